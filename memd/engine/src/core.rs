//! The daemon's service object: one `Core` per process, shared by HTTP, MCP and the workers.
//!
//! Owns the store handle, the embedder (loaded in the background; absent when the runtime is
//! missing), the query-embedding cache and the operations that are not hook-specific: search,
//! takeaways, health, stats (the memory bank, books, projects and export add theirs in their
//! own modules). Must never block an async thread on embedding
//! or fsync: heavy calls go through `spawn_blocking` or the store's async commit.

use crate::config::Config;
use crate::embed::Embed;
use crate::error::{ApiError, check_len};
use crate::record::Record;
use crate::redact;
use crate::retrieve;
use crate::search::{self, Query, Ranking};
use crate::state::ops::{Op, Output};
use crate::state::{MemState, new_id};
use crate::store::Store;
use crate::{clock, learn};
use proto::limits;
use proto::*;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

pub use crate::bank::BANK_DUPLICATE_COSINE;
const QUERY_CACHE_MAX: usize = 512;
const HOOK_CALLS_KEPT: usize = 50;

pub struct Core {
    pub cfg: Config,
    pub store: Store<MemState>,
    embedder: RwLock<Option<Arc<dyn Embed>>>,
    model_error: RwLock<Option<String>>,
    /// The cross-encoder for searches; `None` until loaded (or when off or missing).
    reranker: RwLock<Option<Arc<crate::embed::CrossEncoder>>>,
    /// The late-interaction model (prompt path and searches); `None` until loaded.
    late_model: RwLock<Option<Arc<crate::embed::LateInteraction>>>,
    /// Every memory's token states for it, filled in the background (`late::states_loop`).
    pub late_states: crate::late::States,
    /// Woken when memories may need token states.
    pub late_wake: tokio::sync::Notify,
    query_cache: Mutex<HashMap<String, Arc<Vec<f32>>>>,
    /// Woken when an exchange is scored (the stop hook's grace window waits on it).
    pub scored: tokio::sync::Notify,
    /// Woken when new memories need embedding.
    pub embed_wake: tokio::sync::Notify,
    /// Woken after outcomes (keeps a permit, so a wake during a running pass is not lost).
    pub lifecycle_wake: tokio::sync::Notify,
    hook_calls: Mutex<VecDeque<HookCall>>,
    /// Session records queued by get-context but perhaps not applied yet (see `settle`).
    queued: std::sync::atomic::AtomicU64,
    applied: tokio::sync::watch::Sender<u64>,
    pub started: Instant,
    /// What the hooks did, per conversation (ids and digests only).
    pub trace: crate::trace::Trace,
    /// Directory → project, so a prompt does not re-read `.git` every time.
    pub project_cache: crate::scope::ProjectCache,
    /// The shared store's status and wake-up bell (`shared`).
    pub shared: crate::shared::SharedLink,
    /// What the agent's commands did per conversation (process memory only).
    pub evidence: crate::evidence::Evidence,
}

/// What opening the engine found, for the start-up log line.
#[derive(Debug, Clone)]
pub struct OpenReport {
    pub snapshot_gen: u64,
    pub ops_replayed: u64,
    /// Empty when the write-ahead log ended cleanly; otherwise what recovery cut or set aside.
    pub tail: String,
}

impl std::fmt::Display for OpenReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "snapshot gen {}, {} ops replayed{}",
            self.snapshot_gen, self.ops_replayed, self.tail
        )
    }
}

impl Core {
    /// Opens the engine on `<data dir>/store` (blocking: loads the snapshot, replays the log).
    /// This is the storage seam: the server never sees the store type, so another backend
    /// can stand behind `Core` without touching it.
    pub fn open(cfg: Config) -> anyhow::Result<(Core, OpenReport)> {
        let store_dir = cfg.data_dir.join("store");
        let state = MemState::new(crate::embed::DIMS)?;
        let (store, recovery) =
            Store::open(&store_dir, state).map_err(|e| anyhow::anyhow!("{e}"))?;
        let report = OpenReport {
            snapshot_gen: recovery.snapshot_gen,
            ops_replayed: recovery.ops_replayed,
            tail: tail_note(&recovery.tail),
        };
        Ok((Core::new(cfg, store), report))
    }

