//! Tests of `late_disk`: what survives a reopen, a torn tail, a damaged record, compaction.

use super::*;
use crate::models::late_codes::tests::unit_vectors;

/// `tokens` tokens of seeded vectors, every other one kept.
fn full(tokens: usize, seed: u64) -> Full {
    Full {
        states: TokenStates::quantize(&unit_vectors(tokens, seed)),
        kept: (0..tokens).map(|t| t % 2 == 0).collect(),
    }
}

/// A log in `dir` holding keys 1, 2, 3 (5, 6, 7 tokens), appended in that order.
fn three(dir: &Path) -> (PathBuf, FullStore, Vec<Full>) {
    let path = path_in(dir);
    let (store, opened) = FullStore::open(&path).unwrap();
    assert_eq!(opened, Opened::default());
    let fulls: Vec<Full> = (0..3).map(|i| full(5 + i, i as u64)).collect();
    for (i, f) in fulls.iter().enumerate() {
        store.append(i as u64 + 1, 10 + i as u32, f).unwrap();
    }
    (path, store, fulls)
}

fn record_len(f: &Full) -> u64 {
    encode_record(0, 0, f).len() as u64
}

#[test]
fn what_was_appended_reads_back_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store, fulls) = three(dir.path());
    assert_eq!(store.read(2, 11).unwrap(), Some(fulls[1].clone()));
    assert_eq!(store.read(2, 99).unwrap(), None, "another text");
    assert!(store.has(3, 12) && !store.has(3, 13) && !store.has(4, 0));
    drop(store);
    let (store, opened) = FullStore::open(&path).unwrap();
    assert_eq!(opened, Opened { records: 3, cut: 0 });
    for (i, f) in fulls.iter().enumerate() {
        assert_eq!(
            store.read(i as u64 + 1, 10 + i as u32).unwrap().as_ref(),
            Some(f)
        );
    }
    let keys: Vec<u64> = store.entries().iter().map(|e| e.0).collect();
    assert_eq!(keys, vec![1, 2, 3], "in the order written");
    // Kept tokens: every other one (3 of 5, 3 of 6, 4 of 7).
    assert_eq!(store.size().1, 10);
    assert_eq!(fulls[0].kept_rows().len(), 3);
    // A newer record of the same key supersedes the older one, across a reopen too.
    let newer = full(4, 9);
    store.append(1, 77, &newer).unwrap();
    drop(store);
    let (store, _) = FullStore::open(&path).unwrap();
    assert_eq!(store.read(1, 77).unwrap(), Some(newer));
    assert_eq!(store.read(1, 10).unwrap(), None);
    assert_eq!(store.size().0, 3);
}

#[test]
fn a_torn_tail_is_cut_and_the_records_before_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store, fulls) = three(dir.path());
    drop(store);
    let good = fs::read(&path).unwrap();
    let last = record_len(&fulls[2]);
    let two_end = good.len() as u64 - last;
    // Every cut inside the last record (a write that a kill -9 interrupted).
    for len in (two_end + 1..good.len() as u64)
        .step_by(97)
        .chain([good.len() as u64 - 1])
    {
        fs::write(&path, &good[..len as usize]).unwrap();
        let (store, opened) = FullStore::open(&path).unwrap();
        assert_eq!(
            opened,
            Opened {
                records: 2,
                cut: len - two_end
            },
            "cut at {len}"
        );
        assert_eq!(fs::metadata(&path).unwrap().len(), two_end);
        assert!(store.has(2, 11) && !store.has(3, 12));
        // Appends go on from the last whole record.
        store.append(3, 12, &fulls[2]).unwrap();
        drop(store);
        let (store, opened) = FullStore::open(&path).unwrap();
        assert_eq!(opened, Opened { records: 3, cut: 0 });
        assert_eq!(store.read(3, 12).unwrap().as_ref(), Some(&fulls[2]));
    }
}

#[test]
fn a_damaged_record_is_never_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store, fulls) = three(dir.path());
    let first_end = HEADER_LEN + record_len(&fulls[0]);
    // Damaged while open: the read fails, and the record leaves the index.
    let mut bytes = fs::read(&path).unwrap();
    bytes[first_end as usize + 40] ^= 0x10;
    fs::write(&path, &bytes).unwrap();
    assert!(store.read(2, 11).is_err());
    assert!(!store.has(2, 11), "dropped: encoded again");
    assert!(store.read(1, 10).unwrap().is_some() && store.read(3, 12).unwrap().is_some());
    drop(store);
    // Damaged at open: the scan stops there and cuts the rest (encoded again too).
    let (store, opened) = FullStore::open(&path).unwrap();
    assert_eq!(opened.records, 1);
    assert!(opened.cut > 0 && store.has(1, 10) && !store.has(3, 12));
    drop(store);
    // Not a log at all (or of another width): started afresh.
    fs::write(&path, b"something else entirely").unwrap();
    let (store, opened) = FullStore::open(&path).unwrap();
    assert_eq!((opened.records, store.size()), (0, (0, 0, HEADER_LEN)));
    store.append(5, 1, &fulls[0]).unwrap();
    assert!(store.read(5, 1).unwrap().is_some());
}

#[test]
fn compaction_keeps_live_records_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = path_in(dir.path());
    let (store, _) = FullStore::open(&path).unwrap();
    // 180-token records (~70 KB): 40 of them, then all but key 0 and key 39 dropped.
    let big = full(180, 1);
    for key in 0..40 {
        store.append(key, key as u32, &big).unwrap();
    }
    assert!(!store.compact_if_due().unwrap(), "nothing dropped yet");
    let dropped = store.retain(|k, _| k == 0 || k == 39);
    assert_eq!(dropped, 38);
    let before = fs::metadata(&path).unwrap().len();
    assert!(store.compact_if_due().unwrap());
    let after = fs::metadata(&path).unwrap().len();
    assert_eq!(after, HEADER_LEN + 2 * record_len(&big));
    assert!(after < before / 10);
    assert_eq!(store.read(39, 39).unwrap().as_ref(), Some(&big));
    assert!(!store.has(5, 5) && !store.compact_if_due().unwrap());
    // Appends after compaction land in the new file; all of it survives a reopen.
    store.append(7, 7, &full(3, 2)).unwrap();
    drop(store);
    let (store, opened) = FullStore::open(&path).unwrap();
    assert_eq!(opened, Opened { records: 3, cut: 0 });
    assert!(store.has(0, 0) && store.has(39, 39) && store.has(7, 7));
    assert!(!dir.path().join("token-states.log.tmp").exists());
}

#[test]
fn a_record_needs_a_kept_flag_per_token() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = FullStore::open(&path_in(dir.path())).unwrap();
    let mut bad = full(3, 1);
    bad.kept.pop();
    assert!(store.append(1, 1, &bad).is_err());
    assert_eq!(store.size(), (0, 0, HEADER_LEN));
}
