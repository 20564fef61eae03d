//! In-memory BM25 index over memory contents, with incremental insert and remove.
//!
//! Owns the documents' slots (key, length, a check of their terms), the term dictionary
//! (`lexical_terms`), the posting lists (`lexical_postings`) and the index's image as bytes
//! (`lexical_image`: the state machine saves it with each snapshot and loads it at start
//! instead of tokenising every memory). Must never do file I/O itself, never decide final
//! ranking (callers fuse it with vector results) and never lock internally: memd wraps it in a
//! `RwLock`, and `search` is `&self` so many readers can score at once.
//!
//! BM25 with k1 = 1.2 and b = 0.5. Measured on LoCoMo (BM25 alone, 762 questions): b 0.75 gave
//! R@5 58.7 / MRR 0.465, b 0.5 60.0 / 0.477, b 0.3 60.9 / 0.485; k1 0.9–1.5 moved nothing
//! beyond noise. b = 0.5 keeps most of the gain while still damping long ingested book chunks,
//! which would otherwise win on raw term counts; LoCoMo has no long documents to test that.
//!
//! No document keeps its own term list: a removal is given the text that was inserted and
//! tokenises it again (checked against the document's stored check; on a mismatch every list
//! is searched, slower but never wrong). At a million memories the term lists were a third of
//! the index. The hot path of a search is tokenising and the term lookup, then one pass over
//! each query term's postings with the documents' lengths in one dense array.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hasher;

use super::fxhash::{FastHash, FxHasher};
use super::tokenize::for_each_term;

#[path = "lexical_image.rs"]
mod image;
#[path = "lexical_postings.rs"]
mod postings;
#[path = "lexical_terms.rs"]
mod terms;

use postings::{Postings, clamp_tf};
use terms::Terms;

const K1: f32 = 1.2;
const B: f32 = 0.5;

/// BM25 index. Keys are the store's memory keys.
#[derive(Default)]
pub struct Lexical {
    terms: Terms,
    postings: Postings,
    /// Per slot: whether a document is there, its key, its length in terms (with repeats, for
    /// length normalisation) and `terms_check` of its terms.
    present: Vec<bool>,
    keys: Vec<u64>,
    lens: Vec<u32>,
    checks: Vec<u64>,
    free_slots: Vec<u32>,
    slot_of: HashMap<u64, u32, FastHash>,
    total_len: u64,
    /// Reused by `insert` and `remove` to collect term ids without allocating per document.
    scratch_terms: Vec<u32>,
    scratch_word: String,
}

impl Lexical {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of indexed documents.
    pub fn len(&self) -> usize {
        self.slot_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slot_of.is_empty()
    }

    /// Whether `key` is indexed.
    pub fn contains(&self, key: u64) -> bool {
        self.slot_of.contains_key(&key)
    }

