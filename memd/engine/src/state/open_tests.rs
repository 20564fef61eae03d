//! Opening a store from the indexes saved with its snapshot: the same answers as a rebuild,
//! damaged or stale index files rebuilt, and the WAL after the snapshot applied on top.

use super::lexical_file::{KIND, lexical_file};
use super::ops::{Op, Output};
use super::*;
use crate::store::Store;
use std::fs;

const DIMS: usize = 8;
const QUERIES: [&str; 5] = [
    "redis cache eviction",
    "deploy step port",
    "rewritten text about kafka",
    "nightly backup",
    "zebra",
];

fn text(i: u64) -> String {
    format!(
        "note {i}: the {} job uses port {} and the {} cache",
        ["nightly", "deploy", "backup"][i as usize % 3],
        5000 + i % 13,
        ["redis", "disk", "memory", "eviction"][i as usize % 4]
    )
}

fn vector(i: u64) -> Vec<f32> {
    (0..DIMS)
        .map(|d| ((i as usize * 7 + d * 3) % 11) as f32 + 0.5)
        .collect()
}

fn insert(store: &Store<MemState>, from: u64, to: u64) -> Vec<String> {
    let ops = (from..to)
        .map(|i| Op::Insert(Box::new(Record::new(Collection::Working, text(i), 1))))
        .collect();
    let outs = store.commit(ops).unwrap();
    let mut ids = Vec::new();
    let mut vectors = Vec::new();
    for (i, out) in (from..).zip(outs) {
        let Output::Inserted { id, key } = out else {
            panic!("not inserted: {out:?}")
        };
        ids.push(id);
        vectors.push(Op::vector(key, &vector(i)));
    }
    store.commit(vectors).unwrap();
    ids
}

/// A store with a snapshot (and its side files) and then WAL-only changes: inserts, an edit
/// and a deletion. Dropped without `close`, so the last changes exist only in the WAL.
fn store_with_wal_tail(dir: &Path) -> String {
    let (store, _) = Store::open(dir, MemState::new(DIMS).unwrap()).unwrap();
    let ids = insert(&store, 0, 120);
    store.snapshot().unwrap();
    insert(&store, 120, 150);
    store
        .commit(vec![
            Op::Update {
                id: ids[5].clone(),
                content: Some("rewritten text about kafka".into()),
                tags: None,
                importance: None,
                confidence: None,
                at: 2,
            },
            Op::Delete {
                id: ids[6].clone(),
                reason: "test".into(),
            },
        ])
        .unwrap();
    ids[5].clone()
}

/// The lexical answers of a state next to those of an index built afresh from its records.
fn assert_matches_a_rebuild(s: &MemState) {
    let mut keys: Vec<u64> = s.records().map(|r| r.key).collect();
    keys.sort_unstable();
    let mut fresh = Lexical::new();
    for k in keys {
        fresh.insert(k, &s.by_key(k).unwrap().content);
    }
    assert_eq!(s.lexical().len(), s.len());
    for q in QUERIES {
        let got = s.lexical().search(q, 20, &|_| true);
        let want = fresh.search(q, 20, &|_| true);
        let ids = |h: &[(u64, f32)]| h.iter().map(|x| x.0).collect::<Vec<_>>();
        assert_eq!(ids(&got), ids(&want), "{q}");
        for (g, w) in got.iter().zip(&want) {
            assert!((g.1 - w.1).abs() < 1e-4, "{q}: {g:?} vs {w:?}");
        }
    }
}

fn open(dir: &Path) -> (Store<MemState>, crate::store::Recovery) {
    Store::open(dir, MemState::new(DIMS).unwrap()).unwrap()
}

