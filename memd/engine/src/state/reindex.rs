//! Exchanges whose vectors were made from an older indexed text (`indexed_text::VERSION`):
//! the persisted cursor of their re-embedding after an upgrade.
//!
//! A store whose snapshot was written with an older version of the indexed text opens with the
//! cursor above every key; the embedding worker (`workers`) takes the exchanges below it newest
//! first (highest key first), embeds their indexed text and commits the vectors with
//! `Op::Reindexed`, which lowers the cursor, so a restart resumes where the last commit left
//! it. Memories stored since have keys above the cursor and were indexed with today's text.
//! The lexical index is rebuilt at the first start instead (its image's version), and the
//! token states follow their text's hash (`late_plan`). Owns the cursor, its count of what is
//! left and the batches the worker takes; must never read the clock or do I/O.

use super::MemState;
use crate::indexed_text;

/// Keys looked at per batch under one read of the store's lock (a hash lookup each).
pub const SCAN_KEYS: u64 = 4096;

/// One batch of the re-embedding: the exchanges to embed again (key, indexed text), newest
/// first, and the cursor to commit once their vectors are in.
pub struct Batch {
    pub todo: Vec<(u64, String)>,
    pub below: u64,
}

impl MemState {
    /// Exchanges left whose vectors were made from an older indexed text (0: none).
    pub fn reindex_left(&self) -> usize {
        self.reindex.map_or(0, |_| self.reindex_left)
    }

    /// Counts what is left below the cursor, once the vectors are loaded (an open).
    pub(super) fn count_reindex(&mut self) {
        let Some(cursor) = self.reindex else {
            return;
        };
        self.reindex_left = self
            .records
            .iter()
            .filter(|(k, r)| **k < cursor && self.needs_vector(**k, r))
            .count();
    }

    fn needs_vector(&self, key: u64, r: &crate::record::Record) -> bool {
        indexed_text::is_exchange(&r.metadata) && self.vectors.contains(key)
    }

    /// Up to `n` exchanges below the cursor with a vector (key, indexed text), highest key
    /// first, looking at `SCAN_KEYS` keys at most; `None` when nothing is left.
    pub fn reindex_batch(&self, n: usize) -> Option<Batch> {
        let start = self.reindex?.min(self.next_key);
        let floor = start.saturating_sub(SCAN_KEYS);
        let mut todo = Vec::new();
        let mut below = floor;
        for key in (floor..start).rev() {
            if let Some(r) = self.records.get(&key)
                && self.needs_vector(key, r)
            {
                todo.push((key, indexed_text::of(r).into_owned()));
                if todo.len() == n {
                    below = key;
                    break;
                }
            }
        }
        Some(Batch { todo, below })
    }

    /// `Op::Reindexed`: every exchange at or above `below` has a vector of today's text.
    pub(super) fn apply_reindexed(&mut self, below: u64) -> super::ops::Output {
        let Some(cursor) = self.reindex else {
            return super::ops::Output::Done;
        };
        let done = (below..cursor.min(self.next_key))
            .filter(|k| {
                self.records
                    .get(k)
                    .is_some_and(|r| self.needs_vector(*k, r))
            })
            .count();
        // The count may run short (memories the last old memd wrote after its snapshot), the
        // cursor does not: it is done at the bottom of the key space.
        self.reindex_left = self.reindex_left.saturating_sub(done);
        self.reindex = (below > 1).then_some(below.min(cursor));
        if self.reindex.is_none() {
            self.reindex_left = 0;
        }
        super::ops::Output::Done
    }

    /// A memory leaving the store (or its vector): no longer one to re-embed.
    pub(super) fn reindex_forget(&mut self, key: u64) {
        if let Some(cursor) = self.reindex
            && key < cursor
            && self
                .records
                .get(&key)
                .is_some_and(|r| self.needs_vector(key, r))
        {
            self.reindex_left = self.reindex_left.saturating_sub(1);
        }
    }
}
