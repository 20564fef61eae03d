//! Tests of `late_plan`'s `Planner`: it walks the store once, then reads only what the change
//! journal names, and keeps the order and the cap of a fresh `plan`.

use super::*;
use crate::models::embed::{DIMS, TokenStates};
use crate::record::Record;
use crate::state::ops::{Op, Output};
use crate::store::Machine;

/// `n` notes, oldest first (created at 0, 1, …): the state and their keys.
fn notes(n: usize) -> (MemState, Vec<u64>) {
    let mut s = MemState::new(DIMS).unwrap();
    let keys = (0..n)
        .map(|i| insert(&mut s, &format!("note {i:04}"), i as i64))
        .collect();
    (s, keys)
}

fn insert(s: &mut MemState, text: &str, at: i64) -> u64 {
    let r = Record::new(proto::Collection::MemoryBank, text.to_owned(), at);
    match s.apply(&Op::Insert(Box::new(r))) {
        Output::Inserted { key, .. } => key,
        other => panic!("{other:?}"),
    }
}

/// States of exactly the estimated size of `text` (so the cap's sums stay as planned).
fn encode(states: &States, todo: &[(u64, String)]) {
    for (key, text) in todo {
        let tokens = estimated_bytes(text.len(), false) / (DIMS + 4);
        let t = TokenStates::for_tests(&vec![0.5; tokens]);
        assert_eq!(t.bytes(), estimated_bytes(text.len(), false));
        states.insert(*key, text, t).unwrap();
    }
}

fn keys(todo: &[(u64, String)]) -> Vec<u64> {
    todo.iter().map(|(k, _)| *k).collect()
}

#[test]
fn the_planner_walks_the_store_once_then_reads_only_what_changed() {
    let (mut s, all) = notes(1000);
    let states = States::default();
    let mut p = Planner::default();
    let first = p.next(&s, &states, usize::MAX).todo;
    assert_eq!(
        first,
        plan(&states, &s, usize::MAX).todo,
        "a plan's first batch"
    );
    assert_eq!((p.walks, p.records_read), (1, 1000 + 32));
    encode(&states, &first);
    // Nine more batches read their own 32 records each, never the store.
    let mut order = keys(&first);
    for _ in 0..9 {
        let todo = p.next(&s, &states, usize::MAX).todo;
        encode(&states, &todo);
        order.extend(keys(&todo));
    }
    assert_eq!(p.walks, 1);
    assert_eq!(p.records_read, 1000 + 320);
    let newest: Vec<u64> = all.iter().rev().take(320).copied().collect();
    assert_eq!(order, newest, "newest first, none twice");
    // A new memory is the next one encoded, read alone with the batch.
    let new = insert(&mut s, "a new note", 5000);
    let todo = p.next(&s, &states, usize::MAX).todo;
    assert_eq!(todo[0], (new, "a new note".to_owned()));
    assert_eq!(todo[1].0, all[1000 - 321]);
    assert_eq!((p.walks, p.records_read), (1, 1000 + 320 + 1 + 32));
}

#[test]
fn an_edit_or_a_deletion_after_planning_is_taken_in() {
    let (mut s, all) = notes(100);
    let states = States::default();
    let mut p = Planner::default();
    let todo = p.next(&s, &states, usize::MAX).todo;
    encode(&states, &todo);
    // Queued but not encoded yet: edited. Encoded already: deleted.
    let (queued, done) = (all[99 - 40], all[99]);
    let id = |k: u64| s.by_key(k).unwrap().id.clone();
    let (queued_id, done_id) = (id(queued), id(done));
    let edit = Op::Update {
        id: queued_id,
        content: Some("note, edited".into()),
        tags: None,
        importance: None,
        confidence: None,
        at: 7,
    };
    assert!(matches!(s.apply(&edit), Output::Updated { .. }));
    let delete = Op::Delete {
        id: done_id,
        reason: "test".into(),
    };
    assert!(matches!(s.apply(&delete), Output::Deleted { .. }));
    assert!(states.get(done, "note 0099").is_some());
    let todo = p.next(&s, &states, usize::MAX).todo;
    assert!(
        states.get(done, "note 0099").is_none(),
        "a deleted memory's states go"
    );
    let edited: Vec<&(u64, String)> = todo.iter().filter(|(k, _)| *k == queued).collect();
    assert_eq!(edited, vec![&(queued, "note, edited".to_owned())]);
    assert_eq!(todo.len(), 32);
    assert_eq!(p.walks, 1);
}

#[test]
fn the_cap_holds_across_batches_and_a_full_journal_means_a_walk() {
    let (mut s, all) = notes(300);
    let states = States::default();
    let cap = 100 * estimated_bytes("note 0000".len(), false);
    let mut p = Planner::default();
    let mut order = Vec::new();
    loop {
        let next = p.next(&s, &states, cap);
        if next.todo.is_empty() {
            assert!(next.over_cap);
            break;
        }
        encode(&states, &next.todo);
        order.extend(keys(&next.todo));
    }
    let newest: Vec<u64> = all.iter().rev().take(100).copied().collect();
    assert_eq!(order, newest, "the 100 newest fit, in order");
    assert_eq!(p.walks, 2, "one walk, one more when its estimates ran out");
    // One new memory: within the cap's frontier, encoded; the walk it makes due later drops
    // the oldest kept one.
    let new = insert(&mut s, "note 9999", 1000);
    assert_eq!(keys(&p.next(&s, &states, cap).todo), vec![new]);
    // More changes than the journal holds: the next batch walks the store.
    for i in 0..=crate::state::changes::KEPT {
        insert(&mut s, &format!("later note {i}"), 2000 + i as i64);
    }
    let walks = p.walks;
    let todo = p.next(&s, &states, cap).todo;
    assert_eq!(p.walks, walks + 1);
    assert_eq!(todo, plan(&states, &s, cap).todo, "what a fresh plan says");
}

#[test]
fn the_pending_figure_follows_the_planner_and_what_changed_since_without_a_walk() {
    let (mut s, all) = notes(300);
    let states = States::default();
    let cap = 100 * estimated_bytes("note 0000".len(), false);
    // Before the planner looked: every live memory without states.
    assert_eq!(pending(&states, &s), 300);
    let mut p = Planner::default();
    let todo = p.next(&s, &states, cap).todo;
    let fresh = |s: &MemState| plan(&states, s, cap).missing;
    assert_eq!(pending(&states, &s), 100, "the batch in flight counts");
    assert_eq!(fresh(&s), 100);
    encode(&states, &todo);
    let todo = p.next(&s, &states, cap).todo;
    assert_eq!(pending(&states, &s), 100 - 32);
    assert_eq!(pending(&states, &s), fresh(&s));
    encode(&states, &todo);
    assert_eq!(
        pending(&states, &s),
        100 - 64,
        "a stored batch is no longer pending"
    );
    // A new memory counts before the planner takes it in; a deleted one does not.
    let new = insert(&mut s, "note 9999", 1000);
    let gone = s.by_key(all[0]).unwrap().id.clone();
    let delete = Op::Delete {
        id: gone,
        reason: "test".into(),
    };
    assert!(matches!(s.apply(&delete), Output::Deleted { .. }));
    assert_eq!(pending(&states, &s), 100 - 64 + 1);
    let todo = p.next(&s, &states, cap).todo;
    assert_eq!(todo[0].0, new);
    encode(&states, &todo);
    loop {
        let todo = p.next(&s, &states, cap).todo;
        if todo.is_empty() {
            break;
        }
        encode(&states, &todo);
    }
    assert_eq!(pending(&states, &s), 0);
    assert_eq!(fresh(&s), 0);
}
