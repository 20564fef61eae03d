//! Tests of `late`: the reorder, the cap's plan and the two stored forms.

use super::*;
use crate::models::late_plan::{estimated_bytes, plan};

#[test]
fn reorder_leaves_memories_without_states_in_place() {
    // No states at all: the order is the input order, whatever the depth.
    let states = States::default();
    let keyed = [(1, "a", 0.0), (2, "b", 0.0), (3, "c", 0.0)];
    let q = QueryStates::for_tests(&[1.0]);
    assert_eq!(reorder(&states, &q, &keyed, 3, None), vec![0, 1, 2]);
}

#[test]
fn reorder_sorts_scored_memories_into_their_slots() {
    let states = States::default();
    // Key 1 matches the query weakly, key 3 strongly; key 2 has no states.
    states
        .insert(1, "a", TokenStates::for_tests(&[0.2]))
        .unwrap();
    states
        .insert(3, "c", TokenStates::for_tests(&[0.9]))
        .unwrap();
    let keyed = [(1, "a", 0.0), (2, "b", 0.0), (3, "c", 0.0), (4, "d", 0.0)];
    let q = QueryStates::for_tests(&[1.0]);
    assert_eq!(reorder(&states, &q, &keyed, 3, None), vec![2, 1, 0, 3]);
    // Depth 2: key 3 is outside the head and stays last but one.
    assert_eq!(reorder(&states, &q, &keyed, 2, None), vec![0, 1, 2, 3]);
    // Edited text: the states no longer count.
    let edited = [
        (1, "a", 0.0),
        (2, "b", 0.0),
        (3, "c, edited", 0.0),
        (4, "d", 0.0),
    ];
    assert_eq!(reorder(&states, &q, &edited, 3, None), vec![0, 1, 2, 3]);
}

#[test]
fn the_cosine_breaks_near_ties_but_maxsim_leads() {
    let states = States::default();
    states
        .insert(1, "a", TokenStates::for_tests(&[0.5]))
        .unwrap();
    states
        .insert(2, "b", TokenStates::for_tests(&[0.5]))
        .unwrap();
    let q = QueryStates::for_tests(&[1.0]);
    let keyed = [(1, "a", 0.1), (2, "b", 0.9)];
    assert_eq!(reorder(&states, &q, &keyed, 2, None), vec![1, 0]);
    // A clearly better MaxSim still wins over a higher cosine.
    states
        .insert(1, "a", TokenStates::for_tests(&[0.9]))
        .unwrap();
    assert_eq!(reorder(&states, &q, &keyed, 2, None), vec![0, 1]);
}

#[test]
fn a_passed_deadline_keeps_the_fused_order() {
    let states = States::default();
    states
        .insert(1, "a", TokenStates::for_tests(&[0.2]))
        .unwrap();
    states
        .insert(2, "b", TokenStates::for_tests(&[0.9]))
        .unwrap();
    let keyed = [(1, "a", 0.0), (2, "b", 0.0)];
    let q = QueryStates::for_tests(&[1.0]);
    let past = Instant::now();
    assert_eq!(reorder(&states, &q, &keyed, 2, Some(past)), vec![0, 1]);
    assert_eq!(reorder(&states, &q, &keyed, 2, None), vec![1, 0]);
}

/// Three stored notes, oldest first: (state, their keys).
fn three_notes() -> (crate::state::MemState, Vec<u64>) {
    use crate::state::ops::{Op, Output};
    use crate::store::Machine;
    let mut s = crate::state::MemState::new(crate::models::embed::DIMS).unwrap();
    let mut keys = Vec::new();
    for i in 0..3 {
        let r = crate::record::Record::new(proto::Collection::MemoryBank, format!("note {i}"), i);
        match s.apply(&Op::Insert(Box::new(r))) {
            Output::Inserted { key, .. } => keys.push(key),
            other => panic!("{other:?}"),
        }
    }
    (s, keys)
}

#[test]
fn the_cap_keeps_the_newest_memories() {
    let (s, keys) = three_notes();
    let states = States::default();
    // Room for two memories' estimate: the two newest are wanted, the oldest is not.
    let cap = 2 * estimated_bytes("note 0".len(), false);
    let p = plan(&states, &s, cap);
    let wanted: Vec<u64> = p.todo.iter().map(|(k, _)| *k).collect();
    assert_eq!(wanted, vec![keys[2], keys[1]]);
    assert_eq!(p.missing, 2);
    // The oldest has states (say, from before the cap shrank): they are not kept.
    states
        .insert(keys[0], "note 0", TokenStates::for_tests(&[0.5]))
        .unwrap();
    let p = plan(&states, &s, cap);
    assert!(!p.keep.contains(&keys[0]) && p.live.len() == 3);
    states.retain(&p.keep, &p.live);
    assert_eq!(states.size().0, 0);
}

