//! Which memories get token states, and in what order: the newest first, live ones only,
//! within `search.token_states_mb` of memory (`plan`, one look; `Planner`, the background
//! pass's running plan).
//!
//! Owns the order and the cap's accounting. The `Planner` walks the whole store rarely (at
//! start, after the codebook changed every size, after many changes, after its look-ahead ran
//! out), in slices of keys so no read of the store's lock lasts long, and between walks takes
//! in only the memories the store's change journal names. Must never walk every record under
//! one read of the store's lock, nor per batch: a write waits behind a read, and requests
//! behind the write (at 1M memories one walk took seconds).

use super::late::{ENCODE_BATCH, Figure, Known, States, text_hash};
use crate::indexed_text;
use crate::state::{Db, MemState};
use std::collections::{HashSet, VecDeque};

/// What the next pass does.
pub struct Plan {
    /// Up to `ENCODE_BATCH` memories to encode (key, text).
    pub todo: Vec<(u64, String)>,
    /// All memories within the cap that still lack current states.
    pub missing: usize,
    /// Memories whose current states are within the cap: every other state is dropped
    /// (deleted, archived, edited since, or pushed out by newer memories).
    pub keep: HashSet<u64>,
    /// Every live memory's key.
    pub live: HashSet<u64>,
    /// Some live memory does not fit the cap (in i8: time to train the codebook).
    pub over_cap: bool,
}

/// Live memories within the cap (`search.token_states_mb`) that still lack token states, for
/// `memd stats`, without a walk: the `Planner`'s queue at its last look (the batch in flight
/// included), plus the memories changed since then that lack states (a deleted one is not
/// counted). Before the planner's first look: every live memory without states (an upper
/// bound: the cap may leave some out); when more changed than the journal holds, each change.
pub fn pending(states: &States, s: &MemState) -> usize {
    let Some(Figure {
        queued,
        in_flight,
        seq,
    }) = states.planned.get()
    else {
        return s.totals().live().saturating_sub(states.size().0);
    };
    let in_flight_lacking = in_flight
        .iter()
        .filter(|(key, hash)| states.covered(*key, *hash).is_none())
        .count();
    let Some(changed) = s.changes().since(seq) else {
        return queued + in_flight_lacking + s.changes().seq().saturating_sub(seq) as usize;
    };
    let mut seen: HashSet<u64> = in_flight.iter().map(|(k, _)| *k).collect();
    let lacking = changed
        .filter(|k| seen.insert(*k))
        .filter_map(|k| s.by_key(k).and_then(Entry::of))
        .filter(|e| {
            states.covered(e.key, e.hash).is_none()
                && states.known(e.key, e.hash) != Some(Known::Failed)
        })
        .count();
    queued + in_flight_lacking + lacking
}

/// Which memories get states within `cap` bytes of memory: the newest first (what a prompt
/// most likely finds), live ones only. A memory's size is its states' real size once it was
/// encoded, an estimate before. Reads every record: for one look (tests, studies); the
/// background pass plans with a `Planner`.
pub fn plan(states: &States, s: &MemState, cap: usize) -> Plan {
    let mut entries: Vec<Entry> = s.records().filter_map(Entry::of).collect();
    newest_first(&mut entries);
    let walk = walk(states, &entries, cap);
    let todo = walk
        .queue
        .iter()
        .take(ENCODE_BATCH)
        .filter_map(|e| Some((e.key, indexed_text::of(s.by_key(e.key)?).into_owned())))
        .collect();
    Plan {
        todo,
        missing: walk.queue.len(),
        keep: walk.keep,
        live: walk.live,
        over_cap: walk.over_cap,
    }
}

/// A live memory as the plan orders and sizes it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Entry {
    created_at: i64,
    key: u64,
    hash: u32,
    len: usize,
}

impl Entry {
    fn of(r: &crate::record::Record) -> Option<Entry> {
        (!r.archived).then(|| {
            let text = indexed_text::of(r);
            Entry {
                created_at: r.created_at,
                key: r.key,
                hash: text_hash(&text),
                len: text.len(),
            }
        })
    }

    /// Whether `self` comes before `other` newest first (ties: the higher key).
    fn newer_than(&self, other: &Entry) -> bool {
        (self.created_at, self.key) > (other.created_at, other.key)
    }
}

fn newest_first(entries: &mut [Entry]) {
    entries.sort_unstable_by_key(|e| std::cmp::Reverse((e.created_at, e.key)));
}

