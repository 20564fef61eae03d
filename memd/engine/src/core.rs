//! The engine's facade: one `Core` per process, shared by HTTP, MCP and the workers. One short
//! method per operation, handing the operation's module the narrow handles it needs.
//!
//! Owns the handles and their life: the store (private: operations get the `Db` handle, never
//! `Core`), the models, the token states, the trace ledger, the per-conversation tool evidence,
//! the project cache, the shared store's link and the recent hook calls. Must never hold an
//! operation's logic (it lives in the operation's module and takes handles) and never block an
//! async thread on embedding or fsync.

use crate::config::Config;
use crate::error::ApiError;
use crate::models::Models;
use crate::models::embed::{CrossEncoder, Embed, LateInteraction};
use crate::models::late::States;
use crate::ops::bank::Bank;
use crate::ops::books::Books;
use crate::ops::context::{Hooks, PromptDeps};
use crate::ops::evidence::Evidence;
use crate::ops::export::{ImportResponse, Transfer};
use crate::ops::find::Search;
use crate::ops::inspect::{self, Inspect};
use crate::ops::registry::Registry;
use crate::ops::status::{HookCalls, StatsDeps};
use crate::ops::tools::Tools;
use crate::record::Record;
use crate::scope::ProjectCache;
use crate::shared::SharedLink;
use crate::shutdown::Shutdown;
use crate::state::ops::{Op, Output, ScoreResult};
use crate::state::{Db, MemState, Signals};
use crate::store::Store;
use crate::trace::Trace;
use crate::workers::{self, Workers};
use proto::*;
use std::sync::Arc;

pub use crate::ops::bank::BANK_DUPLICATE_COSINE;

pub struct Core {
    pub cfg: Config,
    db: Arc<Db>,
    models: Models,
    /// Every memory's token states, filled in the background (`workers`).
    late: Arc<States>,
    /// What the hooks did, per conversation (ids and digests only).
    trace: Trace,
    /// Directory → project, so a prompt does not re-read `.git` every time.
    projects: ProjectCache,
    /// The shared store's status and wake-up bell (`shared`).
    shared: Arc<SharedLink>,
    /// What the agent's commands did per conversation (process memory only).
    evidence: Evidence,
    hooks: HookCalls,
}

/// What opening the engine found, for the start-up log line.
#[derive(Debug, Clone)]
pub struct OpenReport {
    pub snapshot_gen: u64,
    pub ops_replayed: u64,
    /// Empty when the write-ahead log ended cleanly; otherwise what recovery cut or set aside.
    pub tail: String,
    /// The snapshot's records decoded, the indexes loaded or rebuilt, each with its time.
    pub steps: String,
}

impl std::fmt::Display for OpenReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "snapshot gen {}, {} ops replayed{}",
            self.snapshot_gen, self.ops_replayed, self.tail
        )?;
        if !self.steps.is_empty() {
            write!(f, "; {}", self.steps)?;
        }
        Ok(())
    }
}

// ---- life ----
impl Core {
    /// Opens the engine on `<data dir>/store` (blocking: loads the snapshot, replays the log).
    pub fn open(cfg: Config) -> anyhow::Result<(Core, OpenReport)> {
        let store_dir = cfg.data_dir.join("store");
        let state = MemState::new(crate::models::embed::DIMS)?;
        let (store, recovery) =
            Store::open(&store_dir, state).map_err(|e| anyhow::anyhow!("{e}"))?;
        let report = OpenReport {
            snapshot_gen: recovery.snapshot_gen,
            ops_replayed: recovery.ops_replayed,
            tail: tail_note(&recovery.tail),
            steps: store.read(|s| s.open_note.clone()),
        };
        Ok((Core::new(cfg, store), report))
    }

    pub fn new(cfg: Config, store: Store<MemState>) -> Core {
        let shared = Arc::new(SharedLink::default());
        let bell = cfg.store.url.is_some().then(|| shared.clone());
        Core {
            db: Arc::new(Db::new(store, Arc::new(Signals::default()), bell)),
            models: Models::new(cfg.search.rerank),
            late: Arc::default(),
            trace: Trace::open(&cfg.data_dir.join("logs")),
            projects: ProjectCache::default(),
            shared,
            evidence: Evidence::default(),
            hooks: HookCalls::default(),
            cfg,
        }
    }

