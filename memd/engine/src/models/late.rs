//! Late-interaction reranking (ColBERT MaxSim) of the prompt path and of searches: the token
//! states of every memory and the reorder of a ranked head under a deadline.
//!
//! Owns `States` (memory key → its token states and the hash of the text they came from;
//! derived data, rebuilt from the store, never in the write-ahead log), their two forms (i8
//! while every memory's states fit `search.token_states_mb`; once they do not, codes against a
//! codebook trained once on the states held, as PLAID trains on its corpus: `late_codes`,
//! ~6x smaller for 0.006-0.010 of MRR), which memories should
//! have states within `search.token_states_mb` (`plan`: newest first), and `reorder`: inside
//! the head, memories with states sorted by MaxSim into the places such memories held; a memory
//! without states (not encoded yet) keeps its place. The background pass that fills the states
//! is a worker (`workers`); `late_file` saves them between runs. Must never block a
//! request on encoding a memory and never let a missing model or a late clock fail a read: the
//! fused order is always an answer.

use super::embed::{QueryStates, TokenStates};
pub use super::late_codes::Stored;
use super::late_codes::{Codebook, QueryTable};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// Memories encoded per pass between checks for shutdown and new work (~7 ms each).
pub const ENCODE_BATCH: usize = 32;

/// Token vectors the codebook is trained on (an even sample of the i8 states held; about 230
/// memories' worth).
pub const TRAIN_TOKENS: usize = 8_192;

/// Token states by memory key, with a hash of the text they were computed from (an edited
/// memory is re-encoded; until then it has none).
#[derive(Default)]
pub struct States {
    map: RwLock<HashMap<u64, (u32, Arc<Stored>)>>,
    /// The codebook every `Stored::Coded` was made with; set once (trained or loaded).
    codebook: RwLock<Option<Arc<Codebook>>>,
    /// Bumped on every insert and eviction: the saved file is behind when it differs.
    changes: std::sync::atomic::AtomicU64,
    /// What encoding each (key, text hash) gave, kept after eviction: its real size, so the
    /// cap is planned with it instead of an estimate (which could admit, encode and evict the
    /// same memory on every pass), or that it failed (never retried for that text).
    known: std::sync::Mutex<HashMap<(u64, u32), Known>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Known {
    Bytes(usize),
    Failed,
}

impl States {
    /// Loads what a previous run saved (nothing when the file is missing or unusable: the
    /// states are derived, they will be encoded again).
    pub fn load(&self, path: &std::path::Path) {
        match super::late_file::load(path) {
            Ok((codebook, entries)) => {
                let n = entries.len();
                {
                    let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
                    for (key, hash, states) in entries {
                        map.insert(key, (hash, Arc::new(states)));
                    }
                }
                // A file of the first format holds i8 states only: they are coded once the
                // codebook is trained, like states encoded before it.
                if let Some(codebook) = codebook {
                    self.adopt(codebook);
                }
                tracing::info!(
                    "token states of {n} memories loaded from {}",
                    path.display()
                );
            }
            Err(e) if path.exists() => {
                tracing::warn!("token states not loaded, they will be encoded again: {e:#}")
            }
            Err(_) => {}
        }
    }

    /// Writes every memory's states to `path` (atomically); returns the change count saved.
    pub fn save(&self, path: &std::path::Path) -> anyhow::Result<u64> {
        let changes = self.changes();
        let entries: Vec<(u64, u32, Arc<Stored>)> = {
            let map = self.map.read().unwrap_or_else(|p| p.into_inner());
            map.iter().map(|(k, (h, s))| (*k, *h, s.clone())).collect()
        };
        let refs: Vec<(u64, u32, &Stored)> = entries
            .iter()
            .map(|(k, h, s)| (*k, *h, s.as_ref()))
            .collect();
        super::late_file::save(path, self.codebook().as_deref(), &refs)?;
        Ok(changes)
    }

