//! The shared store's bookkeeping inside the state machine (issue 14).
//!
//! Owns what this machine still has to send to the shared PostgreSQL store (changed memories,
//! deleted ones, outcome events), how far it has read the store's changes, and applying the
//! rows it read as mirrored memories (the ops saying so, `SyncOp`, are in `ops` with every
//! other op). Must never talk to the database (the `memd-pg` crate does, through the engine's
//! `shared_sync` handle, which logs what it did as `SyncOp`s) and never forget something unsent before the
//! database committed it: a crash in between sends it again, and every write there is
//! idempotent (rows by uid, outcome events by event id).

use super::MemState;
use super::ops::{Output, SharedRow, SyncOp};
use crate::record::{Origin, Record};
use proto::{Collection, Outcome};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What the state knows about the shared store. Persisted with the snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncState {
    /// This store's name in the shared store (the first half of every uid it made); `None`
    /// while no shared store is configured, and then nothing is tracked.
    pub store_id: Option<String>,
    /// Local memories (by key) changed since they were last sent, with the change's number.
    pub dirty: BTreeMap<u64, u64>,
    /// Uids of local memories deleted since.
    pub deleted: BTreeSet<String>,
    /// Outcome events not sent yet, by event id.
    pub events: BTreeMap<String, OutcomeEvent>,
    /// Numbers changes and events; deterministic, so a replayed log names them the same.
    pub revision: u64,
    /// The shared store's change number read up to.
    pub cursor: i64,
    /// Where an unfinished catch-up (more than one page of changes) started: this store's own
    /// memories changed by others since then are still news on its later pages.
    #[serde(default)]
    pub floor: Option<i64>,
    /// The database role this store writes as: memories from the shared store that it owns
    /// (made on the same user's other machines) may be edited here too.
    #[serde(default)]
    pub role: Option<String>,
    /// Which database `cursor` and the mirrored memories belong to.
    #[serde(default)]
    pub database: Option<String>,
}

/// One outcome as the shared store applies it: the same deltas the memory took here, added
/// atomically there, so two machines scoring one memory at once both count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeEvent {
    pub uid: String,
    pub outcome: Outcome,
    pub at: i64,
    pub score_delta: f64,
    /// Counted as a use (every outcome but `unknown`).
    pub counted: bool,
    pub success: f64,
    pub confidence_delta: f64,
}

/// What is due for the shared store, read under one lock so rows and events agree.
#[derive(Debug, Default)]
pub struct Outbox {
    pub memories: Vec<OutboxRow>,
    pub deleted: Vec<String>,
    pub events: Vec<(String, OutcomeEvent)>,
}

/// A changed memory to write.
#[derive(Debug)]
pub struct OutboxRow {
    pub key: u64,
    /// The change's number: `SyncOp::Sent` clears the memory only if it did not change since.
    pub revision: u64,
    pub uid: String,
    /// Its counts leave out the events still pending for it: those are added by the events
    /// themselves, exactly once.
    pub record: Record,
    pub vector: Option<Vec<f32>>,
}

impl Outbox {
    pub fn is_empty(&self) -> bool {
        self.memories.is_empty() && self.deleted.is_empty() && self.events.is_empty()
    }
}

/// The uid of a local memory.
pub fn uid(store_id: &str, key: u64) -> String {
    format!("{store_id}:{key}")
}

impl SyncState {
    /// Own memories changed by others after this change number are news to read.
    pub fn news_after(&self) -> i64 {
        self.floor.unwrap_or(self.cursor)
    }
}

impl MemState {
    pub fn sync(&self) -> &SyncState {
        &self.sync
    }

    pub fn mirrored_len(&self) -> usize {
        self.mirrored.len()
    }

    /// Changes, deletions and events not yet in the shared store.
    pub fn backlog(&self) -> usize {
        self.sync.dirty.len() + self.sync.deleted.len() + self.sync.events.len()
    }

    /// Up to `max_rows` changed memories and `max_events` events that are due.
    pub fn outbox(&self, max_rows: usize, max_events: usize) -> Outbox {
        let Some(store_id) = &self.sync.store_id else {
            return Outbox::default();
        };
        let memories = self
            .sync
            .dirty
            .iter()
            .filter_map(|(&key, &revision)| {
                let r = self.records.get(&key)?;
                let uid = match &r.origin {
                    Some(o) => o.uid.clone(),
                    None => uid(store_id, key),
                };
                Some(OutboxRow {
                    key,
                    revision,
                    record: without_pending(r, &uid, &self.sync.events),
                    uid,
                    vector: self.vectors.get(key),
                })
            })
            .take(max_rows)
            .collect();
        Outbox {
            memories,
            deleted: self.sync.deleted.iter().cloned().collect(),
            events: self
                .sync
                .events
                .iter()
                .take(max_events)
                .map(|(id, e)| (id.clone(), e.clone()))
                .collect(),
        }
    }