    /// Every indexed key, in no particular order.
    pub fn indexed_keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.slot_of.keys().copied()
    }

    /// Bytes held, by the tables' capacities (no walk beyond the posting tails' map).
    pub fn memory_bytes(&self) -> usize {
        // A hash map slot is its entry plus one control byte.
        let slots = self.slot_of.capacity() * (size_of::<(u64, u32)>() + 1);
        let per_slot = size_of::<bool>() + size_of::<u64>() * 2 + size_of::<u32>();
        self.terms.memory_bytes()
            + self.postings.memory_bytes()
            + slots
            + self.keys.capacity() * per_slot
            + self.free_slots.capacity() * size_of::<u32>()
            + self.scratch_terms.capacity() * size_of::<u32>()
    }

    /// Indexes `text` under `key`. A key already indexed is replaced, but without its old text
    /// that takes a search of every list: callers `remove` first.
    pub fn insert(&mut self, key: u64, text: &str) {
        if let Some(slot) = self.slot_of.get(&key).copied() {
            self.drop_slot(key, slot, None);
        }
        let mut ids = std::mem::take(&mut self.scratch_terms);
        let mut word = std::mem::take(&mut self.scratch_word);
        ids.clear();
        let terms = &mut self.terms;
        for_each_term(text, &mut word, |t| ids.extend(terms.intern(t)));
        let len = ids.len() as u32;
        ids.sort_unstable();
        let slot = self.take_slot();
        for run in ids.chunk_by(|a, b| a == b) {
            self.postings.push(run[0], slot, clamp_tf(run.len()));
        }
        let s = slot as usize;
        (self.present[s], self.keys[s]) = (true, key);
        (self.lens[s], self.checks[s]) = (len, terms_check(&ids));
        self.slot_of.insert(key, slot);
        self.total_len += u64::from(len);
        self.scratch_terms = ids;
        self.scratch_word = word;
        if self.postings.wants_compact() {
            self.compact();
        }
    }

    /// Forgets `key`, whose indexed text was `text`; unknown keys are ignored.
    pub fn remove(&mut self, key: u64, text: &str) {
        if let Some(slot) = self.slot_of.get(&key).copied() {
            self.drop_slot(key, slot, Some(text));
        }
    }

    /// Packs every posting list into the flat runs (each sorted by slot) and drops the tails;
    /// `insert` does it by itself as they grow. Call after building an index in bulk.
    pub fn compact(&mut self) {
        self.postings.compact(self.terms.len());
        self.free_slots.shrink_to_fit();
    }

    /// Top `k` keys by BM25 for `query`, best first, among keys for which `keep` is true.
    /// An empty query, or one made only of unknown terms or stopwords, finds nothing.
    pub fn search(&self, query: &str, k: usize, keep: &dyn Fn(u64) -> bool) -> Vec<(u64, f32)> {
        if k == 0 || self.is_empty() {
            return Vec::new();
        }
        let terms = self.query_terms(query);
        if terms.is_empty() {
            return Vec::new();
        }
        SCRATCH.with(|cell| {
            let mut scratch = cell.borrow_mut();
            self.score_into(&terms, &mut scratch);
            let best = self.top_k(&scratch, k, keep);
            scratch.reset();
            best
        })
    }

    /// BM25's IDF of `word`'s first term over the indexed memories (a term no memory holds:
    /// the highest); `None` when the word has no term (a stopword, punctuation). For studies
    /// (`memd-eval fusion`'s query-token rules).
    pub fn word_idf(&self, word: &str) -> Option<f32> {
        let mut buf = String::new();
        let mut first: Option<String> = None;
        for_each_term(word, &mut buf, |t| {
            first.get_or_insert_with(|| t.to_owned());
        });
        let term = first?;
        let df = self.terms.get(&term).map_or(0, |id| self.postings.df(id));
        Some(idf(self.len() as f32, df as f32))
    }

    /// Takes `slot` (holding `key`) out of every list it is in. With the inserted `text` its
    /// terms are found again; without it, or when the text's terms are not the check's, every
    /// list is searched.
    fn drop_slot(&mut self, key: u64, slot: u32, text: Option<&str>) {
        let s = slot as usize;
        let mut ids = std::mem::take(&mut self.scratch_terms);
        let known = text.is_some_and(|text| self.known_terms(text, &mut ids));
        let fast = known && terms_check(&ids) == self.checks[s];
        let mut all_found = fast;
        if fast {
            for run in ids.chunk_by(|a, b| a == b) {
                all_found &= self.postings.remove(run[0], slot);
            }
        }
        if !all_found {
            for term in 0..self.terms.len() as u32 {
                self.postings.remove(term, slot);
            }
        }
        self.scratch_terms = ids;
        self.slot_of.remove(&key);
        self.total_len -= u64::from(self.lens[s]);
        (self.present[s], self.lens[s], self.checks[s]) = (false, 0, 0);
        self.free_slots.push(slot);
        if self.postings.wants_compact() {
            self.compact();
        }
    }

    /// `text`'s term ids, sorted with repeats, into `ids`; false if a term has no id (so the
    /// text is not one that was inserted).
    fn known_terms(&mut self, text: &str, ids: &mut Vec<u32>) -> bool {
        ids.clear();
        let mut known = true;
        let terms = &self.terms;
        for_each_term(text, &mut self.scratch_word, |t| match terms.get(t) {
            Some(id) => ids.push(id),
            None => known = false,
        });
        ids.sort_unstable();
        known
    }

    fn take_slot(&mut self) -> u32 {
        if let Some(slot) = self.free_slots.pop() {
            return slot;
        }
        self.present.push(false);
        self.keys.push(0);
        self.lens.push(0);
        self.checks.push(0);
        (self.keys.len() - 1) as u32
    }

    /// Distinct known term ids of the query; repeats of a query word do not count twice.
    fn query_terms(&self, query: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        let mut word = String::new();
        for_each_term(query, &mut word, |t| ids.extend(self.terms.get(t)));
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn score_into(&self, terms: &[u32], scratch: &mut Scratch) {
        scratch.ensure_len(self.keys.len());
        let n = self.len() as f32;
        let avg_len = (self.total_len as f32 / n).max(1.0);
        for &term in terms {
            let df = self.postings.df(term);
            if df == 0 {
                continue;
            }
            let idf = idf(n, df as f32);
            self.postings.for_each(term, |slot, tf| {
                let len = self.lens[slot as usize] as f32;
                let tf = f32::from(tf);
                let norm = K1 * (1.0 - B + B * len / avg_len);
                scratch.add(slot, idf * tf * (K1 + 1.0) / (tf + norm));
            });
        }
    }

    fn top_k(&self, scratch: &Scratch, k: usize, keep: &dyn Fn(u64) -> bool) -> Vec<(u64, f32)> {
        let k = k.min(scratch.touched.len());
        let mut heap: BinaryHeap<Ranked> = BinaryHeap::with_capacity(k + 1);
        for &slot in &scratch.touched {
            if !self.present[slot as usize] {
                continue;
            }
            let key = self.keys[slot as usize];
            let candidate = Ranked {
                score: scratch.scores[slot as usize],
                key,
            };
            // Check the cheap heap bound before calling the caller's filter.
            if heap.len() == k && heap.peek().is_some_and(|worst| candidate >= *worst) {
                continue;
            }
            if !keep(key) {
                continue;
            }
            heap.push(candidate);
            if heap.len() > k {
                heap.pop();
            }
        }
        let mut out: Vec<Ranked> = heap.into_vec();
        out.sort_unstable();
        out.into_iter().map(|r| (r.key, r.score)).collect()
    }
}

