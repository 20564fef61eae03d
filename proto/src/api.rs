//! Search, memory bank, books, health and stats: the general memory API.

use crate::memory::MemoryView;
use crate::metadata::Metadata;
use crate::value::Value;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every 4xx/5xx answer carries this body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorBody {
    pub error: String,
    /// The request field the error is about, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// Limits shared by the daemon's validation and the tool descriptions.
pub mod limits {
    pub const QUERY_MAX_CHARS: usize = 2000;
    pub const ID_MAX_CHARS: usize = 200;
    pub const DAYS_BACK: (i64, i64) = (1, 365);
    pub const SEARCH_LIMIT: (i64, i64) = (1, 100);
    pub const MEMORY_BANK_MAX_CHARS: usize = 600;
    pub const TAKEAWAY_MAX_CHARS: usize = 600;
    pub const SUMMARY_MAX_CHARS: usize = 600;
    pub const TAGS_MAX: usize = 16;
    pub const TAG_MAX_CHARS: usize = 64;
    /// Hook exchange texts: larger texts are kept, cut at this many characters.
    pub const EXCHANGE_MAX_CHARS: usize = 50_000;
    pub const INGEST_MAX_BYTES: usize = 10 * 1024 * 1024;
    /// Every JSON endpoint except ingest.
    pub const BODY_MAX_BYTES: usize = 1024 * 1024;
    /// A working directory sent for project resolution (`cwd`, `project_dir`).
    pub const DIR_MAX_CHARS: usize = 4096;
    /// A shell command line a tool event carries (longer ones are cut by the hooks). Above the
    /// 64 KiB the guard reads, so a cut command is still seen to be too long.
    pub const COMMAND_MAX_CHARS: usize = 65_600;
    /// A project id or selector (`project`).
    pub const PROJECT_MAX_CHARS: usize = 512;
}

/// Where a new memory belongs: the caller's current project, or every project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Only the project the caller works in (build commands, conventions, paths).
    #[default]
    Project,
    /// Every project (who the user is, how they like to work).
    Global,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::Global => "global",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SortBy {
    #[default]
    Relevance,
    Recency,
    Score,
}

/// `POST /api/search`. At least one of `query`, `days_back`, `id` is required; `id` wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SearchRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::QUERY_MAX_CHARS)))]
    pub query: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = limits::DAYS_BACK.0, max = limits::DAYS_BACK.1)))]
    pub days_back: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::ID_MAX_CHARS)))]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::ID_MAX_CHARS)))]
    pub conversation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collections: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = limits::SEARCH_LIMIT.0, max = limits::SEARCH_LIMIT.1)))]
    pub limit: Option<i64>,
    /// Equality on metadata keys; `{"created_at": {"$gte": "2026-01-01T00:00:00Z"}}` style
    /// range operators (`$gte`, `$lte`, `$gt`, `$lt`) on strings and numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_filters: Option<BTreeMap<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort_by: Option<SortBy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_archived: Option<bool>,
    /// Whose memories are candidates: `current` (the project of `cwd`, else of
    /// `conversation_id`, plus global ones), `global` (global ones only), `all`, or a project
    /// id as `memd projects` lists it. Absent: `current` when a project is known, else `all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::PROJECT_MAX_CHARS)))]
    pub project: Option<String>,
    /// The caller's working directory (absolute); memd resolves it to its repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::DIR_MAX_CHARS)))]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SearchResponse {
    pub results: Vec<MemoryView>,
    pub count: usize,
}

/// `POST /api/memory-bank/add`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemoryBankAdd {
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = limits::MEMORY_BANK_MAX_CHARS)))]
    pub content: String,
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::TAGS_MAX)))]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0, max = 1.0)))]
    pub importance: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0, max = 1.0)))]
    pub confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// `project` (default: only the project of `cwd`) or `global` (every project). A
    /// project-scoped add without a resolvable `cwd` is stored global, and the answer says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// The caller's working directory (absolute); memd resolves it to its repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::DIR_MAX_CHARS)))]
    pub cwd: Option<String>,
    /// Share the fact with the team through the shared store (default: private).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub share: bool,
}

/// `POST /api/share`: share a memory-bank fact or pattern with the team, or make it private.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ShareRequest {
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = limits::ID_MAX_CHARS)))]
    pub id: String,
    /// `true` (default): visible to the team; `false`: private again.
    #[serde(default = "share_default")]
    pub shared: bool,
}

fn share_default() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ShareResponse {
    pub id: String,
    pub shared: bool,
    /// False when no shared store is configured: the flag is kept and takes effect once one is.
    pub shared_store: bool,
}

/// `POST /api/memory/delete`: delete one memory of any collection for good (the memory bank's
/// soft delete is archive). A memory shared by a teammate can only be deleted by its owner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeleteMemoryRequest {
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = limits::ID_MAX_CHARS)))]
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeleteMemoryResponse {
    pub success: bool,
    /// The deleted memory's current id (the request may have named a former one).
    pub id: String,
}

/// `POST /api/ui/login-link` takes an empty object (`{}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UiLoginLinkRequest {}