/// One walk of the live memories (newest first) against the cap.
struct Walk {
    /// Within the cap and lacking current states, newest first.
    queue: VecDeque<Entry>,
    keep: HashSet<u64>,
    live: HashSet<u64>,
    over_cap: bool,
    /// The oldest memory the cap admitted, when some did not fit.
    frontier: Option<Entry>,
}

fn walk(states: &States, entries: &[Entry], cap: usize) -> Walk {
    let mut w = Walk {
        queue: VecDeque::new(),
        keep: HashSet::new(),
        live: entries.iter().map(|e| e.key).collect(),
        over_cap: false,
        frontier: None,
    };
    let coded = states.codebook().is_some();
    let mut used = states.codebook_bytes();
    let mut last = None;
    for e in entries {
        let current = states.covered(e.key, e.hash);
        let bytes = match (&current, states.known(e.key, e.hash)) {
            (Some(t), _) => t.bytes(),
            (None, Some(Known::Failed)) => continue,
            (None, Some(Known::Bytes(b))) => b,
            (None, None) => estimated_bytes(e.len, coded),
        };
        if used + bytes > cap {
            w.over_cap = true;
            continue;
        }
        used += bytes;
        last = Some(*e);
        match current {
            Some(_) => {
                w.keep.insert(e.key);
            }
            None => w.queue.push_back(*e),
        }
    }
    w.frontier = last.filter(|_| w.over_cap);
    w
}

/// A memory's token states before encoding it, from its text's length in bytes: a token per
/// ~4 characters (English text with code), two markers and [SEP], within the model's cut;
/// coded (the words' tokens: ~3/4) or i8.
pub(super) fn estimated_bytes(len: usize, coded: bool) -> usize {
    let tokens = (len / 4 + 3).min(crate::models::embed::colbert::MAX_DOC_TOKENS);
    match coded {
        true => (tokens * 3 / 4).max(1) * super::late_codes::SUBVECTORS,
        false => tokens * (crate::models::embed::DIMS + 4),
    }
}

/// Keys read per read of the store's lock in a walk (~2 ms at 1M memories).
const SLICE: u64 = 16_384;

/// The store as the planner reads it: the daemon's (`Db`, a short read lock per call) or a
/// state held directly (tests, studies).
pub trait StoreRead {
    fn read_state<R>(&self, f: impl FnOnce(&MemState) -> R) -> R;
}

impl StoreRead for Db {
    fn read_state<R>(&self, f: impl FnOnce(&MemState) -> R) -> R {
        self.read(f)
    }
}

impl StoreRead for MemState {
    fn read_state<R>(&self, f: impl FnOnce(&MemState) -> R) -> R {
        f(self)
    }
}

/// What one call of `Planner::next` gives the background pass.
pub struct Next {
    /// Up to `ENCODE_BATCH` memories to encode (key, text), newest first.
    pub todo: Vec<(u64, String)>,
    /// Some live memory did not fit the cap at the last walk.
    pub over_cap: bool,
}

/// The background pass's plan, kept between batches (see the module's note).
#[derive(Default)]
pub struct Planner {
    /// Memories to encode, newest first (checked against the store when taken).
    queue: VecDeque<Entry>,
    /// How far the change journal was read (`None`: never walked, or told to walk again).
    seq: Option<u64>,
    frontier: Option<Entry>,
    over_cap: bool,
    /// Bytes (estimated) of the memories taken in from the journal since the last walk.
    admitted: usize,
    /// The queue holds estimates of a walk: once it runs out, walk again with real sizes.
    estimated: bool,
    /// Records read under the store's lock, all told (tests: the batches do not walk).
    pub records_read: u64,
    /// Walks of the whole store made.
    pub walks: u64,
}

impl Planner {
    /// Walk the whole store before the next batch (every size changed: the codebook).
    pub fn invalidate(&mut self) {
        self.seq = None;
    }

    /// The next batch to encode. Walks the store only when due (see the module's note);
    /// otherwise reads the journal's new entries and the batch's own records.
    pub fn next(&mut self, store: &impl StoreRead, states: &States, cap: usize) -> Next {
        let journal = self.seq.and_then(|seq| {
            store.read_state(|s| {
                let changed: Vec<u64> = s.changes().since(seq)?.collect();
                Some((s.changes().seq(), Self::read_keys(s, &changed)))
            })
        });
        // Many memories taken in since the walk (the cap's accounting is due again), or the
        // walk's estimated look-ahead ran out (sized again with what encoding found).
        let walk_due = self.admitted > cap / 8 || (self.queue.is_empty() && self.estimated);
        match journal {
            Some((seq, changed)) if !walk_due => {
                self.seq = Some(seq);
                self.take_in(states, changed);
            }
            _ => self.walk(store, states, cap),
        }
        let todo = self.take(store, states);
        if let Some(seq) = self.seq {
            states.planned.set(Figure {
                queued: self.queue.len(),
                in_flight: todo.iter().map(|(k, t)| (*k, text_hash(t))).collect(),
                seq,
            });
        }
        Next {
            todo,
            over_cap: self.over_cap,
        }
    }