/// BM25's IDF of a term held by `df` of `n` documents.
fn idf(n: f32, df: f32) -> f32 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// A check of a document's terms (`ids`: sorted, with repeats), so a removal can tell whether
/// the text it was given is the one inserted.
fn terms_check(ids: &[u32]) -> u64 {
    let mut h = FxHasher::default();
    h.write_usize(ids.len());
    for &id in ids {
        h.write_u32(id);
    }
    h.finish()
}

/// Orders best first: higher score, then lower key (so ties are deterministic). The heap's
/// maximum is therefore the worst kept candidate.
#[derive(Clone, Copy, PartialEq)]
struct Ranked {
    score: f32,
    key: u64,
}

impl Eq for Ranked {}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.key.cmp(&other.key))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Per-thread score accumulator, reused across queries so a search allocates only its result
/// (and the buffers grow once to the collection size instead of per query): 4 bytes per
/// document slot per searching thread, 400 KB at 100k documents.
#[derive(Default)]
struct Scratch {
    scores: Vec<f32>,
    touched: Vec<u32>,
}

impl Scratch {
    fn ensure_len(&mut self, n: usize) {
        if self.scores.len() < n {
            self.scores.resize(n, 0.0);
        }
    }

    fn add(&mut self, slot: u32, s: f32) {
        let cell = &mut self.scores[slot as usize];
        if *cell == 0.0 {
            self.touched.push(slot);
        }
        *cell += s;
    }

