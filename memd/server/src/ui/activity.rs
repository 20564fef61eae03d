//! The Conversations and Health pages.
//!
//! Owns rendering conversations turn by turn (from `inspect::conversations`: the ledger's ids,
//! the store's current content) and the health page (the figures `memd status` prints, from
//! the same `health`/`stats` calls, plus the daily series). Must never show text from the
//! trace ledger (it has none: a deleted memory shows as its id).

use super::layout::{self, segment, snippet, when};
use super::{App, Viewer, chart, off_thread};
use axum::extract::{Path, State};
use axum::response::Response;
use maud::{Markup, html};
use proto::{HealthResponse, StatsResponse};

pub async fn conversations(State(s): App, viewer: Viewer) -> Response {
    let list = match off_thread(&s, |core| core.conversations()).await {
        Ok(list) => list,
        Err(page) => return page,
    };
    let body = html! {
        p { "From the trace ledger: which memories each prompt got and how each turn was scored." }
        @if list.is_empty() {
            p { "No conversation yet: the hooks record one at the first prompt." }
        } @else {
            table {
                thead { tr {
                    th scope="col" { "Conversation" } th scope="col" { "Project" }
                    th scope="col" { "Turns" } th scope="col" { "Injected" }
                    th scope="col" { "Scored turns" } th scope="col" { "Last activity" }
                } }
                tbody { @for c in &list { tr {
                    td { a href=(format!("/ui/conversations/{}", segment(&c.id))) { (c.id) } }
                    td { (c.project.as_deref().unwrap_or("—")) }
                    td { (c.turns) } td { (c.injected) } td { (c.scored_turns) }
                    td { (when(c.last_at)) }
                } } }
            }
        }
    };
    layout::page("Conversations", "/ui/conversations", &viewer, body)
}

pub async fn conversation(State(s): App, viewer: Viewer, Path(id): Path<String>) -> Response {
    let which = id.clone();
    let turns = match off_thread(&s, move |core| core.conversation_turns(&which)).await {
        Ok(turns) => turns,
        Err(page) => return page,
    };
    let body = html! {
        p { a href="/ui/conversations" { "← All conversations" } }
        @if turns.is_empty() {
            p { "The trace ledger has no turn of this conversation." }
        }
        ol.turns {
            @for (n, t) in turns.iter().enumerate() {
                li.turn {
                    h2 { "Turn " (n + 1) " · " (when(t.at)) }
                    p {
                        "Outcome: " strong { (t.outcome.as_deref().unwrap_or("not scored")) }
                        @if let Some(by) = &t.scored_by { " (" (by) ")" }
                        @if let Some(doc) = &t.stored {
                            " · stored as " a href=(format!("/ui/memory/{}", segment(doc))) { (doc) }
                        }
                    }
                    @if t.injected.is_empty() {
                        p { "Nothing injected." }
                    } @else {
                        ul { @for m in &t.injected { li {
                            @match &m.now {
                                Some((id, collection, content)) => {
                                    a href=(format!("/ui/memory/{}", segment(id))) { (snippet(content, 140)) }
                                    " " span.badge { (collection) }
                                }
                                None => { code { (m.id) } " (deleted since)" }
                            }
                            @if m.scored { " " span.badge.scored { "scored" } }
                        } } }
                    }
                }
            }
        }
    };
    layout::page(
        &format!("Conversation {id}"),
        "/ui/conversations",
        &viewer,
        body,
    )
}

