//! memd's state machine: every memory, the derived indexes, sessions and the routing graph.
//!
//! Owns the in-memory state that the store's write-ahead log rebuilds: records by key, id and
//! content-hash lookups, per-conversation hook state, the routing graph, lifecycle counters, the
//! shared store's bookkeeping (`sync`). The vector and lexical indexes are derived and updated in
//! `apply`; they are saved with each snapshot and loaded at open instead of being rebuilt
//! (`vector_files`, `lexical_file`; the snapshot's own encoding: `persist`). Must never do I/O in `apply` beyond the
//! derived in-memory indexes, and never read the clock (ops carry their times).

pub mod changes;
#[cfg(test)]
mod compat_tests;
mod content_hash;
mod db;
pub mod expiry;
#[cfg(test)]
mod footprint_tests;
mod ids;
mod lexical_file;
#[cfg(test)]
mod open_tests;
pub mod ops;
mod persist;
mod prefetch;
mod projects;
pub mod reindex;
#[cfg(test)]
mod reindex_tests;
mod rows;
mod scores;
pub mod session;
mod signals;
pub mod sync;
#[cfg(test)]
mod sync_tests;
mod totals;
mod vector_files;

use crate::index::{FastHash, Lexical, VectorIndex};
use crate::learn;
use crate::record::Record;
use crate::store::Machine;
use anyhow::Result;
pub use content_hash::scoped_hash;
use ops::{Op, Output};
pub use ops::{SharedRow, SyncOp};
pub use projects::ProjectSeen;
use proto::Collection;
use session::Sessions;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
pub use sync::{Outbox, OutboxRow, OutcomeEvent, SyncState};
pub use totals::Totals;

/// How many sidecar attempts are kept for `memd status`.
const SIDECAR_ATTEMPTS_KEPT: usize = 50;

/// The records by key (`MemState::records`).
type Records = HashMap<u64, Box<Record>, FastHash>;

pub struct MemState {
    /// Boxed: the map then holds 16 bytes a slot instead of a whole record, and hashbrown keeps
    /// up to twice the slots it needs (at 1M memories ~350 MB less resident). Keyed by the
    /// store's own numbers, so hashed without SipHash (filling it at open took half the time;
    /// bench/EVAL.md section 23), as is `hashes`.
    records: Records,
    /// Current and former ids → key.
    ids: ids::Ids,
    /// (collection, hash of project and content) → key, for exact-duplicate detection. The
    /// same text in two projects is two memories: forgetting one project must not take the
    /// other's.
    hashes: HashMap<(Collection, u64), u64, FastHash>,
    next_key: u64,
    pub sessions: Sessions,
    pub graph: learn::Graphs,
    /// Lifecycle transitions and other counters since the store was created.
    pub counters: BTreeMap<String, u64>,
    pub sidecar_attempts: VecDeque<(i64, proto::SidecarAttempt)>,
    /// Projects prompts came from: root and last use (`memd projects`).
    pub projects: BTreeMap<String, ProjectSeen>,
    vectors: Arc<VectorIndex>,
    lexical: Lexical,
    /// Keys stored but not embedded yet.
    pending: BTreeSet<u64>,
    /// Counts, score sums and bytes of the records, kept by every write path so
    /// `/api/health` and `/api/stats` do not walk every record.
    totals: totals::Totals,
    /// Where the vector index came from at open: `loaded`, `rebuilt` or `empty`.
    pub index_origin: String,
    /// Where the lexical index came from at open: `loaded`, `rebuilt` or `empty`.
    pub lexical_origin: String,
    /// What opening took, step by step (records decoded, indexes loaded or rebuilt), for the
    /// start-up log line.
    pub open_note: String,
    /// The shared store's bookkeeping (`sync`).
    sync: SyncState,
    /// Mirrored memories: uid in the shared store → key here.
    mirrored: HashMap<String, u64>,
    /// The last time the age cleanup went by (`expiry`).
    pub cleanup_clock: Option<crate::clock::Trusted>,
    /// Keys whose text or liveness changed lately (the token-state planner reads it instead
    /// of every record).
    changes: changes::Changes,
    /// The side files being read while the snapshot decodes (only during an open).
    prefetch: Option<prefetch::Prefetch>,
    /// Exchanges below this key still have vectors of an older indexed text (`reindex`).
    reindex: Option<u64>,
    /// How many of them (for `memd stats`).
    reindex_left: usize,
}

