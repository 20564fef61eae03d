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
//! and record-outcome (`accept`: which named ids a score may reach), `compact` the digest before a client compacts the conversation,
//! `sidecar` the sidecar decision, `unscored` the tool evidence's outcome
//! for an exchange nobody scored.

mod accept;
mod budget;
mod compact;
pub mod format;
mod select;
mod sidecar;
mod stages;
mod turn;
pub mod unscored;

pub use sidecar::sidecar_status;

use crate::config::Config;
use crate::error::{ApiError, check_len};
use crate::models::Models;
use crate::models::late::States;
use crate::ops::evidence::Evidence;
use crate::ops::registry::Registry;
use crate::redact;
use crate::scope::ProjectCache;
use crate::state::Db;
use crate::state::ops::ScoreResult;
use crate::trace::Trace;
use proto::limits;
use proto::{
    GetContextRequest, GetContextResponse, Outcome, RecordOutcomeRequest, RecordOutcomeResponse,
    StopRequest, StopResponse,
};

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

/// What the turn cycle reads and writes: the settings, the state, the ledger, the tool
/// evidence, the project cache.
#[derive(Clone, Copy)]
pub struct Hooks<'a> {
    pub cfg: &'a Config,
    pub db: &'a Db,
    pub trace: &'a Trace,
    pub evidence: &'a Evidence,
    pub cache: &'a ProjectCache,
}

/// What a prompt reads besides: the models (the query's encodings) and the token states.
pub struct PromptDeps<'a> {
    pub hooks: Hooks<'a>,
    pub models: &'a Models,
    pub late: &'a States,
}

impl Hooks<'_> {
    pub(crate) fn registry(&self) -> Registry<'_> {
        Registry {
            db: self.db,
            cache: self.cache,
        }
    }

    /// `POST /api/hooks/stop`.
    pub async fn stop(&self, req: &StopRequest) -> Result<StopResponse, ApiError> {
        turn::stop(self, req).await
    }

    /// `POST /api/record-outcome`. `session_shown`: what the asking MCP session was shown by
    /// its own tool calls, which it may score beside the ids the scoring request listed.
    pub async fn record_outcome(
        &self,
        req: &RecordOutcomeRequest,
        session_shown: &[String],
    ) -> Result<RecordOutcomeResponse, ApiError> {
        turn::record_outcome(self, req, session_shown).await
    }

    /// `POST /api/hooks/pre-compact`.
    pub async fn pre_compact(
        &self,
        req: &proto::PreCompactRequest,
    ) -> Result<proto::PreCompactResponse, ApiError> {
        compact::pre_compact(self, req).await
    }

    /// Scores memories outside a hook turn (MCP clients without hooks).
    pub async fn score_memories(
        &self,
        scores: Vec<(String, Outcome)>,
    ) -> Result<ScoreResult, ApiError> {
        turn::score_memories(self, scores).await
    }
}

impl PromptDeps<'_> {
    /// `POST /api/hooks/get-context`, for a caller whose project may be known otherwise
    /// (`fallback`: an MCP session's) when neither its directory nor its conversation tells
    /// it. The prompt goes through named stages (`stages`): check → one read of the
    /// conversation → the query's encodings → retrieval (one read for the snapshot, the rest
    /// outside the lock) → lay-out → record.
    pub async fn get_context(
        &self,
        req: &GetContextRequest,
        fallback: Option<String>,
    ) -> Result<GetContextResponse, ApiError> {
        let h = &self.hooks;
        // Background model runs (new memories' embeddings and token states) don't start while
        // a prompt is being served: they would share its cores.
        let _urgent = crate::models::embed::urgent();
        let mut clock = stages::Clock::start();
        let prompt = stages::Prompt::check(h, req)?;
        h.db.settle().await;
        clock.lap("settle");
        let turn = stages::Turn::read(h, &prompt, fallback);
        clock.lap("read");
        let queries = stages::encode(self, &prompt, &turn).await;
        clock.lap("embed");
        let picked = stages::retrieve(self, &prompt, &turn, queries, &mut clock).await;
        clock.lap("cut");
        let injection = stages::lay_out(h, &prompt, &turn, picked);
        stages::record(h, req, &prompt, turn.unscored, &injection)?;
        clock.lap("record");
        clock.log();
        Ok(injection.response(turn.plan.required, turn.scoring_hints))
    }
}

/// The project of the hook's directory (`project_dir`, else `cwd`), if it sent one.
fn where_the_prompt_is(
    h: &Hooks,
    req: &GetContextRequest,
) -> Result<Option<crate::project::Project>, ApiError> {
    let nonblank = |d: &Option<String>| d.as_deref().filter(|d| !d.trim().is_empty()).is_some();
    if nonblank(&req.project_dir) {
        h.cache.resolve("project_dir", req.project_dir.as_deref())
    } else {
        h.cache.resolve("cwd", req.cwd.as_deref())
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

pub use turn::GRACE;
