//! Tests of `late_disk`: what survives a reopen, a torn tail, a damaged record, compaction;
//! the saved index and when it is not applied; states of another model.

use super::*;
use crate::models::embed::TokenStates;
use crate::models::late_codes::tests::unit_vectors;

const MODEL: Digest = [1; 32];

fn open(path: &Path) -> (FullStore, Opened) {
    FullStore::open(path, &MODEL, None).unwrap()
}

/// What a scan of `records` whole records finds.
fn scanned(records: usize) -> Opened {
    Opened {
        scanned: records,
        ..Opened::default()
    }
}

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
    let (store, opened) = open(&path);
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
    let (store, opened) = open(&path);
    assert_eq!(opened, scanned(3));
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
    let (store, _) = open(&path);
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
        let (store, opened) = open(&path);
        assert_eq!(
            opened,
            Opened {
                scanned: 2,
                cut: len - two_end,
                ..Opened::default()
            },
            "cut at {len}"
        );
        assert_eq!(fs::metadata(&path).unwrap().len(), two_end);
        assert!(store.has(2, 11) && !store.has(3, 12));
        // Appends go on from the last whole record.
        store.append(3, 12, &fulls[2]).unwrap();
        drop(store);
        let (store, opened) = open(&path);
        assert_eq!(opened, scanned(3));
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
    let (store, opened) = open(&path);
    assert_eq!(opened.scanned, 1);
    assert!(opened.cut > 0 && store.has(1, 10) && !store.has(3, 12));
    drop(store);
    // Not a log at all (or of another width): started afresh.
    fs::write(&path, b"something else entirely").unwrap();
    let (store, opened) = open(&path);
    assert_eq!((opened.scanned, store.size()), (0, (0, 0, HEADER_LEN)));
    assert!(opened.discarded.unwrap().contains("not a token-state log"));
    store.append(5, 1, &fulls[0]).unwrap();
    assert!(store.read(5, 1).unwrap().is_some());
}

#[test]
fn compaction_keeps_live_records_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = path_in(dir.path());
    let (store, _) = open(&path);
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
    let (store, opened) = open(&path);
    assert_eq!(opened, scanned(3));
    assert!(store.has(0, 0) && store.has(39, 39) && store.has(7, 7));
    assert!(!dir.path().join("token-states.log.tmp").exists());
}

#[test]
fn a_record_needs_a_kept_flag_per_token() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(&path_in(dir.path()));
    let mut bad = full(3, 1);
    bad.kept.pop();
    assert!(store.append(1, 1, &bad).is_err());
    assert_eq!(store.size(), (0, 0, HEADER_LEN));
}

#[test]
fn the_saved_index_opens_without_a_scan_and_the_tail_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store, fulls) = three(dir.path());
    let saved = store.saved_index();
    assert_eq!(
        saved.slots.iter().map(|s| s.0).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    // Appended after the index was saved (then the process ended without saving again).
    let later = full(4, 4);
    store.append(4, 13, &later).unwrap();
    drop(store);
    // A damaged record inside what the index covers: the open does not read it...
    let second = (HEADER_LEN + record_len(&fulls[0])) as usize;
    let mut bytes = fs::read(&path).unwrap();
    bytes[second + 40] ^= 0x10;
    fs::write(&path, &bytes).unwrap();
    let (store, opened) = FullStore::open(&path, &MODEL, Some(saved.clone())).unwrap();
    let only_tail = Opened {
        scanned: 1,
        saved_index: true,
        ..Opened::default()
    };
    assert_eq!(opened, only_tail);
    assert_eq!(store.read(1, 10).unwrap().as_ref(), Some(&fulls[0]));
    assert_eq!(store.read(3, 12).unwrap().as_ref(), Some(&fulls[2]));
    assert_eq!(store.read(4, 13).unwrap(), Some(later));
    // ...a read checks it: dropped, never scored.
    assert!(store.read(2, 11).is_err() && !store.has(2, 11));
    assert_eq!(fs::metadata(&path).unwrap().len(), bytes.len() as u64);
}

