//! MaxSim's query-token weights, read off the memories a query is scored against: a token
//! most of them hold ("the", "?", the name every turn of a conversation repeats) counts for
//! less than one few of them hold. bench/EVAL.md sections 16 and 22: a study, not shipped; a
//! query is weighed only when it asks to be (`QueryStates::weighed_over_candidates`), which no
//! daemon path does.
//!
//! Owns the weights (smoothed IDF over the candidates, held at `WEIGHT_FLOOR` or above) and
//! the query they give. Must never run the model (the tokenizer only), keep counts between
//! queries, or fail: a query that does not ask, or has nothing to count over, is scored as it
//! came.

use super::embed::QueryStates;
use std::collections::HashSet;

/// No query token weighs less than this: ln((N + 1) / (df + 0.5)) falls below it for tokens
/// in more than ~1/8 of the candidates, which then all count alike. `memd-eval fusion`
/// (section 16): floor 0 or 1 cost the coding set R@1 and R@10 one question each, 2 held every
/// set.
pub const WEIGHT_FLOOR: f32 = 2.0;

/// BERT uncased `[SEP]`; with `[CLS]` and the query marker (a query's first two rows) the rows
/// that stand for no word of the query.
const SEP: i64 = 102;

/// Each query token's weight over `docs` (each memory's token ids): ln((N + 1) / (df +
/// 0.5)), at least `WEIGHT_FLOOR`; the markers take the mean of the words' weights. Empty
/// when there is nothing to count over.
pub fn candidate_weights(query: &[i64], docs: &[Vec<i64>]) -> Vec<f32> {
    if docs.is_empty() || query.is_empty() {
        return Vec::new();
    }
    let sets: Vec<HashSet<i64>> = docs.iter().map(|d| d.iter().copied().collect()).collect();
    let n = docs.len() as f32;
    let marker = |i: usize| i < 2 || query[i] == SEP;
    let weight = |id: i64| {
        let df = sets.iter().filter(|s| s.contains(&id)).count() as f32;
        ((n + 1.0) / (df + 0.5)).ln().max(WEIGHT_FLOOR)
    };
    let mut w: Vec<f32> = query
        .iter()
        .enumerate()
        .map(|(i, &id)| if marker(i) { 0.0 } else { weight(id) })
        .collect();
    let words: Vec<f32> = (0..w.len()).filter(|&i| !marker(i)).map(|i| w[i]).collect();
    let mean = match words.len() {
        0 => 1.0,
        k => words.iter().sum::<f32>() / k as f32,
    };
    for (i, x) in w.iter_mut().enumerate() {
        if marker(i) {
            *x = mean;
        }
    }
    w
}

/// `query` weighed over `texts` (the memories it is about to be scored against), tokenised
/// as the model reads memories; `None` when the query does not ask to be weighed.
pub fn weigh_by(query: &QueryStates, texts: &[&str]) -> Option<QueryStates> {
    let (ids, tokenizer) = query.weigh()?;
    let docs: Vec<Vec<i64>> = texts.iter().map(|t| tokenizer.ids(t)).collect();
    Some(query.weighted(&candidate_weights(ids, &docs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rare_tokens_among_the_candidates_weigh_more_and_markers_take_the_mean() {
        // [CLS] [unused0] the ship [SEP] over 20 memories: "the" (1996) in all, "ship" (2911)
        // in one.
        let query = [101, 1, 1996, 2911, SEP];
        let mut docs: Vec<Vec<i64>> = (0..19).map(|i| vec![101, 2, 1996, 5000 + i]).collect();
        docs.push(vec![101, 2, 1996, 2911, 1996]);
        let w = candidate_weights(&query, &docs);
        let ship = (21.0f32 / 1.5).ln();
        assert!((w[3] - ship).abs() < 1e-5, "{w:?}");
        // "the" is held by every memory: its IDF is below the floor.
        assert_eq!(w[2], WEIGHT_FLOOR);
        let mean = (ship + WEIGHT_FLOOR) / 2.0;
        for i in [0, 1, 4] {
            assert!((w[i] - mean).abs() < 1e-5, "{w:?}");
        }
    }

    #[test]
    fn nothing_to_count_over_gives_no_weights() {
        assert!(candidate_weights(&[101, 1, 7, SEP], &[]).is_empty());
        assert!(candidate_weights(&[], &[vec![7]]).is_empty());
        // A query of markers only: every row at 1.
        assert_eq!(candidate_weights(&[101, 1, SEP], &[vec![7]]), [1.0; 3]);
    }

    #[test]
    fn a_query_that_does_not_ask_is_not_weighed() {
        let q = QueryStates::for_tests(&[1.0, 0.5]);
        assert!(weigh_by(&q, &["anything"]).is_none());
    }
}