#[test]
fn a_memory_larger_than_its_estimate_is_planned_with_its_real_size() {
    let (s, keys) = three_notes();
    let states = States::default();
    let cap = 2 * estimated_bytes("note 0".len(), false);
    // The newest note turned out to fill the cap alone.
    let big = TokenStates::for_tests(&vec![0.1; cap / (crate::models::embed::DIMS + 4)]);
    let real = big.bytes();
    assert!(real > estimated_bytes("note 2".len(), false));
    states.insert(keys[2], "note 2", big).unwrap();
    let p = plan(&states, &s, cap);
    assert!(p.keep.contains(&keys[2]));
    assert!(p.todo.is_empty(), "nothing else fits: {:?}", p.todo);
    // The cap shrinks under its real size (still over its estimate): evicted, and its real
    // size is what the plan keeps counting, so it is not admitted again on its estimate
    // only to be evicted once more.
    let smaller = real - 1;
    assert!(smaller > estimated_bytes("note 2".len(), false));
    let p = plan(&states, &s, smaller);
    states.retain(&p.keep, &p.live);
    assert_eq!(states.size().0, 0);
    let p = plan(&states, &s, smaller);
    let todo: Vec<u64> = p.todo.iter().map(|(k, _)| *k).collect();
    assert_eq!(todo, vec![keys[1]], "the next newest fits on its estimate");
}

#[test]
fn a_text_that_failed_is_not_retried_but_an_edit_is() {
    let (s, keys) = three_notes();
    let states = States::default();
    states.remember(keys[2], text_hash("note 2"), Known::Failed);
    let p = plan(&states, &s, usize::MAX);
    let todo: Vec<u64> = p.todo.iter().map(|(k, _)| *k).collect();
    assert_eq!(todo, vec![keys[1], keys[0]]);
    // The same key with another text is a new attempt.
    assert_eq!(states.known(keys[2], text_hash("note 2, edited")), None);
}

#[test]
fn retain_drops_what_is_not_kept() {
    let states = States::default();
    states
        .insert(1, "a", TokenStates::for_tests(&[0.2]))
        .unwrap();
    states
        .insert(2, "b", TokenStates::for_tests(&[0.2]))
        .unwrap();
    let keep = [2].into_iter().collect();
    let live = [2].into_iter().collect();
    let before = states.changes();
    states.retain(&keep, &live);
    assert_eq!(states.size().0, 1);
    assert!(states.get(2, "b").is_some() && states.get(1, "a").is_none());
    assert!(states.changes() > before);
    assert_eq!(
        states.known(1, text_hash("a")),
        None,
        "forgotten with its memory"
    );
}

/// The model the tests' states are of.
pub(super) const MODEL: super::Digest = [3; 32];

/// States with their log in `dir`.
fn opened(dir: &std::path::Path) -> States {
    let states = States::default();
    states.open(dir, &MODEL);
    states
}