    pub fn changes(&self) -> u64 {
        self.changes.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn changed(&self) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn codebook(&self) -> Option<Arc<Codebook>> {
        self.codebook
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Trains the codebook on (a sample of) the i8 states held and codes them all; true when
    /// it did (false: trained already, or fewer token vectors than centroids). Called once
    /// the i8 states no longer fit the cap. CPU-heavy (k-means): a worker's job.
    pub fn train_codebook(&self) -> bool {
        if self.codebook().is_some() {
            return false;
        }
        let sample: Vec<Vec<f32>> = {
            let map = self.map.read().unwrap_or_else(|p| p.into_inner());
            let mut full: Vec<(&u64, &TokenStates)> = map
                .iter()
                .filter_map(|(k, (_, s))| match s.as_ref() {
                    Stored::Full(f) => Some((k, f)),
                    Stored::Coded(_) => None,
                })
                .collect();
            let total: usize = full.iter().map(|(_, f)| f.tokens()).sum();
            if total < super::late_codes::CENTROIDS {
                return false;
            }
            // The same states give the same codebook, whatever the map's order; an even
            // sample of `TRAIN_TOKENS`, decoded one memory at a time.
            full.sort_by_key(|(k, _)| **k);
            let step = total.div_ceil(TRAIN_TOKENS).max(1);
            let mut at = 0usize;
            let mut sample = Vec::with_capacity(TRAIN_TOKENS);
            for (_, f) in full {
                for row in f.rows() {
                    if at.is_multiple_of(step) {
                        sample.push(row);
                    }
                    at += 1;
                }
            }
            sample
        };
        match Codebook::train(&sample) {
            Some(codebook) => {
                self.adopt(codebook);
                true
            }
            None => false,
        }
    }

    /// Makes `codebook` the store's and codes every i8 state held with it.
    fn adopt(&self, codebook: Codebook) {
        let codebook = Arc::new(codebook);
        *self.codebook.write().unwrap_or_else(|p| p.into_inner()) = Some(codebook.clone());
        let full: Vec<(u64, u32, Arc<Stored>)> = {
            let map = self.map.read().unwrap_or_else(|p| p.into_inner());
            map.iter()
                .filter(|(_, (_, s))| matches!(s.as_ref(), Stored::Full(_)))
                .map(|(k, (h, s))| (*k, *h, s.clone()))
                .collect()
        };
        // Coded outside the lock; a state replaced meanwhile (re-encoded) is left as it is.
        let coded: Vec<(u64, u32, Arc<Stored>, Stored)> = full
            .into_iter()
            .filter_map(|(k, h, s)| match s.as_ref() {
                Stored::Full(f) => {
                    let c = Stored::Coded(codebook.encode(&f.rows()));
                    Some((k, h, s.clone(), c))
                }
                Stored::Coded(_) => None,
            })
            .collect();
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        for (k, h, before, c) in coded {
            if let Some(entry) = map.get_mut(&k)
                && entry.0 == h
                && Arc::ptr_eq(&entry.1, &before)
            {
                entry.1 = Arc::new(c);
            }
        }
        drop(map);
        // Sizes remembered for i8 states no longer hold: plan with estimates until re-encoded.
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.retain(|_, k| *k == Known::Failed);
        drop(known);
        self.changed();
    }

    pub fn get(&self, key: u64, content: &str) -> Option<Arc<Stored>> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        map.get(&key)
            .filter(|(h, _)| *h == text_hash(content))
            .map(|(_, s)| s.clone())
    }

    /// Stores what the model gave for `content`: coded when the codebook exists, else i8.
    pub fn insert(&self, key: u64, content: &str, states: TokenStates) {
        let hash = text_hash(content);
        let states = match self.codebook() {
            Some(codebook) => Stored::Coded(codebook.encode(&states.rows())),
            None => Stored::Full(states),
        };
        self.remember(key, hash, Known::Bytes(states.bytes()));
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        map.insert(key, (hash, Arc::new(states)));
        self.changed();
    }

    pub fn remember(&self, key: u64, hash: u32, known: Known) {
        let mut k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        k.insert((key, hash), known);
    }

    fn known(&self, key: u64, hash: u32) -> Option<Known> {
        let k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        k.get(&(key, hash)).copied()
    }

    /// Keeps only the states of `keep` (and what is known of live memories).
    pub fn retain(
        &self,
        keep: &std::collections::HashSet<u64>,
        live: &std::collections::HashSet<u64>,
    ) {
        {
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            let before = map.len();
            map.retain(|k, _| keep.contains(k));
            if map.len() != before {
                self.changed();
            }
        }
        let mut k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        k.retain(|(key, _), _| live.contains(key));
    }

    /// (memories with states, bytes their states hold). The codebook is counted apart
    /// (`codebook_bytes`).
    pub fn size(&self) -> (usize, usize) {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        (map.len(), map.values().map(|(_, s)| s.bytes()).sum())
    }

    /// Bytes of the codebook (0 before it is trained).
    pub fn codebook_bytes(&self) -> usize {
        self.codebook().map_or(0, |c| c.as_floats().len() * 4)
    }
}

pub fn text_hash(content: &str) -> u32 {
    crc32fast::hash(content.as_bytes())
}

/// Fixed weight of the first stage's cosine similarity beside MaxSim per query token, in
/// `score` and `reorder` (the studies' score: `memd-eval rerankers`, bench/EVAL.md section 7,
/// late@40: coding set R@5 0.806 → 0.851, MRR 0.639 → 0.695). The daemon weighs the cosine
/// per query instead (`retrieve::second`, bench/EVAL.md section 11).
pub const COSINE_WEIGHT: f32 = 0.05;

/// A memory's late-interaction score: MaxSim per query token plus `COSINE_WEIGHT` × its
/// cosine similarity to the query (0 when the vector signal is missing).
pub fn score(query: &QueryStates, states: &TokenStates, cosine: f32) -> f32 {
    query.maxsim(states) / query.tokens().max(1) as f32 + COSINE_WEIGHT * cosine
}

/// `score` of a stored form: coded states through `table` (the query against the codebook
/// that made them); `None` for codes without a table.
pub fn score_stored(
    query: &QueryStates,
    table: Option<&QueryTable>,
    stored: &Stored,
    cosine: f32,
) -> Option<f32> {
    match stored {
        Stored::Full(s) => Some(score(query, s, cosine)),
        Stored::Coded(c) => {
            let t = table?;
            Some(t.maxsim(c) / query.tokens().max(1) as f32 + COSINE_WEIGHT * cosine)
        }
    }
}

/// One candidate of a reorder: its key, its text, its cosine similarity to the query.
pub type Candidate<'a> = (u64, &'a str, f32);

/// Reorders the first `depth` of `keyed` by `score` against `query`; returns the new order as
/// indexes into `keyed`. Stops scoring at `deadline` (the unscored rest of the head keeps its
/// places). A memory without current states keeps its place too.
pub fn reorder(
    states: &States,
    query: &QueryStates,
    keyed: &[Candidate],
    depth: usize,
    deadline: Option<Instant>,
) -> Vec<usize> {
    reorder_within(states, query, keyed, depth, deadline).0
}

/// `reorder`, and whether it scored the whole head before `deadline`.
pub fn reorder_within(
    states: &States,
    query: &QueryStates,
    keyed: &[Candidate],
    depth: usize,
    deadline: Option<Instant>,
) -> (Vec<usize>, bool) {
    let (maxsim, finished) = maxsim_within(states, query, keyed, depth, deadline);
    let scored: Vec<(usize, f32)> = maxsim
        .into_iter()
        .map(|(i, m)| (i, m + COSINE_WEIGHT * keyed[i].2))
        .collect();
    (order_within(scored, keyed.len()), finished)
}

/// MaxSim per query token of the first `depth` of `keyed` that have current states, as
/// (index, score) in `keyed`'s order, and whether it got through them before `deadline`. The
/// caller mixes in what else it scores by (`reorder_within`: the cosine).
pub fn maxsim_within(
    states: &States,
    query: &QueryStates,
    keyed: &[Candidate],
    depth: usize,
    deadline: Option<Instant>,
) -> (Vec<(usize, f32)>, bool) {
    let n = depth.min(keyed.len());
    // Built once per query (~0.4 M multiply-adds for a 16-token query), read per memory.
    let table = match n {
        0 => None,
        _ => states.codebook().map(|c| c.table(query.rows())),
    };
    let mut scored: Vec<(usize, f32)> = Vec::with_capacity(n);
    let mut finished = true;
    for (i, (key, text, _)) in keyed[..n].iter().enumerate() {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            finished = false;
            break;
        }
        let stored = states.get(*key, text);
        if let Some(v) = stored.and_then(|s| score_stored(query, table.as_ref(), &s, 0.0)) {
            scored.push((i, v));
        }
    }
    (scored, finished)
}

