//! Context injection and the hook turn cycle: get-context, stop, record-outcome.
//!
//! Owns what happens on every prompt and every stop: the relevance floor, the count and token
//! budgets, the doc-id cache per conversation, completion-aware scoring, the grace window for an
//! in-flight score and the decision to ask `hook-stop` for a sidecar run. Must stay fast: the
//! only heavy steps on the prompt path are the query's encodings (its embedding beside its
//! late-interaction states; a second embedding for a short follow-up); learning and promotion
//! run in the background workers, never here.
//!
//! This file is get-context's entry; `stages` its named stages, `select` picks the memories
//! (floor, disputed, follow-ups, profile) around the retrieval pipeline (`crate::retrieve`),
//! `budget` lays them out within the token budget, `format` writes the text, `turn` is stop
//! and record-outcome, `compact` the digest before a client compacts the conversation,
//! `sidecar` the sidecar decision, `unscored` the tool evidence's outcome
//! for an exchange nobody scored.

mod budget;
mod compact;
pub mod format;
mod select;
mod sidecar;
mod stages;
mod turn;
pub mod unscored;

pub use sidecar::sidecar_status;

use crate::core::Core;
use crate::error::{ApiError, check_len};
use crate::redact;
use proto::limits;
use proto::{GetContextRequest, GetContextResponse};
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
/// session's) when neither its directory nor its conversation tells it. The prompt goes
/// through named stages (`stages`): check → one read of the conversation → the query's
/// encodings → retrieval (one read for the snapshot, the rest outside the lock) → lay-out →
/// record.
pub async fn get_context_for(
    core: &Arc<Core>,
    req: &GetContextRequest,
    fallback: Option<String>,
) -> Result<GetContextResponse, ApiError> {
    let prompt = stages::Prompt::check(core, req)?;
    core.settle().await;
    let turn = stages::Turn::read(core, &prompt, fallback);
    let queries = stages::encode(core, &prompt, &turn).await;
    let picked = stages::retrieve(core, &prompt, &turn, &queries).await;
    let injection = stages::lay_out(core, &prompt, &turn, picked);
    stages::record(core, req, &prompt, turn.unscored, &injection)?;
    Ok(injection.response(turn.plan.required, turn.scoring_hints))
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

pub use compact::pre_compact;
pub use turn::{record_outcome, score_memories, stop};
