//! Late-interaction reranking (ColBERT MaxSim) of the prompt path and of searches: the token
//! states of every memory and the reorder of a ranked head under a deadline.
//!
//! Owns `States` (memory key → its token states in memory and the hash of the text they came
//! from; derived data, rebuilt from the store, never in the write-ahead log) and their two
//! forms: i8 while the store is small (fewer than `TRAIN_TOKENS` kept token vectors, and within
//! `search.token_states_mb`), then 16-byte codes of the words' tokens against a codebook
//! trained once on the store's first states (`late_codes`, ~450 bytes a memory), the full i8
//! states of every memory on disk (`late_disk`), of which a reorder reads back the best
//! `RESCORE` of the code order (`memd-eval states`, bench/EVAL.md section 10: the same R@5 and
//! MRR as i8 in memory). Also which memories should have states within the cap (`plan`: newest
//! first) and `reorder`: inside the head, memories with states sorted by MaxSim into the
//! places such memories held; a memory without states (not encoded yet) keeps its place. The
//! background pass that fills the states is a worker (`workers`); `late_file` saves the codes
//! and the log's index between runs, `late_open` brings them and the log back, for the
//! late-interaction model whose SHA-256 both files carry. Must never block a request on
//! encoding a memory and never let a missing model, a late clock or an unreadable disk fail a
//! read: the fused order (or the code order) is always an answer.

use super::embed::{LateInteraction, QueryStates, TokenStates};
pub use super::late_codes::Stored;
use super::late_codes::{Codebook, QueryTable};
use super::late_disk::FullStore;
pub use super::late_disk::{Digest, Full};
pub use super::late_record::{Form as LogForm, record_bytes};
use anyhow::Result;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// Memories encoded per pass between checks for shutdown and new work (~7 ms each).
pub const ENCODE_BATCH: usize = 32;

/// Kept token vectors the codebook is trained on (the store's first ~300 memories' worth);
/// once the log holds this many, the store switches to codes.
pub const TRAIN_TOKENS: usize = 8_192;

/// The best this many of the code order are rescored with the full states read from disk.
/// With the candidates beyond the fused 40 and the query's own cosine weight (section 11),
/// `memd-eval retrieval` on LoCoMo: 20 gave R@5 0.724 / MRR 0.581, 40 gives 0.730 / 0.584,
/// against 0.734 / 0.586 with every state in memory (bench/EVAL.md section 10).
pub const RESCORE: usize = 40;