/// `POST /api/ui/login-link`: a one-time link that logs a browser into the dashboard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct UiLoginLinkResponse {
    /// `http://127.0.0.1:<port>/ui/login?code=...`: works once, until `expires_in_secs` pass.
    pub url: String,
    pub expires_in_secs: u64,
}

/// `POST /api/memory-bank/update`. Unset fields keep their value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemoryBankUpdate {
    #[serde(alias = "doc_id")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::ID_MAX_CHARS)))]
    pub id: String,
    #[serde(
        default,
        alias = "new_content",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = limits::MEMORY_BANK_MAX_CHARS)))]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::TAGS_MAX)))]
    pub tags: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0, max = 1.0)))]
    pub importance: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0, max = 1.0)))]
    pub confidence: Option<f64>,
}

/// `POST /api/memory-bank/archive`: by id, or by the closest active entry to `content`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemoryBankArchive {
    #[serde(default, alias = "doc_id", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::ID_MAX_CHARS)))]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// Answer of every memory-bank mutation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemoryBankResponse {
    pub success: bool,
    pub doc_id: String,
    /// True when the add matched an existing entry and nothing new was stored.
    #[serde(default)]
    pub duplicate: bool,
    /// The project the entry belongs to; absent when it is global.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// An add that reads like an existing fact but says otherwise (negated, another number or
    /// identifier) is stored as new and archives that fact: its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded: Option<String>,
}

/// `POST /api/ingest`: a book (reference document) as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IngestRequest {
    pub title: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `global` (default: books are reference for every project) or `project` (only the
    /// project of `cwd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::DIR_MAX_CHARS)))]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IngestResponse {
    pub success: bool,
    pub title: String,
    /// The project the book belongs to; absent when it is global.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    pub chunks: usize,
    /// Chunks that were already stored (re-ingesting the same text stores nothing twice).
    pub already_present: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BookInfo {
    pub title: String,
    pub chunks: usize,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The project the book belongs to; absent when it is global.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BooksResponse {
    pub books: Vec<BookInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RemoveBookRequest {
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RemoveBookResponse {
    pub success: bool,
    pub removed_chunks: usize,
}

/// One project memd has memories or conversations for (`GET /api/projects`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProjectInfo {
    /// `host/owner/repo` of the origin remote, else `path:<repository root>`.
    pub id: String,
    /// The repository root memd last saw it at (absent for a project known only from
    /// imported memories).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// Memories per collection (archived memory-bank entries included).
    pub memories: BTreeMap<String, usize>,
    pub total: usize,
    /// RFC 3339: the last prompt in it, else its newest memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used: Option<String>,
}

/// `GET /api/projects`: newest use first; global memories are counted apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProjectsResponse {
    pub projects: Vec<ProjectInfo>,
    pub global: BTreeMap<String, usize>,
}

/// `POST /api/projects/forget`: deletes every memory of one project (global ones stay).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ForgetProjectRequest {
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = limits::PROJECT_MAX_CHARS)))]
    pub project: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ForgetProjectResponse {
    pub success: bool,
    pub deleted: usize,
    /// Conversations of that project whose hook state was dropped too.
    pub conversations: usize,
}

/// `GET /api/hello?nonce=<32 hex>`: memd proves it holds this user's token without sending it
/// (`memd_client::proof`). Answered without authentication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HelloResponse {
    /// Hex HMAC-SHA256 of `"memd-hello:" + nonce + ":" + address` keyed with the token, where
    /// address is the socket address the connection reached (`127.0.0.1:47111`).
    pub proof: String,
}

