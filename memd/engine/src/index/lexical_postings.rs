//! The BM25 index's posting lists: for each term, the document slots holding it and how often.
//!
//! Owns two layers. The runs: every term's postings in one pair of flat arrays (slots `u32`,
//! counts `u16`), a term's run at `start[t]..start[t + 1]`, its first `live[t]` entries in use;
//! this is what an image loads and what `compact` writes, so a start allocates three arrays
//! instead of one list per term (a million of them at 1M memories). The tails: postings added
//! since, per term, in a small map. A removal swaps the posting with its list's last one.
//! Must never hold a slot twice in one term's list (callers add a document's terms once each)
//! and never decide scores: it only says who holds a term.

use std::collections::HashMap;

use super::FastHash;

/// Term counts are kept in 16 bits: the longest text memd indexes (an exchange, at most 50,000
/// characters) holds fewer than 25,001 terms, so no count memd stores is ever capped.
pub(super) fn clamp_tf(n: usize) -> u16 {
    n.min(u16::MAX as usize) as u16
}

#[derive(Default)]
struct Tail {
    slots: Vec<u32>,
    tfs: Vec<u16>,
}

#[derive(Default)]
pub(super) struct Postings {
    /// `start[t]..start[t + 1]`: term `t`'s run; terms past `live.len()` have none yet.
    start: Vec<usize>,
    live: Vec<u32>,
    slots: Vec<u32>,
    tfs: Vec<u16>,
    tails: HashMap<u32, Tail, FastHash>,
    /// Postings in the tails, and run entries freed by removals: what `compact` reclaims.
    tail_len: usize,
    dead: usize,
}

impl Postings {
    /// A runs-only layer from an image's arrays: `lens[t]` postings of term `t`, in order.
    pub(super) fn from_runs(lens: &[u32], slots: Vec<u32>, tfs: Vec<u16>) -> Postings {
        let mut start = Vec::with_capacity(lens.len() + 1);
        let mut at = 0usize;
        start.push(0);
        for &n in lens {
            at += n as usize;
            start.push(at);
        }
        Postings {
            start,
            live: lens.to_vec(),
            slots,
            tfs,
            ..Postings::default()
        }
    }

    /// Documents holding `term`.
    pub(super) fn df(&self, term: u32) -> usize {
        let run = self.live.get(term as usize).map_or(0, |&n| n as usize);
        run + self.tails.get(&term).map_or(0, |t| t.slots.len())
    }

    /// Total postings (runs' live entries and tails).
    pub(super) fn len(&self) -> usize {
        self.slots.len() - self.dead + self.tail_len
    }

    /// Calls `f(slot, tf)` for every document holding `term`, in no particular order.
    pub(super) fn for_each(&self, term: u32, mut f: impl FnMut(u32, u16)) {
        let (slots, tfs) = self.run(term);
        for (&s, &tf) in slots.iter().zip(tfs) {
            f(s, tf);
        }
        if let Some(tail) = self.tails.get(&term) {
            for (&s, &tf) in tail.slots.iter().zip(&tail.tfs) {
                f(s, tf);
            }
        }
    }

    /// Term `term`'s list, sorted by slot (for the image).
    pub(super) fn sorted(&self, term: u32, out: &mut Vec<(u32, u16)>) {
        out.clear();
        self.for_each(term, |s, tf| out.push((s, tf)));
        out.sort_unstable_by_key(|p| p.0);
    }

    pub(super) fn push(&mut self, term: u32, slot: u32, tf: u16) {
        let tail = self.tails.entry(term).or_default();
        tail.slots.push(slot);
        tail.tfs.push(tf);
        self.tail_len += 1;
    }

    /// Drops `slot` from `term`'s list; false when it was not there.
    pub(super) fn remove(&mut self, term: u32, slot: u32) -> bool {
        let t = term as usize;
        if t < self.live.len() {
            let (from, n) = (self.start[t], self.live[t] as usize);
            if let Some(i) = self.slots[from..from + n].iter().position(|&s| s == slot) {
                self.slots.swap(from + i, from + n - 1);
                self.tfs.swap(from + i, from + n - 1);
                self.live[t] -= 1;
                self.dead += 1;
                return true;
            }
        }
        let Some(tail) = self.tails.get_mut(&term) else {
            return false;
        };
        let Some(i) = tail.slots.iter().position(|&s| s == slot) else {
            return false;
        };
        tail.slots.swap_remove(i);
        tail.tfs.swap_remove(i);
        if tail.slots.is_empty() {
            self.tails.remove(&term);
        }
        self.tail_len -= 1;
        true
    }