impl MemState {
    pub fn new(dims: usize) -> Result<MemState> {
        Ok(MemState {
            records: HashMap::default(),
            ids: ids::Ids::default(),
            hashes: HashMap::default(),
            next_key: 1,
            sessions: Sessions::default(),
            graph: learn::Graphs::default(),
            counters: BTreeMap::new(),
            sidecar_attempts: VecDeque::new(),
            projects: BTreeMap::new(),
            vectors: Arc::new(VectorIndex::new(dims)?),
            lexical: Lexical::new(),
            pending: BTreeSet::new(),
            totals: totals::Totals::default(),
            index_origin: "empty".into(),
            lexical_origin: "empty".into(),
            open_note: String::new(),
            sync: SyncState::default(),
            mirrored: HashMap::new(),
            cleanup_clock: None,
            changes: changes::Changes::default(),
            prefetch: None,
            reindex: None,
            reindex_left: 0,
        })
    }

    pub fn vectors(&self) -> &VectorIndex {
        &self.vectors
    }

    pub fn lexical(&self) -> &Lexical {
        &self.lexical
    }

    pub fn by_key(&self, key: u64) -> Option<&Record> {
        self.records.get(&key).map(|r| &**r)
    }

    /// Finds a memory by its current id or any id it had before a promotion.
    pub fn by_id(&self, id: &str) -> Option<&Record> {
        self.ids.get(id, &self.records).and_then(|k| self.by_key(k))
    }

    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.records.values().map(|r| &**r)
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// One past the highest key ever given (every key is below it).
    pub fn key_end(&self) -> u64 {
        self.next_key
    }