/// Token states by memory key, with a hash of the text they were computed from (an edited
/// memory is re-encoded; until then it has none).
#[derive(Default)]
pub struct States {
    pub(super) map: RwLock<HashMap<u64, (u32, Arc<Stored>)>>,
    /// The codebook every `Stored::Coded` was made with; set once (trained or loaded).
    pub(super) codebook: RwLock<Option<Arc<Codebook>>>,
    /// The full states on disk (`None`: not opened, or it could not be: i8 in memory only).
    pub(super) disk: RwLock<Option<Arc<FullStore>>>,
    /// The model the states are of (set by `open`; `save` writes nothing before).
    pub(super) digest: RwLock<Option<super::late_disk::Digest>>,
    /// A coarser form the log's records are read back in (studies only; `None`: as stored).
    pub(super) log_form: RwLock<Option<LogForm>>,
    /// Bumped on every insert and eviction: the saved file is behind when it differs.
    pub(super) changes: std::sync::atomic::AtomicU64,
    /// What encoding each (key, text hash) gave, kept after eviction: its real size, so the
    /// cap is planned with it instead of an estimate (which could admit, encode and evict the
    /// same memory on every pass), or that it failed (never retried for that text).
    known: std::sync::Mutex<HashMap<(u64, u32), Known>>,
    /// What the background pass's planner last found pending (`late_plan::pending`).
    pub(super) planned: PlanFigure,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Known {
    Bytes(usize),
    Failed,
}

/// A memory's states as the background pass makes them: every token in i8, and which tokens
/// the codes keep (not `[CLS]`, the marker or `[SEP]`, not punctuation: `memd-eval states`).
pub fn encode_memory(model: &LateInteraction, text: &str) -> Result<Full> {
    let (ids, rows) = model.doc_rows(text)?;
    let n = ids.len();
    let punct = |id: i64| {
        model
            .token_text(id)
            .is_some_and(|t| t.chars().all(|c| c.is_ascii_punctuation()))
    };
    let kept = (0..n)
        .map(|i| i >= 2 && i + 1 < n && !punct(ids[i]))
        .collect();
    Ok(Full {
        states: TokenStates::quantize(&rows),
        kept,
    })
}

impl States {
    pub fn changes(&self) -> u64 {
        self.changes.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(super) fn changed(&self) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Reads the log's records back as a record of `form` would hold them, from `open` on
    /// (studies: `memd-eval retrieval --log-form`; the daemon reads them as stored).
    pub fn set_log_form(&self, form: LogForm) {
        *self.log_form.write().unwrap_or_else(|p| p.into_inner()) = Some(form);
    }

    pub fn codebook(&self) -> Option<Arc<Codebook>> {
        self.codebook
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(super) fn disk(&self) -> Option<Arc<FullStore>> {
        self.disk.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn get(&self, key: u64, content: &str) -> Option<Arc<Stored>> {
        self.get_hashed(key, text_hash(content))
    }

    /// `get` by the text's hash (`text_hash`).
    pub fn get_hashed(&self, key: u64, hash: u32) -> Option<Arc<Stored>> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        map.get(&key)
            .filter(|(h, _)| *h == hash)
            .map(|(_, s)| s.clone())
    }

    /// The full states of `key` for `content` from the log (`Ok(None)`: no log, or nothing
    /// there for this text).
    pub fn read_full(&self, key: u64, content: &str) -> Result<Option<Full>> {
        match self.disk() {
            Some(d) => d.read(key, text_hash(content)),
            None => Ok(None),
        }
    }

    /// Whether `key` has current states everywhere they belong: in memory, and on disk when
    /// the log is open (codes without their full states are encoded again).
    pub(super) fn covered(&self, key: u64, hash: u32) -> Option<Arc<Stored>> {
        let stored = self.get_hashed(key, hash)?;
        match self.disk() {
            Some(d) if !d.has(key, hash) => None,
            _ => Some(stored),
        }
    }

    /// Stores what the model gave for `content` (`insert_batch` of one).
    pub fn insert_full(&self, key: u64, content: &str, full: Full) -> Result<()> {
        self.insert_batch(vec![(key, content, full)])
    }

    /// Stores what the model gave for each (key, text): on disk first, durably and with one
    /// fsync for the whole batch, then in memory, coded when the codebook exists, else i8. An
    /// error (the disk) stores none of them.
    pub fn insert_batch(&self, batch: Vec<(u64, &str, Full)>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let hashed: Vec<(u64, u32, Full)> = batch
            .into_iter()
            .map(|(key, content, full)| (key, text_hash(content), full))
            .collect();
        if let Some(disk) = self.disk() {
            let refs: Vec<(u64, u32, &Full)> = hashed.iter().map(|(k, h, f)| (*k, *h, f)).collect();
            disk.append_batch(&refs)?;
        }
        let codebook = self.codebook();
        for (key, hash, full) in hashed {
            let states = match &codebook {
                Some(codebook) => Stored::Coded(codebook.encode(&full.kept_rows())),
                None => Stored::Full(full.states),
            };
            self.remember(key, hash, Known::Bytes(states.bytes()));
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            map.insert(key, (hash, Arc::new(states)));
        }
        self.changed();
        Ok(())
    }

    /// `insert_full` with every token kept.
    pub fn insert(&self, key: u64, content: &str, states: TokenStates) -> Result<()> {
        let kept = vec![true; states.tokens()];
        self.insert_full(key, content, Full { states, kept })
    }

    pub fn remember(&self, key: u64, hash: u32, known: Known) {
        let mut k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        k.insert((key, hash), known);
    }

    pub(super) fn known(&self, key: u64, hash: u32) -> Option<Known> {
        let k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        k.get(&(key, hash)).copied()
    }

    /// Forgets the sizes remembered (they were of another form); failures stay.
    pub(super) fn forget_sizes(&self) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.retain(|_, k| *k == Known::Failed);
    }

    /// Keeps only the states of `keep`, in memory and on disk (and what is known of live
    /// memories).
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
        if let Some(disk) = self.disk() {
            disk.retain(|k, _| keep.contains(&k));
        }
        let mut k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        k.retain(|(key, _), _| live.contains(key));
    }

    /// Drops the in-memory states of `keys` (deleted or archived memories; the log's records
    /// and what is known of them go at the next `retain`).
    pub fn forget(&self, keys: &[u64]) {
        if keys.is_empty() {
            return;
        }
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        let before = map.len();
        for k in keys {
            map.remove(k);
        }
        if map.len() != before {
            self.changed();
        }
    }