    /// Whether the tails and freed entries have grown enough to be worth one `compact`: past
    /// half the runs, so a growing index copies each posting a bounded number of times.
    pub(super) fn wants_compact(&self) -> bool {
        self.tail_len + self.dead > 65_536 + self.slots.len() / 2
    }

    /// The share of postings in the tails (for tests and studies).
    #[cfg(test)]
    pub(super) fn tail_share(&self) -> f64 {
        self.tail_len as f64 / self.len().max(1) as f64
    }

    /// Rewrites everything into runs (term ids below `n_terms`), each sorted by slot.
    pub(super) fn compact(&mut self, n_terms: usize) {
        let total = self.len();
        let (mut slots, mut tfs) = (Vec::with_capacity(total), Vec::with_capacity(total));
        let mut lens = Vec::with_capacity(n_terms);
        let mut list = Vec::new();
        for term in 0..n_terms as u32 {
            self.sorted(term, &mut list);
            lens.push(list.len() as u32);
            slots.extend(list.iter().map(|p| p.0));
            tfs.extend(list.iter().map(|p| p.1));
        }
        *self = Postings::from_runs(&lens, slots, tfs);
    }

    /// Bytes held, by capacity (a tail's map entry counted with its vectors).
    pub(super) fn memory_bytes(&self) -> usize {
        let runs = self.start.capacity() * size_of::<usize>()
            + self.live.capacity() * size_of::<u32>()
            + self.slots.capacity() * size_of::<u32>()
            + self.tfs.capacity() * size_of::<u16>();
        let tails: usize = self
            .tails
            .values()
            .map(|t| t.slots.capacity() * size_of::<u32>() + t.tfs.capacity() * size_of::<u16>())
            .sum();
        runs + tails + self.tails.capacity() * (size_of::<(u32, Tail)>() + 1)
    }

    fn run(&self, term: u32) -> (&[u32], &[u16]) {
        let t = term as usize;
        match self.live.get(t) {
            Some(&n) => {
                let from = self.start[t];
                let to = from + n as usize;
                (&self.slots[from..to], &self.tfs[from..to])
            }
            None => (&[], &[]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(p: &Postings, term: u32) -> Vec<(u32, u16)> {
        let mut out = Vec::new();
        p.sorted(term, &mut out);
        out
    }

    #[test]
    fn runs_and_tails_list_add_and_remove_alike() {
        // Term 0: slots 1, 4 in the run; term 1: slot 2; term 2 has no run yet.
        let mut p = Postings::from_runs(&[2, 1], vec![1, 4, 2], vec![3, 1, 1]);
        p.push(0, 9, 2);
        p.push(2, 4, 5);
        assert_eq!(list(&p, 0), [(1, 3), (4, 1), (9, 2)]);
        assert_eq!(list(&p, 2), [(4, 5)]);
        assert_eq!((p.df(0), p.df(1), p.df(2), p.df(7)), (3, 1, 1, 0));
        assert_eq!(p.len(), 5);
        assert!(p.remove(0, 1) && p.remove(0, 9) && p.remove(2, 4));
        assert!(!p.remove(0, 1) && !p.remove(1, 4) && !p.remove(5, 1));
        assert_eq!(list(&p, 0), [(4, 1)]);
        assert_eq!(p.len(), 2);
        p.compact(3);
        assert_eq!(
            (list(&p, 0), list(&p, 1), list(&p, 2)),
            (vec![(4, 1)], vec![(2, 1)], vec![])
        );
        assert_eq!((p.len(), p.tail_len, p.dead), (2, 0, 0));
    }

    #[test]
    fn counts_are_capped_at_16_bits() {
        assert_eq!(
            (clamp_tf(1), clamp_tf(65_535), clamp_tf(100_000)),
            (1, 65_535, 65_535)
        );
    }
}
