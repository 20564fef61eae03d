//! A store written before exchanges were indexed with their dates: opened, its exchanges'
//! vectors are made again from the dated text newest first, the lexical index reads the dates
//! at once, and a kill in the middle resumes where the last commit left off.

use super::ops::{Op, Output};
use super::persist::TEXT_VERSION_WRITTEN;
use super::*;
use crate::store::Store;
use proto::Value;

const DIMS: usize = 8;
/// 2023-05-08 13:56 UTC.
const MAY_8: i64 = 1_683_554_160_000;

fn exchange(i: i64) -> Record {
    let mut r = Record::new(
        Collection::Working,
        format!("User: how is the kiln {i}?\nAssistant: warm"),
        MAY_8 + i * 86_400_000,
    );
    r.metadata
        .insert("memory_type".into(), Value::from("exchange"));
    r
}

fn vector(i: u64) -> Vec<f32> {
    (0..DIMS)
        .map(|d| ((i as usize + d) % 5) as f32 + 0.5)
        .collect()
}

/// Five exchanges (8 to 12 May 2023) and a note, embedded, in a snapshot that says its vectors
/// are of the text before dates; their keys.
fn old_store(dir: &Path) -> Vec<u64> {
    let (store, _) = Store::open(dir, MemState::new(DIMS).unwrap()).unwrap();
    let mut ops: Vec<Op> = (0..5).map(|i| Op::Insert(Box::new(exchange(i)))).collect();
    let note = Record::new(Collection::MemoryBank, "kilns fire at dawn".into(), MAY_8);
    ops.push(Op::Insert(Box::new(note)));
    let keys: Vec<u64> = store
        .commit(ops)
        .unwrap()
        .into_iter()
        .map(|o| match o {
            Output::Inserted { key, .. } => key,
            other => panic!("not inserted: {other:?}"),
        })
        .collect();
    store
        .commit(keys.iter().map(|k| Op::vector(*k, &vector(*k))).collect())
        .unwrap();
    TEXT_VERSION_WRITTEN.with(|v| v.set(1));
    store.snapshot().unwrap();
    TEXT_VERSION_WRITTEN.with(|v| v.set(crate::indexed_text::VERSION));
    keys
}

/// One batch of the worker's (`Workers::reembed_some`): the texts it would embed, committed.
fn reembed(store: &Store<MemState>, n: usize) -> Option<Vec<(u64, String)>> {
    let batch = store.read(|s| s.reindex_batch(n))?;
    let mut ops: Vec<Op> = batch
        .todo
        .iter()
        .map(|(k, _)| Op::vector(*k, &vector(*k + 1)))
        .collect();
    ops.push(Op::Reindexed { below: batch.below });
    store.commit(ops).unwrap();
    Some(batch.todo)
}

#[test]
fn an_old_store_embeds_its_exchanges_again_newest_first_across_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let keys = old_store(dir.path());
    let (store, _) = Store::open(dir.path(), MemState::new(DIMS).unwrap()).unwrap();
    assert_eq!(store.read(|s| s.reindex_left()), 5, "the five exchanges");
    // The lexical index was rebuilt at the open (its image's version): the dates are terms.
    let may = store.read(|s| s.lexical().search("may 2023", 10, &|_| true));
    assert_eq!(may.len(), 5, "only the exchanges carry dates: {may:?}");
    let first = reembed(&store, 2).unwrap();
    assert_eq!(
        first.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        [keys[4], keys[3]],
        "newest first"
    );
    assert_eq!(
        first[0].1,
        "[12 May 2023] User: how is the kiln 4?\nAssistant: warm"
    );
    assert_eq!(store.read(|s| s.reindex_left()), 3);
    // Killed: dropped without a snapshot; the WAL holds the batch and its cursor.
    drop(store);
    let (store, _) = Store::open(dir.path(), MemState::new(DIMS).unwrap()).unwrap();
    assert_eq!(
        store.read(|s| s.reindex_left()),
        3,
        "resumed, not restarted"
    );
    let before = store.read(|s| s.vectors().get(keys[0]));
    let mut rest = Vec::new();
    while let Some(batch) = reembed(&store, 2) {
        rest.extend(batch.into_iter().map(|(k, _)| k));
    }
    assert_eq!(
        rest,
        [keys[2], keys[1], keys[0]],
        "the note is not an exchange"
    );
    assert_eq!(store.read(|s| s.reindex_left()), 0);
    let after = store.read(|s| s.vectors().get(keys[0]));
    assert!(
        before.is_some() && after != before,
        "the oldest exchange's vector made again"
    );
    // Done for good: a snapshot and a restart start nothing again.
    store.snapshot().unwrap();
    drop(store);
    let (store, _) = Store::open(dir.path(), MemState::new(DIMS).unwrap()).unwrap();
    assert!(store.read(|s| s.reindex_batch(2)).is_none());
}

#[test]
fn a_new_store_has_nothing_to_embed_again() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(dir.path(), MemState::new(DIMS).unwrap()).unwrap();
    store
        .commit(vec![Op::Insert(Box::new(exchange(0)))])
        .unwrap();
    store.snapshot().unwrap();
    drop(store);
    let (store, _) = Store::open(dir.path(), MemState::new(DIMS).unwrap()).unwrap();
    assert!(store.read(|s| s.reindex_batch(2)).is_none());
    assert_eq!(store.read(|s| s.reindex_left()), 0);
}
