//! `memd-eval fusion`'s query-token rules (issue 34): which of a query's tokens late
//! interaction's MaxSim counts and how much. Punctuation, the lexical index's stopwords and
//! ColBERT's markers (`[CLS]`, `[unused0]`, `[SEP]`) left out, or every token weighed by its
//! IDF over the store's memories' tokens.
//!
//! The `Weigh` family (section 13) reads document frequencies either from the question's own
//! store or from one store mixing every set's memories, as a user's daemon holds them; section
//! 16 adds two sources a mixed store cannot blur: the query's own candidates (what late
//! interaction scores: the fused 40 and the vector list's first 100), and the candidate's
//! collection (notes counted against notes, exchanges against exchanges).
//!
//! Owns the rules and the per-query weights they give; the rows are printed by `fusion`. Must
//! never decide a default by itself (the shipped rows come from `memd-eval retrieval`).

use memd_engine::models::embed::LateInteraction;
use std::collections::{HashMap, HashSet};

/// BERT uncased `[SEP]`.
const SEP: i64 = 102;

/// A query's tokens as MaxSim sees them: one entry per row of its states.
#[derive(Clone, Debug, Default)]
pub struct QueryTokens {
    /// Punctuation only.
    punct: Vec<bool>,
    /// A whole word the lexical index drops ("the", "do", "we").
    stop: Vec<bool>,
    /// `[CLS]`, the query marker or `[SEP]`.
    marker: Vec<bool>,
    /// ln(1 + (N - df + 0.5) / (df + 0.5)) over the store's memories' tokens.
    idf: Vec<f32>,
    /// The same over one store mixing every set's memories (every LoCoMo conversation given, the
    /// coding and holdout notes, the probe's three).
    global_idf: Vec<f32>,
    /// Per token, (memories holding it, memories) in the question's own store and in the
    /// mixed one, for the `Weigh` forms.
    local_df: Vec<(f32, f32)>,
    mixed_df: Vec<(f32, f32)>,
    /// The same over the query's candidates (set by `set_candidate_df` once they are known).
    cand_df: Vec<(f32, f32)>,
    /// The same over each collection of the mixed store: `[exchanges, notes]`.
    coll_df: [Vec<(f32, f32)>; 2],
    /// The same over the lexical index's terms: the IDF of the word the token belongs to
    /// (`None`: a marker, or a word without a term: a stopword, punctuation).
    word_idf: Vec<Option<f32>>,
}

/// Document frequency of every token id over a store's memories, and how many memories.
#[derive(Default)]
pub struct Vocabulary {
    df: HashMap<i64, u32>,
    docs: u32,
}

impl Vocabulary {
    /// Counts one memory's token ids.
    pub fn add(&mut self, ids: &[i64]) {
        self.docs += 1;
        for id in ids.iter().copied().collect::<HashSet<i64>>() {
            *self.df.entry(id).or_default() += 1;
        }
    }

    fn idf(&self, id: i64) -> f32 {
        let (df, n) = self.df(id);
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// (memories holding `id`, memories).
    fn df(&self, id: i64) -> (f32, f32) {
        let df = self.df.get(&id).copied().unwrap_or(0);
        (df as f32, self.docs as f32)
    }
}

/// Which store's document frequencies a `Weigh` rule reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Source {
    /// The question's own store (LoCoMo: its conversation): the upper bound.
    Own,
    /// One store mixing every set's memories, as a user's daemon holds them.
    Mixed,
    /// The memories late interaction scores for this query (the fused 40 and the vector
    /// list's first 100): known at scoring time, no counts to keep.
    Candidates,
    /// The mixed store's memories of the candidate's own collection: notes weigh a query's
    /// tokens by the notes' counts, exchanges by the exchanges'.
    Collection,
}

/// A memory's collection as `Source::Collection` counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A conversation's turn (the daemon's working and history collections).
    Exchange = 0,
    /// A note (memory bank, patterns, books).
    Note = 1,
}

/// The document frequencies a question's weights are read from, besides its own store.
#[derive(Default)]
pub struct Counts {
    /// Every set's memories together.
    pub mixed: Vocabulary,
    /// The same split by `Kind`.
    pub kinds: [Vocabulary; 2],
}

