//! The Memories pages: the filtered list, one memory, and its actions.
//!
//! Owns reading the list's filters from the query string, rendering a memory with its history
//! (outcome timeline, moves, the turns it was injected into) and turning the action forms into
//! the API's own calls (`memory_bank_update`, `memory_bank_archive`, `delete_memory`,
//! `share`). Must never change a memory any other way.

use super::layout::{self, csrf_field, segment, snippet, when};
use super::{App, Checked, Viewer, answer, chart, off_thread, see_other};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use maud::{Markup, html};
use memd_engine::error::ApiError;
use memd_engine::ops::inspect::{Archived, ListFilter, MemoryDetail};
use proto::{Collection, MemoryView};
use serde::Deserialize;

/// The list's filters, as the search form sends them.
#[derive(Deserialize, Default)]
pub struct ListParams {
    #[serde(default)]
    q: String,
    #[serde(default)]
    collection: String,
    #[serde(default)]
    project: String,
    #[serde(default)]
    scope: String,
    #[serde(default)]
    tag: String,
    #[serde(default)]
    disputed: String,
    #[serde(default)]
    archived: String,
}

impl ListParams {
    fn filter(&self) -> ListFilter {
        let some = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_string());
        ListFilter {
            query: some(&self.q),
            collection: Collection::parse(&self.collection),
            project: some(&self.project),
            project_bound: match self.scope.as_str() {
                "project" => Some(true),
                "global" => Some(false),
                _ => None,
            },
            tag: some(&self.tag),
            disputed_only: !self.disputed.is_empty(),
            archived: match self.archived.as_str() {
                "include" => Archived::Include,
                "only" => Archived::Only,
                _ => Archived::Hide,
            },
            limit: memd_engine::ops::inspect::LIST_MAX,
        }
    }
}

pub async fn list(State(s): App, viewer: Viewer, Query(p): Query<ListParams>) -> Response {
    let projects = s.core.projects().projects;
    let tags = s.core.tags_in_use();
    let filter = p.filter();
    answer(s.core.list_memories(&filter).await, |views| {
        let body = html! {
            form.filters role="search" method="get" action="/ui/memories" {
                div.field.wide {
                    label for="q" { "Search (ranked as the agent's searches are)" }
                    input #q type="search" name="q" value=(p.q) autofocus;
                }
                (select("collection", "Collection", &p.collection,
                    &[("", "any")], Collection::ALL.iter().map(|c| (c.as_str(), c.as_str()))))
                (select("project", "Project", &p.project,
                    &[("", "all"), ("global", "global only")],
                    projects.iter().map(|x| (x.id.as_str(), x.id.as_str()))))
                (select("scope", "Scope", &p.scope,
                    &[("", "any"), ("global", "global"), ("project", "project-bound")],
                    std::iter::empty()))
                (select("tag", "Tag", &p.tag, &[("", "any")], tags.iter().map(|t| (t.as_str(), t.as_str()))))
                (select("archived", "Archived", &p.archived,
                    &[("", "hide"), ("include", "include"), ("only", "only")], std::iter::empty()))
                div.field.check {
                    input #disputed type="checkbox" name="disputed" value="1" checked[!p.disputed.is_empty()];
                    label for="disputed" { "Disputed only" }
                }
                button type="submit" { "Search" }
            }
            p.count role="status" { (views.len()) " memories" @if views.len() >= filter.limit { " (the first " (filter.limit) ")" } }
            (table(&views))
        };
        layout::page("Memories", "/ui/memories", &viewer, body)
    })
}

fn select<'a>(
    name: &str,
    label: &str,
    current: &str,
    fixed: &[(&'a str, &'a str)],
    more: impl Iterator<Item = (&'a str, &'a str)>,
) -> Markup {
    let options: Vec<(&str, &str)> = fixed.iter().copied().chain(more).collect();
    html! {
        div.field {
            label for=(name) { (label) }
            select id=(name) name=(name) {
                @for (value, text) in options {
                    option value=(value) selected[value == current] { (text) }
                }
            }
        }
    }
}

fn table(views: &[MemoryView]) -> Markup {
    html! {
        table.memories {
            caption.visually-hidden { "Memories" }
            thead { tr {
                th scope="col" { "Content" } th scope="col" { "Collection" }
                th scope="col" { "Score" } th scope="col" { "Uses" } th scope="col" { "Age" }
            } }
            tbody {
                @for v in views {
                    tr {
                        td {
                            a.memory-link href=(format!("/ui/memory/{}", segment(&v.id))) { (snippet(&v.content, 160)) }
                            (badges(v))
                        }
                        td { (v.collection) }
                        td title="learned score (raw outcome score)" { (format!("{:.2}", v.learned_score)) " (" (format!("{:.2}", v.score)) ")" }
                        td { (v.uses) " " (v.outcome_history) }
                        td { (v.age) }
                    }
                }
            }
        }
    }
}

