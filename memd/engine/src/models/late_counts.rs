//! How many memories with token states hold each of the late-interaction model's token ids,
//! so MaxSim can weigh a query token by how rare it is in this store (its IDF): a shared common
//! token ("the", "?", a name every note repeats) counts for less than a rare one.
//!
//! Owns `TokenCounts`: per memory (key, text hash) its distinct token ids, per id the number
//! of memories holding it, and the weights a query's tokens get from them. Filled by the
//! background pass as it encodes a memory and, after a restart, by tokenising the memories
//! whose states came back (`late::plan`'s `uncounted`; no model run); dropped with the
//! states. Must never run the model, touch a file, or fail a read: a query against no counts
//! is scored unweighted.

use super::embed::{LateInteraction, QueryStates};
use super::late::{States, text_hash};
use std::collections::HashMap;

impl States {
    /// `query` with each row weighed by its token's IDF over the memories with states
    /// (`TokenCounts::weights`); as it is when nothing is counted yet or its ids are unknown.
    /// A lookup per query token under a read lock.
    pub fn weigh(&self, query: &QueryStates) -> QueryStates {
        let counts = self.counts.read().unwrap_or_else(|p| p.into_inner());
        let weights = counts.weights(query.ids());
        drop(counts);
        query.weighted(&weights)
    }

    /// Counts the token ids of each (key, text) (the tokenizer only, no model run). A text
    /// that does not tokenise counts with no ids (so it is not tried again every pass).
    pub fn count_texts(&self, model: &LateInteraction, texts: &[(u64, &str)]) {
        let ids: Vec<(u64, u32, Vec<i64>)> = texts
            .iter()
            .map(|(key, text)| {
                (
                    *key,
                    text_hash(text),
                    model.doc_ids(text).unwrap_or_default(),
                )
            })
            .collect();
        let mut counts = self.counts.write().unwrap_or_else(|p| p.into_inner());
        for (key, hash, ids) in ids {
            counts.add(key, hash, &ids);
        }
    }

    /// Counts `key`'s `content` by token ids the caller has (`count_texts` tokenises).
    pub fn count_ids(&self, key: u64, content: &str, ids: &[i64]) {
        let mut counts = self.counts.write().unwrap_or_else(|p| p.into_inner());
        counts.add(key, text_hash(content), ids);
    }

    /// (memories counted, bytes the counts hold).
    pub fn counts_size(&self) -> (usize, usize) {
        let counts = self.counts.read().unwrap_or_else(|p| p.into_inner());
        (counts.docs(), counts.bytes())
    }
}

/// BERT uncased `[SEP]`; with `[CLS]` and the query marker (a query's first two rows) the
/// rows that stand for no word of the query.
const SEP: i64 = 102;

/// Document counts of token ids over the memories with token states.
#[derive(Default)]
pub struct TokenCounts {
    /// Memory key → (text hash, its distinct token ids). The model's vocabulary (30,522)
    /// fits 16 bits: ~2 bytes an id, ~60-100 bytes a memory.
    by_key: HashMap<u64, (u32, Box<[u16]>)>,
    /// Token id → memories holding it.
    df: Vec<u32>,
}

impl TokenCounts {
    /// Counts `key`'s text (`hash`) by its token ids, in place of what it held before.
    pub fn add(&mut self, key: u64, hash: u32, ids: &[i64]) {
        self.remove(key);
        let mut distinct: Vec<u16> = ids
            .iter()
            .filter_map(|&id| u16::try_from(id).ok())
            .collect();
        distinct.sort_unstable();
        distinct.dedup();
        for &id in &distinct {
            let id = usize::from(id);
            if self.df.len() <= id {
                self.df.resize(id + 1, 0);
            }
            self.df[id] += 1;
        }
        self.by_key.insert(key, (hash, distinct.into_boxed_slice()));
    }

    /// Stops counting `key`.
    pub fn remove(&mut self, key: u64) {
        if let Some((_, ids)) = self.by_key.remove(&key) {
            for id in ids.iter() {
                let df = &mut self.df[usize::from(*id)];
                *df = df.saturating_sub(1);
            }
        }
    }