    /// Whether no memory has states in memory (nothing for MaxSim to score).
    pub fn is_empty(&self) -> bool {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// (memories with states in memory, bytes their states hold). The codebook is counted
    /// apart (`codebook_bytes`).
    pub fn size(&self) -> (usize, usize) {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        (map.len(), map.values().map(|(_, s)| s.bytes()).sum())
    }

    /// (memories with full states on disk, bytes of the log); (0, 0) without one.
    pub fn disk_size(&self) -> (usize, u64) {
        self.disk().map_or((0, 0), |d| {
            let (n, _, bytes) = d.size();
            (n, bytes)
        })
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
    query.maxsim(states) / query.norm() + COSINE_WEIGHT * cosine
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
            Some(t.maxsim(c) / query.norm() + COSINE_WEIGHT * cosine)
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

/// `reorder`, and whether it scored the whole head (and rescored the best of a code order)
/// before `deadline`.
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
    // A study's query asks to be weighed over these candidates (`late_weigh`); none of the
    // daemon's does, and costs nothing here.
    let weighed = match query.weigh() {
        Some(_) => {
            let texts: Vec<&str> = keyed[..n].iter().map(|c| c.1).collect();
            super::late_weigh::weigh_by(query, &texts)
        }
        None => None,
    };
    let query = weighed.as_ref().unwrap_or(query);
    // Built once per query (~0.1 M multiply-adds for a 16-token query), read per memory.
    let table = match n {
        0 => None,
        _ => states.codebook().map(|c| c.table(query.rows())),
    };
    let mut scored: Vec<(usize, f32, bool)> = Vec::with_capacity(n);
    let mut finished = true;
    for (i, (key, text, _)) in keyed[..n].iter().enumerate() {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            finished = false;
            break;
        }
        let Some(stored) = states.get(*key, text) else {
            continue;
        };
        if let Some(v) = score_stored(query, table.as_ref(), &stored, 0.0) {
            scored.push((i, v, matches!(stored.as_ref(), Stored::Coded(_))));
        }
    }
    if finished && !rescore(states, query, keyed, &mut scored, deadline) {
        finished = false;
    }
    (
        scored.into_iter().map(|(i, v, _)| (i, v)).collect(),
        finished,
    )
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

/// The best `RESCORE` of `scored` (index, MaxSim, coded; in index order) by their code
/// MaxSim and `COSINE_WEIGHT` × cosine (the order `memd-eval states` rescored) get their MaxSim
/// from the full states: held in memory as they are, coded ones read back from disk. The
/// other coded ones are held under the lowest of those, so the rescored lead as they did in
/// the study. When one cannot be read (no log, a damaged record: logged, the memory is encoded
/// again) the code MaxSim stands; false when `deadline` passed first (it stands too).
fn rescore(
    states: &States,
    query: &QueryStates,
    keyed: &[Candidate],
    scored: &mut [(usize, f32, bool)],
    deadline: Option<Instant>,
) -> bool {
    let mut by_code: Vec<usize> = (0..scored.len()).collect();
    let code_score = |j: usize| scored[j].1 + COSINE_WEIGHT * keyed[scored[j].0].2;
    by_code.sort_by(|&a, &b| code_score(b).total_cmp(&code_score(a)).then(a.cmp(&b)));
    let top = &by_code[..RESCORE.min(by_code.len())];
    if !top.iter().any(|&j| scored[j].2) {
        return true;
    }
    let mut full = Vec::with_capacity(top.len());
    for &j in top {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return false;
        }
        let (i, v, coded) = scored[j];
        if !coded {
            full.push((j, v));
            continue;
        }
        let (key, text, _) = keyed[i];
        match states.read_full(key, text) {
            Ok(Some(f)) => full.push((j, query.maxsim(&f.states) / query.norm())),
            Ok(None) => return true,
            Err(e) => {
                tracing::warn!("rescoring from the code order: {e:#}");
                return true;
            }
        }
    }
    let floor = full.iter().map(|(_, v)| *v).fold(f32::INFINITY, f32::min);
    for &j in &by_code[top.len()..] {
        if scored[j].2 {
            scored[j].1 = scored[j].1.min(floor.next_down());
        }
    }
    for (j, v) in full {
        scored[j].1 = v;
    }
    true
}

/// What the background pass's planner (`late_plan::Planner`) last looked at, for
/// `late_plan::pending`. Kept here, beside the states it describes, so `late_plan` stays above
/// this module.
#[derive(Clone)]
pub(super) struct Figure {
    /// Memories left in its queue.
    pub(super) queued: usize,
    /// (key, text hash) of the batch it handed out (pending until their states are stored).
    pub(super) in_flight: Vec<(u64, u32)>,
    /// The change journal's point its plan reflects.
    pub(super) seq: u64,
}

/// The planner's last `Figure`, shared with `memd stats`.
#[derive(Default)]
pub struct PlanFigure(std::sync::Mutex<Option<Figure>>);

impl PlanFigure {
    pub(super) fn set(&self, figure: Figure) {
        if let Ok(mut f) = self.0.lock() {
            *f = Some(figure);
        }
    }

    pub(super) fn get(&self) -> Option<Figure> {
        self.0.lock().ok().and_then(|f| f.clone())
    }
}

#[cfg(test)]
#[path = "late_tests.rs"]
mod tests;
