//! Context injection and the hook turn cycle: get-context, stop, record-outcome.
//!
//! Owns what happens on every prompt and every stop: the relevance floor, the count and token
//! budgets, the doc-id cache per conversation, completion-aware scoring, the grace window for an
//! in-flight score and the decision to ask `hook-stop` for a sidecar run. Must stay fast: the
//! only heavy step on the prompt path is one query embedding; learning and promotion run in the
//! background workers, never here.

pub mod format;
mod sidecar;
mod turn;

pub use sidecar::sidecar_status;

use crate::clock;
use crate::core::Core;
use crate::error::{ApiError, check_len};
use crate::learn;
use crate::redact;
use crate::scope::Visibility;
use crate::search::{self, Hit, Query};
use crate::state::MemState;
use crate::state::ops::Op;
use crate::state::session::{ProjectRef, SessionOp};
use format::Line;
use proto::limits;
use proto::{Collection, GetContextRequest, GetContextResponse, MemoryView, ScoringMemory};
use std::sync::Arc;

/// Characters per token, for the injection budget (English prose averages about 4).
const CHARS_PER_TOKEN: usize = 4;
/// The longest prompt prefix used as a search query.
const QUERY_CHARS: usize = 2_000;
/// A memory line is never cut below this many characters (a stub helps nobody).
const MIN_LINE_CHARS: usize = 80;

pub(crate) fn validate_conversation(id: &str) -> Result<&str, ApiError> {
    let id = id.trim();
    if id.is_empty() {
        return Err(ApiError::bad(
            "conversation_id",
            "conversation_id must not be empty",
        ));
    }
    check_len("conversation_id", id, limits::ID_MAX_CHARS)?;
    Ok(id)
}

/// `POST /api/hooks/get-context`.
pub async fn get_context(
    core: &Arc<Core>,
    req: &GetContextRequest,
) -> Result<GetContextResponse, ApiError> {
    get_context_for(core, req, None).await
}

/// get-context for a caller whose project may be known otherwise (`fallback`: an MCP
/// session's) when neither its directory nor its conversation tells it.
pub async fn get_context_for(
    core: &Arc<Core>,
    req: &GetContextRequest,
    fallback: Option<String>,
) -> Result<GetContextResponse, ApiError> {
    let conv = validate_conversation(&req.conversation_id)?.to_string();
    check_len("query", &req.query, limits::EXCHANGE_MAX_CHARS)?;
    let prompt = redact::scrub(&req.query).text;
    let here = where_the_prompt_is(core, req)?;
    core.settle().await;
    let current = match &here {
        Some(p) => Some(p.id.clone()),
        None => core.conversation_project(&conv).or(fallback),
    };
    let visible = Visibility::of_current(current.as_deref());
    let query: String = prompt.chars().take(QUERY_CHARS).collect();
    let now = clock::now_ms();
    let plan = if req.session_start {
        crate::state::session::ScoringPlan {
            required: false,
            ids: Vec::new(),
        }
    } else {
        core.store.read(|s| s.sessions.plan(&conv))
    };

    let qvec = if query.trim().is_empty() {
        None
    } else {
        core.embed_query(&query).await
    };
    let budget = core.cfg.context.token_budget * CHARS_PER_TOKEN;
    let (memories, lines_text, shown_now) = core.store.read(|s| {
        let picked = if query.trim().is_empty() {
            profile_memories(s, &visible, core.cfg.context.max_memories)
        } else {
            relevant_memories(core, s, &visible, &query, qvec.as_deref().map(|v| &v[..]))
        };
        let already = s
            .sessions
            .get(&conv)
            .map(|c| c.shown.clone())
            .unwrap_or_default();
        let views: Vec<MemoryView> = picked
            .iter()
            .filter_map(|(k, h)| Some(search::view(s.by_key(*k)?, now, h.as_ref())))
            .collect();
        let (lines, shown) = budget_lines(&views, &already, budget);
        (views.clone(), lines, shown)
    });
    let lines: Vec<Line<'_>> = lines_text
        .iter()
        .map(|(i, text)| match text {
            Some(t) => Line::Full {
                m: &memories[*i],
                text: t.clone(),
            },
            None => Line::Repeat { m: &memories[*i] },
        })
        .collect();
    let scoring_prompt = if plan.required {
        format::scoring_prompt(&plan.ids)
    } else {
        String::new()
    };
    let context = format::known_context(&lines);
    let formatted_injection = [scoring_prompt.as_str(), context.as_str()]
        .iter()
        .filter(|t| !t.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n\n");
    let scoring_memories = scoring_hints(core, &plan.ids);
    let injected: Vec<String> = lines_text
        .iter()
        .map(|(i, _)| memories[*i].id.clone())
        .collect();
    let op = Op::Session(SessionOp::Prompt {
        conv,
        at: now,
        client: req.client,
        prompt: format::clip(&prompt, crate::state::session::EXCHANGE_KEEP_CHARS),
        injected: injected.clone(),
        shown: shown_now,
        concepts: learn::graph::extract_concepts(&query),
        session_start: req.session_start,
        project: here.map(|p| ProjectRef {
            id: p.id,
            root: p.root.display().to_string(),
        }),
    });
    // The prompt's session record is queued, not awaited: its order against the stop that
    // follows is fixed now, and the prompt path does not pay an fsync. A crash in between loses
    // only which ids this turn showed, never a memory.
    core.commit_queued(vec![op])?;
    core.trace.append(&crate::trace::TraceEntry::get_context(
        req.conversation_id.trim(),
        &prompt,
        &injected,
        &formatted_injection,
    ));
    if core.cfg.cursor.rules_file && req.client == Some(proto::Client::Cursor) && !req.session_start
    {
        write_cursor_rules(req.cwd.as_deref(), &context);
    }
    let relevant_memories = memories
        .into_iter()
        .filter(|m| injected.contains(&m.id))
        .collect();
    Ok(GetContextResponse {
        formatted_injection,
        relevant_memories,
        scoring_required: plan.required,
        scoring_prompt,
        scoring_memories,
    })
}

/// The project of the hook's directory (`project_dir`, else `cwd`), if it sent one.
fn where_the_prompt_is(
    core: &Core,
    req: &GetContextRequest,
) -> Result<Option<crate::project::Project>, ApiError> {
    let nonblank = |d: &Option<String>| d.as_deref().filter(|d| !d.trim().is_empty()).is_some();
    if nonblank(&req.project_dir) {
        core.project_cache
            .resolve("project_dir", req.project_dir.as_deref())
    } else {
        core.project_cache.resolve("cwd", req.cwd.as_deref())
    }
}

/// Where the opt-in Cursor rules file lives, relative to the workspace root.
pub const CURSOR_RULES_FILE: &str = ".cursor/rules/memd-context.mdc";

/// Keeps `<workspace>/.cursor/rules/memd-context.mdc` (alwaysApply) in step with the latest
/// context, in the background: Cursor's `beforeSubmitPrompt` cannot inject context itself.
/// Only for an existing absolute workspace dir; failures are logged, never surfaced.
fn write_cursor_rules(cwd: Option<&str>, context: &str) {
    let Some(root) = cwd
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
    else {
        return;
    };
    let body = if context.is_empty() {
        "No stored memory is relevant to the latest prompt."
    } else {
        context
    };
    let text = format!(
        "---\ndescription: memd memories relevant to the current conversation (generated; do not edit)\nalwaysApply: true\n---\n{body}\n"
    );
    tokio::task::spawn_blocking(move || {
        let path = root.join(CURSOR_RULES_FILE);
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(path.parent().unwrap_or(&root))?;
            let tmp = path.with_extension("mdc.tmp");
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, &path)
        };
        if let Err(e) = write() {
            tracing::warn!("cannot update the Cursor rules file: {e}");
        }
    });
}