/// `GET /api/health`: answered without authentication, reveals no content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HealthResponse {
    pub status: String,
    pub version: String,
    pub model_loaded: bool,
    /// Why the model is not loaded, with the command that fixes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_error: Option<String>,
    /// The search reranker is loaded (it loads only when `search.rerank` is on).
    #[serde(default)]
    pub reranker_loaded: bool,
    /// The late-interaction model that reranks prompts and searches is loaded.
    #[serde(default)]
    pub late_interaction_loaded: bool,
    pub counts: BTreeMap<String, usize>,
    pub pid: u32,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CollectionStats {
    pub count: usize,
    pub mean_score: f64,
    pub scored: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IndexStats {
    /// Vectors in the index.
    pub vectors: usize,
    /// Memories stored but not yet embedded (queue + retries).
    pub pending_embeddings: usize,
    pub lexical_docs: usize,
    /// Memories with late-interaction token states, and the bytes those hold in memory (the
    /// codebook of their codes included).
    #[serde(default)]
    pub token_states: usize,
    #[serde(default)]
    pub token_state_bytes: usize,
    /// Live (not archived) memories: `token_states` of them are reranked (the coverage).
    #[serde(default)]
    pub token_states_total: usize,
    /// The states in memory are codes against a codebook trained on the store (false: still
    /// i8, until enough memories are encoded to train it).
    #[serde(default)]
    pub token_states_coded: bool,
    /// Memories whose full (i8) states are in the log on disk (a reorder rescores the best
    /// of the code order with them), and the log's bytes.
    #[serde(default)]
    pub token_states_on_disk: usize,
    #[serde(default)]
    pub token_state_disk_bytes: u64,
    /// Live memories still waiting for token states (reranking skips them until then); 0 while
    /// the model is not loaded.
    #[serde(default)]
    pub pending_token_states: usize,
    /// Conversation turns (exchanges) whose vectors are still of the text memd indexed before
    /// an upgrade (`[date] ` before each turn): embedded again in the background, newest first.
    #[serde(default)]
    pub pending_reindex: usize,
    /// `loaded` (from disk), `rebuilt`, or `empty`.
    pub state: String,
    /// Prompts since start that asked for late interaction, by what they got.
    #[serde(default)]
    pub prompt_rerank: PromptRerankStats,
}

/// How prompts fared against `search.prompt_budget_ms` since the daemon started: reranked in
/// full, over budget (query encoding or MaxSim ran out of time: the fused order kept, at least
/// for part of the head), or shed (another prompt's query was still encoding); besides them,
/// the prompts with nothing to rerank (no memory had token states yet, or the first stage
/// found fewer than two candidates), which did not wait for their query's token states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PromptRerankStats {
    pub reranked: u64,
    /// `late_encoding_late` + `maxsim_cut_short`.
    pub over_budget: u64,
    /// Of `over_budget`: the query's late encoding had not arrived by the deadline (the whole
    /// head kept its fused order).
    #[serde(default)]
    pub late_encoding_late: u64,
    /// Of `over_budget`: the encoding arrived, and MaxSim reached the deadline before the end
    /// of the head (the part it did not reach kept its fused places).
    #[serde(default)]
    pub maxsim_cut_short: u64,
    pub shed: u64,
    #[serde(default)]
    pub nothing_to_rerank: u64,
}

/// `GET /api/stats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StatsResponse {
    pub version: String,
    pub collections: BTreeMap<String, CollectionStats>,
    pub disk_bytes: u64,
    pub index: IndexStats,
    /// Lifecycle transitions since the store was created.
    pub lifecycle: BTreeMap<String, u64>,
    /// Conversations whose hook state memd currently keeps (expire after the session TTL).
    #[serde(default)]
    pub conversations: usize,
    /// Knowledge-graph sizes (`routing_concepts`, `routing_outcomes`).
    pub knowledge_graph: BTreeMap<String, usize>,
    /// Last hook calls seen by the daemon, newest first.
    #[serde(default)]
    pub recent_hooks: Vec<HookCall>,
    #[serde(default)]
    pub sidecar: SidecarStatus,
    /// The shared PostgreSQL store, when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_store: Option<SharedStoreStatus>,
    /// Where the daemon's memory goes.
    #[serde(default)]
    pub memory: MemoryStats,
}

/// The daemon's memory by component (`memd stats`). Sizes held by data structures are counted
/// from their capacities; the models' are the growth of the resident set while each loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemoryStats {
    /// The process's resident set now (0 where the system does not say).
    pub rss_bytes: u64,
    /// Bytes per component: `records`, `vector_index`, `lexical_index`, `token_states`,
    /// `query_cache`, `model.<name>` for each loaded model (its weights and session: anonymous
    /// memory), and `code` (file-backed pages: the binary and shared libraries, ONNX Runtime's
    /// among them).
    pub components: BTreeMap<String, u64>,
    /// The components that are resident-set growth measured while they loaded, not counts.
    #[serde(default)]
    pub measured_at_load: Vec<String>,
    /// Resident set not attributed to a component (allocator slack, ONNX Runtime's arenas
    /// grown by runs, stacks); 0 when the components exceed it.
    pub unattributed_bytes: u64,
}

/// How the exchange with the shared store goes (`memd status`, `memd doctor`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SharedStoreStatus {
    /// Host, port, database and role (never a password).
    pub target: String,
    /// The last exchange worked.
    pub connected: bool,
    /// The database role memd acts as (owner of what this machine writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Round trip of the last successful exchange's first query, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    /// Changes, deletions and outcomes written here but not there yet.
    pub backlog: usize,
    /// Memories here that came from the shared store (other machines, teammates).
    pub mirrored: usize,
    /// When the last exchange worked (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_ok: Option<String>,
    /// Why the last exchange failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// One hook request as the daemon timed it (no content).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HookCall {
    pub at: String,
    pub endpoint: String,
    pub micros: u64,
    pub status: u16,
}

/// Sidecar bookkeeping shown by `memd status` (issue 4 fills it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SidecarStatus {
    pub remote_enabled: bool,
    pub calls_today: u32,
    pub daily_cap: u32,
    #[serde(default)]
    pub attempts: Vec<crate::hooks::SidecarAttempt>,
    /// Targets or models refused for a while, with the reason and until when.
    #[serde(default)]
    pub cooling: Vec<CoolingEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CoolingEntry {
    pub key: String,
    pub until: String,
    pub reason: String,
}

/// An answer that only says the request was carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SuccessResponse {
    pub success: bool,
}