#[test]
fn over_the_cap_the_states_are_coded_and_later_ones_too() {
    use crate::models::late_codes::{SUBVECTORS, tests::unit_vectors};
    let dir = tempfile::tempdir().unwrap();
    let (s, keys) = three_notes();
    let states = opened(dir.path());
    // Two notes' i8 states of 200 tokens each (388 bytes a token), every token kept.
    for (i, key) in keys[1..].iter().enumerate() {
        let rows = unit_vectors(200, i as u64);
        let text = format!("note {}", i + 1);
        states
            .insert(*key, &text, TokenStates::quantize(&rows))
            .unwrap();
    }
    let held = states.size().1;
    assert_eq!(held, 400 * (crate::models::embed::DIMS + 4));
    assert_eq!(states.disk_size().0, 2, "on disk too");
    assert!(!plan(&states, &s, held + 2_000).over_cap, "all three fit");
    assert!(plan(&states, &s, held).over_cap, "the oldest does not");
    assert!(
        !states.due_for_codebook(false),
        "400 token vectors: not yet"
    );
    assert!(states.due_for_codebook(true), "over the cap: now");
    let before = states.changes();
    assert!(states.train_codebook());
    assert!(states.changes() > before, "to be saved");
    assert!(!states.train_codebook(), "once");
    // Coded: 16 bytes a token, scored through the query's table like i8 states were.
    assert_eq!(states.size(), (2, 400 * SUBVECTORS));
    let coded = states.get(keys[1], "note 1").unwrap();
    assert!(matches!(coded.as_ref(), Stored::Coded(c) if c.tokens() == 200));
    let q = QueryStates::for_tests(&[1.0]);
    let keyed = [(keys[1], "note 1", 0.0), (keys[2], "note 2", 0.0)];
    let (order, finished) = reorder_within(&states, &q, &keyed, 2, None);
    assert!(finished && order.len() == 2);
    // Coded, the oldest note fits beside the others and the codebook: admitted, coded.
    let cap = states.codebook_bytes() + 400 * SUBVECTORS + 1_000;
    let p = plan(&states, &s, cap);
    assert!(!p.over_cap && p.todo.len() == 1);
    states
        .insert(keys[0], "note 0", TokenStates::for_tests(&[0.5]))
        .unwrap();
    let oldest = states.get(keys[0], "note 0").unwrap();
    assert!(matches!(oldest.as_ref(), Stored::Coded(c) if c.tokens() == 1));
    // Saved and reopened: the same codes and codebook, nothing trained or encoded again.
    let book = states.codebook().unwrap();
    states
        .save(&super::super::late_file::path_in(dir.path()))
        .unwrap();
    drop(states);
    let again = opened(dir.path());
    assert_eq!(again.codebook().unwrap().id(), book.id());
    assert_eq!(again.size(), (3, 401 * SUBVECTORS));
    assert!(plan(&again, &s, usize::MAX).todo.is_empty());
}

#[test]
fn the_saved_index_spares_the_scan_and_another_models_states_are_encoded_again() {
    let dir = tempfile::tempdir().unwrap();
    let (s, keys) = three_notes();
    let saved = super::super::late_file::path_in(dir.path());
    let states = States::default();
    assert!(
        !states.open(dir.path(), &MODEL),
        "a new log: nothing to save"
    );
    for (i, key) in keys.iter().enumerate() {
        let text = format!("note {i}");
        states
            .insert(*key, &text, TokenStates::for_tests(&[0.5]))
            .unwrap();
    }
    // Killed before any save: the next open scans the log, and asks for a save at once.
    drop(states);
    let states = opened_again(dir.path(), &MODEL, true);
    assert_eq!((states.size().0, states.disk_size().0), (3, 3));
    states.save(&saved).unwrap();
    drop(states);
    let states = opened_again(dir.path(), &MODEL, false);
    assert_eq!((states.size().0, states.disk_size().0), (3, 3));
    assert!(
        plan(&states, &s, usize::MAX).todo.is_empty(),
        "nothing to encode"
    );
    drop(states);
    // Another model: neither file is used, every memory is encoded again.
    let states = opened_again(dir.path(), &[9; 32], true);
    assert_eq!((states.size().0, states.disk_size().0), (0, 0));
    assert_eq!(plan(&states, &s, usize::MAX).missing, 3);
}

/// States of the model `digest` reopened from `dir`, asserting whether the open asked for
/// the saved file to be written again.
fn opened_again(dir: &std::path::Path, digest: &super::Digest, resave: bool) -> States {
    let states = States::default();
    assert_eq!(states.open(dir, digest), resave);
    states
}

#[test]
fn without_a_log_no_codebook_is_trained() {
    let states = States::default();
    states
        .insert(1, "a", TokenStates::for_tests(&[0.2, 0.3]))
        .unwrap();
    assert!(!states.due_for_codebook(true) && !states.train_codebook());
    assert!(states.codebook().is_none() && states.codebook_bytes() == 0);
}

#[test]
fn too_few_token_vectors_train_no_codebook() {
    let dir = tempfile::tempdir().unwrap();
    let states = opened(dir.path());
    states
        .insert(1, "a", TokenStates::for_tests(&[0.2, 0.3]))
        .unwrap();
    assert!(!states.train_codebook());
    assert!(states.codebook().is_none() && states.codebook_bytes() == 0);
}

#[path = "late_rescore_tests.rs"]
mod rescore;