    fn reset(&mut self) {
        for &slot in &self.touched {
            self.scores[slot as usize] = 0.0;
        }
        self.touched.clear();
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(_: u64) -> bool {
        true
    }

    fn keys(hits: &[(u64, f32)]) -> Vec<u64> {
        hits.iter().map(|h| h.0).collect()
    }

    fn sample() -> Lexical {
        let mut ix = Lexical::new();
        ix.insert(
            1,
            "The build failed because the linker could not find libssl",
        );
        ix.insert(2, "Prefer ripgrep over grep when searching the repository");
        ix.insert(3, "User likes short answers and dislikes long explanations");
        ix.insert(4, "Run cargo clippy before every commit in this repository");
        ix
    }

    /// A word in one memory is rarer than one in two; a word in none the rarest; a stopword or
    /// punctuation has no term. Stemmed like documents ("repositories" is "repository").
    #[test]
    fn word_idf_ranks_words_by_how_few_memories_hold_them() {
        let ix = sample();
        let (one, two) = (
            ix.word_idf("ripgrep").unwrap(),
            ix.word_idf("repositories").unwrap(),
        );
        let none = ix.word_idf("kubernetes").unwrap();
        assert!(none > one && one > two && two > 0.0, "{none} {one} {two}");
        assert_eq!(ix.word_idf("the"), None);
        assert_eq!(ix.word_idf("?"), None);
    }

    #[test]
    fn memory_grows_with_documents_and_shrinks_back_on_removal() {
        let mut ix = Lexical::new();
        let empty = ix.memory_bytes();
        ix.insert(1, "staging postgres listens on port 5433");
        let one = ix.memory_bytes();
        // Five new terms: their text and one posting each (a slot and a count) at least.
        assert!(one >= empty + 5 * (4 + 4 + 2), "{empty} → {one}");
        let note = |k: u64| format!("service{k} listens on port {}", 6000 + k);
        for k in 2..102 {
            ix.insert(k, &note(k));
        }
        let many = ix.memory_bytes();
        assert!(many > one + 100 * (4 + 4 + 2), "{one} → {many}");
        for k in 2..102 {
            ix.remove(k, &note(k));
        }
        ix.remove(1, "staging postgres listens on port 5433");
        // Tables keep their capacity; the emptied posting lists are gone.
        assert!(ix.memory_bytes() < many);
    }

    #[test]
    fn exact_term_document_ranks_first() {
        let ix = sample();
        let hits = ix.search("why did the linker fail", 3, &all);
        assert_eq!(hits.first().map(|h| h.0), Some(1));
        let hits = ix.search("clippy", 3, &all);
        assert_eq!(keys(&hits), [4]);
        assert!(hits[0].1 > 0.0);
    }

    #[test]
    fn rare_term_outweighs_common_term() {
        let ix = sample();
        // "repository" is in two documents, "ripgrep" in one: the ripgrep document wins.
        let hits = ix.search("repository ripgrep", 4, &all);
        assert_eq!(keys(&hits), [2, 4]);
        assert!(hits[0].1 > hits[1].1);
    }

    #[test]
    fn empty_and_unknown_queries_find_nothing() {
        let ix = sample();
        assert!(ix.search("", 5, &all).is_empty());
        assert!(ix.search("   ?!", 5, &all).is_empty());
        assert!(ix.search("the and of", 5, &all).is_empty());
        assert!(ix.search("kubernetes helm", 5, &all).is_empty());
        assert!(ix.search("clippy", 0, &all).is_empty());
        assert_eq!(ix.search("repository", usize::MAX, &all).len(), 2);
        assert!(Lexical::new().search("clippy", 5, &all).is_empty());
    }

    #[test]
    fn removal_and_reinsert() {
        let mut ix = sample();
        assert_eq!(ix.len(), 4);
        let clippy = "Run cargo clippy before every commit in this repository";
        ix.remove(4, clippy);
        ix.remove(4, clippy);
        ix.remove(99, clippy);
        assert_eq!(ix.len(), 3);
        assert!(ix.search("clippy", 5, &all).is_empty());
        assert_eq!(keys(&ix.search("repository", 5, &all)), [2]);
        ix.insert(4, "Run cargo clippy before every commit in this repository");
        assert_eq!(ix.len(), 4);
        assert_eq!(keys(&ix.search("clippy", 5, &all)), [4]);
        assert_eq!(keys(&ix.search("repository", 5, &all)).len(), 2);
    }

    #[test]
    fn insert_replaces_earlier_text() {
        let mut ix = sample();
        ix.insert(3, "User prefers tabs");
        assert_eq!(ix.len(), 4);
        assert!(ix.search("explanations", 5, &all).is_empty());
        assert_eq!(keys(&ix.search("tabs", 5, &all)), [3]);
    }

    #[test]
    fn filter_and_k_limit_results() {
        let mut ix = Lexical::new();
        for key in 0..50u64 {
            ix.insert(key, &format!("shared word plus item{key}"));
        }
        let hits = ix.search("shared", 7, &|k| k % 2 == 1);
        assert_eq!(hits.len(), 7);
        assert!(hits.iter().all(|h| h.0 % 2 == 1));
        // equal scores tie-break by key, so the result is deterministic
        assert_eq!(keys(&hits), [1, 3, 5, 7, 9, 11, 13]);
        assert!(ix.search("shared", 5, &|_| false).is_empty());
    }

    #[test]
    fn scores_are_sorted_and_term_frequency_counts() {
        let mut ix = Lexical::new();
        ix.insert(1, "deploy");
        ix.insert(2, "deploy deploy deploy now");
        ix.insert(3, "unrelated text entirely");
        let hits = ix.search("deploy", 5, &all);
        assert_eq!(keys(&hits), [2, 1]);
        assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
    }

    #[test]
    fn slots_are_reused_after_removal() {
        let mut ix = Lexical::new();
        for round in 0..3u64 {
            for key in 0..100u64 {
                ix.insert(round * 1000 + key, "alpha beta");
            }
            for key in 0..100u64 {
                ix.remove(round * 1000 + key, "alpha beta");
            }
        }
        assert!(ix.is_empty());
        assert_eq!(ix.keys.len(), 100);
        assert_eq!(ix.total_len, 0);
    }

    /// Inserts, removals with the inserted text or another, replacing inserts and compactions,
    /// mixed: the index then answers as one built afresh from what is left.
    #[test]
    fn churn_with_compactions_answers_as_a_fresh_build() {
        let words = [
            "redis", "cache", "port", "deploy", "kafka", "lag", "tls", "cert", "vite",
        ];
        let text = |key: u64, round: u64| -> String {
            (0..1 + (key * 7 + round) % 6)
                .map(|i| words[((key * 31 + i * 17 + round * 5) % 9) as usize])
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut ix = Lexical::new();
        let mut live: std::collections::BTreeMap<u64, String> = Default::default();
        for round in 0..6u64 {
            for key in 0..400u64 {
                match (key + round) % 5 {
                    0 if live.contains_key(&key) => {
                        ix.remove(key, &live.remove(&key).unwrap());
                    }
                    // A text that is not the one inserted: the slow path, still exact.
                    1 if live.contains_key(&key) => {
                        live.remove(&key);
                        ix.remove(key, "kafka lag vite");
                    }
                    // Replacing without a removal first.
                    _ => {
                        ix.insert(key, &text(key, round));
                        live.insert(key, text(key, round));
                    }
                }
            }
            if round % 2 == 1 {
                ix.compact();
            }
        }
        let mut fresh = Lexical::new();
        for (&key, text) in &live {
            fresh.insert(key, text);
        }
        assert_eq!((ix.len(), ix.total_len), (fresh.len(), fresh.total_len));
        assert_eq!(ix.postings.len(), fresh.postings.len());
        for q in [
            "redis",
            "kafka lag",
            "tls cert vite",
            "deploy port cache redis",
        ] {
            let (got, want) = (ix.search(q, 50, &all), fresh.search(q, 50, &all));
            assert_eq!(keys(&got), keys(&want), "{q}");
            for (g, w) in got.iter().zip(&want) {
                assert!((g.1 - w.1).abs() < 1e-4, "{q}: {g:?} vs {w:?}");
            }
        }
    }

    /// Enough inserts compact the tails into runs by themselves.
    #[test]
    fn growth_compacts_by_itself() {
        let mut ix = Lexical::new();
        for key in 0..30_000u64 {
            ix.insert(key, &format!("word{} shared extra{}", key % 97, key % 13));
        }
        assert_eq!(ix.postings.len(), 90_000);
        assert!(
            ix.postings.tail_share() < 0.9,
            "{}",
            ix.postings.tail_share()
        );
        assert_eq!(ix.search("shared", 30_001, &all).len(), 30_000);
        let word5 = (0..30_000u64).filter(|k| k % 97 == 5).count();
        assert_eq!(ix.search("word5", 1000, &all).len(), word5);
    }
}