    /// Flushes the log and writes the final snapshot and the token states (blocking). Needs
    /// every worker stopped: they hold the store handle.
    pub fn close(self) -> Result<(), String> {
        if self.late.size().0 > 0
            && let Err(e) = self.late.save(&workers::token_states_path(&self.cfg))
        {
            tracing::warn!("saving token states failed (they will be encoded again): {e:#}");
        }
        let db = Arc::try_unwrap(self.db).map_err(|_| "the store is still in use".to_string())?;
        db.into_store().close().map_err(|e| e.to_string())
    }

    /// The background workers (embedding, token states, lifecycle, snapshots), each holding
    /// the engine until `shutdown`.
    pub fn spawn_workers(
        self: &Arc<Self>,
        shutdown: &Shutdown,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        workers::Loop::ALL
            .into_iter()
            .map(|which| {
                let (core, shutdown) = (self.clone(), shutdown.clone());
                tokio::spawn(async move { core.workers().run(which, &shutdown).await })
            })
            .collect()
    }

    fn workers(&self) -> Workers<'_> {
        Workers {
            cfg: &self.cfg,
            db: &self.db,
            models: &self.models,
            late: &self.late,
            trace: &self.trace,
        }
    }

    /// One lifecycle pass now (promotions, demotions, deletions, age cleanup, idle sessions).
    pub async fn run_lifecycle(&self) -> anyhow::Result<usize> {
        self.workers().run_lifecycle().await
    }

    /// A lifecycle pass as if the wall clock read `wall_ms` (the boot clock is the real one):
    /// how the clock guard is tested across restarts.
    pub async fn run_lifecycle_with_wall_clock(&self, wall_ms: i64) -> anyhow::Result<usize> {
        let last = self.db.read(|s| s.cleanup_clock);
        let clock = crate::clock::cleanup_now_with(wall_ms, last);
        self.workers().run_lifecycle_at(clock).await
    }
}

// ---- handles for the shared store's worker and tests; the daemon's model loading ----
impl Core {
    /// The store handle: named reads (`read`), commits, `settle`.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Runs `f` under one short read of the state.
    pub fn read<R>(&self, f: impl FnOnce(&MemState) -> R) -> R {
        self.db.read(f)
    }

    pub fn models(&self) -> &Models {
        &self.models
    }

    pub fn shared(&self) -> &SharedLink {
        &self.shared
    }

    pub fn set_embedder(&self, e: Result<Arc<dyn Embed>, String>) {
        if self.models.set_embedder(e) {
            self.db.signals().embed.notify_one();
        }
    }

    pub fn set_reranker(&self, ce: Arc<CrossEncoder>) {
        self.models.set_cross_encoder(ce);
    }

    pub fn set_late_model(&self, model: Arc<LateInteraction>) {
        self.models.set_late(model);
        self.db.signals().late.notify_one();
    }

    /// Records that loading `model` grew the resident set by `bytes` (measured by the
    /// daemon's loader), for `memd stats`.
    pub fn note_model_footprint(&self, model: &'static str, bytes: u64) {
        self.models.note_footprint(model, bytes);
    }

    /// A fresh record with neutral scores; content must already be scrubbed.
    pub fn new_record(collection: Collection, content: String, now: i64) -> Record {
        Record::new(collection, content, now)
    }

    pub async fn commit(&self, ops: Vec<Op>) -> Result<Vec<Output>, ApiError> {
        self.db.commit(ops).await
    }

    pub async fn commit_one(&self, op: Op) -> Result<Output, ApiError> {
        self.db.commit_one(op).await
    }

    /// Stores a record, or reports the id of the identical one already stored.
    pub async fn insert(&self, rec: Record) -> Result<(String, bool), ApiError> {
        self.db.insert(rec).await
    }

    /// Waits until every queued write is applied.
    pub async fn settle(&self) {
        self.db.settle().await
    }
}