#[test]
fn a_stale_or_damaged_index_falls_back_to_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store, fulls) = three(dir.path());
    let saved = store.saved_index();
    drop(store);
    let reopen = |index: SavedIndex| {
        let (store, opened) = FullStore::open(&path, &MODEL, Some(index)).unwrap();
        assert_eq!(opened, scanned(3), "scanned instead");
        assert_eq!(store.read(3, 12).unwrap().as_ref(), Some(&fulls[2]));
    };
    // Of another generation (another log, or this one before a compaction or a cut).
    reopen(SavedIndex {
        generation: saved.generation ^ 1,
        ..saved.clone()
    });
    // Covering more than the log holds.
    reopen(SavedIndex {
        end: saved.end + 1,
        ..saved.clone()
    });
    // A slot past the end it covers, or inside the header.
    let mut past = saved.clone();
    past.slots[2].1.offset += 1;
    reopen(past);
    let mut header = saved.clone();
    header.slots[0].1.offset = 0;
    reopen(header);
    // Compaction: a new generation, so the index saved before it no longer applies.
    let (store, _) = FullStore::open(&path, &MODEL, Some(saved.clone())).unwrap();
    store.compact().unwrap();
    assert_ne!(store.saved_index().generation, saved.generation);
    drop(store);
    reopen(saved);
}

#[test]
fn a_cut_tail_gives_the_log_a_new_generation() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store, _) = three(dir.path());
    let saved = store.saved_index();
    store.append(4, 13, &full(4, 4)).unwrap();
    drop(store);
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    let (store, opened) = FullStore::open(&path, &MODEL, Some(saved.clone())).unwrap();
    assert!(opened.saved_index && opened.scanned == 0 && opened.cut > 0);
    assert!(store.has(3, 12) && !store.has(4, 13));
    // Records will be written where the cut one was: the index saved before is stale.
    assert_ne!(store.saved_index().generation, saved.generation);
    store.append(5, 14, &full(9, 5)).unwrap();
    drop(store);
    let (store, opened) = FullStore::open(&path, &MODEL, Some(saved)).unwrap();
    assert_eq!(opened, scanned(4));
    assert!(store.read(5, 14).unwrap().is_some());
}

#[test]
fn states_of_another_model_or_of_the_previous_format_are_discarded() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store, _) = three(dir.path());
    drop(store);
    let other: Digest = [2; 32];
    let (store, opened) = FullStore::open(&path, &other, None).unwrap();
    let why = opened.discarded.unwrap();
    assert!(why.contains("another late-interaction model"), "{why}");
    assert!(why.contains(&hex::encode(MODEL)) && why.contains(&hex::encode(other)));
    assert_eq!(store.size(), (0, 0, HEADER_LEN));
    assert_eq!(fs::metadata(&path).unwrap().len(), HEADER_LEN);
    store.append(1, 10, &full(3, 1)).unwrap();
    drop(store);
    // The new model's log opens as its own.
    let (store, opened) = FullStore::open(&path, &other, None).unwrap();
    assert_eq!(opened, scanned(1));
    assert!(store.has(1, 10));
    drop(store);
    // The previous release's log named no model.
    let mut v1 = MAGIC_V1.to_vec();
    v1.extend((DIMS as u32).to_le_bytes());
    v1.extend(encode_record(1, 10, &full(3, 1)));
    fs::write(&path, &v1).unwrap();
    let (store, opened) = open(&path);
    assert!(opened.discarded.unwrap().contains("previous format"));
    assert_eq!(store.size(), (0, 0, HEADER_LEN));
    // An empty file is new, not discarded.
    fs::write(&path, b"").unwrap();
    assert_eq!(open(&path).1, Opened::default());
}