    /// The journal of memories whose text or liveness changed lately.
    pub fn changes(&self) -> &changes::Changes {
        &self.changes
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn count(&self, c: Collection) -> usize {
        self.totals.count(c)
    }

    /// Up to `n` keys that still need an embedding.
    pub fn pending_keys(&self, n: usize) -> Vec<u64> {
        self.pending.iter().take(n).copied().collect()
    }

    /// Every key still waiting for its embedding, oldest first.
    pub fn pending_iter(&self) -> impl DoubleEndedIterator<Item = u64> + '_ {
        self.pending.iter().copied()
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The id an identical content of the same project already has in `collection`, if any.
    pub fn duplicate_of(
        &self,
        collection: Collection,
        project: Option<&str>,
        content: &str,
    ) -> Option<&str> {
        self.hashes
            .get(&(collection, scoped_hash(project, content)))
            .and_then(|k| self.records.get(k))
            .map(|r| r.id.as_str())
    }

    fn bump(&mut self, counter: &str) {
        *self.counters.entry(counter.to_string()).or_default() += 1;
    }

    fn index_record(&mut self, key: u64) {
        self.changes.note(key);
        let Some(r) = self.records.get(&key) else {
            return;
        };
        self.lexical.insert(key, &crate::indexed_text::of(r));
        self.hashes.insert(
            (r.collection, scoped_hash(r.project.as_deref(), &r.content)),
            key,
        );
        if !self.vectors.contains(key) {
            self.pending.insert(key);
        }
    }

    fn unindex_record(&mut self, key: u64) {
        self.changes.note(key);
        let Some(r) = self.records.get(&key) else {
            return;
        };
        let hk = (r.collection, scoped_hash(r.project.as_deref(), &r.content));
        if self.hashes.get(&hk) == Some(&key) {
            self.hashes.remove(&hk);
        }
        // Its entry was inserted with `indexed_text::of(r)`: the removal re-reads that text.
        self.lexical.remove(key, &crate::indexed_text::of(r));
    }

    fn apply_insert(&mut self, rec: &Record) -> Output {
        if let Some(id) = self.duplicate_of(rec.collection, rec.project.as_deref(), &rec.content) {
            return Output::Duplicate { id: id.to_string() };
        }
        if self.ids.contains(&rec.id, &self.records) {
            return Output::Rejected(format!("id {} already exists", rec.id));
        }
        let key = self.next_key;
        self.next_key += 1;
        let mut rec = Box::new(rec.clone());
        rec.key = key;
        let id = rec.id.clone();
        self.totals.add(&rec);
        self.records.insert(key, rec);
        self.claim_ids(key);
        self.index_record(key);
        self.touch(key);
        Output::Inserted { id, key }
    }

    fn apply_update(
        &mut self,
        id: &str,
        content: &Option<String>,
        tags: &Option<Vec<String>>,
        importance: Option<f64>,
        confidence: Option<f64>,
        at: i64,
    ) -> Output {
        let key = match self.editable_key(id) {
            Ok(key) => key,
            Err(answer) => return answer,
        };
        self.unindex_record(key);
        let content_changed = self.edit(key, |r| {
            let changed = content.as_ref().is_some_and(|c| *c != r.content);
            if let Some(c) = content {
                r.content = c.clone();
            }
            if changed {
                // The outcomes judged the old text: a corrected fact starts a new record of
                // them (and is no longer disputed). Uses and successes stay as counts.
                r.outcome_history.clear();
                r.last_outcome = None;
            }
            if let Some(t) = tags {
                r.tags = t.clone();
            }
            r.importance = importance.or(r.importance);
            r.confidence = confidence.or(r.confidence);
            r.updated_at = at;
            changed
        });
        let Some(content_changed) = content_changed else {
            return Output::NotFound { id: id.into() };
        };
        if content_changed {
            self.reindex_forget(key);
            self.vectors.remove(key).ok();
        }
        self.index_record(key);
        self.touch(key);
        let id = self
            .records
            .get(&key)
            .map(|r| r.id.clone())
            .unwrap_or_default();
        Output::Updated { id }
    }

    fn apply_archive(&mut self, id: &str, at: i64) -> Output {
        let key = match self.editable_key(id) {
            Ok(key) => key,
            Err(answer) => return answer,
        };
        let Some(r) = self.records.get(&key) else {
            return Output::NotFound { id: id.into() };
        };
        if r.collection != Collection::MemoryBank {
            return Output::Rejected(format!("{id} is not a memory_bank entry"));
        }
        let id = self.edit(key, |r| {
            r.archived = true;
            r.updated_at = at;
            r.id.clone()
        });
        let id = id.unwrap_or_default();
        self.changes.note(key);
        self.touch(key);
        Output::Updated { id }
    }

    fn apply_delete(&mut self, id: &str, reason: &str) -> Output {
        let key = match self.editable_key(id) {
            Ok(key) => key,
            Err(answer) => return answer,
        };
        match self.remove_key(key, reason) {
            Some(r) => Output::Deleted { id: r.id },
            None => Output::NotFound { id: id.into() },
        }
    }

    /// Removes the memory with `key` and everything derived from it.
    fn remove_key(&mut self, key: u64, reason: &str) -> Option<Record> {
        self.reindex_forget(key);
        self.unindex_record(key);
        self.vectors.remove(key).ok();
        self.pending.remove(&key);
        self.forget_ids(key);
        let r = *self.records.remove(&key)?;
        self.totals.sub(&r);
        if let Some(o) = &r.origin {
            self.mirrored.remove(&o.uid);
        }
        self.touch_deleted(&r);
        self.bump(&format!("deleted_{reason}"));
        Some(r)
    }

    /// Drops the id lookups of the record at `key` that still lead to it.
    fn forget_ids(&mut self, key: u64) {
        let Some(r) = self.records.get(&key) else {
            return;
        };
        for id in std::iter::once(&r.id).chain(&r.former_ids) {
            self.ids.remove_if(id, key, &self.records);
        }
    }

    /// The record at `key` claims its id (taking it from any other) and its former ids that
    /// no other memory has.
    fn claim_ids(&mut self, key: u64) {
        let Some(r) = self.records.get(&key) else {
            return;
        };
        self.ids.insert(&r.id, key, &self.records);
        for old in &r.former_ids {
            self.ids.insert_absent(old, key, &self.records);
        }
    }

    fn apply_move(&mut self, id: &str, to: Collection, new_id: &str, at: i64) -> Output {
        let key = match self.editable_key(id) {
            Ok(key) => key,
            Err(answer) => return answer,
        };
        if self.records.get(&key).is_some_and(|r| r.origin.is_some()) {
            // Promotion and demotion are the lifecycle of the daemon that made the memory.
            return Output::Rejected(format!("{id} is moved only where it was made"));
        }
        if self.ids.contains(new_id, &self.records) {
            return Output::Rejected(format!("id {new_id} already exists"));
        }
        let Some(old) = self.records.get(&key).cloned() else {
            return Output::NotFound { id: id.into() };
        };
        let from = old.collection;
        let moved = match learn::lifecycle::promote(&old, to, new_id.to_string(), at) {
            Ok(m) => m,
            Err(e) => return Output::Rejected(e.to_string()),
        };
        self.unindex_record(key);
        self.ids.insert(new_id, key, &self.records);
        self.uncount(key);
        self.records.insert(key, Box::new(moved));
        self.recount(key);
        self.index_record(key);
        self.touch(key);
        let kind = if rank(to) > rank(from) {
            "promoted"
        } else {
            "demoted"
        };
        self.bump(&format!("{kind}_{}_to_{}", from.as_str(), to.as_str()));
        Output::Moved {
            from: old.id,
            to: new_id.to_string(),
        }
    }

    fn apply_vector(&mut self, key: u64, vector: &[i8]) -> Output {
        if !self.records.contains_key(&key) {
            return Output::Done; // deleted before its embedding landed
        }
        match self.vectors.upsert_quantized(key, vector) {
            Ok(()) => {
                self.pending.remove(&key);
                self.touch(key);
                Output::Done
            }
            Err(e) => Output::Rejected(format!("vector index: {e}")),
        }
    }

    fn apply_sidecar(&mut self, at: i64, attempts: &[proto::SidecarAttempt]) -> Output {
        for a in attempts {
            self.sidecar_attempts.push_back((at, a.clone()));
        }
        while self.sidecar_attempts.len() > SIDECAR_ATTEMPTS_KEPT {
            self.sidecar_attempts.pop_front();
        }
        Output::Done
    }
}

impl MemState {
    /// One op applied (`Machine::apply`, which checks the totals in test builds).
    fn apply_op(&mut self, op: &Op) -> Output {
        match op {
            Op::Insert(rec) => self.apply_insert(rec),
            Op::Update {
                id,
                content,
                tags,
                importance,
                confidence,
                at,
            } => self.apply_update(id, content, tags, *importance, *confidence, *at),
            Op::Archive { id, at } => self.apply_archive(id, *at),
            Op::SetExpired { id, at } => self.apply_set_expired(id, *at),
            Op::CleanupClock(t) => self.apply_cleanup_clock(*t),
            Op::Reindexed { below } => self.apply_reindexed(*below),
            Op::Delete { id, reason } => self.apply_delete(id, reason),
            Op::ScoreExchange(b) => self.apply_scores(b),
            Op::Move { id, to, new_id, at } => self.apply_move(id, *to, new_id, *at),
            Op::Vector { key, vector } => self.apply_vector(*key, &crate::index::quantize(vector)),
            Op::QuantizedVector { key, components } => {
                let q: Vec<i8> = components.iter().map(|&c| c as i8).collect();
                self.apply_vector(*key, &q)
            }
            Op::Session(s) => {
                if !self.sessions.apply(s) {
                    return Output::Rejected("sidecar lease refused".into());
                }
                match s {
                    session::SessionOp::SidecarLease { at, .. } => {
                        self.bump(&sidecar_day_counter(*at))
                    }
                    session::SessionOp::Prompt {
                        project: Some(p),
                        at,
                        ..
                    } => self.note_project(p, *at),
                    _ => {}
                }
                Output::Done
            }
            Op::ForgetProject { project } => self.apply_forget_project(project),
            Op::Share { id, team, at } => self.apply_share(id, *team, *at),
            Op::Sync(op) => self.apply_sync(op),
            Op::SidecarAttempts { at, attempts } => self.apply_sidecar(*at, attempts),
            Op::Exchange {
                record,
                conv,
                at,
                user,
                assistant,
                evidence,
            } => {
                let out = self.apply_insert(record);
                let doc_id = match &out {
                    Output::Inserted { id, .. } | Output::Duplicate { id } => id.clone(),
                    _ => record.id.clone(),
                };
                self.sessions.apply(&session::SessionOp::Stop {
                    conv: conv.clone(),
                    at: *at,
                    doc_id,
                    user: user.clone(),
                    assistant: assistant.clone(),
                    evidence: *evidence,
                });
                out
            }
        }
    }
}

fn rank(c: Collection) -> u8 {
    match c {
        Collection::Working => 0,
        Collection::History => 1,
        Collection::Patterns => 2,
        _ => 3,
    }
}

/// Counter key for sidecar runs on the UTC day of `at` (for the daily cap).
pub fn sidecar_day_counter(at: i64) -> String {
    format!("sidecar_runs_day_{}", at / crate::clock::DAY_MS)
}

/// A fresh public id: `<collection>_<12 hex>`.
pub use crate::record::new_id;
pub use db::Db;
pub use signals::Signals;

impl Machine for MemState {
    type Op = Op;
    type Output = Output;

    fn apply(&mut self, op: &Op) -> Output {
        let out = self.apply_op(op);
        #[cfg(test)]
        self.check_totals();
        out
    }

    fn encode(&self) -> Result<Vec<u8>> {
        self.encode_snapshot()
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<()> {
        self.decode_snapshot(bytes)
    }

    fn save_side_files(&self, dir: &Path, generation: u64) -> Result<()> {
        self.save_vectors(dir, generation)?;
        self.save_lexical(dir, generation);
        Ok(())
    }

    fn prefetch_side_files(&mut self, dir: &Path, generation: u64) {
        self.prefetch = Some(prefetch::Prefetch::start(
            dir,
            generation,
            self.vectors.dims(),
        ));
    }

    fn load_side_files(&mut self, dir: &Path, generation: u64) -> Result<()> {
        let prefetched = self.prefetch.take().map(|p| p.join());
        let (lexical, vectors) = match prefetched {
            Some((l, v)) => (Some(l), Some(v)),
            None => (None, None),
        };
        self.load_lexical(dir, generation, lexical);
        self.load_vectors(dir, generation, vectors)?;
        self.count_reindex();
        Ok(())
    }
}