// ---- the operations' handles ----
impl Core {
    fn registry(&self) -> Registry<'_> {
        Registry {
            db: &self.db,
            cache: &self.projects,
        }
    }

    fn search_deps(&self) -> Search<'_> {
        Search {
            cfg: &self.cfg,
            db: &self.db,
            models: &self.models,
            late: &self.late,
            cache: &self.projects,
        }
    }

    fn bank(&self) -> Bank<'_> {
        Bank {
            cfg: &self.cfg,
            db: &self.db,
            models: &self.models,
            cache: &self.projects,
        }
    }

    fn books_deps(&self) -> Books<'_> {
        Books {
            db: &self.db,
            cache: &self.projects,
        }
    }

    fn inspect(&self) -> Inspect<'_> {
        Inspect {
            db: &self.db,
            trace: &self.trace,
            data_dir: &self.cfg.data_dir,
        }
    }

    fn hooks(&self) -> Hooks<'_> {
        Hooks {
            cfg: &self.cfg,
            db: &self.db,
            trace: &self.trace,
            evidence: &self.evidence,
            cache: &self.projects,
        }
    }

    fn prompt_deps(&self) -> PromptDeps<'_> {
        PromptDeps {
            hooks: self.hooks(),
            models: &self.models,
            late: &self.late,
        }
    }

    fn tools(&self) -> Tools<'_> {
        Tools {
            cfg: &self.cfg,
            db: &self.db,
            trace: &self.trace,
            evidence: &self.evidence,
            cache: &self.projects,
        }
    }

    fn status(&self) -> StatsDeps<'_> {
        StatsDeps {
            cfg: &self.cfg,
            db: &self.db,
            models: &self.models,
            late: &self.late,
            shared: &self.shared,
            hooks: &self.hooks,
        }
    }
}

// ---- operations: one line each, the logic lives in the named module ----
impl Core {
    /// `fallback`: the caller's project when the request does not tell it (an MCP session's).
    pub async fn search(
        &self,
        req: &SearchRequest,
        fallback: Option<String>,
    ) -> Result<SearchResponse, ApiError> {
        self.search_deps().run(req, fallback).await
    }

    pub async fn get_context(
        &self,
        req: &GetContextRequest,
    ) -> Result<GetContextResponse, ApiError> {
        self.prompt_deps().get_context(req, None).await
    }

    pub async fn get_context_for(
        &self,
        req: &GetContextRequest,
        fallback: Option<String>,
    ) -> Result<GetContextResponse, ApiError> {
        self.prompt_deps().get_context(req, fallback).await
    }

    pub async fn stop(&self, req: &StopRequest) -> Result<StopResponse, ApiError> {
        self.hooks().stop(req).await
    }

    pub async fn pre_compact(
        &self,
        req: &PreCompactRequest,
    ) -> Result<PreCompactResponse, ApiError> {
        self.hooks().pre_compact(req).await
    }

    pub async fn record_outcome(
        &self,
        req: &RecordOutcomeRequest,
    ) -> Result<RecordOutcomeResponse, ApiError> {
        self.hooks().record_outcome(req, &[]).await
    }

    /// `record_outcome` for an MCP session, which may also score what its own tool calls
    /// showed it (`session_shown`).
    pub async fn record_outcome_for_session(
        &self,
        req: &RecordOutcomeRequest,
        session_shown: &[String],
    ) -> Result<RecordOutcomeResponse, ApiError> {
        self.hooks().record_outcome(req, session_shown).await
    }

    pub async fn score_memories(
        &self,
        scores: Vec<(String, Outcome)>,
    ) -> Result<ScoreResult, ApiError> {
        self.hooks().score_memories(scores).await
    }

    pub async fn sidecar_report(&self, req: &SidecarReport) -> Result<SuccessResponse, ApiError> {
        self.hooks().sidecar_report(req).await
    }

    pub async fn pre_tool(&self, req: &PreToolRequest) -> Result<PreToolResponse, ApiError> {
        self.tools().pre_tool(req).await
    }

    pub async fn post_tool(&self, req: &PostToolRequest) -> Result<PostToolResponse, ApiError> {
        self.tools().post_tool(req).await
    }

    pub async fn record_response(
        &self,
        req: &RecordResponseRequest,
        fallback: Option<String>,
    ) -> Result<RecordResponseResponse, ApiError> {
        self.bank().record_response(req, fallback).await
    }

    pub async fn memory_bank_add(
        &self,
        req: &MemoryBankAdd,
        fallback: Option<String>,
    ) -> Result<MemoryBankResponse, ApiError> {
        self.bank().add(req, fallback).await
    }