fn badges(v: &MemoryView) -> Markup {
    html! {
        @if v.disputed { " " span.badge.disputed { "disputed" } }
        @if v.archived { " " span.badge.archived { "archived" } }
        @if v.shared { " " span.badge { "shared" } }
        @if let Some(owner) = &v.owner { " " span.badge { "from " (owner) } }
        @if let Some(p) = &v.project { " " span.badge.project { (p) } }
    }
}

#[derive(Deserialize, Default)]
pub struct Done {
    #[serde(default)]
    done: String,
}

pub async fn one(
    State(s): App,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(done): Query<Done>,
) -> Response {
    let which = id.clone();
    let d = match off_thread(&s, move |core| core.memory_detail(&which)).await {
        Ok(Some(d)) => d,
        Ok(None) => return layout::error_page(&ApiError::not_found(format!("no memory {id}"))),
        Err(page) => return page,
    };
    let can_share = s.core.cfg.store.url.is_some()
        && matches!(
            d.record.collection,
            Collection::MemoryBank | Collection::Patterns
        );
    let flash = match done.done.as_str() {
        "edited" => Some("Saved."),
        "archived" => Some("Archived."),
        "shared" => Some("Shared with the team."),
        "private" => Some("Private again."),
        _ => None,
    };
    let now = memd_engine::clock::now_ms();
    let body = html! {
        @if let Some(f) = flash { p.flash role="status" { (f) } }
        blockquote.content { (d.record.content) }
        p { (badges(&d.view)) }
        (facts(&d))
        h2 { "Outcomes and moves" }
        (chart::timeline(&d.record.outcome_history, &d.record.moves, d.record.created_at, now))
        (history(&d))
        h2 { "Injected into" }
        @if d.injected.is_empty() {
            p { "No turn in the trace ledger carried this memory." }
        } @else {
            table { thead { tr { th scope="col" { "When" } th scope="col" { "Conversation" } th scope="col" { "Turn's outcome" } } }
                tbody { @for i in &d.injected { tr {
                    td { (when(i.at)) @if i.session_start { " (session start)" } }
                    td { a href=(format!("/ui/conversations/{}", segment(&i.conversation_id))) { (i.conversation_id) } }
                    td { (i.outcome.as_deref().unwrap_or("—")) }
                } } }
            }
        }
        h2 { "Actions" }
        (actions(&viewer, &d, can_share))
    };
    layout::page(
        &format!("Memory {}", d.record.id),
        "/ui/memories",
        &viewer,
        body,
    )
}

fn facts(d: &MemoryDetail) -> Markup {
    let (r, v) = (&d.record, &d.view);
    let opt = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{x:.2}"));
    html! {
        dl.facts {
            dt { "Id" } dd { code { (r.id) } }
            dt { "Collection" } dd { (v.collection) }
            dt { "Project" } dd { (r.project.as_deref().unwrap_or("global")) }
            dt { "Created" } dd { (when(r.created_at)) " (age: " (v.age) ")" }
            dt { "Updated" } dd { (when(r.updated_at)) }
            dt { "Last used" } dd { (r.last_used.map_or("never".to_string(), when)) }
            dt { "Score" } dd { (format!("{:.3}", r.score)) " raw, " (format!("{:.3}", v.wilson_score)) " Wilson, " (format!("{:.3}", v.learned_score)) " learned" }
            dt { "Uses" } dd { (r.uses) " (" (r.success_count) " successes) " (v.outcome_history) }
            dt { "Importance / confidence" } dd { (opt(v.importance)) " / " (opt(v.confidence)) }
            dt { "Tags" } dd { @if r.tags.is_empty() { "—" } @else { (r.tags.join(", ")) } }
            @if !r.former_ids.is_empty() { dt { "Former ids" } dd { (r.former_ids.join(", ")) } }
            @for (k, val) in &r.metadata { dt { (k) } dd { (metadata_text(val)) } }
        }
    }
}