    /// Flushes the log and writes the final snapshot and the token states (blocking).
    pub fn close(self) -> Result<(), String> {
        if self.late_states.size().0 > 0
            && let Err(e) = self.late_states.save(&self.token_states_path())
        {
            tracing::warn!("saving token states failed (they will be encoded again): {e:#}");
        }
        self.store.close().map_err(|e| e.to_string())
    }

    /// Where the late-interaction token states are saved between runs.
    pub fn token_states_path(&self) -> std::path::PathBuf {
        crate::late_file::path_in(&self.cfg.data_dir.join("store"))
    }

    pub fn new(cfg: Config, store: Store<MemState>) -> Core {
        Core {
            trace: crate::trace::Trace::open(&cfg.data_dir.join("logs")),
            cfg,
            store,
            embedder: RwLock::new(None),
            model_error: RwLock::new(Some("model is loading".into())),
            reranker: RwLock::new(None),
            late_model: RwLock::new(None),
            late_states: crate::late::States::default(),
            late_wake: tokio::sync::Notify::new(),
            query_cache: Mutex::new(HashMap::new()),
            scored: tokio::sync::Notify::new(),
            embed_wake: tokio::sync::Notify::new(),
            lifecycle_wake: tokio::sync::Notify::new(),
            hook_calls: Mutex::new(VecDeque::new()),
            queued: std::sync::atomic::AtomicU64::new(0),
            applied: tokio::sync::watch::channel(0).0,
            started: Instant::now(),
            project_cache: crate::scope::ProjectCache::default(),
            shared: crate::shared::SharedLink::default(),
            evidence: Default::default(),
        }
    }

    pub fn set_embedder(&self, e: Result<Arc<dyn Embed>, String>) {
        match e {
            Ok(e) => {
                *self.embedder.write().unwrap_or_else(|p| p.into_inner()) = Some(e);
                *self.model_error.write().unwrap_or_else(|p| p.into_inner()) = None;
                self.embed_wake.notify_one();
            }
            Err(msg) => *self.model_error.write().unwrap_or_else(|p| p.into_inner()) = Some(msg),
        }
    }

    pub fn set_reranker(&self, ce: Arc<crate::embed::CrossEncoder>) {
        *self.reranker.write().unwrap_or_else(|p| p.into_inner()) = Some(ce);
    }

