//! Running totals of the records (per collection: count, score sum, scored; all told: live
//! memories and the bytes they take), kept by every write path so `/api/health` and
//! `/api/stats` read them instead of walking every record (at 1M memories a walk took seconds
//! under the store's read lock).
//!
//! Owns the totals and the two calls that keep them: `add` when a record enters the key map or
//! after an in-place change, `sub` when it leaves or before one. Must never drift: sums are
//! exact integers (scores in fixed point), and test builds compare them with a walk after every
//! op (`MemState::check_totals`).

use super::MemState;
use crate::record::Record;
use proto::{Collection, CollectionStats};
use std::collections::{BTreeMap, HashMap};

/// Fixed-point scale of a score in the sums (exact add and subtract, so no drift).
const SCORE_ONE: f64 = (1u64 << 40) as f64;

#[derive(Default, Clone, Debug, PartialEq)]
pub struct Totals {
    per: HashMap<Collection, Part>,
    /// Memories not archived.
    live: i64,
    /// `Record::memory_bytes` summed.
    bytes: i64,
}

#[derive(Default, Clone, Copy, Debug, PartialEq)]
struct Part {
    count: i64,
    score: i128,
    scored: i64,
}

impl Totals {
    pub(super) fn add(&mut self, r: &Record) {
        self.step(r, 1);
    }

    pub(super) fn sub(&mut self, r: &Record) {
        self.step(r, -1);
    }

    fn step(&mut self, r: &Record, sign: i64) {
        let p = self.per.entry(r.collection).or_default();
        p.count += sign;
        // A NaN score counts as 0 (the cast saturates); scores are in [0, 1].
        p.score += i128::from(sign) * i128::from((r.score * SCORE_ONE).round() as i64);
        p.scored += sign * i64::from(r.uses > 0);
        self.live += sign * i64::from(!r.archived);
        self.bytes += sign * r.memory_bytes() as i64;
    }

    /// Adds `other`'s totals (chunks counted on their own cores at open).
    pub(super) fn merge(&mut self, other: &Totals) {
        for (c, p) in &other.per {
            let mine = self.per.entry(*c).or_default();
            mine.count += p.count;
            mine.score += p.score;
            mine.scored += p.scored;
        }
        self.live += other.live;
        self.bytes += other.bytes;
    }

    /// Records in `c` (archived included).
    pub(super) fn count(&self, c: Collection) -> usize {
        self.per.get(&c).map_or(0, |p| p.count.max(0) as usize)
    }

    /// Memories not archived.
    pub fn live(&self) -> usize {
        self.live.max(0) as usize
    }

    /// What the records take in memory (`Record::memory_bytes` summed).
    pub fn bytes(&self) -> usize {
        self.bytes.max(0) as usize
    }

    /// Count, mean score and scored count of each collection that holds a record.
    pub fn collections(&self) -> BTreeMap<String, CollectionStats> {
        self.per
            .iter()
            .filter(|(_, p)| p.count > 0)
            .map(|(c, p)| {
                let stats = CollectionStats {
                    count: p.count as usize,
                    mean_score: p.score as f64 / SCORE_ONE / p.count as f64,
                    scored: p.scored.max(0) as usize,
                };
                (c.as_str().to_string(), stats)
            })
            .collect()
    }

    /// The totals of `records` counted afresh.
    pub(super) fn of<'a>(records: impl Iterator<Item = &'a Record>) -> Totals {
        let mut t = Totals::default();
        records.for_each(|r| t.add(r));
        t
    }
}

impl MemState {
    /// The records' running totals.
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// Takes `key`'s record out of the totals before an in-place change (`recount` after).
    pub(super) fn uncount(&mut self, key: u64) {
        if let Some(r) = self.records.get(&key) {
            self.totals.sub(r);
        }
    }

    /// Puts `key`'s record back into the totals after an in-place change.
    pub(super) fn recount(&mut self, key: u64) {
        if let Some(r) = self.records.get(&key) {
            self.totals.add(r);
        }
    }

    /// `f` on the record with `key`, the totals kept (`None`: no such record).
    pub(super) fn edit<R>(&mut self, key: u64, f: impl FnOnce(&mut Record) -> R) -> Option<R> {
        let r = self.records.get_mut(&key)?;
        self.totals.sub(r);
        let out = f(r);
        self.totals.add(r);
        Some(out)
    }

    /// Test builds: the running totals equal a walk of every record (after every op of a
    /// store small enough that the walk costs nothing).
    #[cfg(test)]
    pub(super) fn check_totals(&self) {
        if self.records.len() <= 2_000 {
            assert_eq!(
                self.totals,
                Totals::of(self.records()).normalised(&self.totals)
            );
        }
    }
}

#[cfg(test)]
impl Totals {
    /// `self` with an empty entry wherever `like` keeps one (a collection emptied keeps its
    /// zeroed entry in the running totals).
    fn normalised(mut self, like: &Totals) -> Totals {
        for c in like.per.keys() {
            self.per.entry(*c).or_default();
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ops::Op;
    use crate::store::Machine;

    #[test]
    fn the_totals_match_a_walk_and_give_the_walks_figures() {
        let mut s = MemState::new(4).unwrap();
        let mut ids = Vec::new();
        for i in 0..40 {
            let c = [Collection::Working, Collection::MemoryBank][i % 2];
            let mut r = Record::new(c, format!("note {i}"), 1);
            r.score = i as f64 / 40.0;
            r.uses = (i % 3) as u32;
            ids.push(r.id.clone());
            s.apply(&Op::Insert(Box::new(r)));
        }
        s.apply(&Op::Archive {
            id: ids[1].clone(),
            at: 2,
        });
        s.apply(&Op::Delete {
            id: ids[2].clone(),
            reason: "test".into(),
        });
        s.apply(&Op::Update {
            id: ids[3].clone(),
            content: Some("a much longer text than the one it had before".into()),
            tags: Some(vec!["t".into()]),
            importance: None,
            confidence: None,
            at: 3,
        });
        s.check_totals();
        let t = s.totals();
        assert_eq!(t.live(), 38);
        assert_eq!(
            t.bytes(),
            s.records().map(Record::memory_bytes).sum::<usize>()
        );
        let c = t.collections();
        let working: Vec<&Record> = s
            .records()
            .filter(|r| r.collection == Collection::Working)
            .collect();
        let w = &c["working"];
        assert_eq!(w.count, working.len());
        assert_eq!(w.scored, working.iter().filter(|r| r.uses > 0).count());
        let mean = working.iter().map(|r| r.score).sum::<f64>() / working.len() as f64;
        assert!(
            (w.mean_score - mean).abs() < 1e-9,
            "{} vs {mean}",
            w.mean_score
        );
        assert_eq!(s.count(Collection::MemoryBank), c["memory_bank"].count);
        assert!(
            !c.contains_key("history"),
            "an empty collection is not listed"
        );
    }
}