fn metadata_text(v: &proto::Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn history(d: &MemoryDetail) -> Markup {
    let r = &d.record;
    html! {
        @if r.moves.is_empty() && !r.former_ids.is_empty() {
            p { "Moved before moves were dated; the last move: "
                (r.metadata.get(memd_engine::learn::lifecycle::PROMOTED_AT_KEY)
                    .and_then(|v| match v { proto::Value::Number(ms) => Some(when(*ms as i64)), _ => None })
                    .unwrap_or_else(|| "unknown".into())) }
        }
        ul.history {
            @for m in &r.moves {
                li { (when(m.at)) ": " (if m.to > m.from { "promoted" } else { "demoted" }) " " (m.from.as_str()) " → " (m.to.as_str()) }
            }
            @for o in r.outcome_history.iter().rev() {
                li { (when(o.at)) ": " (o.outcome.as_str()) }
            }
        }
    }
}

fn actions(viewer: &Viewer, d: &MemoryDetail, can_share: bool) -> Markup {
    let r = &d.record;
    let base = format!("/ui/memory/{}", segment(&r.id));
    let bank = r.collection == Collection::MemoryBank;
    html! {
        @if bank {
            form.edit method="post" action=(format!("{base}/edit")) {
                (csrf_field(viewer))
                // What the form showed: a field left as shown is not sent as a change.
                input type="hidden" name="shown_tags" value=(tags_text(&r.tags));
                input type="hidden" name="shown_importance" value=(number_text(d.view.importance));
                input type="hidden" name="shown_confidence" value=(number_text(d.view.confidence));
                div.field.wide { label for="content" { "Content" }
                    textarea #content name="content" rows="5" required { (r.content) } }
                div.field { label for="tags" { "Tags (comma-separated)" }
                    input #tags type="text" name="tags" value=(tags_text(&r.tags)); }
                div.field { label for="importance" { "Importance (0–1)" }
                    input #importance type="number" name="importance" min="0" max="1" step="any" value=(number_text(d.view.importance)); }
                div.field { label for="confidence" { "Confidence (0–1)" }
                    input #confidence type="number" name="confidence" min="0" max="1" step="any" value=(number_text(d.view.confidence)); }
                button type="submit" { "Save" }
            }
            @if !r.archived {
                form.inline method="post" action=(format!("{base}/archive")) {
                    (csrf_field(viewer)) button #archive type="submit" { "Archive" }
                }
            }
        }
        @if can_share {
            form.inline method="post" action=(format!("{base}/share")) {
                (csrf_field(viewer))
                input type="hidden" name="shared" value=(if r.team { "false" } else { "true" });
                button type="submit" { (if r.team { "Make private" } else { "Share with the team" }) }
            }
        }
        form.inline.danger method="post" action=(format!("{base}/delete")) data-confirm="Delete this memory for good?" {
            (csrf_field(viewer)) button #delete type="submit" { "Delete" }
        }
    }
}

/// A memory's tags as the edit form shows them.
fn tags_text(tags: &[String]) -> String {
    tags.join(", ")
}

/// A score as the edit form shows it: exact, so an unchanged field reads back the same.
fn number_text(x: Option<f64>) -> String {
    x.map(|x| x.to_string()).unwrap_or_default()
}

/// `now` when it differs from what the form showed.
fn changed<'a>(now: &'a str, shown: &str) -> Option<&'a str> {
    (now.trim() != shown.trim()).then_some(now)
}

#[derive(Deserialize)]
pub struct EditForm {
    content: String,
    #[serde(default)]
    tags: String,
    #[serde(default)]
    importance: String,
    #[serde(default)]
    confidence: String,
    #[serde(default)]
    shown_tags: String,
    #[serde(default)]
    shown_importance: String,
    #[serde(default)]
    shown_confidence: String,
}

pub async fn edit(
    State(s): App,
    Path(id): Path<String>,
    Checked(_, f): Checked<EditForm>,
) -> Response {
    let number = |field: &str, text: &str| -> Result<Option<f64>, ApiError> {
        let t = text.trim();
        if t.is_empty() {
            return Ok(None);
        }
        t.parse::<f64>()
            .map(Some)
            .map_err(|_| ApiError::bad(field, format!("{field} must be a number from 0 to 1")))
    };
    // Only what the user changed is sent: a tag with a comma in it, or a score the form
    // would round, survives an edit of the content.
    let req = (|| {
        Ok(proto::MemoryBankUpdate {
            id: id.clone(),
            content: Some(f.content.replace("\r\n", "\n")),
            tags: changed(&f.tags, &f.shown_tags).map(|t| {
                t.split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect()
            }),
            importance: match changed(&f.importance, &f.shown_importance) {
                Some(t) => number("importance", t)?,
                None => None,
            },
            confidence: match changed(&f.confidence, &f.shown_confidence) {
                Some(t) => number("confidence", t)?,
                None => None,
            },
        })
    })();
    let req: proto::MemoryBankUpdate = match req {
        Ok(r) => r,
        Err(e) => return layout::error_page(&e),
    };
    answer(s.core.memory_bank_update(&req).await, |r| {
        see_other(&format!("/ui/memory/{}?done=edited", segment(&r.doc_id)))
    })
}

pub async fn archive(
    State(s): App,
    Path(id): Path<String>,
    Checked(_, _): Checked<super::NoFields>,
) -> Response {
    let req = proto::MemoryBankArchive {
        id: Some(id),
        content: None,
    };
    answer(s.core.memory_bank_archive(&req, None).await, |r| {
        see_other(&format!("/ui/memory/{}?done=archived", segment(&r.doc_id)))
    })
}

pub async fn delete(
    State(s): App,
    Path(id): Path<String>,
    Checked(_, _): Checked<super::NoFields>,
) -> Response {
    let req = proto::DeleteMemoryRequest { id };
    answer(s.core.delete_memory(&req).await, |_| {
        see_other("/ui/memories")
    })
}

#[derive(Deserialize)]
pub struct ShareForm {
    shared: bool,
}

pub async fn share(
    State(s): App,
    Path(id): Path<String>,
    Checked(_, f): Checked<ShareForm>,
) -> Response {
    let req = proto::ShareRequest {
        id,
        shared: f.shared,
    };
    answer(s.core.share(&req).await, |r| {
        let word = if r.shared { "shared" } else { "private" };
        see_other(&format!("/ui/memory/{}?done={word}", segment(&r.id)))
    })
}