#[test]
fn start_from_saved_indexes_answers_like_a_rebuild_with_the_wal_on_top() {
    let dir = tempfile::tempdir().unwrap();
    let edited = store_with_wal_tail(dir.path());
    assert!(lexical_file(dir.path(), 1).exists());
    let (store, recovery) = open(dir.path());
    assert_eq!(recovery.snapshot_gen, 1);
    assert!(recovery.ops_replayed > 0);
    store.read(|s| {
        assert_eq!(s.lexical_origin, "loaded");
        assert_eq!(s.index_origin, "loaded");
        assert_eq!(s.len(), 149);
        // Only the edited memory waits for a new embedding.
        assert_eq!(s.pending_len(), 1);
        assert!(
            s.open_note.contains("lexical index loaded"),
            "{}",
            s.open_note
        );
        // The WAL's edit and deletion are in the loaded index.
        let hits = s.lexical().search("kafka", 5, &|_| true);
        assert_eq!(hits.len(), 1);
        assert_eq!(s.by_key(hits[0].0).unwrap().id, edited);
        assert_matches_a_rebuild(s);
    });
    // A clean close saves the next generation, which the next open loads.
    store.close().unwrap();
    assert!(lexical_file(dir.path(), 2).exists());
    assert!(!lexical_file(dir.path(), 1).exists());
    let (store, _) = open(dir.path());
    store.read(|s| {
        assert_eq!(s.lexical_origin, "loaded");
        assert_matches_a_rebuild(s);
    });
}

/// Each damage: the index is rebuilt (never used), and the answers are still a rebuild's.
#[test]
fn damaged_cut_or_stale_lexical_files_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    store_with_wal_tail(dir.path());
    let path = lexical_file(dir.path(), 1);
    let good = fs::read(&path).unwrap();
    let stale = {
        // A valid file of the right generation, but of the state before the last 20 inserts.
        let (store, _) = open(dir.path());
        let image = store.read(|s| {
            let mut ix = Lexical::from_image(&s.lexical().to_image()).unwrap();
            for r in s.records().filter(|r| r.key % 7 == 0) {
                ix.remove(r.key, &crate::indexed_text::of(r));
            }
            ix.to_image()
        });
        drop(store);
        image
    };
    type Damage<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let damages: Vec<Damage> = vec![
        (
            "cut short",
            Box::new(|| fs::write(&path, &good[..good.len() / 2]).unwrap()),
        ),
        (
            "flipped byte",
            Box::new(|| {
                let mut bad = good.clone();
                let at = bad.len() - 9;
                bad[at] ^= 0x20;
                fs::write(&path, bad).unwrap()
            }),
        ),
        (
            "other generation",
            Box::new(|| crate::store::side_file::write(&path, KIND, 0, &good[32..]).unwrap()),
        ),
        (
            "documents that are not the records",
            Box::new(|| crate::store::side_file::write(&path, KIND, 1, &stale).unwrap()),
        ),
        ("missing", Box::new(|| fs::remove_file(&path).unwrap())),
    ];
    for (what, damage) in damages {
        damage();
        let (store, _) = open(dir.path());
        store.read(|s| {
            assert_eq!(s.lexical_origin, "rebuilt", "{what}");
            assert_matches_a_rebuild(s);
            assert_eq!(s.lexical().search("kafka", 5, &|_| true).len(), 1, "{what}");
        });
        drop(store);
        // The rebuild was saved for the same snapshot: the next start loads it.
        let (store, _) = open(dir.path());
        store.read(|s| assert_eq!(s.lexical_origin, "loaded", "{what}"));
        drop(store);
        fs::write(&path, &good).unwrap();
    }
    let (store, _) = open(dir.path());
    store.read(|s| assert_eq!(s.lexical_origin, "loaded"));
}

/// The vector index is read beside the decode: a damaged one is still refused (every memory
/// then waits for its embedding), and a good one is still taken.
#[test]
fn a_damaged_vector_file_read_beside_the_decode_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    store_with_wal_tail(dir.path());
    let path = dir.path().join("vectors.00000001.usearch");
    let good = fs::read(&path).unwrap();
    let mut bad = good.clone();
    bad[good.len() / 3] ^= 0x40;
    fs::write(&path, &bad).unwrap();
    let (store, _) = open(dir.path());
    store.read(|s| {
        assert_eq!(s.index_origin, "rebuilt");
        assert_eq!(s.vectors().len(), 30, "only the WAL's embeddings");
        // The snapshot's 120 wait (less the one the WAL deleted); the WAL's 30 came embedded.
        assert_eq!(s.pending_len(), 119, "{}", s.open_note);
        assert_eq!(s.lexical_origin, "loaded");
    });
    drop(store);
    fs::write(&path, &good).unwrap();
    let (store, _) = open(dir.path());
    store.read(|s| {
        assert_eq!(s.index_origin, "loaded");
        assert_eq!(s.pending_len(), 1);
    });
}
