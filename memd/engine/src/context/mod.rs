//! Context injection and the hook turn cycle: get-context, stop, record-outcome.
//!
//! Owns what happens on every prompt and every stop: the relevance floor, the count and token
//! budgets, the doc-id cache per conversation, completion-aware scoring, the grace window for an
//! in-flight score and the decision to ask `hook-stop` for a sidecar run. Must stay fast: the
//! only heavy steps on the prompt path are the query embeddings (one, two for a short
//! follow-up); learning and promotion run in the background workers, never here.
//!
//! This file is get-context itself; `select` picks the memories (floor, disputed, follow-ups,
//! profile), `budget` lays them out within the token budget, `format` writes the text, `turn`
//! is stop and record-outcome, `sidecar` the sidecar decision, `unscored` the tool evidence's
//! outcome for an exchange nobody scored.

mod budget;
pub mod format;
mod select;
mod sidecar;
mod turn;
pub mod unscored;

pub use sidecar::sidecar_status;

use crate::clock;
use crate::core::Core;
use crate::error::{ApiError, check_len};
use crate::learn;
use crate::redact;
use crate::scope::Visibility;
use crate::search;
use crate::state::MemState;
use crate::state::ops::Op;
use crate::state::session::{ProjectRef, SessionOp};
use proto::limits;
use proto::{GetContextRequest, GetContextResponse, MemoryView, ScoringMemory};
use std::sync::Arc;

/// Characters per token, for the injection budget (English prose averages about 4).
pub const CHARS_PER_TOKEN: usize = 4;
/// The longest prompt prefix used as a search query.
const QUERY_CHARS: usize = 2_000;

/// The conversation id as memd keeps it: trimmed, and with a secret in it replaced by a digest
/// ([`redact::safe_id`]) before it keys session state, the ledger or a record.
pub(crate) fn validate_conversation(id: &str) -> Result<std::borrow::Cow<'_, str>, ApiError> {
    let id = id.trim();
    if id.is_empty() {
        return Err(ApiError::bad(
            "conversation_id",
            "conversation_id must not be empty",
        ));
    }
    check_len("conversation_id", id, limits::ID_MAX_CHARS)?;
    Ok(redact::safe_id(id))
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
    // The agent asking for context itself (MCP) sees disputed memories, flagged, so it can
    // verify and fix them; the hooks never inject them.
    let with_disputed = req.client == Some(proto::Client::Mcp);
    let query: String = prompt.chars().take(QUERY_CHARS).collect();
    let now = clock::now_ms();
    // After `clear` / `compact` the model no longer sees earlier memories: show them again.
    let fresh_context =
        req.session_start && matches!(req.session_source.as_deref(), Some("clear" | "compact"));
    let plan = if req.session_start {
        crate::state::session::ScoringPlan {
            required: false,
            ids: Vec::new(),
        }
    } else {
        core.store.read(|s| s.sessions.plan(&conv))
    };

    let followup = core
        .store
        .read(|s| select::followup_query(s, &conv, &query));
    // The reranking budget covers the late-interaction query encoding, which runs beside the
    // prompt's embedding (each has its own model), and MaxSim after the first stage.
    let rerank_deadline = std::time::Instant::now()
        + std::time::Duration::from_millis(core.cfg.search.prompt_budget_ms);
    let has_query = !query.trim().is_empty();
    // A follow-up's words are mostly the conversation's, not the prompt's: fused order.
    let wants_late = has_query && followup.is_none();
    let (qvec, late_q) = tokio::join!(
        async {
            match has_query {
                true => core.embed_query(&query).await,
                false => None,
            }
        },
        async {
            match wants_late {
                true => crate::late::encode_query(core, &query, rerank_deadline, true).await,
                false => None,
            }
        }
    );
    let fvec = match &followup {
        Some(f) => core.embed_query(f).await,
        None => None,
    };
    let scoring_memories = scoring_hints(core, &plan.ids);
    let scoring_prompt = match (plan.required, req.client) {
        (false, _) => String::new(),
        (true, Some(proto::Client::Opencode)) => format::scoring_with_reference(&scoring_memories),
        (true, _) => format::scoring_prompt(&plan.ids),
    };
    let budget = core.cfg.context.token_budget * CHARS_PER_TOKEN;
    let (memories, lines_text, shown_now, first_context) = core.store.read(|s| {
        let picked = if query.trim().is_empty() {
            select::profile(s, &visible, core.cfg.context.max_memories, with_disputed)
        } else {
            let prompt = (query.as_str(), qvec.as_deref().map(|v| &v[..]));
            let followup = followup
                .as_deref()
                .map(|f| (f, fvec.as_deref().map(|v| &v[..])));
            let late = late_q.as_ref().map(|q| (q, rerank_deadline));
            select::relevant(
                core,
                s,
                &conv,
                &visible,
                prompt,
                followup,
                late,
                with_disputed,
            )
        };
        let already = if fresh_context {
            Default::default()
        } else {
            shown_keys(s, &conv)
        };
        let (keys, views): (Vec<u64>, Vec<MemoryView>) = picked
            .iter()
            .filter_map(|(k, h)| Some((*k, search::view(s.by_key(*k)?, now, h.as_ref()))))
            .unzip();
        let seen: Vec<bool> = keys.iter().map(|k| already.contains(k)).collect();
        let first_context = already.is_empty();
        let (lines, shown) = budget::lay_out(
            &views,
            &seen,
            budget::for_lines(budget, &scoring_prompt, first_context),
        );
        (views.clone(), lines, shown, first_context)
    });
    let lines = budget::lines(&memories, &lines_text);
    let context = format::known_context(&lines, first_context);
    let formatted_injection = [scoring_prompt.as_str(), context.as_str()]
        .iter()
        .filter(|t| !t.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n\n");
    let injected: Vec<String> = lines_text
        .iter()
        .map(|(i, _)| memories[*i].id.clone())
        .collect();
    let op = Op::Session(SessionOp::Prompt {
        conv: conv.clone(),
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
    let mut ops = Vec::with_capacity(2);
    if !req.session_start && core.cfg.evidence.tracking() {
        // Before the prompt moves the scoring target on: the exchange it leaves unscored.
        ops.extend(core.store.read(|s| unscored::on_prompt(core, s, &conv)));
        core.evidence.new_turn(&conv);
    }
    let evidence_scored = !ops.is_empty();
    if fresh_context {
        ops.push(Op::Session(SessionOp::ContextReset { conv: conv.clone() }));
    }
    ops.push(op);
    core.commit_queued(ops)?;
    if evidence_scored {
        // The lifecycle pass must see the scores: wake it once the queued ops are applied.
        let core = core.clone();
        tokio::spawn(async move {
            core.settle().await;
            core.lifecycle_wake.notify_one();
        });
    }
    core.trace.append(&crate::trace::TraceEntry::get_context(
        &conv,
        &prompt,
        &injected,
        &formatted_injection,
        req.session_start,
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

/// The memories this conversation has seen in full, by internal key: a memory promoted since
/// has a new id, and its old one (kept in `former_ids`) still leads to it.
fn shown_keys(s: &MemState, conv: &str) -> std::collections::HashSet<u64> {
    s.sessions
        .get(conv)
        .map(|c| {
            c.shown
                .iter()
                .filter_map(|id| s.by_id(id).map(|r| r.key))
                .collect()
        })
        .unwrap_or_default()
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

pub use turn::{record_outcome, score_memories, stop};
