//! What `/api/health` and `/api/stats` report: the counts, the models, the indexes, the token
//! states, the sidecar chain, the shared store, the latest hook calls and where the memory goes.
//!
//! Owns assembling those answers from the handles (`StatsDeps`) and the ring of recent hook
//! calls. Must never block on the store's writer (one read per answer) and never count under
//! the store lock what it can count outside it.

use crate::clock;
use crate::config::Config;
use crate::models::Models;
use crate::models::late::States;
use crate::shared::SharedLink;
use crate::state::{Db, MemState};
use proto::{
    Collection, HealthResponse, HookCall, IndexStats, MemoryStats, SidecarStatus, StatsResponse,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

const HOOK_CALLS_KEPT: usize = 50;

/// The latest hook calls (endpoint, time taken, status), newest first.
#[derive(Default)]
pub struct HookCalls(Mutex<VecDeque<HookCall>>);

impl HookCalls {
    pub fn note(&self, endpoint: &str, micros: u64, status: u16) {
        if let Ok(mut calls) = self.0.lock() {
            calls.push_front(HookCall {
                at: clock::rfc3339(clock::now_ms()),
                endpoint: endpoint.to_string(),
                micros,
                status,
            });
            calls.truncate(HOOK_CALLS_KEPT);
        }
    }

    fn list(&self) -> Vec<HookCall> {
        self.0
            .lock()
            .map(|c| c.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// What the status answers read.
pub struct StatsDeps<'a> {
    pub cfg: &'a Config,
    pub db: &'a Db,
    pub models: &'a Models,
    pub late: &'a States,
    pub shared: &'a SharedLink,
    pub hooks: &'a HookCalls,
}

/// Each collection's count.
pub fn counts(s: &MemState) -> BTreeMap<String, usize> {
    Collection::ALL
        .iter()
        .map(|c| (c.as_str().to_string(), s.count(*c)))
        .collect()
}

impl StatsDeps<'_> {
    /// `GET /api/health`.
    pub fn health(&self) -> HealthResponse {
        let model_error = self.models.error();
        HealthResponse {
            status: "ok".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            model_loaded: model_error.is_none(),
            model_error,
            reranker_loaded: self.models.cross_encoder().is_some(),
            late_interaction_loaded: self.models.late().is_some(),
            counts: self.db.read(counts),
            pid: std::process::id(),
            port: self.cfg.port,
        }
    }

    /// `GET /api/stats`.
    pub fn stats(&self) -> StatsResponse {
        let late_size = self.late.size();
        let late_disk = self.late.disk_size();
        let late_loaded = self.models.late().is_some();
        let mut records_bytes = 0;
        let mut index_bytes = (0, 0);
        // Running totals and the planner's queue: no walk of the records (seconds at 1M).
        let mut stats = self.db.read(|s| StatsResponse {
            version: env!("CARGO_PKG_VERSION").into(),
            collections: {
                index_bytes = (s.vectors().memory_bytes(), s.lexical().memory_bytes());
                records_bytes = s.totals().bytes();
                s.totals().collections()
            },
            disk_bytes: 0,
            index: IndexStats {
                vectors: s.vectors().len(),
                pending_embeddings: s.pending_len(),
                lexical_docs: s.lexical().len(),
                token_states: late_size.0,
                token_state_bytes: late_size.1 + self.late.codebook_bytes(),
                token_states_total: s.totals().live(),
                token_states_coded: self.late.codebook().is_some(),
                token_states_on_disk: late_disk.0,
                token_state_disk_bytes: late_disk.1,
                pending_token_states: match late_loaded {
                    true => crate::models::late_plan::pending(self.late, s),
                    false => 0,
                },
                pending_reindex: s.reindex_left(),
                state: s.index_origin.clone(),
                prompt_rerank: self.models.prompts.view(),
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
            memory: MemoryStats::default(),
        });
        stats.memory = self.memory([
            ("records", records_bytes),
            ("vector_index", index_bytes.0),
            ("lexical_index", index_bytes.1),
            ("token_states", late_size.1),
        ]);
        stats.disk_bytes = self.db.store().disk_bytes();
        stats.recent_hooks = self.hooks.list();
        stats.sidecar = crate::ops::context::sidecar_status(&self.cfg.sidecar, self.db);
        stats.shared_store = self.shared.status().map(|mut s| {
            // Counted now, not at the worker's last pass.
            (s.backlog, s.mirrored) = self.db.read(|st| (st.backlog(), st.mirrored_len()));
            s
        });
        stats
    }
}

impl StatsDeps<'_> {
    /// `counted` (bytes per data structure), the query cache, the models' load-time growth and
    /// the file-backed pages (`code`), against the resident set.
    fn memory<const N: usize>(&self, counted: [(&str, usize); N]) -> MemoryStats {
        let mut components: BTreeMap<String, u64> = counted
            .iter()
            .map(|(name, bytes)| (name.to_string(), *bytes as u64))
            .collect();
        components.insert("query_cache".into(), self.models.query_cache_bytes());
        let mut measured_at_load = Vec::new();
        for (model, bytes) in self.models.footprints() {
            let name = format!("model.{model}");
            components.insert(name.clone(), bytes);
            measured_at_load.push(name);
        }
        // File-backed pages are the binary and the libraries: no count of ours covers them.
        if let Some(resident) = crate::heap::resident() {
            components.insert("code".into(), resident.file);
        }
        let rss_bytes = crate::heap::rss_bytes().unwrap_or(0);
        let attributed: u64 = components.values().sum();
        MemoryStats {
            rss_bytes,
            components,
            measured_at_load,
            unattributed_bytes: rss_bytes.saturating_sub(attributed),
        }
    }
}
