//! The id lookup: every current and former public id → the key of the memory that has it.
//!
//! Owns `Ids`, which keeps no copy of the ids: a slot holds a 64-bit hash of the id and the
//! key, and a match is confirmed against the record's own ids (a map of `String`s held each
//! id a second time, ~100 bytes a memory at 1M with its slots; bench/EVAL.md section 28). An
//! id whose hash slot belongs to another id (a collision) is kept whole in `spill`. The hash is
//! SipHash with a key drawn per process, so ids from imports cannot be chosen to collide. Must
//! never answer for an id the record it points to does not hold.

use super::Records;
use crate::record::Record;
use std::collections::HashMap;
use std::collections::hash_map::{Entry, RandomState};
use std::hash::BuildHasher;

/// Current and former ids → key (see the module's note). `S` hashes the ids (tests give one
/// that makes every id collide).
#[derive(Default)]
pub(super) struct Ids<S = RandomState> {
    hasher: S,
    /// Hash of an id → key, for the first id to take each hash.
    slots: HashMap<u64, u64, crate::index::FastHash>,
    /// Ids whose hash's slot stands for another id; looked at first, almost always empty.
    spill: HashMap<String, u64>,
}

/// Whether `r` has (or had) the id `id`.
fn holds(r: &Record, id: &str) -> bool {
    r.id == id || r.former_ids.iter().any(|f| f == id)
}

impl<S: BuildHasher> Ids<S> {
    fn hash(&self, id: &str) -> u64 {
        self.hasher.hash_one(id)
    }

    /// The key `id` leads to.
    pub fn get(&self, id: &str, records: &Records) -> Option<u64> {
        if let Some(&key) = self.spill.get(id) {
            return Some(key);
        }
        let key = *self.slots.get(&self.hash(id))?;
        records.get(&key).filter(|r| holds(r, id)).map(|_| key)
    }

    pub fn contains(&self, id: &str, records: &Records) -> bool {
        self.get(id, records).is_some()
    }

    /// `id` now leads to `key` (whatever it led to before).
    pub fn insert(&mut self, id: &str, key: u64, records: &Records) {
        if let Some(k) = self.spill.get_mut(id) {
            *k = key;
            return;
        }
        let h = self.hash(id);
        let stands_for_id = match self.slots.get(&h) {
            None => true,
            Some(&held) => records.get(&held).is_none_or(|r| {
                // The slot is this id's unless its record holds another id of the same hash.
                let others = std::iter::once(&r.id).chain(&r.former_ids);
                let mut others = others.filter(|o| *o != id);
                holds(r, id) && !others.any(|o| self.hash(o) == h)
            }),
        };
        if stands_for_id {
            self.slots.insert(h, key);
        } else {
            self.spill.insert(id.to_owned(), key);
        }
    }

    /// `id` leads to `key` unless it already leads somewhere.
    pub fn insert_absent(&mut self, id: &str, key: u64, records: &Records) {
        if !self.contains(id, records) {
            self.insert(id, key, records);
        }
    }

    /// Forgets `id` if it leads to `key`.
    pub fn remove_if(&mut self, id: &str, key: u64, records: &Records) {
        if let Some(&k) = self.spill.get(id) {
            if k == key {
                self.spill.remove(id);
            }
            return;
        }
        let h = self.hash(id);
        if self.slots.get(&h) == Some(&key) && records.get(&key).is_some_and(|r| holds(r, id)) {
            self.slots.remove(&h);
        }
    }

