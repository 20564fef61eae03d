//! Reciprocal rank fusion of ranked candidate lists (vector and lexical).
//!
//! Owns only the fusion arithmetic. Must never look at raw scores (they are on different
//! scales: cosine vs BM25), apply boosts or filters, or know where the lists came from.

use std::collections::HashMap;

/// Fuses best-first lists: each key scores Σ weight_i / (k + rank_i), rank starting at 1, over
/// the lists it appears in. A key repeated within one list counts at its best rank only. A
/// missing weight counts as 1.0. The result is best first; ties break by lower key.
/// `k` (60 in the original RRF paper) damps the head: larger k flattens rank differences.
pub fn reciprocal_rank_fusion(lists: &[&[(u64, f32)]], weights: &[f32], k: f32) -> Vec<(u64, f32)> {
    let mut fused: HashMap<u64, f32> = HashMap::new();
    for (i, list) in lists.iter().enumerate() {
        let weight = weights.get(i).copied().unwrap_or(1.0);
        let mut seen = std::collections::HashSet::with_capacity(list.len());
        for (rank, &(key, _)) in list.iter().enumerate() {
            if seen.insert(key) {
                *fused.entry(key).or_insert(0.0) += weight / (k + rank as f32 + 1.0);
            }
        }
    }
    let mut out: Vec<(u64, f32)> = fused.into_iter().collect();
    out.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(v: &[(u64, f32)]) -> Vec<u64> {
        v.iter().map(|x| x.0).collect()
    }

    #[test]
    fn agreement_beats_a_single_top_rank() {
        // 7 is 2nd in both lists; 1 is 1st in vectors only; 9 is 1st in lexical only.
        let vector = [(1, 0.9), (7, 0.8), (3, 0.7)];
        let lexical = [(9, 12.0), (7, 11.0), (4, 3.0)];
        let fused = reciprocal_rank_fusion(&[&vector, &lexical], &[1.0, 1.0], 60.0);
        assert_eq!(keys(&fused), [7, 1, 9, 3, 4]);
        let expected_7 = 2.0 / 62.0;
        assert!((fused[0].1 - expected_7).abs() < 1e-6);
        // equal score 1/61 for keys 1 and 9: tie broken by key
        assert_eq!(fused[1].1, fused[2].1);
    }

    #[test]
    fn weights_shift_the_order() {
        let vector = [(1, 0.9), (2, 0.8)];
        let lexical = [(2, 5.0), (1, 4.0)];
        let favour_lexical = reciprocal_rank_fusion(&[&vector, &lexical], &[0.5, 1.0], 60.0);
        assert_eq!(keys(&favour_lexical), [2, 1]);
        let favour_vector = reciprocal_rank_fusion(&[&vector, &lexical], &[1.0, 0.5], 60.0);
        assert_eq!(keys(&favour_vector), [1, 2]);
    }

    #[test]
    fn small_k_sharpens_rank_differences() {
        let a = [(1, 0.0), (2, 0.0), (3, 0.0)];
        let b = [(3, 0.0), (4, 0.0), (5, 0.0)];
        // k = 0: key 3 gets 1/3 + 1/1, key 1 gets 1/1, keys 2 and 4 get 1/2 each, key 5 1/3.
        let sharp = reciprocal_rank_fusion(&[&a, &b], &[], 0.0);
        assert_eq!(keys(&sharp), [3, 1, 2, 4, 5]);
        assert!((sharp[0].1 - (1.0 / 3.0 + 1.0)).abs() < 1e-6);
        // k = 1000: every rank is worth about the same, so only list membership counts.
        let flat = reciprocal_rank_fusion(&[&a, &b], &[], 1000.0);
        assert_eq!(keys(&flat)[0], 3);
        assert!((flat[1].1 - flat[4].1) / flat[1].1 < 0.01);
    }

    #[test]
    fn duplicates_in_one_list_count_once_and_empty_input_is_empty() {
        let a = [(5, 0.0), (5, 0.0), (6, 0.0)];
        let fused = reciprocal_rank_fusion(&[&a], &[1.0], 60.0);
        assert_eq!(keys(&fused), [5, 6]);
        assert!((fused[0].1 - 1.0 / 61.0).abs() < 1e-6);
        assert!(reciprocal_rank_fusion(&[], &[], 60.0).is_empty());
        let empty: [(u64, f32); 0] = [];
        assert!(reciprocal_rank_fusion(&[&empty, &empty], &[1.0, 1.0], 60.0).is_empty());
    }
}