/// How a document frequency becomes a weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Form {
    /// ln((N + 1) / (df + 0.5)): BM25's IDF (what `Rule::Idf` uses).
    Smooth,
    /// ln(N / df), df at least 1: unsmoothed.
    Plain,
    /// ln((N + 1) / (df + 1)) + 1: every token keeps at least weight 1.
    PlusOne,
}

/// A token's weight: `form`'s IDF over `source`, held within [`floor`, `cap`], raised to
/// `alpha`. The markers take the mean of the query's other tokens' weights.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weigh {
    pub source: Source,
    pub form: Form,
    pub floor: f32,
    pub cap: f32,
    pub alpha: f32,
}

impl Weigh {
    pub fn weight(&self, (df, n): (f32, f32)) -> f32 {
        let idf = match self.form {
            Form::Smooth => ((n + 1.0) / (df + 0.5)).ln(),
            Form::Plain => (n.max(1.0) / df.max(1.0)).ln(),
            Form::PlusOne => ((n + 1.0) / (df + 1.0)).ln() + 1.0,
        };
        idf.clamp(self.floor, self.cap.max(self.floor))
            .max(0.0)
            .powf(self.alpha)
    }
}

/// The `Weigh` grid `memd-eval fusion` measures: every source, every form, floors 0 / 1 / 2,
/// caps none / 3 / 5, α 0.5 and 1.
pub fn weigh_grid() -> Vec<Rule> {
    let mut out = Vec::new();
    for source in [
        Source::Own,
        Source::Mixed,
        Source::Candidates,
        Source::Collection,
    ] {
        for form in [Form::Smooth, Form::Plain, Form::PlusOne] {
            for floor in [0.0, 1.0, 2.0] {
                for cap in [f32::INFINITY, 3.0, 5.0] {
                    for alpha in [1.0, 0.5] {
                        out.push(Rule::Weigh(Weigh {
                            source,
                            form,
                            floor,
                            cap,
                            alpha,
                        }));
                    }
                }
            }
        }
    }
    out
}

impl QueryTokens {
    pub fn of(
        model: &LateInteraction,
        ids: &[i64],
        vocab: &Vocabulary,
        counts: &Counts,
        word_idf: Vec<Option<f32>>,
    ) -> QueryTokens {
        let global = &counts.mixed;
        let df = |v: &Vocabulary| ids.iter().map(|&id| v.df(id)).collect();
        let text = |id: i64| model.token_text(id).unwrap_or_default();
        QueryTokens {
            punct: ids
                .iter()
                .map(|&id| {
                    let t = text(id);
                    !t.is_empty() && t.chars().all(|c| c.is_ascii_punctuation())
                })
                .collect(),
            stop: ids.iter().map(|&id| model.is_stopword(id)).collect(),
            marker: ids
                .iter()
                .enumerate()
                .map(|(i, &id)| i < 2 || id == SEP)
                .collect(),
            idf: ids.iter().map(|&id| vocab.idf(id)).collect(),
            global_idf: ids.iter().map(|&id| global.idf(id)).collect(),
            local_df: df(vocab),
            mixed_df: df(global),
            cand_df: Vec::new(),
            coll_df: [df(&counts.kinds[0]), df(&counts.kinds[1])],
            word_idf,
        }
    }

    /// Counts the query's tokens over its candidates' token ids (`Source::Candidates`).
    pub fn set_candidate_df(&mut self, ids: &[i64], candidates: &[&[i64]]) {
        let mut v = Vocabulary::default();
        for c in candidates {
            v.add(c);
        }
        self.cand_df = ids.iter().map(|&id| v.df(id)).collect();
    }
}