    pub async fn memory_bank_update(
        &self,
        req: &MemoryBankUpdate,
    ) -> Result<MemoryBankResponse, ApiError> {
        self.bank().update(req).await
    }

    /// `current`: the caller's project (archiving by content sees only what it can see).
    pub async fn memory_bank_archive(
        &self,
        req: &MemoryBankArchive,
        current: Option<String>,
    ) -> Result<MemoryBankResponse, ApiError> {
        self.bank().archive(req, current).await
    }

    pub async fn share(&self, req: &ShareRequest) -> Result<ShareResponse, ApiError> {
        self.bank().share(req).await
    }

    pub async fn delete_memory(
        &self,
        req: &DeleteMemoryRequest,
    ) -> Result<DeleteMemoryResponse, ApiError> {
        self.bank().delete(req).await
    }

    pub async fn ingest(&self, req: &IngestRequest) -> Result<IngestResponse, ApiError> {
        self.books_deps().ingest(req).await
    }

    pub fn books(&self) -> Result<BooksResponse, ApiError> {
        self.books_deps().list()
    }

    pub async fn remove_book(
        &self,
        req: &RemoveBookRequest,
    ) -> Result<RemoveBookResponse, ApiError> {
        self.books_deps().remove(req).await
    }

    pub fn export(&self, collection: Option<Collection>) -> Result<Vec<u8>, ApiError> {
        Transfer { db: &self.db }.export(collection)
    }

    pub async fn import(&self, jsonl: &[u8], dry_run: bool) -> Result<ImportResponse, ApiError> {
        Transfer { db: &self.db }.import(jsonl, dry_run).await
    }

    /// The project a caller stands in: its directory, else its conversation's, else unknown.
    pub fn current_project(
        &self,
        field: &str,
        dir: Option<&str>,
        conversation: Option<&str>,
    ) -> Result<Option<String>, ApiError> {
        self.registry().current_project(field, dir, conversation)
    }

    pub fn conversation_project(&self, conversation: &str) -> Option<String> {
        self.registry().conversation_project(conversation)
    }

    pub fn latest_project(&self) -> Option<String> {
        self.registry().latest_project()
    }

    pub fn projects(&self) -> ProjectsResponse {
        self.registry().projects()
    }

    pub async fn forget_project(
        &self,
        req: &ForgetProjectRequest,
    ) -> Result<ForgetProjectResponse, ApiError> {
        self.registry().forget_project(req).await
    }

    pub async fn list_memories(
        &self,
        f: &inspect::ListFilter,
    ) -> Result<Vec<MemoryView>, ApiError> {
        self.inspect().list_memories(&self.search_deps(), f).await
    }

    pub fn memory_detail(&self, id: &str) -> Option<inspect::MemoryDetail> {
        self.inspect().memory_detail(id)
    }

    pub fn tags_in_use(&self) -> Vec<String> {
        self.inspect().tags_in_use()
    }

    pub fn conversations(&self) -> Vec<inspect::conversations::ConversationSummary> {
        self.inspect().conversations()
    }

    pub fn conversation_turns(&self, conversation: &str) -> Vec<inspect::conversations::Turn> {
        self.inspect().conversation_turns(conversation)
    }

    pub fn health_series(&self) -> inspect::health::HealthSeries {
        self.inspect().health_series()
    }

    pub fn health(&self) -> HealthResponse {
        self.status().health()
    }

    pub fn stats(&self) -> StatsResponse {
        self.status().stats()
    }

    pub fn note_hook_call(&self, endpoint: &str, micros: u64, status: u16) {
        self.hooks.note(endpoint, micros, status)
    }
}

fn tail_note(tail: &crate::store::TailState) -> String {
    match tail {
        crate::store::TailState::Clean => String::new(),
        crate::store::TailState::Torn { offset, reason } => {
            format!("; torn WAL tail cut at byte {offset}: {reason}")
        }
        crate::store::TailState::Corrupt { offset, reason } => {
            format!("; corrupt WAL tail set aside at byte {offset}: {reason}")
        }
        crate::store::TailState::Resynced {
            offset,
            skipped,
            reason,
        } => format!(
            "; {skipped} damaged WAL bytes at byte {offset} set aside ({reason}), the frames \
             after them replayed"
        ),
    }
}