    /// The cross-encoder, when it is loaded and `search.rerank` is on.
    pub fn reranker(&self) -> Option<Arc<crate::embed::CrossEncoder>> {
        if !self.cfg.search.rerank {
            return None;
        }
        self.reranker
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn set_late_model(&self, model: Arc<crate::embed::LateInteraction>) {
        *self.late_model.write().unwrap_or_else(|p| p.into_inner()) = Some(model);
        self.late_wake.notify_one();
    }

    /// The late-interaction model, when it is loaded and `search.rerank` is on.
    pub fn late_model(&self) -> Option<Arc<crate::embed::LateInteraction>> {
        if !self.cfg.search.rerank {
            return None;
        }
        self.late_model
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn embedder(&self) -> Option<Arc<dyn Embed>> {
        self.embedder
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn model_error(&self) -> Option<String> {
        self.model_error
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn ranking(&self) -> Ranking {
        Ranking {
            prior_weight: self.cfg.learning.prior_weight,
            exchange_weight: self.cfg.learning.exchange_weight,
            graph_boosts: self.cfg.learning.graph_boosts,
            ..Ranking::default()
        }
    }

    /// Query embedding (cached). `None` when no model is loaded or embedding failed: callers
    /// fall back to lexical search.
    pub async fn embed_query(self: &Arc<Self>, text: &str) -> Option<Arc<Vec<f32>>> {
        if let Some(v) = self.query_cache.lock().ok()?.get(text) {
            return Some(v.clone());
        }
        let embedder = self.embedder()?;
        let owned = text.to_string();
        let v = tokio::task::spawn_blocking(move || embedder.embed_query(&owned))
            .await
            .ok()?
            .ok()?;
        let v = Arc::new(v);
        if let Ok(mut cache) = self.query_cache.lock() {
            if cache.len() >= QUERY_CACHE_MAX {
                cache.clear(); // crude but bounded; queries repeat within a session, not across
            }
            cache.insert(text.to_string(), v.clone());
        }
        Some(v)
    }

    /// Queues ops without waiting for durability (their order is fixed now); `settle` waits
    /// until everything queued this way is applied. Failures are logged.
    pub fn commit_queued(&self, ops: Vec<Op>) -> Result<(), ApiError> {
        let rx = self.store.enqueue(ops)?;
        let n = self
            .queued
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        let applied = self.applied.clone();
        tokio::spawn(async move {
            if let Ok(Err(e)) = rx.await {
                tracing::error!("a queued write failed: {e}");
            }
            applied.send_modify(|done| *done = (*done).max(n));
        });
        Ok(())
    }

    /// Waits until every op queued by `commit_queued` so far has been applied, so reads see
    /// them (normally immediate: turns are seconds apart, an fsync takes milliseconds).
    pub async fn settle(&self) {
        let target = self.queued.load(std::sync::atomic::Ordering::SeqCst);
        let mut rx = self.applied.subscribe();
        let _ = rx.wait_for(|done| *done >= target).await;
    }

    pub async fn commit(&self, ops: Vec<Op>) -> Result<Vec<Output>, ApiError> {
        let out = self.store.commit_async(ops).await?;
        if out
            .iter()
            .any(|o| matches!(o, Output::Inserted { .. } | Output::Updated { .. }))
        {
            self.embed_wake.notify_one();
            self.late_wake.notify_one();
        }
        if self.cfg.store.url.is_some() {
            // Durable here; the shared store should have it soon, not at the next tick.
            self.shared.wake.notify_one();
        }
        Ok(out)
    }

    pub async fn commit_one(&self, op: Op) -> Result<Output, ApiError> {
        self.commit(vec![op])
            .await?
            .pop()
            .ok_or_else(|| ApiError::internal("store returned no result"))
    }

    // ---- search ----

    /// `fallback` is the caller's project when the request itself does not tell it (an MCP
    /// session's directory).
    pub async fn search(
        self: &Arc<Self>,
        req: &SearchRequest,
        fallback: Option<String>,
    ) -> Result<SearchResponse, ApiError> {
        let now = clock::now_ms();
        let conv = req
            .conversation_id
            .as_deref()
            .map(|c| redact::safe_id(c.trim()));
        let current = self
            .current_project("cwd", req.cwd.as_deref(), conv.as_deref())?
            .or(fallback);
        let q = Query::from_request(req, now, current.as_deref())?;
        if let Some(id) = &q.id {
            let results: Vec<MemoryView> = self
                .store
                .read(|s| s.by_id(id).map(|r| search::view(r, now, None)))
                .into_iter()
                .collect();
            return Ok(SearchResponse {
                count: results.len(),
                results,
            });
        }
        let results = match &q.text {
            Some(text) => self.search_text(&q, text, now).await,
            None => self.store.read(|s| {
                search::browse(s, &q)
                    .into_iter()
                    .map(|r| search::view(r, now, None))
                    .collect()
            }),
        };
        Ok(SearchResponse {
            count: results.len(),
            results,
        })
    }

    /// A text search through the retrieval pipeline: the fused head (deeper than `limit` when
    /// reranking) under one read, then late interaction and the cross-encoder outside it.
    async fn search_text(self: &Arc<Self>, q: &Query, text: &str, now: i64) -> Vec<MemoryView> {
        let relevance_order = matches!(q.sort_by, None | Some(SortBy::Relevance));
        let rerank = relevance_order && self.cfg.search.rerank;
        let wait = match rerank {
            true => retrieve::LateWait::Search,
            false => retrieve::LateWait::Skip,
        };
        let encoded = retrieve::encode(self, text, wait).await;
        let depth = match rerank {
            true => q.limit.max(self.cfg.search.rerank_depth),
            false => q.limit,
        };
        let ranking = self.ranking();
        let stage = retrieve::FirstStage {
            query: q,
            text,
            vector: encoded.vector(),
            ranking: &ranking,
        };
        let head = self
            .store
            .read(|s| retrieve::first_stage(s, &stage, depth, |_| true, now));
        let ce_depth = self.cfg.search.cross_encoder_depth;
        let how = retrieve::Second {
            late: encoded
                .late
                .as_ref()
                .map(|l| (l, self.cfg.search.rerank_depth)),
            deadline: None,
            cross: self
                .reranker()
                .filter(|_| rerank && ce_depth > 0)
                .map(|ce| (ce, ce_depth)),
        };
        let (head, _) = retrieve::second_stage(&self.late_states, text, head, how).await;
        head.into_iter().take(q.limit).map(|c| c.view).collect()
    }

    // ---- writes ----

    /// A fresh record with neutral scores; content must already be scrubbed.
    pub fn new_record(collection: Collection, content: String, now: i64) -> Record {
        Record {
            key: 0,
            id: new_id(collection),
            collection,
            content,
            created_at: now,
            updated_at: now,
            score: 0.5,
            uses: 0,
            success_count: 0.0,
            outcome_history: Vec::new(),
            last_outcome: None,
            last_used: None,
            tags: Vec::new(),
            importance: None,
            confidence: None,
            archived: false,
            former_ids: Vec::new(),
            metadata: BTreeMap::new(),
            project: None,
            team: false,
            origin: None,
            moves: Vec::new(),
        }
    }

    /// Stores a record, or reports the id of the identical one already stored.
    pub async fn insert(&self, rec: Record) -> Result<(String, bool), ApiError> {
        match self.commit_one(Op::Insert(Box::new(rec))).await? {
            Output::Inserted { id, .. } => Ok((id, false)),
            Output::Duplicate { id } => Ok((id, true)),
            Output::Rejected(m) => Err(ApiError::internal(m)),
            other => Err(ApiError::internal(format!(
                "unexpected store answer {other:?}"
            ))),
        }
    }

    /// The takeaway belongs to its conversation's project, else to `fallback`'s.
    pub async fn record_response(
        &self,
        req: &RecordResponseRequest,
        fallback: Option<String>,
    ) -> Result<RecordResponseResponse, ApiError> {
        let text = req.key_takeaway.trim();
        if text.is_empty() {
            return Err(ApiError::bad(
                "key_takeaway",
                "key_takeaway must not be empty",
            ));
        }
        check_len("key_takeaway", text, limits::TAKEAWAY_MAX_CHARS)?;
        let initial = match req.initial_score.as_deref() {
            None | Some("") => None,
            Some(s) => Some(Outcome::parse(s).ok_or_else(|| {
                ApiError::bad(
                    "initial_score",
                    format!("initial_score must be worked, failed or partial (got {s:?})"),
                )
            })?),
        };
        let now = clock::now_ms();
        let mut rec = Core::new_record(Collection::Working, redact::scrub(text).text, now);
        rec.score = learn::scoring::initial_score(initial);
        rec.metadata
            .insert("memory_type".into(), Value::from("key_takeaway"));
        let conv = req
            .conversation_id
            .as_deref()
            .map(|c| redact::safe_id(c.trim()));
        rec.project = conv
            .as_deref()
            .and_then(|c| self.conversation_project(c))
            .or(fallback);
        if let Some(c) = conv {
            rec.metadata
                .insert("conversation_id".into(), Value::from(c.as_ref()));
        }
        let (doc_id, _) = self.insert(rec).await?;
        Ok(RecordResponseResponse {
            success: true,
            doc_id,
        })
    }

    // ---- status ----

    pub fn note_hook_call(&self, endpoint: &str, micros: u64, status: u16) {
        if let Ok(mut calls) = self.hook_calls.lock() {
            calls.push_front(HookCall {
                at: clock::rfc3339(clock::now_ms()),
                endpoint: endpoint.to_string(),
                micros,
                status,
            });
            calls.truncate(HOOK_CALLS_KEPT);
        }
    }

    pub fn health(&self) -> HealthResponse {
        let counts = self.counts();
        let model_error = self.model_error();
        HealthResponse {
            status: "ok".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            model_loaded: model_error.is_none(),
            model_error,
            reranker_loaded: self.reranker().is_some(),
            late_interaction_loaded: self.late_model().is_some(),
            counts,
            pid: std::process::id(),
            port: self.cfg.port,
        }
    }

    fn counts(&self) -> BTreeMap<String, usize> {
        self.store.read(|s| {
            Collection::ALL
                .iter()
                .map(|c| (c.as_str().to_string(), s.count(*c)))
                .collect()
        })
    }

    /// Everything but the sidecar section (see `status::stats`, which adds it).
    pub(crate) fn stats_without_sidecar(&self) -> StatsResponse {
        let late_size = self.late_states.size();
        let late_loaded = self.late_model().is_some();
        let mut stats = self.store.read(|s| {
            let mut collections: BTreeMap<String, CollectionStats> = BTreeMap::new();
            for r in s.records() {
                let e = collections
                    .entry(r.collection.as_str().to_string())
                    .or_default();
                e.count += 1;
                e.mean_score += r.score;
                if r.uses > 0 {
                    e.scored += 1;
                }
            }
            for e in collections.values_mut() {
                e.mean_score = if e.count > 0 {
                    e.mean_score / e.count as f64
                } else {
                    0.0
                };
            }
            StatsResponse {
                version: env!("CARGO_PKG_VERSION").into(),
                collections,
                disk_bytes: 0,
                index: IndexStats {
                    vectors: s.vectors().len(),
                    pending_embeddings: s.pending_len(),
                    lexical_docs: s.lexical().len(),
                    token_states: late_size.0,
                    token_state_bytes: late_size.1,
                    pending_token_states: match late_loaded {
                        true => crate::late::pending(self, s),
                        false => 0,
                    },
                    state: s.index_origin.clone(),
                    prompt_rerank: self.late_states.prompts.view(),
                },
                lifecycle: s
                    .counters
                    .iter()
                    .filter(|(k, _)| !k.starts_with("sidecar_runs_day_"))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect(),
                conversations: s.sessions.conversations.len(),
                knowledge_graph: s.graph.sizes(),
                recent_hooks: Vec::new(),
                sidecar: SidecarStatus::default(),
                shared_store: None,
            }
        });
        stats.disk_bytes = self.store.disk_bytes();
        if let Ok(calls) = self.hook_calls.lock() {
            stats.recent_hooks = calls.iter().cloned().collect();
        }
        stats
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

/// Metadata keys and string values get the same redaction as content.
pub(crate) fn scrub_metadata(m: Metadata) -> Metadata {
    m.into_iter()
        .map(|(k, v)| (redact::scrub(&k).text, scrub_value(v)))
        .collect()
}

fn scrub_value(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(redact::scrub(&s).text),
        Value::List(l) => Value::List(l.into_iter().map(scrub_value).collect()),
        Value::Map(m) => Value::Map(scrub_metadata(m)),
        other => other,
    }
}