/// Which query tokens MaxSim counts, and with what weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// Every token, weight 1 (what ships before this round).
    All,
    NoPunct,
    NoPunctMarkers,
    /// No punctuation, no stopwords.
    NoStop,
    /// No punctuation, no stopwords, no markers.
    NoStopMarkers,
    /// Every word token weighed by its IDF; the markers by the mean of the others.
    Idf,
    /// `Idf`, square-rooted.
    SqrtIdf,
    /// `Idf` with the document frequencies of one store mixing every set's memories.
    GlobalIdf,
    /// `NoStop`, the rest weighed by IDF.
    NoStopIdf,
    /// Every token weighed by its word's IDF in the lexical index; tokens of words without a
    /// term by the query's lowest, the markers by the mean.
    LexIdf,
    /// `LexIdf`, tokens of words without a term left out.
    LexIdfDrop,
    /// Every word token weighed by `Weigh`; the markers by the mean of the others.
    Weigh(Weigh),
}

pub const RULES: [Rule; 11] = [
    Rule::All,
    Rule::NoPunct,
    Rule::NoPunctMarkers,
    Rule::NoStop,
    Rule::NoStopMarkers,
    Rule::Idf,
    Rule::SqrtIdf,
    Rule::GlobalIdf,
    Rule::NoStopIdf,
    Rule::LexIdf,
    Rule::LexIdfDrop,
];

/// The weight of each query token under `rule` (all 1 when the rule would leave none), for a
/// note.
pub fn weights(rule: Rule, q: &QueryTokens) -> Vec<f32> {
    weights_for(rule, q, Kind::Note)
}

/// The weight of each query token under `rule` when scoring a memory of kind `kind` (only
/// `Source::Collection` tells the kinds apart).
pub fn weights_for(rule: Rule, q: &QueryTokens, kind: Kind) -> Vec<f32> {
    if matches!(rule, Rule::LexIdf | Rule::LexIdfDrop) {
        return lexical_weights(rule, q);
    }
    if let Rule::Weigh(weigh) = rule {
        return weigh_weights(weigh, q, kind);
    }
    let n = q.idf.len();
    let dropped = |i: usize| match rule {
        Rule::All | Rule::Idf | Rule::SqrtIdf | Rule::GlobalIdf => false,
        Rule::LexIdf | Rule::LexIdfDrop | Rule::Weigh(_) => false,
        Rule::NoPunct => q.punct[i],
        Rule::NoPunctMarkers => q.punct[i] || q.marker[i],
        Rule::NoStop | Rule::NoStopIdf => q.punct[i] || q.stop[i],
        Rule::NoStopMarkers => q.punct[i] || q.stop[i] || q.marker[i],
    };
    let idf = match rule {
        Rule::GlobalIdf => &q.global_idf,
        _ => &q.idf,
    };
    let words: Vec<f32> = (0..n)
        .filter(|&i| !q.marker[i] && !dropped(i))
        .map(|i| idf[i])
        .collect();
    let mean_idf = words.iter().sum::<f32>() / words.len().max(1) as f32;
    let mut w: Vec<f32> = (0..n)
        .map(|i| match (dropped(i), rule) {
            (true, _) => 0.0,
            (false, Rule::Idf | Rule::SqrtIdf | Rule::GlobalIdf | Rule::NoStopIdf) => {
                let idf = if q.marker[i] { mean_idf } else { idf[i] };
                if rule == Rule::SqrtIdf {
                    idf.sqrt()
                } else {
                    idf
                }
            }
            (false, _) => 1.0,
        })
        .collect();
    if w.iter().sum::<f32>() <= 0.0 {
        w = vec![1.0; n];
    }
    w
}

/// MaxSim under `weights`: the weighted mean of the per-token best matches.
pub fn weighted(per_token: &[f32], weights: &[f32]) -> f32 {
    let total: f32 = weights.iter().sum();
    let sum: f32 = per_token.iter().zip(weights).map(|(m, w)| m * w).sum();
    sum / total.max(f32::MIN_POSITIVE)
}

fn weigh_weights(weigh: Weigh, q: &QueryTokens, kind: Kind) -> Vec<f32> {
    let df = match weigh.source {
        Source::Own => &q.local_df,
        Source::Mixed => &q.mixed_df,
        Source::Candidates => &q.cand_df,
        Source::Collection => &q.coll_df[kind as usize],
    };
    let n = df.len();
    let words: Vec<f32> = (0..n)
        .filter(|&i| !q.marker[i])
        .map(|i| weigh.weight(df[i]))
        .collect();
    let mean = words.iter().sum::<f32>() / words.len().max(1) as f32;
    let mut w: Vec<f32> = (0..n)
        .map(|i| match q.marker[i] {
            true => mean,
            false => weigh.weight(df[i]),
        })
        .collect();
    if w.iter().sum::<f32>() <= 0.0 {
        w = vec![1.0; n];
    }
    w
}