    /// Notes a change to the memory with `key` for the shared store: this store's own
    /// memories, and those of its role made on another machine.
    pub(super) fn touch(&mut self, key: u64) {
        if self.sync.store_id.is_none() {
            return;
        }
        if self.records.get(&key).is_some_and(|r| self.writes(r)) {
            self.sync.revision += 1;
            self.sync.dirty.insert(key, self.sync.revision);
        }
    }

    /// Notes the deletion of `r` (called before it is removed).
    pub(super) fn touch_deleted(&mut self, r: &Record) {
        let Some(store_id) = &self.sync.store_id else {
            return;
        };
        if !self.writes(r) {
            return;
        }
        let uid = match &r.origin {
            Some(o) => o.uid.clone(),
            None => uid(store_id, r.key),
        };
        self.sync.deleted.insert(uid);
        self.sync.dirty.remove(&r.key);
    }

    /// Whether this store writes `r`'s changes to the shared store: made here, or owned by
    /// this store's role.
    fn writes(&self, r: &Record) -> bool {
        match &r.origin {
            None => true,
            Some(o) => self.sync.role.as_deref() == Some(o.owner.as_str()),
        }
    }

    /// Notes an outcome applied to the memory with `key`: `before` is its state before.
    pub(super) fn note_outcome(&mut self, key: u64, before: &Record, outcome: Outcome, at: i64) {
        let Some(store_id) = self.sync.store_id.clone() else {
            return;
        };
        let Some(after) = self.records.get(&key) else {
            return;
        };
        let uid = match &after.origin {
            Some(o) => o.uid.clone(),
            None => uid(&store_id, key),
        };
        let event = OutcomeEvent {
            uid,
            outcome,
            at,
            score_delta: after.score - before.score,
            counted: after.uses > before.uses,
            success: after.success_count - before.success_count,
            confidence_delta: after.confidence.unwrap_or(0.0) - before.confidence.unwrap_or(0.0),
        };
        self.sync.revision += 1;
        let id = format!("{store_id}:e{}", self.sync.revision);
        self.sync.events.insert(id, event);
    }

    /// The key of the memory `id` names, if this store may change it; else the answer. A
    /// memory from the shared store is changed only by its owner (on any of their machines).
    pub(super) fn editable_key(&self, id: &str) -> Result<u64, Output> {
        let Some(key) = self.ids.get(id, &self.records) else {
            return Err(Output::NotFound { id: id.into() });
        };
        match self.refuse_mirrored(key) {
            Some(refused) => Err(refused),
            None => Ok(key),
        }
    }

    fn refuse_mirrored(&self, key: u64) -> Option<Output> {
        let r = self.records.get(&key)?;
        let origin = r.origin.as_ref()?;
        if self.writes(r) {
            // The same user's memory from another machine: the edit goes there too.
            return None;
        }
        Some(Output::Rejected(format!(
            "this memory is shared by {}; only {} can change it",
            origin.owner, origin.owner
        )))
    }

    /// Shares a memory-bank fact or pattern with the team, or makes it private again.
    pub(super) fn apply_share(&mut self, id: &str, team: bool, at: i64) -> Output {
        let key = match self.editable_key(id) {
            Ok(key) => key,
            Err(answer) => return answer,
        };
        let Some(r) = self.records.get(&key) else {
            return Output::NotFound { id: id.into() };
        };
        if team && !matches!(r.collection, Collection::MemoryBank | Collection::Patterns) {
            return Output::Rejected(format!(
                "{id} is in {}: only memory_bank facts and patterns can be shared",
                r.collection.as_str()
            ));
        }
        let id = self
            .edit(key, |r| {
                r.team = team;
                r.updated_at = at;
                r.id.clone()
            })
            .unwrap_or_default();
        self.touch(key);
        Output::Updated { id }
    }

