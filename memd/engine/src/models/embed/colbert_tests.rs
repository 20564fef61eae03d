use super::*;

#[test]
fn quantized_states_keep_dot_products_close() {
    let a: Vec<f32> = (0..DIMS)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0)
        .collect();
    let mut unit = a.clone();
    super::super::onnx::normalise(&mut unit);
    let doc = TokenStates::quantize(std::slice::from_ref(&unit));
    let q = QueryStates::from_rows(vec![unit.clone()]);
    assert!((q.maxsim(&doc) - 1.0).abs() < 0.01, "{}", q.maxsim(&doc));
    assert_eq!(doc.tokens(), 1);
    assert_eq!(doc.bytes(), DIMS + 4);
}

#[test]
fn maxsim_takes_each_query_tokens_best_match() {
    let basis = |i: usize| {
        let mut v = vec![0f32; DIMS];
        v[i] = 1.0;
        v
    };
    let doc = TokenStates::quantize(&[basis(0), basis(1)]);
    let q = QueryStates::from_rows(vec![basis(0), basis(1), basis(2)]);
    // Tokens 0 and 1 match exactly, token 2 matches nothing (best 0).
    assert!((q.maxsim(&doc) - 2.0).abs() < 1e-3);
    let empty = TokenStates::quantize(&[]);
    assert_eq!(q.maxsim(&empty), 0.0);
    // Per token: what `maxsim` sums.
    let per = q.maxsim_per_token(&doc);
    assert_eq!(per.len(), 3);
    assert!(
        (per[0] - 1.0).abs() < 1e-3 && (per[1] - 1.0).abs() < 1e-3,
        "{per:?}"
    );
    assert!(per[2].abs() < 1e-3, "{per:?}");
    assert_eq!(q.maxsim_per_token(&empty), vec![0.0; 3]);
}

#[test]
fn weighted_states_give_the_weighted_mean_of_the_best_matches() {
    let basis = |i: usize| {
        let mut v = vec![0f32; DIMS];
        v[i] = 1.0;
        v
    };
    let doc = TokenStates::quantize(&[basis(0)]);
    let q = QueryStates::from_rows(vec![basis(0), basis(1)]);
    assert!((q.maxsim(&doc) / q.norm() - 0.5).abs() < 1e-3);
    // Token 0 (matched) counts 3 times, token 1 (unmatched) once: 3 / 4.
    let w = q.weighted(&[3.0, 1.0]);
    assert!((w.maxsim(&doc) / w.norm() - 0.75).abs() < 1e-3);
    assert!((w.norm() - 4.0).abs() < 1e-6);
    // Unusable weights leave the query as it was.
    for bad in [&[1.0][..], &[0.0, 0.0], &[-1.0, 2.0], &[f32::NAN, 1.0]] {
        assert!((q.weighted(bad).maxsim(&doc) / q.weighted(bad).norm() - 0.5).abs() < 1e-3);
    }
}
