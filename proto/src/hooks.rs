//! The hook API: what `hook-prompt` and `hook-stop` send, and the outcome endpoints.

use crate::memory::MemoryView;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which client a hook call came from. Decides output shape and context delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Client {
    #[default]
    ClaudeCode,
    Cursor,
    /// Codex CLI: Claude Code's hook shapes, from `~/.codex/hooks.json`.
    Codex,
    Mcp,
    Other,
    /// Gemini CLI (and Antigravity's `agy`, same hooks): `hook-prompt --gemini`.
    Gemini,
    /// OpenCode, through memd's plugin (`hook-prompt --opencode`).
    Opencode,
}

impl Client {
    /// Whether every tool call of a turn, `score_response` included, has finished when the
    /// client reports the turn's end (Cursor never sees the scoring request; Gemini CLI's
    /// AfterAgent and OpenCode's idle session come after the last tool result), so memd need
    /// not wait for a score that may still be in flight.
    pub fn turn_end_after_tools(self) -> bool {
        matches!(self, Client::Cursor | Client::Gemini | Client::Opencode)
    }
}

/// `POST /api/hooks/get-context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GetContextRequest {
    pub query: String,
    pub conversation_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Where the conversation's project is read from (`CLAUDE_PROJECT_DIR`, Cursor's first
    /// workspace root); memd walks up to the repository root. Absent: `cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Client>,
    /// Cursor `sessionStart`: a new conversation, no user prompt yet; context only.
    #[serde(default)]
    pub session_start: bool,
    /// Claude Code's `SessionStart` source (`startup`, `resume`, `clear`, `compact`): after
    /// `clear` and `compact` the model no longer sees what memd showed before, so the brief
    /// shows it in full again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_source: Option<String>,
}

/// One memory the scoring prompt asks about: id plus a short hint (never the full text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScoringMemory {
    pub id: String,
    pub content_hint: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GetContextResponse {
    /// Everything the hook should hand to the model (scoring prompt + KNOWN CONTEXT), or "".
    pub formatted_injection: String,
    pub relevant_memories: Vec<MemoryView>,
    pub scoring_required: bool,
    /// The `<memd-score-required>` block alone ("" when not required).
    pub scoring_prompt: String,
    pub scoring_memories: Vec<ScoringMemory>,
}

/// `POST /api/hooks/stop`: one finished exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StopRequest {
    pub conversation_id: String,
    /// May be empty: memd then uses the prompt it saw in get-context for this conversation.
    #[serde(default)]
    pub user_message: String,
    pub assistant_response: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Client>,
    /// Used only when memd has not seen this conversation's prompt: the project is normally
    /// the one get-context resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_dir: Option<String>,
    /// Did the turn (Claude Code's transcript) call `score_response`? `Some(false)`: no score
    /// can be in flight, so memd answers at once instead of waiting its grace window.
    /// Absent: unknown (memd waits, except for Cursor, which never sees a scoring request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_call_seen: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StopResponse {
    pub stored: bool,
    pub doc_id: String,
    pub scoring_complete: bool,
    /// Never true by default: memd does not stand between the user and the agent.
    pub should_block: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_message: Option<String>,
    pub needs_sidecar: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecar_data: Option<SidecarData>,
}

