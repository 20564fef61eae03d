//! The models: the sentence embedder (first stage, bank duplicates), the late-interaction model
//! (reranking prompts and searches, and every memory's token states) and the optional
//! cross-encoder (searches), as one handle the operations take instead of the engine.
//!
//! Owns which models are loaded (each `None` until its background load finishes, or for good
//! when off or missing), the embedder's load error, the query-embedding cache, and the query
//! side of late interaction (`query`: encoding under a deadline, load shedding, the prompts'
//! tally). Must never load a model itself (the daemon does, off the request path), never hold
//! a lock while a model runs, and never fail a read because a model is missing.

pub mod embed;
pub mod late;
pub mod late_codes;
mod late_disk;
mod late_file;
mod late_open;
pub mod late_plan;
mod late_record;
mod late_weigh;
mod query;

pub use late_file::{FILE_NAME as TOKEN_STATES_FILE, path_in as token_states_path_in};
pub use query::{LateQuery, Load, PromptRerank, PromptTally};

use embed::{CrossEncoder, Embed, LateInteraction};
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, RwLock};

const QUERY_CACHE_MAX: usize = 512;

pub struct Models {
    /// `search.rerank`: when off, neither reranking model is offered (nor loaded).
    rerank: bool,
    embedder: RwLock<Option<Arc<dyn Embed>>>,
    error: RwLock<Option<String>>,
    /// The cross-encoder for searches.
    cross: RwLock<Option<Arc<CrossEncoder>>>,
    /// The late-interaction model (prompt path, searches, token states).
    late: RwLock<Option<Arc<LateInteraction>>>,
    query_cache: Mutex<HashMap<String, Arc<Vec<f32>>>>,
    /// Resident-set growth while each model loaded (`embedder`, `late_interaction`,
    /// `cross_encoder`), for `memd stats`.
    footprints: Mutex<Vec<(&'static str, u64)>>,
    /// Late-interaction query encodings running now (including ones a prompt stopped waiting
    /// for): the load-shedding signal.
    queries: Arc<AtomicUsize>,
    /// How prompts fared against the reranking budget since start.
    pub prompts: PromptTally,
    /// Whether prompts or searches are arriving, and the back-off after a missed budget.
    pub load: Arc<Load>,
}

fn get<T: Clone>(lock: &RwLock<T>) -> T {
    lock.read().unwrap_or_else(|p| p.into_inner()).clone()
}

fn set<T>(lock: &RwLock<T>, value: T) {
    *lock.write().unwrap_or_else(|p| p.into_inner()) = value;
}

impl Models {
    /// No model loaded yet; `rerank` is `search.rerank`.
    pub fn new(rerank: bool) -> Models {
        Models {
            rerank,
            embedder: RwLock::new(None),
            error: RwLock::new(Some("model is loading".into())),
            cross: RwLock::new(None),
            late: RwLock::new(None),
            query_cache: Mutex::new(HashMap::new()),
            footprints: Mutex::default(),
            queries: Arc::default(),
            prompts: PromptTally::default(),
            load: Arc::default(),
        }
    }

    /// The embedder, or why it failed to load. Returns whether one is loaded now.
    pub fn set_embedder(&self, e: Result<Arc<dyn Embed>, String>) -> bool {
        match e {
            Ok(e) => {
                set(&self.embedder, Some(e));
                set(&self.error, None);
                true
            }
            Err(msg) => {
                set(&self.error, Some(msg));
                false
            }
        }
    }

    pub fn set_cross_encoder(&self, ce: Arc<CrossEncoder>) {
        set(&self.cross, Some(ce));
    }

    pub fn set_late(&self, model: Arc<LateInteraction>) {
        set(&self.late, Some(model));
    }

    pub fn embedder(&self) -> Option<Arc<dyn Embed>> {
        get(&self.embedder)
    }

    /// Why the embedder is not loaded (still loading, or the load error).
    pub fn error(&self) -> Option<String> {
        get(&self.error)
    }

    /// The cross-encoder, when it is loaded and `search.rerank` is on.
    pub fn cross_encoder(&self) -> Option<Arc<CrossEncoder>> {
        get(&self.cross).filter(|_| self.rerank)
    }

    /// The late-interaction model, when it is loaded and `search.rerank` is on.
    pub fn late(&self) -> Option<Arc<LateInteraction>> {
        get(&self.late).filter(|_| self.rerank)
    }

    /// Records that loading `model` grew the resident set by `bytes` (measured by the loader).
    pub fn note_footprint(&self, model: &'static str, bytes: u64) {
        let mut f = self.footprints.lock().unwrap_or_else(|p| p.into_inner());
        f.retain(|(m, _)| *m != model);
        f.push((model, bytes));
    }

    /// Each loaded model's resident-set growth at load.
    pub fn footprints(&self) -> Vec<(&'static str, u64)> {
        self.footprints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Bytes the query-embedding cache holds: each entry's text, vector and map slot.
    pub fn query_cache_bytes(&self) -> u64 {
        let Ok(cache) = self.query_cache.lock() else {
            return 0;
        };
        let slot = std::mem::size_of::<(String, Arc<Vec<f32>>)>() + 1;
        // An `Arc` block is two counts and the `Vec` header, then the vector's own buffer.
        let arc = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<Vec<f32>>();
        let entries: usize = cache
            .iter()
            .map(|(k, v)| k.capacity() + arc + v.capacity() * 4)
            .sum();
        (cache.capacity() * slot + entries) as u64
    }

    /// Query embedding (cached). `None` when no model is loaded or embedding failed: callers
    /// fall back to lexical search.
    pub async fn embed_query(&self, text: &str) -> Option<Arc<Vec<f32>>> {
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
}