/// The order of `len` candidates when those `scored` (index, score; in index order) are
/// reordered best first among the places they held; the others keep theirs.
pub fn order_within(mut scored: Vec<(usize, f32)>, len: usize) -> Vec<usize> {
    let slots: Vec<usize> = scored.iter().map(|(i, _)| *i).collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut order: Vec<usize> = (0..len).collect();
    for (slot, (i, _)) in slots.into_iter().zip(scored) {
        order[slot] = i;
    }
    order
}

/// What the next pass does.
pub struct Plan {
    /// Up to `ENCODE_BATCH` memories to encode (key, text).
    pub todo: Vec<(u64, String)>,
    /// All memories within the cap that still lack current states.
    pub missing: usize,
    /// Memories whose current states are within the cap: every other state is dropped
    /// (deleted, archived, edited since, or pushed out by newer memories).
    pub keep: std::collections::HashSet<u64>,
    /// Every live memory's key.
    pub live: std::collections::HashSet<u64>,
    /// Some live memory does not fit the cap (in i8: time to train the codebook).
    pub over_cap: bool,
}

/// Live memories within the cap (`search.token_states_mb`) that still lack token states.
pub fn pending(states: &States, s: &crate::state::MemState, cap_mb: usize) -> usize {
    plan(states, s, cap_mb * 1024 * 1024).missing
}