/// `POST /api/hooks/pre-compact`: the client is about to compact a conversation's context
/// (Claude Code `PreCompact`); memd stores a digest of its exchanges since the last compaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PreCompactRequest {
    pub conversation_id: String,
    /// `manual` (`/compact`) or `auto` (the context window is full).
    #[serde(default)]
    pub trigger: String,
    /// What the user asked the compaction to keep (`/compact <instructions>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Client>,
    /// Used only when memd has not seen this conversation's prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_dir: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PreCompactResponse {
    /// False when nothing happened since the last digest (or the conversation is unknown).
    pub stored: bool,
    /// The digest's id ("" when nothing was stored).
    pub doc_id: String,
    /// How many exchanges the digest covers.
    pub exchanges: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ExchangeText {
    pub user: String,
    pub assistant: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SidecarMemory {
    pub id: String,
    pub content: String,
}

/// Everything `hook-stop` needs to score the previous exchange itself (seed 000).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SidecarData {
    pub conversation_id: String,
    /// The exchange being scored (the one before the current turn).
    pub exchange: ExchangeText,
    pub memories: Vec<SidecarMemory>,
    /// The user's follow-up: the signal the outcome is judged from.
    pub current_user_message: String,
    /// Ordered chain of endpoints to try.
    pub targets: Vec<SidecarTarget>,
    /// Per-model and whole-chain budgets, milliseconds (0: the hook's defaults, 6 s / 15 s).
    #[serde(default)]
    pub per_model_ms: u64,
    #[serde(default)]
    pub total_ms: u64,
    /// Models to skip (circuit-broken), as `target/model` keys.
    #[serde(default)]
    pub skip: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// Configured by the user (config file or `MEMD_SIDECAR_URL`).
    #[default]
    User,
    /// A local server on loopback (Ollama, LM Studio).
    Local,
    /// OpenCode Zen (remote, opt-in only).
    Zen,
}

/// One OpenAI-compatible `/chat/completions` endpoint with the models to try on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SidecarTarget {
    pub name: String,
    pub kind: TargetKind,
    /// Base URL, e.g. `http://127.0.0.1:11434/v1`; the hook appends `/chat/completions`.
    pub base_url: String,
    pub models: Vec<String>,
    /// Sent as `Authorization: Bearer`; travels only over loopback from memd to the hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Ask `GET /models` first (Zen: ids ending in `-free`, plus `big-pickle`).
    #[serde(default)]
    pub discover_models: bool,
}

/// `POST /api/record-outcome`: scores the last completed exchange of a conversation, once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecordOutcomeRequest {
    #[serde(default)]
    pub conversation_id: String,
    /// `worked` | `failed` | `partial` | `unknown`.
    #[serde(alias = "exchange_outcome")]
    pub outcome: String,
    /// Per-memory outcomes, `{id: outcome}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_scores: Option<BTreeMap<String, String>>,
    /// `Some(ids)`: score exactly these; `Some([])`: none; `None`: every memory injected last turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange_summary: Option<String>,
    /// `agent` (score_response) or `sidecar` (hook-stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecordOutcomeResponse {
    pub success: bool,
    pub outcome: String,
    pub documents_scored: usize,
    /// Ids that were named but do not exist (or are not scorable), reported, not errors.
    #[serde(default)]
    pub unknown_ids: Vec<String>,
    /// The exchange had already been scored: nothing changed.
    #[serde(default)]
    pub already_scored: bool,
    #[serde(default)]
    pub summary_stored: bool,
    /// Ids that were named but not scored: not listed by the scoring request (nor shown to the
    /// asking MCP session), or shown with the current prompt and not used yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<IgnoredScore>,
}

/// An id a score named that was not scored, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IgnoredScore {
    pub id: String,
    pub reason: String,
}

/// `POST /api/record-response`: a key takeaway stored in working memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecordResponseRequest {
    pub key_takeaway: String,
    /// `worked` (0.7), `failed` (0.2), `partial` (0.55); absent → 0.5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_score: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecordResponseResponse {
    pub success: bool,
    pub doc_id: String,
}

/// One sidecar attempt as `hook-stop` reports it (never the exchange text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SidecarAttempt {
    #[serde(default)]
    pub at: String,
    pub target: String,
    pub model: String,
    /// HTTP status, or 0 for a transport failure / timeout.
    pub status: u16,
    pub latency_ms: u64,
    /// `ok:<outcome>`, `timeout`, `refused:FreeTierError`, `unparseable`, `invalid_outcome`, ...
    pub result: String,
}

/// `POST /api/sidecar/report`: what a sidecar run did, so memd can circuit-break and show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SidecarReport {
    pub conversation_id: String,
    pub attempts: Vec<SidecarAttempt>,
    /// True once the chain produced a score (already posted to record-outcome).
    pub scored: bool,
}