    /// Keeps only the memories `keep` accepts.
    pub fn retain(&mut self, keep: impl Fn(u64) -> bool) {
        let gone: Vec<u64> = self.by_key.keys().copied().filter(|&k| !keep(k)).collect();
        for key in gone {
            self.remove(key);
        }
    }

    /// Whether `key` is counted with the text whose hash is `hash`.
    pub fn has(&self, key: u64, hash: u32) -> bool {
        self.by_key.get(&key).is_some_and(|(h, _)| *h == hash)
    }

    /// Memories counted.
    pub fn docs(&self) -> usize {
        self.by_key.len()
    }

    /// Memories holding `id`.
    pub fn df(&self, id: i64) -> u32 {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.df.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// Bytes held, for memory accounting (an estimate of the map's entries).
    pub fn bytes(&self) -> usize {
        let ids: usize = self.by_key.values().map(|(_, ids)| ids.len() * 2).sum();
        ids + self.by_key.len() * 40 + self.df.len() * 4
    }

    /// Each row of a query (`ids`: `[CLS] [unused0] … [SEP]`) weighed by its token's IDF
    /// here, ln((N + 1) / (df + 0.5)); the rows of no word (the first two, `[SEP]`) by the
    /// mean of the others. Empty (unweighted) before any memory is counted.
    pub fn weights(&self, ids: &[i64]) -> Vec<f32> {
        if self.by_key.is_empty() || ids.is_empty() {
            return Vec::new();
        }
        let n = self.docs() as f32;
        let marker = |i: usize| i < 2 || ids[i] == SEP;
        let idf = |id: i64| ((n + 1.0) / (self.df(id) as f32 + 0.5)).ln();
        let words: Vec<f32> = (0..ids.len())
            .filter(|&i| !marker(i))
            .map(|i| idf(ids[i]))
            .collect();
        let mean = words.iter().sum::<f32>() / words.len().max(1) as f32;
        (0..ids.len())
            .map(|i| if marker(i) { mean } else { idf(ids[i]) })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_adds_replacements_and_removals() {
        let mut c = TokenCounts::default();
        c.add(1, 10, &[101, 2, 7592, 7592, 2088, 102]);
        c.add(2, 20, &[101, 2, 7592, 102]);
        assert_eq!((c.docs(), c.df(7592), c.df(2088), c.df(9999)), (2, 2, 1, 0));
        // A new text of memory 1 replaces its old ids.
        c.add(1, 11, &[101, 2, 3000, 102]);
        assert_eq!((c.docs(), c.df(7592), c.df(2088), c.df(3000)), (2, 1, 0, 1));
        assert!(c.has(1, 11) && !c.has(1, 10) && !c.has(3, 0));
        c.retain(|k| k == 1);
        assert_eq!((c.docs(), c.df(7592), c.df(101)), (1, 0, 1));
        c.remove(1);
        assert_eq!((c.docs(), c.df(101)), (0, 0));
        assert!(c.weights(&[101, 1, 7592, 102]).is_empty());
    }

    #[test]
    fn a_rare_token_weighs_more_and_markers_take_the_mean() {
        let mut c = TokenCounts::default();
        for key in 0..9 {
            c.add(key, 0, &[101, 2, 1996, 102]);
        }
        c.add(9, 0, &[101, 2, 1996, 24046, 102]);
        // Query `[CLS] [unused0] the kubernetes [SEP]`.
        let w = c.weights(&[101, 1, 1996, 24046, 102]);
        let (the, rare) = ((11.0f32 / 10.5).ln(), (11.0f32 / 1.5).ln());
        assert!(
            (w[2] - the).abs() < 1e-6 && (w[3] - rare).abs() < 1e-6,
            "{w:?}"
        );
        let mean = (the + rare) / 2.0;
        for i in [0, 1, 4] {
            assert!((w[i] - mean).abs() < 1e-6, "{w:?}");
        }
    }

    fn basis(i: usize) -> Vec<f32> {
        let mut v = vec![0f32; crate::models::embed::DIMS];
        v[i] = 1.0;
        v
    }

    #[test]
    fn reorder_weighs_a_rare_query_token_over_a_common_one() {
        use crate::models::embed::TokenStates;
        use crate::models::late::reorder_within;
        // Query `[CLS] [unused0] the kubernetes [SEP]`: rows 0-1 and 4 match nothing, row 2
        // ("the") along axis 0, row 3 ("kubernetes") along axis 1.
        let ids = vec![101, 1, 1996, 24046, 102];
        let rows = [5, 6, 0, 1, 7].map(basis).to_vec();
        let query = QueryStates::from_rows(rows).with_ids(ids);
        // Memory 1 matches "the" fully; memory 2 matches "kubernetes" at 0.8.
        let states = States::default();
        let mut near = basis(1);
        near[1] = 0.8;
        near[2] = 0.6;
        states
            .insert(1, "a", TokenStates::quantize(&[basis(0)]))
            .unwrap();
        states
            .insert(2, "b", TokenStates::quantize(&[near]))
            .unwrap();
        let keyed = [(1, "a", 0.0), (2, "b", 0.0)];
        // Nothing counted: every token counts the same, the shared word wins.
        assert_eq!(reorder_within(&states, &query, &keyed, 2, None).0, [0, 1]);
        // Every memory holds "the", one holds "kubernetes": the rare word wins.
        {
            let mut counts = states.counts.write().unwrap();
            for key in 1..=10 {
                counts.add(key, 0, &[101, 2, 1996, 102]);
            }
            counts.add(11, 0, &[101, 2, 1996, 24046, 102]);
        }
        assert_eq!(reorder_within(&states, &query, &keyed, 2, None).0, [1, 0]);
        // A query without ids (a study's own rows) is scored unweighted.
        let plain = QueryStates::from_rows([5, 6, 0, 1, 7].map(basis).to_vec());
        assert_eq!(reorder_within(&states, &plain, &keyed, 2, None).0, [0, 1]);
    }

    #[test]
    fn counts_are_dropped_with_the_states_and_rebuilt_for_states_without_them() {
        use crate::models::embed::TokenStates;
        use crate::models::late::{plan, text_hash};
        use crate::state::ops::{Op, Output};
        use crate::store::Machine;
        let mut s = crate::state::MemState::new(crate::models::embed::DIMS).unwrap();
        let mut keys = Vec::new();
        for i in 0..2 {
            let r =
                crate::record::Record::new(proto::Collection::MemoryBank, format!("note {i}"), i);
            match s.apply(&Op::Insert(Box::new(r))) {
                Output::Inserted { key, .. } => keys.push(key),
                other => panic!("{other:?}"),
            }
        }
        let states = States::default();
        for (i, key) in keys.iter().enumerate() {
            let text = format!("note {i}");
            states
                .insert(*key, &text, TokenStates::quantize(&[basis(0)]))
                .unwrap();
        }
        // States without counts (as after a restart): the plan lists them to tokenise.
        let p = plan(&states, &s, usize::MAX);
        let mut uncounted: Vec<u64> = p.uncounted.iter().map(|(k, _)| *k).collect();
        uncounted.sort_unstable();
        let mut all = keys.clone();
        all.sort_unstable();
        assert_eq!(uncounted, all);
        for (key, text) in &p.uncounted {
            let mut counts = states.counts.write().unwrap();
            counts.add(*key, text_hash(text), &[101, 2, 3000, 102]);
        }
        assert!(plan(&states, &s, usize::MAX).uncounted.is_empty());
        assert_eq!(states.counts_size().0, 2);
        // Only the newest kept: the other's counts go with its states.
        let keep = [keys[1]].into_iter().collect();
        states.retain(&keep, &p.live);
        let counts = states.counts.read().unwrap();
        assert_eq!((counts.docs(), counts.df(3000)), (1, 1));
        assert!(counts.has(keys[1], text_hash("note 1")));
    }
}
