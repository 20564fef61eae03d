//! Late-interaction reranking (ColBERT MaxSim) of the prompt path and of searches: the token
//! states of every memory, kept current in the background, and the reorder of a ranked head
//! under a deadline.
//!
//! Owns `States` (memory key → its token states and the hash of the text they came from;
//! derived data, rebuilt from the store, never in the write-ahead log), the background pass
//! that fills it within `search.token_states_mb` (newest memories first), and `reorder`: inside the head, memories with states sorted by MaxSim into
//! the places such memories held; a memory without states (not encoded yet) keeps its place.
//! Saved to disk by `late_file` (at shutdown and every few minutes), loaded at start.
//! Must never block a request on encoding a memory and never let a missing model or a late
//! clock fail a read: the fused order is always an answer.

use crate::core::Core;
use crate::embed::{LateInteraction, QueryStates, TokenStates};
use crate::shutdown::Shutdown;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Memories encoded per pass between checks for shutdown and new work (~7 ms each).
const ENCODE_BATCH: usize = 32;
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// While running, the states are saved at most this often (and at shutdown, by `Core::close`):
/// a crash loses at most this much encoding, which is redone in the background.
const SAVE_EVERY: Duration = Duration::from_secs(300);
/// Planning a pass sorts every live memory under the store's read lock (~15 ms at 100k).
const IDLE_TICK: Duration = Duration::from_secs(60);
/// While prompts are arriving (one within `BUSY_WINDOW`), the background encoding takes at
/// most this share of the time: after each memory it rests (1 / share − 1) × what the memory
/// took, and each plan (a read of every memory) waits `BUSY_SETTLE`, so a burst of new
/// memories is planned once instead of once each. Token states are derived data: a memory
/// without them keeps its fused place until the machine is quiet again, when the loop runs at
/// full speed.
const BUSY_SHARE: f64 = 0.1;
const BUSY_WINDOW: Duration = Duration::from_secs(2);
const BUSY_SETTLE: Duration = Duration::from_secs(1);
/// After a prompt's query encoding missed its budget, the prompts of the next `MISS_BACKOFF`
/// keep the fused order without encoding: on a machine that busy their encodings would finish
/// after their prompts too, and the work thrown away is what slowed everyone down.
const MISS_BACKOFF: Duration = Duration::from_millis(500);

/// Token states by memory key, with a hash of the text they were computed from (an edited
/// memory is re-encoded; until then it has none).
#[derive(Default)]
pub struct States {
    map: RwLock<HashMap<u64, (u32, Arc<TokenStates>)>>,
    /// Bumped on every insert and eviction: the saved file is behind when it differs.
    changes: std::sync::atomic::AtomicU64,
    /// Query encodings running now (including ones a prompt stopped waiting for).
    queries: std::sync::atomic::AtomicUsize,
    /// What encoding each (key, text hash) gave, kept after eviction: its real size, so the
    /// cap is planned with it instead of an estimate (which could admit, encode and evict the
    /// same memory on every pass), or that it failed (never retried for that text).
    known: std::sync::Mutex<HashMap<(u64, u32), Known>>,
    /// How prompts fared against the reranking budget since start.
    pub prompts: PromptTally,
    /// When the last prompt asked for reranking, and until when prompts skip their query
    /// encoding after a miss (milliseconds on `clock_ms`).
    last_prompt_ms: std::sync::atomic::AtomicU64,
    backoff_until_ms: std::sync::atomic::AtomicU64,
}

/// Milliseconds on a monotonic clock private to this module (0 = never).
fn clock_ms() -> u64 {
    static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
    EPOCH.elapsed().as_millis() as u64 + 1
}

/// Prompts that asked for late interaction since the daemon started, by what they got: the
/// figure that says how often a busy machine serves the fused order (`/api/stats`
/// `index.prompt_rerank`, memd-bench's concurrent phase).
#[derive(Default)]
pub struct PromptTally {
    reranked: std::sync::atomic::AtomicU64,
    over_budget: std::sync::atomic::AtomicU64,
    shed: std::sync::atomic::AtomicU64,
}