    /// Fills an empty lookup from records in order (a later record's claim on an id wins),
    /// before they are in the key map: a slot already taken is settled by `settle` once they are.
    pub fn fill<'a>(
        &mut self,
        records: impl Iterator<Item = &'a Record>,
        n: usize,
    ) -> Vec<(String, u64)> {
        self.slots.clear();
        self.spill.clear();
        self.slots.reserve(n);
        let mut taken = Vec::new();
        for r in records {
            for id in std::iter::once(&r.id).chain(&r.former_ids) {
                match self.slots.entry(self.hasher.hash_one(id.as_str())) {
                    Entry::Vacant(v) => {
                        v.insert(r.key);
                    }
                    Entry::Occupied(_) => taken.push((id.clone(), r.key)),
                }
            }
        }
        taken
    }

    /// The claims `fill` set aside, in their order, now that the records are in the key map.
    pub fn settle(&mut self, taken: Vec<(String, u64)>, records: &Records) {
        for (id, key) in taken {
            self.insert(&id, key, records);
        }
    }

    /// Heap bytes the lookup takes: slots and spilled ids (`footprint_tests`).
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        let table = |capacity: usize, slot: usize| {
            let buckets = (capacity * 8).div_ceil(7).next_power_of_two();
            buckets * (slot + 1)
        };
        table(self.slots.capacity(), 16)
            + table(self.spill.capacity(), size_of::<(String, u64)>())
            + self.spill.keys().map(String::capacity).sum::<usize>()
    }

    #[cfg(test)]
    pub fn spilled(&self) -> usize {
        self.spill.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::Collection;
    use std::hash::{BuildHasherDefault, Hasher};

    /// Hashes every id to the same value, so every id after the first collides.
    #[derive(Default)]
    struct Same;
    impl Hasher for Same {
        fn finish(&self) -> u64 {
            7
        }
        fn write(&mut self, _: &[u8]) {}
    }
    type Colliding = Ids<BuildHasherDefault<Same>>;

    fn records(ids: &[(&str, &[&str])]) -> Records {
        let mut out = Records::default();
        for (i, (id, former)) in ids.iter().enumerate() {
            let key = i as u64 + 1;
            let mut r = Record::new(Collection::History, format!("text {key}"), 1);
            r.key = key;
            r.id = id.to_string();
            r.former_ids = former.iter().map(|f| f.to_string()).collect();
            out.insert(key, Box::new(r));
        }
        out
    }

    #[test]
    fn colliding_ids_each_lead_to_their_own_memory() {
        let recs = records(&[("a", &[]), ("b", &["old_b"]), ("c", &[])]);
        let mut ids = Colliding::default();
        for (key, r) in &recs {
            ids.insert(&r.id, *key, &recs);
            for f in &r.former_ids {
                ids.insert_absent(f, *key, &recs);
            }
        }
        assert_eq!(ids.spilled(), 3, "one slot for four ids of one hash");
        for (key, r) in &recs {
            assert_eq!(ids.get(&r.id, &recs), Some(*key));
        }
        assert_eq!(ids.get("old_b", &recs), Some(2));
        assert_eq!(
            ids.get("d", &recs),
            None,
            "a hash match alone is not the id"
        );
        // Forgetting one leaves the others found, the slot's owner included.
        let first = recs.values().find(|r| !ids.spill.contains_key(&r.id));
        let first = first.map(|r| (r.id.clone(), r.key)).unwrap();
        let (other, other_key) = if first.0 == "c" { ("a", 1) } else { ("c", 3) };
        ids.remove_if(other, other_key, &recs);
        assert_eq!(ids.get(other, &recs), None);
        assert_eq!(ids.get(&first.0, &recs), Some(first.1));
        ids.remove_if(&first.0, first.1 + 10, &recs);
        assert_eq!(
            ids.get(&first.0, &recs),
            Some(first.1),
            "only if it leads there"
        );
    }

    #[test]
    fn a_later_claim_wins_in_a_fill_as_in_inserts() {
        // Memory 3 had memory 1's id before: read in order, the id is 3's.
        let recs = records(&[("a", &[]), ("b", &[]), ("c", &["a"])]);
        for colliding in [false, true] {
            let in_order = || (1..=3).map(|k| &*recs[&k]);
            let got = if colliding {
                let mut ids = Colliding::default();
                let taken = ids.fill(in_order(), 3);
                ids.settle(taken, &recs);
                ["a", "b", "c"].map(|id| ids.get(id, &recs))
            } else {
                let mut ids = Ids::<RandomState>::default();
                let taken = ids.fill(in_order(), 3);
                ids.settle(taken, &recs);
                ["a", "b", "c"].map(|id| ids.get(id, &recs))
            };
            assert_eq!(got, [Some(3), Some(2), Some(3)], "colliding: {colliding}");
        }
    }
}