pub async fn health(State(s): App, viewer: Viewer) -> Response {
    let read = off_thread(&s, |core| {
        (core.health(), core.stats(), core.health_series())
    });
    let (h, stats, series) = match read.await {
        Ok(all) => all,
        Err(page) => return page,
    };
    let days: Vec<String> = series.counts.iter().map(|d| d.day.clone()).collect();
    let lines: Vec<(String, Vec<usize>)> = proto::Collection::ALL
        .iter()
        .map(|c| {
            let name = c.as_str().to_string();
            let values = series
                .counts
                .iter()
                .map(|d| d.counts.get(&name).copied().unwrap_or(0))
                .collect();
            (name, values)
        })
        .collect();
    let injections: Vec<(String, usize)> = series
        .activity
        .iter()
        .map(|a| (a.day.clone(), a.injected))
        .collect();
    let body = html! {
        (status_block(&h, &stats))
        h2 { "Memories per collection, per day" }
        (chart::lines("Memories per collection per day", &days, &lines))
        ul.legend { @for (k, (name, values)) in lines.iter().enumerate() {
            li { span class=(format!("key s{k}")) {} (name) ": " (values.last().copied().unwrap_or(0)) }
        } }
        h2 { "Injections per day" }
        @if injections.is_empty() { p { "No prompt recorded yet." } } @else {
            (chart::bars("Memories injected per day", &injections))
            table { thead { tr { th scope="col" { "Day" } th scope="col" { "Prompts" } th scope="col" { "Memories injected" } } }
                tbody { @for a in series.activity.iter().rev() { tr { td { (a.day) } td { (a.prompts) } td { (a.injected) } } } } }
        }
        h2 { "Scored turns" }
        p #hit-rate {
            "Hit rate: " strong { (series.hit_rate().map_or("—".to_string(), |r| format!("{:.0} %", r * 100.0))) }
            " (worked, partial as half, of worked + partial + failed) · "
            @for (word, n) in &series.outcomes { (word) " " (n) " · " }
        }
    };
    layout::page("Health", "/ui/health", &viewer, body)
}

/// What `memd status` prints: daemon, model, index, hooks, sidecar, shared store.
fn status_block(h: &HealthResponse, s: &StatsResponse) -> Markup {
    let hook_p50 = {
        let mut m: Vec<u64> = s.recent_hooks.iter().map(|c| c.micros).collect();
        m.sort_unstable();
        m.get(m.len() / 2)
            .map(|us| format!("{:.1} ms", *us as f64 / 1000.0))
    };
    html! {
        dl.facts #status {
            dt { "Daemon" } dd { (h.status) ", version " (h.version) ", pid " (h.pid) }
            dt { "Model" } dd { @if h.model_loaded { "loaded" } @else { "not loaded: " (h.model_error.as_deref().unwrap_or("?")) }
                @if h.reranker_loaded { ", reranker loaded" } @if h.late_interaction_loaded { ", late interaction loaded" } }
            @for (name, c) in &s.collections {
                dt { (name) } dd { (c.count) " memories, mean score " (format!("{:.2}", c.mean_score)) ", " (c.scored) " scored" }
            }
            dt { "Index" } dd { (s.index.vectors) " vectors, " (s.index.pending_embeddings) " waiting for embedding" }
            dt { "Store on disk" } dd { (format!("{:.1} MB", s.disk_bytes as f64 / 1e6)) }
            dt { "Conversations" } dd { (s.conversations) }
            dt { "Recent hook calls" } dd { (s.recent_hooks.len()) @if let Some(p) = hook_p50 { ", p50 " (p) } }
            dt { "Sidecar" } dd {
                (if s.sidecar.remote_enabled { "remote enabled" } else { "remote off" })
                ", " (s.sidecar.calls_today) " of " (s.sidecar.daily_cap) " calls today"
                @if !s.sidecar.cooling.is_empty() { ", " (s.sidecar.cooling.len()) " cooling down" }
            }
            dt { "Shared store" } dd {
                @match &s.shared_store {
                    None => "none (local only)",
                    Some(st) => {
                        (st.target) ": " (if st.connected { "connected" } else { "not connected" })
                        ", backlog " (st.backlog) ", mirrored " (st.mirrored)
                        @if let Some(e) = &st.last_error { ", last error: " (e) }
                    }
                }
            }
        }
    }
}