    /// (key, the memory when live) of each changed key, read under the caller's lock.
    fn read_keys(s: &MemState, keys: &[u64]) -> Vec<(u64, Option<Entry>)> {
        let mut seen = HashSet::new();
        keys.iter()
            .filter(|k| seen.insert(**k))
            .map(|&k| (k, s.by_key(k).and_then(Entry::of)))
            .collect()
    }

    /// Takes in what the journal named: states of memories gone are dropped; a new or edited
    /// memory newer than the cap's frontier goes into the queue in its place.
    fn take_in(&mut self, states: &States, changed: Vec<(u64, Option<Entry>)>) {
        if changed.is_empty() {
            return;
        }
        self.records_read += changed.len() as u64;
        let keys: HashSet<u64> = changed.iter().map(|(k, _)| *k).collect();
        self.queue.retain(|e| !keys.contains(&e.key));
        let mut gone = Vec::new();
        let coded = states.codebook().is_some();
        for (key, entry) in changed {
            let Some(e) = entry else {
                gone.push(key);
                continue;
            };
            let wanted = states.covered(e.key, e.hash).is_none()
                && states.known(e.key, e.hash) != Some(Known::Failed)
                && self.frontier.is_none_or(|f| e.newer_than(&f));
            if wanted {
                let at = self.queue.partition_point(|q| q.newer_than(&e));
                self.queue.insert(at, e);
                self.admitted += estimated_bytes(e.len, coded);
            }
        }
        states.forget(&gone);
    }

    /// Walks every live memory in slices of keys, then orders and sizes them off the lock.
    fn walk(&mut self, store: &impl StoreRead, states: &States, cap: usize) {
        let (seq, end) = store.read_state(|s| (s.changes().seq(), s.key_end()));
        let mut entries = Vec::new();
        let mut lo = 0;
        while lo < end {
            let hi = end.min(lo + SLICE);
            store.read_state(|s| {
                entries.extend((lo..hi).filter_map(|k| s.by_key(k).and_then(Entry::of)));
            });
            lo = hi;
        }
        // Changes during the walk are in the journal after `seq`: taken in next time.
        self.records_read += entries.len() as u64;
        self.walks += 1;
        newest_first(&mut entries);
        let w = walk(states, &entries, cap);
        drop(entries);
        states.retain(&w.keep, &w.live);
        self.seq = Some(seq);
        self.estimated = !w.queue.is_empty();
        self.queue = w.queue;
        self.frontier = w.frontier;
        self.over_cap = w.over_cap;
        self.admitted = 0;
    }

    /// Up to `ENCODE_BATCH` of the queue's front that still need states, with their texts; an
    /// entry whose memory changed or went is dropped (the journal brings it back if needed).
    fn take(&mut self, store: &impl StoreRead, states: &States) -> Vec<(u64, String)> {
        let mut todo = Vec::new();
        while todo.len() < ENCODE_BATCH && !self.queue.is_empty() {
            let n = self.queue.len().min(4 * ENCODE_BATCH);
            let front: Vec<Entry> = self.queue.drain(..n).collect();
            let mut rest = front.into_iter();
            let mut read = 0;
            store.read_state(|s| {
                for e in rest.by_ref() {
                    read += 1;
                    let current = s
                        .by_key(e.key)
                        .filter(|r| !r.archived)
                        .map(indexed_text::of)
                        .filter(|text| text_hash(text) == e.hash);
                    if let Some(text) = current
                        && states.covered(e.key, e.hash).is_none()
                        && states.known(e.key, e.hash) != Some(Known::Failed)
                    {
                        todo.push((e.key, text.into_owned()));
                        if todo.len() == ENCODE_BATCH {
                            break;
                        }
                    }
                }
            });
            // What this batch did not reach goes back to the front, in order.
            for e in rest.rev() {
                self.queue.push_front(e);
            }
            self.records_read += read;
        }
        todo
    }
}

#[cfg(test)]
#[path = "late_plan_tests.rs"]
mod tests;