fn lexical_weights(rule: Rule, q: &QueryTokens) -> Vec<f32> {
    let n = q.word_idf.len().min(q.marker.len());
    let known: Vec<f32> = q.word_idf.iter().flatten().copied().collect();
    let lowest = known.iter().copied().fold(f32::INFINITY, f32::min);
    let mean = known.iter().sum::<f32>() / known.len().max(1) as f32;
    let mut w: Vec<f32> = (0..n)
        .map(|i| match (q.marker[i], q.word_idf[i]) {
            (true, _) => mean,
            (false, Some(idf)) => idf,
            (false, None) if rule == Rule::LexIdf && lowest.is_finite() => lowest,
            (false, None) => 0.0,
        })
        .collect();
    if w.iter().sum::<f32>() <= 0.0 {
        w = vec![1.0; n];
    }
    w.resize(q.idf.len(), 0.0);
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[CLS] [unused0] the ship ? [SEP]`: a stopword, a word, punctuation.
    fn query() -> QueryTokens {
        QueryTokens {
            punct: vec![false, false, false, false, true, false],
            stop: vec![false, false, true, false, false, false],
            marker: vec![true, true, false, false, false, true],
            idf: vec![0.0, 5.0, 0.1, 2.0, 0.3, 0.0],
            global_idf: vec![0.0, 5.0, 0.2, 4.0, 0.6, 0.0],
            local_df: vec![
                (9.0, 9.0),
                (0.0, 9.0),
                (8.0, 9.0),
                (1.0, 9.0),
                (3.0, 9.0),
                (9.0, 9.0),
            ],
            mixed_df: vec![
                (90.0, 99.0),
                (0.0, 99.0),
                (50.0, 99.0),
                (1.0, 99.0),
                (9.0, 99.0),
                (99.0, 99.0),
            ],
            cand_df: Vec::new(),
            coll_df: [
                vec![(5.0, 10.0); 6],
                vec![
                    (0.0, 10.0),
                    (0.0, 10.0),
                    (1.0, 10.0),
                    (9.0, 10.0),
                    (1.0, 10.0),
                    (10.0, 10.0),
                ],
            ],
            word_idf: vec![None, None, None, Some(2.5), None, None],
        }
    }

    #[test]
    fn rules_drop_or_weigh_the_tokens_they_name() {
        let q = query();
        assert_eq!(weights(Rule::All, &q), vec![1.0; 6]);
        assert_eq!(weights(Rule::NoPunct, &q), [1.0, 1.0, 1.0, 1.0, 0.0, 1.0]);
        assert_eq!(
            weights(Rule::NoStopMarkers, &q),
            [0.0, 0.0, 0.0, 1.0, 0.0, 0.0]
        );
        // IDF: the markers take the mean of the words' (0.1, 2.0, 0.3), not their own.
        let mean = (0.1 + 2.0 + 0.3) / 3.0;
        let idf = weights(Rule::Idf, &q);
        assert!(
            idf[..2]
                .iter()
                .chain(&idf[5..])
                .all(|w| (w - mean).abs() < 1e-6)
        );
        assert_eq!(idf[2..5], [0.1, 2.0, 0.3]);
        assert_eq!(weights(Rule::GlobalIdf, &q)[2..5], [0.2, 4.0, 0.6]);
        // The lexical index's IDF: words without a term take the query's lowest (here the
        // only one), or nothing.
        assert_eq!(weights(Rule::LexIdf, &q), [2.5, 2.5, 2.5, 2.5, 2.5, 2.5]);
        assert_eq!(
            weights(Rule::LexIdfDrop, &q),
            [2.5, 2.5, 0.0, 2.5, 0.0, 2.5]
        );
    }

    #[test]
    fn weigh_reads_its_source_and_holds_the_weight_within_floor_and_cap() {
        let q = query();
        let rule = |source, form, floor, cap, alpha| Weigh {
            source,
            form,
            floor,
            cap,
            alpha,
        };
        let own = rule(Source::Own, Form::Smooth, 0.0, f32::INFINITY, 1.0);
        let w = weights(Rule::Weigh(own), &q);
        // "ship" (df 1 of 9) weighs ln(10 / 1.5); "the" (8 of 9) ln(10 / 8.5).
        assert!((w[3] - (10.0f32 / 1.5).ln()).abs() < 1e-5, "{w:?}");
        assert!((w[2] - (10.0f32 / 8.5).ln()).abs() < 1e-5, "{w:?}");
        let words = (w[2] + w[3] + w[4]) / 3.0;
        assert!((w[0] - words).abs() < 1e-5 && (w[5] - words).abs() < 1e-5);
        let mixed = Weigh {
            source: Source::Mixed,
            ..own
        };
        assert!((weights(Rule::Weigh(mixed), &q)[3] - (100.0f32 / 1.5).ln()).abs() < 1e-5);
        let held = rule(Source::Mixed, Form::Smooth, 1.0, 3.0, 0.5);
        let w = weights(Rule::Weigh(held), &q);
        assert!((w[3] - 3f32.sqrt()).abs() < 1e-5, "cap: {w:?}");
        assert!((w[2] - 1.0).abs() < 1e-5, "floor: {w:?}");
        assert!((held.weight((0.0, 0.0)) - 1.0).abs() < 1e-6);
        let plain = rule(Source::Own, Form::Plain, 0.0, f32::INFINITY, 1.0);
        assert!((plain.weight((3.0, 9.0)) - 3f32.ln()).abs() < 1e-6);
        let plus = rule(Source::Own, Form::PlusOne, 0.0, f32::INFINITY, 1.0);
        assert!((plus.weight((9.0, 9.0)) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn candidates_and_collections_give_their_own_counts() {
        let mut q = query();
        let ids = [101, 1, 1996, 2911, 1029, 102];
        // "ship" (2911) in one of three candidates, "the" (1996) in all three.
        q.set_candidate_df(&ids, &[&[1996, 2911], &[1996, 1996], &[1996, 7]]);
        assert_eq!(q.cand_df[2], (3.0, 3.0));
        assert_eq!(q.cand_df[3], (1.0, 3.0));
        let by = |source| {
            Rule::Weigh(Weigh {
                source,
                form: Form::Smooth,
                floor: 0.0,
                cap: f32::INFINITY,
                alpha: 1.0,
            })
        };
        let w = weights(by(Source::Candidates), &q);
        assert!((w[3] - (4.0f32 / 1.5).ln()).abs() < 1e-5, "{w:?}");
        assert!((w[2] - (4.0f32 / 3.5).ln()).abs() < 1e-5, "{w:?}");
        // Among notes "ship" is common (9 of 10), among exchanges every token is at 5 of 10.
        let notes = weights_for(by(Source::Collection), &q, Kind::Note);
        let exchanges = weights_for(by(Source::Collection), &q, Kind::Exchange);
        assert!((notes[3] - (11.0f32 / 9.5).ln()).abs() < 1e-5, "{notes:?}");
        assert!(
            exchanges
                .iter()
                .all(|w| (w - (11.0f32 / 5.5).ln()).abs() < 1e-5)
        );
    }

    #[test]
    fn a_rule_that_leaves_no_token_counts_every_one() {
        let q = QueryTokens {
            punct: vec![true],
            stop: vec![false],
            marker: vec![false],
            idf: vec![1.0],
            global_idf: vec![1.0],
            local_df: vec![(1.0, 1.0)],
            mixed_df: vec![(1.0, 1.0)],
            cand_df: vec![(1.0, 1.0)],
            coll_df: [vec![(1.0, 1.0)], vec![(1.0, 1.0)]],
            word_idf: vec![None],
        };
        assert_eq!(weights(Rule::NoPunct, &q), [1.0]);
        assert_eq!(weights(Rule::LexIdfDrop, &q), [1.0]);
        assert!((weighted(&[0.8, 0.2], &[3.0, 1.0]) - 0.65).abs() < 1e-6);
    }
}