/// What one prompt's reranking came to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PromptRerank {
    /// The whole head was scored within the budget.
    Reranked,
    /// The query encoding or MaxSim ran past the budget: (part of) the fused order kept.
    OverBudget,
    /// Another query was still encoding: the fused order at once (load shedding).
    Shed,
}

impl PromptTally {
    pub fn count(&self, what: PromptRerank) {
        let counter = match what {
            PromptRerank::Reranked => &self.reranked,
            PromptRerank::OverBudget => &self.over_budget,
            PromptRerank::Shed => &self.shed,
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn view(&self) -> proto::PromptRerankStats {
        let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        proto::PromptRerankStats {
            reranked: get(&self.reranked),
            over_budget: get(&self.over_budget),
            shed: get(&self.shed),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Known {
    Bytes(usize),
    Failed,
}

impl States {
    /// Loads what a previous run saved (nothing when the file is missing or unusable: the
    /// states are derived, they will be encoded again).
    pub fn load(&self, path: &std::path::Path) {
        match crate::late_file::load(path) {
            Ok(entries) => {
                let n = entries.len();
                let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
                for (key, hash, states) in entries {
                    map.insert(key, (hash, Arc::new(states)));
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
        let entries: Vec<(u64, u32, Arc<TokenStates>)> = {
            let map = self.map.read().unwrap_or_else(|p| p.into_inner());
            map.iter().map(|(k, (h, s))| (*k, *h, s.clone())).collect()
        };
        let refs: Vec<(u64, u32, &TokenStates)> = entries
            .iter()
            .map(|(k, h, s)| (*k, *h, s.as_ref()))
            .collect();
        crate::late_file::save(path, &refs)?;
        Ok(changes)
    }

    /// A prompt asked for reranking now.
    fn prompt_seen(&self) {
        self.last_prompt_ms
            .store(clock_ms(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a prompt asked for reranking within `BUSY_WINDOW`.
    fn prompts_arriving(&self) -> bool {
        let last = self
            .last_prompt_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        last != 0 && clock_ms().saturating_sub(last) < BUSY_WINDOW.as_millis() as u64
    }

    /// A prompt's query encoding missed its budget: the next ones skip theirs for a while.
    fn missed(&self) {
        let until = clock_ms() + MISS_BACKOFF.as_millis() as u64;
        self.backoff_until_ms
            .store(until, std::sync::atomic::Ordering::Relaxed);
    }

    fn backing_off(&self) -> bool {
        clock_ms()
            < self
                .backoff_until_ms
                .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn changes(&self) -> u64 {
        self.changes.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn changed(&self) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn get(&self, key: u64, content: &str) -> Option<Arc<TokenStates>> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        map.get(&key)
            .filter(|(h, _)| *h == text_hash(content))
            .map(|(_, s)| s.clone())
    }

    pub(crate) fn insert(&self, key: u64, content: &str, states: TokenStates) {
        let hash = text_hash(content);
        self.remember(key, hash, Known::Bytes(states.bytes()));
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        map.insert(key, (hash, Arc::new(states)));
        self.changed();
    }

    fn remember(&self, key: u64, hash: u32, known: Known) {
        let mut k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        k.insert((key, hash), known);
    }

    fn known(&self, key: u64, hash: u32) -> Option<Known> {
        let k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        k.get(&(key, hash)).copied()
    }

    /// Keeps only the states of `keep` (and what is known of live memories).
    fn retain(&self, keep: &std::collections::HashSet<u64>, live: &std::collections::HashSet<u64>) {
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

    /// (memories with states, bytes they hold).
    pub fn size(&self) -> (usize, usize) {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        (map.len(), map.values().map(|(_, s)| s.bytes()).sum())
    }
}

fn text_hash(content: &str) -> u32 {
    crc32fast::hash(content.as_bytes())
}

/// Weight of the first stage's cosine similarity beside MaxSim per query token. MaxSim alone
/// orders coding notes worse than MiniLM's vectors do; a little of the cosine fixes most of
/// that without costing conversational recall. `memd-eval rerankers` (bench/EVAL.md section 7),
/// late@40: coding set R@5 0.806 → 0.851, MRR 0.639 → 0.695; LoCoMo R@5 0.721 → 0.721, MRR
/// 0.584 → 0.583. At 0.1 LoCoMo falls under the target (0.716 / 0.576).
pub const COSINE_WEIGHT: f32 = 0.05;

/// A memory's late-interaction score: MaxSim per query token plus `COSINE_WEIGHT` × its
/// cosine similarity to the query (0 when the vector signal is missing).
pub fn score(query: &QueryStates, states: &TokenStates, cosine: f32) -> f32 {
    query.maxsim(states) / query.tokens().max(1) as f32 + COSINE_WEIGHT * cosine
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
    let n = depth.min(keyed.len());
    let mut scored: Vec<(usize, f32)> = Vec::with_capacity(n);
    let mut finished = true;
    for (i, (key, text, cosine)) in keyed[..n].iter().enumerate() {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            finished = false;
            break;
        }
        if let Some(s) = states.get(*key, text) {
            scored.push((i, score(query, &s, *cosine)));
        }
    }
    let slots: Vec<usize> = scored.iter().map(|(i, _)| *i).collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut order: Vec<usize> = (0..keyed.len()).collect();
    for (slot, (i, _)) in slots.into_iter().zip(scored) {
        order[slot] = i;
    }
    (order, finished)
}

/// The query's token states, if the model is loaded and they arrive before `deadline`. The
/// encoding cannot be interrupted: past the deadline it finishes on its blocking thread and is
/// thrown away, while the caller goes on with the fused order. With `shed`, a query that
/// would queue behind another one still encoding gets `None` at once: under load the prompt
/// path keeps the fused order instead of piling up work it would not wait for.
pub async fn encode_query(
    core: &Arc<Core>,
    text: &str,
    deadline: Instant,
    shed: bool,
) -> Option<QueryStates> {
    let model = core.late_model()?;
    // Only the prompt path sheds, and only its outcomes are tallied.
    let tally = |what| {
        if shed {
            core.late_states.prompts.count(what)
        }
    };
    let states = &core.late_states;
    if shed {
        states.prompt_seen();
        if states.backing_off() {
            tally(PromptRerank::Shed);
            return None;
        }
    }
    if Instant::now() >= deadline {
        tally(PromptRerank::OverBudget);
        if shed {
            states.missed();
        }
        return None;
    }
    let in_flight = InFlight::enter(core.clone());
    if shed && in_flight.others > 0 {
        tracing::debug!("late-interaction query skipped: another one is encoding");
        tally(PromptRerank::Shed);
        return None;
    }
    let text = text.to_string();
    // The guard moves into the work: it counts until the encoding ends, however it ends.
    let work = tokio::task::spawn_blocking(move || {
        let _in_flight = in_flight;
        model.encode_query(&text)
    });
    match tokio::time::timeout_at(deadline.into(), work).await {
        Ok(Ok(Ok(q))) => Some(q),
        Ok(Ok(Err(e))) => {
            tracing::warn!("late-interaction query encoding failed: {e:#}");
            None
        }
        Ok(Err(e)) => {
            tracing::warn!("late-interaction query encoding crashed: {e}");
            None
        }
        Err(_) => {
            tracing::debug!("late-interaction query missed the reranking budget");
            tally(PromptRerank::OverBudget);
            if shed {
                states.missed();
            }
            None
        }
    }
}

/// One query encoding in the count of those running; leaves it when dropped (finished,
/// failed, panicked or never run).
struct InFlight {
    core: Arc<Core>,
    /// How many were running when this one entered.
    others: usize,
}

impl InFlight {
    fn enter(core: Arc<Core>) -> InFlight {
        let others = core
            .late_states
            .queries
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight { core, others }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.core
            .late_states
            .queries
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Keeps `core`'s token states current: encodes memories that have none (new or edited),
/// drops those of deleted memories, sleeps until woken when there is nothing to do.
pub async fn states_loop(core: Arc<Core>, shutdown: Shutdown) {
    if !core.cfg.search.rerank {
        return; // no model will load: keep nothing in memory
    }
    let path = core.token_states_path();
    {
        let (c, p) = (core.clone(), path.clone());
        tokio::task::spawn_blocking(move || c.late_states.load(&p))
            .await
            .ok();
    }
    let mut saved = core.late_states.changes();
    let mut saved_at = Instant::now();
    loop {
        if shutdown.is_set() {
            return;
        }
        let pass = match core.late_model() {
            Some(model) => encode_some(&core, model, &shutdown).await,
            None => Ok(0),
        };
        // Checked after busy passes too, so a long backfill is saved along the way.
        if core.late_states.changes() != saved && saved_at.elapsed() >= SAVE_EVERY {
            let (c, p) = (core.clone(), path.clone());
            match tokio::task::spawn_blocking(move || c.late_states.save(&p)).await {
                Ok(Ok(n)) => saved = n,
                Ok(Err(e)) => tracing::warn!("saving token states failed: {e:#}"),
                Err(e) => tracing::warn!("saving token states failed: {e}"),
            }
            saved_at = Instant::now();
        }
        match pass {
            Ok(0) => {
                // New and edited memories wake the loop; the timer tidies up after deletions.
                tokio::select! {
                    _ = core.late_wake.notified() => {}
                    _ = tokio::time::sleep(IDLE_TICK) => {}
                    _ = shutdown.wait() => return,
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!("late-interaction encoding failed, will retry: {e:#}");
                tokio::select! {
                    _ = tokio::time::sleep(RETRY_AFTER) => {}
                    _ = shutdown.wait() => return,
                }
            }
        }
        // Planning reads every memory: under load, let the new ones gather first.
        if core.late_states.prompts_arriving() {
            tokio::select! {
                _ = tokio::time::sleep(BUSY_SETTLE) => {}
                _ = shutdown.wait() => return,
            }
        }
    }
}

/// Encodes up to `ENCODE_BATCH` of the memories that should have states and lack them; returns
/// how many.
async fn encode_some(
    core: &Arc<Core>,
    model: Arc<LateInteraction>,
    shutdown: &Shutdown,
) -> anyhow::Result<usize> {
    let cap = core.cfg.search.token_states_mb * 1024 * 1024;
    let Plan {
        todo, keep, live, ..
    } = core.store.read(|s| plan(&core.late_states, s, cap));
    core.late_states.retain(&keep, &live);
    if todo.is_empty() {
        return Ok(0);
    }
    let (c, stop) = (core.clone(), shutdown.clone());
    tokio::task::spawn_blocking(move || -> anyhow::Result<usize> {
        let mut done = 0;
        // One memory per call: a prompt's query waits for the model behind one memory at most.
        for (key, text) in todo {
            if stop.is_set() {
                break;
            }
            let started = Instant::now();
            match model.encode_doc(&text) {
                Ok(states) => c.late_states.insert(key, &text, states),
                Err(e) => {
                    // This text is skipped for good (a new text of the memory is tried anew);
                    // the memory keeps its fused place.
                    tracing::warn!("token states of memory {key} failed, skipped: {e:#}");
                    c.late_states.remember(key, text_hash(&text), Known::Failed);
                }
            }
            done += 1;
            if c.late_states.prompts_arriving() {
                std::thread::sleep(started.elapsed().mul_f64(1.0 / BUSY_SHARE - 1.0));
            }
        }
        Ok(done)
    })
    .await?
}

/// What the next pass does.
struct Plan {
    /// Up to `ENCODE_BATCH` memories to encode (key, text).
    todo: Vec<(u64, String)>,
    /// All memories within the cap that still lack current states.
    missing: usize,
    /// Memories whose current states are within the cap: every other state is dropped
    /// (deleted, archived, edited since, or pushed out by newer memories).
    keep: std::collections::HashSet<u64>,
    /// Every live memory's key.
    live: std::collections::HashSet<u64>,
}

/// Live memories within the cap (`search.token_states_mb`) that still lack token states.
pub fn pending(core: &Core, s: &crate::state::MemState) -> usize {
    plan(
        &core.late_states,
        s,
        core.cfg.search.token_states_mb * 1024 * 1024,
    )
    .missing
}

/// Which memories get states within `cap` bytes: the newest first (what a prompt most likely
/// finds), live ones only. A memory's size is its states' real size once it was encoded, an
/// estimate before.
fn plan(states: &States, s: &crate::state::MemState, cap: usize) -> Plan {
    let mut live: Vec<&crate::record::Record> = s.records().filter(|r| !r.archived).collect();
    live.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.key.cmp(&a.key)));
    let mut plan = Plan {
        todo: Vec::new(),
        missing: 0,
        keep: std::collections::HashSet::new(),
        live: live.iter().map(|r| r.key).collect(),
    };
    let mut used = 0usize;
    for r in live {
        let hash = text_hash(&r.content);
        let current = states.get(r.key, &r.content);
        let bytes = match (&current, states.known(r.key, hash)) {
            (Some(t), _) => t.bytes(),
            (None, Some(Known::Failed)) => continue,
            (None, Some(Known::Bytes(b))) => b,
            (None, None) => estimated_bytes(&r.content),
        };
        if used + bytes > cap {
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
/// code), two markers and [SEP], within the model's cut.
fn estimated_bytes(content: &str) -> usize {
    let tokens = (content.len() / 4 + 3).min(crate::embed::colbert::MAX_DOC_TOKENS);
    tokens * (crate::embed::DIMS + 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missed_budget_backs_off_and_prompts_make_the_background_yield() {
        let states = States::default();
        assert!(!states.backing_off() && !states.prompts_arriving());
        states.prompt_seen();
        assert!(states.prompts_arriving(), "a prompt just arrived");
        assert!(!states.backing_off(), "no miss yet");
        states.missed();
        assert!(states.backing_off(), "the next prompts skip their encoding");
    }

    #[test]
    fn reorder_leaves_memories_without_states_in_place() {
        // No states at all: the order is the input order, whatever the depth.
        let states = States::default();
        let keyed = [(1, "a", 0.0), (2, "b", 0.0), (3, "c", 0.0)];
        let q = QueryStates::for_tests(&[1.0]);
        assert_eq!(reorder(&states, &q, &keyed, 3, None), vec![0, 1, 2]);
    }

    #[test]
    fn reorder_sorts_scored_memories_into_their_slots() {
        let states = States::default();
        // Key 1 matches the query weakly, key 3 strongly; key 2 has no states.
        states.insert(1, "a", TokenStates::for_tests(&[0.2]));
        states.insert(3, "c", TokenStates::for_tests(&[0.9]));
        let keyed = [(1, "a", 0.0), (2, "b", 0.0), (3, "c", 0.0), (4, "d", 0.0)];
        let q = QueryStates::for_tests(&[1.0]);
        assert_eq!(reorder(&states, &q, &keyed, 3, None), vec![2, 1, 0, 3]);
        // Depth 2: key 3 is outside the head and stays last but one.
        assert_eq!(reorder(&states, &q, &keyed, 2, None), vec![0, 1, 2, 3]);
        // Edited text: the states no longer count.
        let edited = [
            (1, "a", 0.0),
            (2, "b", 0.0),
            (3, "c, edited", 0.0),
            (4, "d", 0.0),
        ];
        assert_eq!(reorder(&states, &q, &edited, 3, None), vec![0, 1, 2, 3]);
    }

    #[test]
    fn the_cosine_breaks_near_ties_but_maxsim_leads() {
        let states = States::default();
        states.insert(1, "a", TokenStates::for_tests(&[0.5]));
        states.insert(2, "b", TokenStates::for_tests(&[0.5]));
        let q = QueryStates::for_tests(&[1.0]);
        let keyed = [(1, "a", 0.1), (2, "b", 0.9)];
        assert_eq!(reorder(&states, &q, &keyed, 2, None), vec![1, 0]);
        // A clearly better MaxSim still wins over a higher cosine.
        states.insert(1, "a", TokenStates::for_tests(&[0.9]));
        assert_eq!(reorder(&states, &q, &keyed, 2, None), vec![0, 1]);
    }

    #[test]
    fn a_passed_deadline_keeps_the_fused_order() {
        let states = States::default();
        states.insert(1, "a", TokenStates::for_tests(&[0.2]));
        states.insert(2, "b", TokenStates::for_tests(&[0.9]));
        let keyed = [(1, "a", 0.0), (2, "b", 0.0)];
        let q = QueryStates::for_tests(&[1.0]);
        let past = Instant::now();
        assert_eq!(reorder(&states, &q, &keyed, 2, Some(past)), vec![0, 1]);
        assert_eq!(reorder(&states, &q, &keyed, 2, None), vec![1, 0]);
    }

    /// Three stored notes, oldest first: (state, their keys).
    fn three_notes() -> (crate::state::MemState, Vec<u64>) {
        use crate::state::ops::{Op, Output};
        use crate::store::Machine;
        let mut s = crate::state::MemState::new(crate::embed::DIMS).unwrap();
        let mut keys = Vec::new();
        for i in 0..3 {
            let r = Core::new_record(proto::Collection::MemoryBank, format!("note {i}"), i);
            match s.apply(&Op::Insert(Box::new(r))) {
                Output::Inserted { key, .. } => keys.push(key),
                other => panic!("{other:?}"),
            }
        }
        (s, keys)
    }

    #[test]
    fn the_cap_keeps_the_newest_memories() {
        let (s, keys) = three_notes();
        let states = States::default();
        // Room for two memories' estimate: the two newest are wanted, the oldest is not.
        let cap = 2 * estimated_bytes("note 0");
        let p = plan(&states, &s, cap);
        let wanted: Vec<u64> = p.todo.iter().map(|(k, _)| *k).collect();
        assert_eq!(wanted, vec![keys[2], keys[1]]);
        assert_eq!(p.missing, 2);
        // The oldest has states (say, from before the cap shrank): they are not kept.
        states.insert(keys[0], "note 0", TokenStates::for_tests(&[0.5]));
        let p = plan(&states, &s, cap);
        assert!(!p.keep.contains(&keys[0]) && p.live.len() == 3);
        states.retain(&p.keep, &p.live);
        assert_eq!(states.size().0, 0);
    }

    #[test]
    fn a_memory_larger_than_its_estimate_is_planned_with_its_real_size() {
        let (s, keys) = three_notes();
        let states = States::default();
        let cap = 2 * estimated_bytes("note 0");
        // The newest note turned out to fill the cap alone.
        let big = TokenStates::for_tests(&vec![0.1; cap / (crate::embed::DIMS + 4)]);
        let real = big.bytes();
        assert!(real > estimated_bytes("note 2"));
        states.insert(keys[2], "note 2", big);
        let p = plan(&states, &s, cap);
        assert!(p.keep.contains(&keys[2]));
        assert!(p.todo.is_empty(), "nothing else fits: {:?}", p.todo);
        // The cap shrinks under its real size (still over its estimate): evicted, and its real
        // size is what the plan keeps counting, so it is not admitted again on its estimate
        // only to be evicted once more.
        let smaller = real - 1;
        assert!(smaller > estimated_bytes("note 2"));
        let p = plan(&states, &s, smaller);
        states.retain(&p.keep, &p.live);
        assert_eq!(states.size().0, 0);
        let p = plan(&states, &s, smaller);
        let todo: Vec<u64> = p.todo.iter().map(|(k, _)| *k).collect();
        assert_eq!(todo, vec![keys[1]], "the next newest fits on its estimate");
    }

    #[test]
    fn a_text_that_failed_is_not_retried_but_an_edit_is() {
        let (s, keys) = three_notes();
        let states = States::default();
        states.remember(keys[2], text_hash("note 2"), Known::Failed);
        let p = plan(&states, &s, usize::MAX);
        let todo: Vec<u64> = p.todo.iter().map(|(k, _)| *k).collect();
        assert_eq!(todo, vec![keys[1], keys[0]]);
        // The same key with another text is a new attempt.
        assert_eq!(states.known(keys[2], text_hash("note 2, edited")), None);
    }

    #[test]
    fn retain_drops_what_is_not_kept() {
        let states = States::default();
        states.insert(1, "a", TokenStates::for_tests(&[0.2]));
        states.insert(2, "b", TokenStates::for_tests(&[0.2]));
        let keep = [2].into_iter().collect();
        let live = [2].into_iter().collect();
        let before = states.changes();
        states.retain(&keep, &live);
        assert_eq!(states.size().0, 1);
        assert!(states.get(2, "b").is_some() && states.get(1, "a").is_none());
        assert!(states.changes() > before);
        assert_eq!(
            states.known(1, text_hash("a")),
            None,
            "forgotten with its memory"
        );
    }
}
