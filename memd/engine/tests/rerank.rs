//! The real cross-encoder (ms-marco-MiniLM-L-12-v2, int8) on pairs whose order is not in doubt.
//!
//! Needs the runtime from install/fetch-runtime.sh (reranker/ included). When it is missing
//! these tests fail with the fix, unless MEMD_SKIP_MODEL_TESTS=1 says to skip them.

use memd_engine::models::embed::{CrossEncoder, RuntimePaths, reranker_dir};

fn load() -> Option<CrossEncoder> {
    if std::env::var("MEMD_SKIP_MODEL_TESTS").as_deref() == Ok("1") {
        eprintln!("MEMD_SKIP_MODEL_TESTS=1: skipping a test that needs the reranker");
        return None;
    }
    let paths = RuntimePaths::resolve();
    Some(CrossEncoder::load(&paths.ort_lib, &reranker_dir(), 2).unwrap_or_else(|e| panic!("{e:#}")))
}

/// The model card's example: an earlier study measured 9.33 against -11.16.
#[test]
fn the_answer_outscores_an_unrelated_passage_by_far() {
    let Some(ce) = load() else { return };
    let scores = ce
        .score(
            "How many people live in Berlin?",
            &[
                "Berlin has a population of 3,520,031 registered inhabitants in an area of 891.82 square kilometers.",
                "New York City is famous for the Metropolitan Museum of Art.",
            ],
        )
        .unwrap();
    assert!(scores[0] > 8.0 && scores[1] < -8.0, "{scores:?}");
}

/// A shared word ("staging") must not beat the answer. Scores do not depend on batching: the
/// same pair scores the same alone and in a batch.
#[test]
fn meaning_beats_a_shared_word_and_batching_changes_nothing() {
    let Some(ce) = load() else { return };
    let query = "which port does the staging database listen on?";
    let notes = [
        "The staging cluster reads its config from Bazel.",
        "Staging Postgres accepts connections on 5433.",
        "Lint with cargo clippy before every commit.",
    ];
    let scores = ce.score(query, &notes).unwrap();
    let best = (0..3)
        .max_by(|a, b| scores[*a].total_cmp(&scores[*b]))
        .unwrap();
    assert_eq!(best, 1, "{scores:?}");
    let alone = ce.score(query, &notes[1..2]).unwrap();
    assert!(
        (alone[0] - scores[1]).abs() < 1e-3,
        "{alone:?} vs {scores:?}"
    );
    assert!(ce.score(query, &[]).unwrap().is_empty());
    // A prompt far over the pair limit is cut, not an error.
    let long_query = "why does the staging database refuse connections? ".repeat(80);
    assert_eq!(ce.score(&long_query, &notes).unwrap().len(), 3);
}
