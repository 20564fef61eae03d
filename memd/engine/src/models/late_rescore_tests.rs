//! Tests of the coded form with its log: the order equals full precision's, a damaged log keeps
//! the code order, a crash loses nothing acknowledged.

use super::super::*;
use super::opened;
use crate::models::late_codes::tests::unit_vectors;

const MEMORIES: usize = 60;
const TOKENS: usize = 12;

/// A query of 4 tokens and `MEMORIES` memories of `TOKENS` tokens, each token a mix of one
/// query token and noise: memory i leans on the query by a weight spread over (0, 0.9),
/// shuffled, so the full-precision order is clear but not the key order.
fn fixture() -> (QueryStates, Vec<(u64, String, TokenStates)>) {
    let query = unit_vectors(4, 100);
    let memories = (0..MEMORIES)
        .map(|i| {
            let w = ((i * 37) % MEMORIES) as f32 / MEMORIES as f32 * 0.9;
            let noise = unit_vectors(TOKENS, 1_000 + i as u64);
            let rows: Vec<Vec<f32>> = noise
                .iter()
                .enumerate()
                .map(|(t, r)| {
                    let q = &query[t % query.len()];
                    let v: Vec<f32> = q
                        .iter()
                        .zip(r)
                        .map(|(a, b)| w * a + (1.0 - w) * b)
                        .collect();
                    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    v.iter().map(|x| x / n).collect()
                })
                .collect();
            (
                i as u64 + 1,
                format!("memory {i}"),
                TokenStates::quantize(&rows),
            )
        })
        .collect();
    (QueryStates::from_rows(query), memories)
}

fn fill(states: &States, memories: &[(u64, String, TokenStates)]) {
    for (key, text, s) in memories {
        states.insert(*key, text, s.clone()).unwrap();
    }
}

fn keyed(memories: &[(u64, String, TokenStates)]) -> Vec<Candidate<'_>> {
    memories
        .iter()
        .map(|(k, t, _)| (*k, t.as_str(), 0.0))
        .collect()
}

#[test]
fn codes_with_the_best_rescored_rank_like_full_precision() {
    let (query, memories) = fixture();
    let full = States::default();
    fill(&full, &memories);
    let dir = tempfile::tempdir().unwrap();
    let coded = opened(dir.path());
    fill(&coded, &memories);
    assert!(coded.train_codebook());
    assert!(matches!(
        coded.get(1, "memory 0").unwrap().as_ref(),
        Stored::Coded(_)
    ));
    let keyed = keyed(&memories);
    let want = reorder(&full, &query, &keyed, 40, None);
    let (got, finished) = reorder_within(&coded, &query, &keyed, 40, None);
    assert!(finished);
    assert_eq!(
        got[..RESCORE],
        want[..RESCORE],
        "the rescored part is exact"
    );
    // Below the rescored part, the code order: the same memories, maybe not in that order.
    let (mut a, mut b) = (got[..40].to_vec(), want[..40].to_vec());
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b);
}

#[test]
fn a_damaged_log_keeps_the_code_order_and_the_memory_is_encoded_again() {
    let (query, memories) = fixture();
    let dir = tempfile::tempdir().unwrap();
    let states = opened(dir.path());
    fill(&states, &memories);
    assert!(states.train_codebook());
    let keyed = keyed(&memories);
    // The code order: what a reorder gives without the log.
    let disk = states.disk.write().unwrap().take();
    let code_order = reorder(&states, &query, &keyed, 40, None);
    *states.disk.write().unwrap() = disk;
    assert_ne!(
        code_order,
        reorder(&states, &query, &keyed, 40, None),
        "the fixture needs a rescore that changes something"
    );
    // Every record damaged on disk: the first read fails, the code order stands.
    let log = crate::models::late_disk::path_in(dir.path());
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[40..].iter_mut().for_each(|b| *b = !*b);
    std::fs::write(&log, &bytes).unwrap();
    let (order, finished) = reorder_within(&states, &query, &keyed, 40, None);
    assert!(finished, "a fallback, not a missed budget");
    assert_eq!(order, code_order);
    // The memory read first (the code order's best) is no longer covered: encoded again.
    let (key, text, _) = keyed[code_order[0]];
    assert!(states.get(key, text).is_some() && states.covered(key, text_hash(text)).is_none());
}

#[test]
fn a_crash_loses_nothing_appended_and_a_torn_tail_is_encoded_again() {
    let (_, memories) = fixture();
    let dir = tempfile::tempdir().unwrap();
    let codes_file = super::super::super::late_file::path_in(dir.path());
    let states = opened(dir.path());
    fill(&states, &memories[..40]);
    assert!(states.train_codebook());
    states.save(&codes_file).unwrap();
    // Appended after the last save, then killed (nothing saved at exit).
    fill(&states, &memories[40..]);
    let held = states.size();
    drop(states);
    let again = opened(dir.path());
    assert_eq!(again.size(), held, "the log's newer records coded at open");
    for (key, text, _) in &memories {
        assert!(again.covered(*key, text_hash(text)).is_some(), "{text}");
    }
    drop(again);
    // Killed in the middle of an append: the torn record is cut, its memory has no states.
    let log = crate::models::late_disk::path_in(dir.path());
    let len = std::fs::metadata(&log).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(len - 100).unwrap();
    drop(f);
    let again = opened(dir.path());
    let (last_key, last_text, _) = &memories[MEMORIES - 1];
    assert!(again.covered(*last_key, text_hash(last_text)).is_none());
    assert!(
        again.get(*last_key, last_text).is_none(),
        "codes without a record are dropped"
    );
    assert_eq!(again.size().0, MEMORIES - 1);
}