/// Candidates above the relevance floor, best first, at most `max_memories`. Only memories
/// `visible` admits are candidates at all.
fn relevant_memories(
    core: &Core,
    s: &MemState,
    visible: &Visibility,
    query: &str,
    qvec: Option<&[f32]>,
) -> Vec<(u64, Option<Hit>)> {
    let cfg = &core.cfg.context;
    let q = Query {
        limit: cfg.max_memories,
        visibility: visible.clone(),
        ..Query::default()
    };
    let floor = cfg.relevance_floor;
    search::rank(s, &q, query, qvec, &core.ranking(), cfg.max_memories)
        .into_iter()
        .filter(|h| match h.similarity {
            Some(sim) => sim >= floor,
            // Not embedded yet (or no model loaded): only a lexical match counts.
            None => h.lexical.is_some(),
        })
        .take(cfg.max_memories)
        .map(|h| (h.key, Some(h)))
        .collect()
}

/// For a conversation's first context (Cursor sessionStart): the user's most important facts.
fn profile_memories(s: &MemState, visible: &Visibility, n: usize) -> Vec<(u64, Option<Hit>)> {
    let mut bank: Vec<_> = s
        .records()
        .filter(|r| r.collection == Collection::MemoryBank && !r.archived)
        .filter(|r| visible.admits(r.project.as_deref()))
        .collect();
    bank.sort_by(|a, b| {
        learn::scoring::memory_bank_quality(b)
            .total_cmp(&learn::scoring::memory_bank_quality(a))
            .then(b.created_at.cmp(&a.created_at))
    });
    bank.into_iter().take(n).map(|r| (r.key, None)).collect()
}

/// Which memories get a full line (text clipped to the budget) and which only a reference.
/// Returns `(index into views, Some(text) | None for a repeat)` and the ids newly shown in full.
fn budget_lines(
    views: &[MemoryView],
    already: &std::collections::BTreeSet<String>,
    budget_chars: usize,
) -> (Vec<(usize, Option<String>)>, Vec<String>) {
    let mut left = budget_chars;
    let mut lines = Vec::new();
    let mut shown = Vec::new();
    for (i, m) in views.iter().enumerate() {
        if already.contains(&m.id) {
            lines.push((i, None));
            continue;
        }
        if left < MIN_LINE_CHARS {
            break;
        }
        let text = format::clip(&m.content, left);
        left = left.saturating_sub(text.chars().count());
        shown.push(m.id.clone());
        lines.push((i, Some(text)));
    }
    (lines, shown)
}

fn scoring_hints(core: &Core, ids: &[String]) -> Vec<ScoringMemory> {
    core.store.read(|s| {
        ids.iter()
            .map(|id| ScoringMemory {
                id: id.clone(),
                content_hint: s
                    .by_id(id)
                    .map(|r| format::clip(&r.content, 60))
                    .unwrap_or_default(),
            })
            .collect()
    })
}

pub use turn::{record_outcome, stop};