    pub(super) fn apply_sync(&mut self, op: &SyncOp) -> Output {
        match op {
            SyncOp::Enable { store_id, database } => {
                if self.sync.store_id.as_deref() == Some(store_id.as_str())
                    && self.sync.database == *database
                {
                    return Output::Done;
                }
                let mirrored: Vec<u64> = self.mirrored.values().copied().collect();
                for key in mirrored {
                    self.remove_key(key, "shared_store_changed");
                }
                self.sync = SyncState {
                    store_id: Some(store_id.clone()),
                    database: database.clone(),
                    ..SyncState::default()
                };
                let keys: Vec<u64> = self.records.keys().copied().collect();
                for key in keys {
                    self.touch(key);
                }
            }
            SyncOp::Sent {
                memories,
                deleted,
                events,
            } => {
                for (key, rev) in memories {
                    if self.sync.dirty.get(key) == Some(rev) {
                        self.sync.dirty.remove(key);
                    }
                }
                for uid in deleted {
                    self.sync.deleted.remove(uid);
                }
                for id in events {
                    self.sync.events.remove(id);
                }
            }
            SyncOp::Received {
                rows,
                cursor,
                complete,
            } => {
                for row in rows {
                    self.receive(row);
                }
                self.sync.floor = match complete {
                    true => None,
                    false => Some(self.sync.floor.unwrap_or(self.sync.cursor)),
                };
                self.sync.cursor = self.sync.cursor.max(*cursor);
            }
            SyncOp::Role { role } => self.sync.role = Some(role.clone()),
        }
        Output::Done
    }

    fn receive(&mut self, row: &SharedRow) {
        let own_prefix = self.sync.store_id.as_ref().map(|s| format!("{s}:"));
        if let Some(key) = own_prefix
            .as_deref()
            .and_then(|p| row.uid.strip_prefix(p))
            .and_then(|k| k.parse::<u64>().ok())
        {
            // Only rows this store's role owns speak for its memories.
            if self.sync.role.as_deref().is_none_or(|r| r == row.owner) {
                self.receive_own(key, row);
            }
            return;
        }
        let existing = self.mirrored.get(&row.uid).copied();
        let owner = existing
            .and_then(|k| self.records.get(&k))
            .and_then(|r| r.origin.as_ref())
            .map(|o| o.owner.clone());
        if owner.as_deref().is_some_and(|o| o != row.owner) {
            // Another role speaking for someone else's memory: not news.
            return;
        }
        if row.deleted {
            if let Some(key) = existing {
                self.remove_key(key, "shared_deleted");
            }
            return;
        }
        if let Some(key) = existing.filter(|k| self.sync.dirty.contains_key(k)) {
            // Our edit of it is on its way there: keep it, take only the counts.
            let events = &self.sync.events;
            if let Some(r) = self.records.get_mut(&key) {
                self.totals.sub(r);
                take_counts(&row.record, r);
                with_pending(r, &row.uid, events);
                self.totals.add(r);
            }
            return;
        }
        let mut rec = row.record.clone();
        rec.origin = Some(Box::new(Origin {
            uid: row.uid.clone(),
            owner: row.owner.clone(),
        }));
        let mut same_text = false;
        let key = match existing {
            Some(key) => {
                self.unindex_record(key);
                self.forget_ids(key);
                if let Some(old) = self.records.remove(&key) {
                    self.totals.sub(&old);
                    same_text = old.content == rec.content;
                }
                key
            }
            None => {
                let key = self.next_key;
                self.next_key += 1;
                key
            }
        };
        let taken = std::iter::once(&rec.id)
            .chain(&rec.former_ids)
            .any(|id| self.ids.get(id, &self.records).is_some_and(|k| k != key));
        if taken {
            // An id clash with a different memory here (48 random bits make it all but
            // impossible): keep ours, skip theirs.
            self.vectors.remove(key).ok();
            self.pending.remove(&key);
            self.mirrored.remove(&row.uid);
            tracing::warn!("shared memory {} skipped: its id is taken here", rec.id);
            return;
        }
        rec.key = key;
        with_pending(&mut rec, &row.uid, &self.sync.events);
        self.mirrored.insert(row.uid.clone(), key);
        // The old embedding still fits an unchanged text until the owner's arrives.
        let same_text = same_text && self.vectors.contains(key);
        self.totals.add(&rec);
        self.records.insert(key, Box::new(rec));
        self.claim_ids(key);
        match &row.vector {
            Some(v) => {
                let q: Vec<i8> = v.iter().map(|&c| c as i8).collect();
                if self.vectors.upsert_quantized(key, &q).is_err() {
                    self.vectors.remove(key).ok();
                }
            }
            None if !same_text => {
                self.vectors.remove(key).ok();
            }
            None => {}
        }
        self.index_record(key);
    }

