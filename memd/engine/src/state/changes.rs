//! Which memories changed lately, for derived data kept outside the state (the token-state
//! planner): a bounded journal of keys whose text, liveness or existence changed, with a
//! running sequence number.
//!
//! Owns the journal only. Must never grow without bound (nobody may be reading it: reranking
//! off) and never claim completeness past what it still holds: a reader that fell behind its
//! oldest entry is told so and walks the store instead.

use std::collections::VecDeque;

/// Keys held: a reader more than this many changes behind re-reads the whole store.
pub const KEPT: usize = 8192;

#[derive(Default)]
pub struct Changes {
    /// Sequence number of `keys[0]`.
    base: u64,
    keys: VecDeque<u64>,
}

impl Changes {
    /// Notes that the memory with `key` was stored, edited, archived, restored or deleted.
    pub fn note(&mut self, key: u64) {
        if self.keys.back() == Some(&key) {
            return; // an edit unindexes and indexes again: one change
        }
        self.keys.push_back(key);
        if self.keys.len() > KEPT {
            self.keys.pop_front();
            self.base += 1;
        }
    }

    /// The sequence number after the newest change (where a reader that saw everything is).
    pub fn seq(&self) -> u64 {
        self.base + self.keys.len() as u64
    }

    /// The keys changed since `seq` (oldest first, repeats possible), or `None` when some of
    /// them are no longer held.
    pub fn since(&self, seq: u64) -> Option<impl Iterator<Item = u64> + '_> {
        let skip = seq.checked_sub(self.base)?;
        Some(self.keys.iter().skip(skip as usize).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_gets_what_changed_since_it_looked_until_it_fell_too_far_behind() {
        let mut c = Changes::default();
        c.note(1);
        c.note(1);
        let seen = c.seq();
        assert_eq!(seen, 1, "an edit's two notes are one change");
        c.note(2);
        c.note(3);
        assert_eq!(c.since(seen).unwrap().collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(c.since(c.seq()).unwrap().count(), 0);
        for k in 0..KEPT as u64 {
            c.note(100 + k);
        }
        assert!(c.since(seen).is_none(), "key 2 is no longer held");
        assert_eq!(c.since(c.seq() - 5).unwrap().count(), 5);
    }
}