#[test]
fn a_batch_is_one_append_and_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = path_in(dir.path());
    let (store, _) = open(&path);
    let fulls: Vec<Full> = (0..3).map(|i| full(3 + i, i as u64)).collect();
    let batch: Vec<(u64, u32, &Full)> = fulls
        .iter()
        .enumerate()
        .map(|(i, f)| (i as u64, i as u32, f))
        .collect();
    store.append_batch(&batch).unwrap();
    let lens: u64 = fulls.iter().map(record_len).sum();
    assert_eq!(store.size().2, HEADER_LEN + lens);
    // One malformed member: nothing of the batch is written.
    let mut bad = full(3, 9);
    bad.kept.pop();
    let err = store
        .append_batch(&[(7, 7, &fulls[0]), (8, 8, &bad)])
        .unwrap_err();
    assert!(err.to_string().contains("memory 8"), "{err}");
    assert!(!store.has(7, 7));
    assert_eq!(fs::metadata(&path).unwrap().len(), HEADER_LEN + lens);
    drop(store);
    let (store, opened) = open(&path);
    assert_eq!(opened, scanned(3));
    for (i, f) in fulls.iter().enumerate() {
        assert_eq!(store.read(i as u64, i as u32).unwrap().as_ref(), Some(f));
    }
}

const CHILD_DIR_ENV: &str = "MEMD_TOKEN_LOG_CHILD_DIR";

/// The states the child writes for `key`.
fn child_full(key: u64) -> Full {
    full(3 + (key % 7) as usize, key)
}

/// The child side of the kill test: appends batches of 4 forever, printing `ack <key>` for
/// each memory once its batch's `append_batch` returned (what the daemon counts as on disk).
#[test]
#[ignore]
fn child_appends_until_killed() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let (store, _) = open(&path_in(Path::new(&dir)));
    for first in (0..).step_by(4) {
        let fulls: Vec<Full> = (first..first + 4).map(child_full).collect();
        let batch: Vec<(u64, u32, &Full)> = fulls
            .iter()
            .zip(first..)
            .map(|(f, key)| (key, key as u32, f))
            .collect();
        store.append_batch(&batch).unwrap();
        for key in first..first + 4 {
            println!("ack {key}");
        }
    }
}

#[test]
fn what_was_reported_on_disk_survives_sigkill() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let test = module_path!()
        .split_once("::")
        .map_or("", |(_, rest)| rest)
        .to_owned()
        + "::child_appends_until_killed";
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([&test, "--exact", "--ignored", "--nocapture"])
        .env(CHILD_DIR_ENV, dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        if let Some(key) = line.unwrap().strip_prefix("ack ") {
            acked.push(key.parse::<u64>().unwrap());
            if acked.len() == 400 {
                break;
            }
        }
    }
    assert_eq!(acked.len(), 400, "child stopped early");
    child.kill().unwrap();
    child.wait().unwrap();
    let (store, opened) = open(&path_in(dir.path()));
    assert!(opened.scanned >= 400, "{opened:?}");
    for key in acked {
        let read = store.read(key, key as u32).unwrap();
        assert_eq!(read, Some(child_full(key)), "memory {key}");
    }
}

#[test]
fn a_study_view_reads_records_back_coarser_and_leaves_the_file_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = path_in(dir.path());
    let (store, _) = open(&path);
    let f = full(9, 4);
    store.append(1, 10, &f).unwrap();
    drop(store);
    let len = fs::metadata(&path).unwrap().len();
    let four = Form {
        kept_only: true,
        bits: 4,
    };
    let (store, opened) = FullStore::open_with(&path, &MODEL, None, Some(four)).unwrap();
    assert_eq!(opened, scanned(1));
    assert_eq!(store.read(1, 10).unwrap(), Some(four.apply(&f)));
    assert_ne!(four.apply(&f), f);
    assert_eq!(fs::metadata(&path).unwrap().len(), len);
}