    /// One of this store's own memories, changed in the shared store by another machine's
    /// outcomes: take its counts, unless outcomes of ours are still on their way there.
    fn receive_own(&mut self, key: u64, row: &SharedRow) {
        if self.records.get(&key).is_none_or(|r| r.origin.is_some()) {
            return;
        }
        if row.deleted {
            // Deleted on another machine of this role.
            self.remove_key(key, "shared_deleted");
            return;
        }
        // An edit of ours on its way there wins over what the store had before it.
        if !row.counts_only && !self.sync.dirty.contains_key(&key) {
            self.take_edit(key, &row.record);
        }
        let Some(r) = self.records.get_mut(&key) else {
            return;
        };
        self.totals.sub(r);
        let confidence = r.confidence;
        take_counts(&row.record, r);
        if r.collection != Collection::MemoryBank {
            r.confidence = confidence;
        }
        with_pending(r, &row.uid, &self.sync.events);
        self.totals.add(r);
    }

    /// What another machine of this role changed in one of this store's memories: its text
    /// (then re-embedded here), tags, bank fields, archive flag, sharing.
    fn take_edit(&mut self, key: u64, theirs: &Record) {
        let Some(r) = self.records.get(&key) else {
            return;
        };
        let text_changed = r.content != theirs.content;
        let changed = text_changed
            || r.tags != theirs.tags
            || r.importance != theirs.importance
            || r.archived != theirs.archived
            || r.team != theirs.team;
        if !changed || theirs.content.is_empty() {
            return;
        }
        self.unindex_record(key);
        self.edit(key, |r| {
            r.content = theirs.content.clone();
            r.tags = theirs.tags.clone();
            r.importance = theirs.importance;
            r.archived = theirs.archived;
            r.team = theirs.team;
            r.updated_at = r.updated_at.max(theirs.updated_at);
        });
        if text_changed {
            self.vectors.remove(key).ok();
        }
        self.index_record(key);
    }
}

/// The shared store's counts for a memory: every outcome it has applied.
fn take_counts(from: &Record, to: &mut Record) {
    to.score = from.score;
    to.uses = from.uses;
    to.success_count = from.success_count;
    to.outcome_history = from.outcome_history.clone();
    to.last_outcome = from.last_outcome;
    to.last_used = from.last_used;
    to.confidence = from.confidence;
}

/// `r`, whose counts came from the shared store, with the outcomes still on their way there
/// added on top (the inverse of `without_pending`): what the memory will have once they land.
fn with_pending(r: &mut Record, uid: &str, events: &BTreeMap<String, OutcomeEvent>) {
    for e in events.values().filter(|e| e.uid == uid) {
        r.score = (r.score + e.score_delta).clamp(0.0, 1.0);
        r.success_count += e.success;
        if let Some(c) = r.confidence.as_mut() {
            *c = (*c + e.confidence_delta).clamp(0.0, 1.0);
        }
        r.last_used = Some(r.last_used.map_or(e.at, |t| t.max(e.at)));
        if e.counted {
            r.uses = r.uses.saturating_add(1);
            r.outcome_history.push(crate::record::OutcomeEntry {
                outcome: e.outcome,
                at: e.at,
            });
            r.last_outcome = Some(e.outcome);
        }
    }
    let excess = r
        .outcome_history
        .len()
        .saturating_sub(crate::record::HISTORY_LEN);
    r.outcome_history.drain(..excess);
}

/// `r` as the shared store should first see it: without the effects of outcome events that
/// are still pending for it (they are sent, and added there, on their own).
fn without_pending(r: &Record, uid: &str, events: &BTreeMap<String, OutcomeEvent>) -> Record {
    let mut row = r.clone();
    let mut unlogged = 0;
    for e in events.values().filter(|e| e.uid == uid) {
        row.score -= e.score_delta;
        row.success_count -= e.success;
        if let Some(c) = row.confidence.as_mut() {
            *c -= e.confidence_delta;
        }
        if e.counted {
            row.uses = row.uses.saturating_sub(1);
            unlogged += 1;
        }
    }
    let keep = row.outcome_history.len().saturating_sub(unlogged);
    row.outcome_history.truncate(keep);
    row.last_outcome = row.outcome_history.last().map(|e| e.outcome);
    row
}

/// An embedding as `SharedRow::vector` carries it: quantised as the local index keeps it.
pub fn quantized(v: &[f32]) -> serde_bytes::ByteBuf {
    let q = crate::index::quantize(v);
    serde_bytes::ByteBuf::from(q.into_iter().map(|c| c as u8).collect::<Vec<u8>>())
}