/// Which memories get states within `cap` bytes: the newest first (what a prompt most likely
/// finds), live ones only. A memory's size is its states' real size once it was encoded, an
/// estimate before.
pub fn plan(states: &States, s: &crate::state::MemState, cap: usize) -> Plan {
    let mut live: Vec<&crate::record::Record> = s.records().filter(|r| !r.archived).collect();
    live.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.key.cmp(&a.key)));
    let mut plan = Plan {
        todo: Vec::new(),
        missing: 0,
        keep: std::collections::HashSet::new(),
        live: live.iter().map(|r| r.key).collect(),
        over_cap: false,
    };
    let coded = states.codebook().is_some();
    let mut used = states.codebook_bytes();
    for r in live {
        let hash = text_hash(&r.content);
        let current = states.get(r.key, &r.content);
        let bytes = match (&current, states.known(r.key, hash)) {
            (Some(t), _) => t.bytes(),
            (None, Some(Known::Failed)) => continue,
            (None, Some(Known::Bytes(b))) => b,
            (None, None) => estimated_bytes(&r.content, coded),
        };
        if used + bytes > cap {
            plan.over_cap = true;
            continue;
        }
        used += bytes;
        if current.is_some() {
            plan.keep.insert(r.key);
        } else {
            plan.missing += 1;
            if plan.todo.len() < ENCODE_BATCH {
                plan.todo.push((r.key, r.content.clone()));
            }
        }
    }
    plan
}

/// A memory's token states before encoding it: a token per ~4 characters (English text with
/// code), two markers and [SEP], within the model's cut; coded or i8.
fn estimated_bytes(content: &str, coded: bool) -> usize {
    let tokens = (content.len() / 4 + 3).min(crate::models::embed::colbert::MAX_DOC_TOKENS);
    match coded {
        true => tokens * super::late_codes::SUBVECTORS,
        false => tokens * (crate::models::embed::DIMS + 4),
    }
}

#[cfg(test)]
#[path = "late_tests.rs"]
mod tests;
