//! `memd-eval fusion`'s query-token rules (issue 34): which of a query's tokens late
//! interaction's MaxSim counts and how much. Punctuation, the lexical index's stopwords and
//! ColBERT's markers (`[CLS]`, `[unused0]`, `[SEP]`) left out, or every token weighed by its
//! IDF over the store's memories' tokens.
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
    /// The same over every store of the set (LoCoMo: all its conversations together).
    global_idf: Vec<f32>,
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
        let n = self.docs as f32;
        let df = self.df.get(&id).copied().unwrap_or(0) as f32;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }
}

impl QueryTokens {
    pub fn of(
        model: &LateInteraction,
        ids: &[i64],
        vocab: &Vocabulary,
        global: &Vocabulary,
        word_idf: Vec<Option<f32>>,
    ) -> QueryTokens {
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
            word_idf,
        }
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
    /// `Idf` with the document frequencies of every store of the set together.
    GlobalIdf,
    /// `NoStop`, the rest weighed by IDF.
    NoStopIdf,
    /// Every token weighed by its word's IDF in the lexical index; tokens of words without a
    /// term by the query's lowest, the markers by the mean.
    LexIdf,
    /// `LexIdf`, tokens of words without a term left out.
    LexIdfDrop,
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

/// The weight of each query token under `rule` (all 1 when the rule would leave none).
pub fn weights(rule: Rule, q: &QueryTokens) -> Vec<f32> {
    if matches!(rule, Rule::LexIdf | Rule::LexIdfDrop) {
        return lexical_weights(rule, q);
    }
    let n = q.idf.len();
    let dropped = |i: usize| match rule {
        Rule::All | Rule::Idf | Rule::SqrtIdf | Rule::GlobalIdf => false,
        Rule::LexIdf | Rule::LexIdfDrop => false,
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
    fn a_rule_that_leaves_no_token_counts_every_one() {
        let q = QueryTokens {
            punct: vec![true],
            stop: vec![false],
            marker: vec![false],
            idf: vec![1.0],
            global_idf: vec![1.0],
            word_idf: vec![None],
        };
        assert_eq!(weights(Rule::NoPunct, &q), [1.0]);
        assert_eq!(weights(Rule::LexIdfDrop, &q), [1.0]);
        assert!((weighted(&[0.8, 0.2], &[3.0, 1.0]) - 0.65).abs() < 1e-6);
    }
}
