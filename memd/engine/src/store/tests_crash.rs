//! Recovery from the files a crash, a failed disk or an interrupted snapshot leaves behind.
//!
//! Owns tests that build damaged directories (torn and corrupt WAL tails at every byte, snapshot
//! steps cut short, missing and damaged files) and check what `Store::open` makes of them. Must
//! never accept a recovery that silently loses acknowledged ops.

use std::fs;
use std::path::Path;

use super::snapshot::CrashPoint;
use super::test_machine::{Log, copy_image, entries, file_len, open, ops, snapshot_path, wal_path};
use super::{Store, StoreError, TailState, files};

/// A directory whose only segment ends with a two-op frame; returns where that frame starts.
fn image_with_last_frame(dir: &Path) -> (u64, u64) {
    let (store, _) = open(dir);
    store.commit(ops(&["one"])).unwrap();
    store.commit(ops(&["two", "three"])).unwrap();
    let last_start = file_len(&wal_path(dir, 0));
    store.commit(ops(&["four", "five"])).unwrap();
    let full = file_len(&wal_path(dir, 0));
    drop(store);
    (last_start, full)
}

fn reopen_damaged(
    image: &Path,
    damage: impl FnOnce(&Path),
) -> (tempfile::TempDir, Store<Log>, super::Recovery) {
    let dir = tempfile::tempdir().unwrap();
    copy_image(image, dir.path());
    damage(dir.path());
    let (store, recovery) = open(dir.path());
    (dir, store, recovery)
}

#[test]
fn torn_last_frame_at_every_offset_keeps_earlier_ops() {
    let image = tempfile::tempdir().unwrap();
    let (last_start, full) = image_with_last_frame(image.path());
    for cut in last_start..full {
        let (dir, store, recovery) = reopen_damaged(image.path(), |d| {
            let file = files::open_read_write(&wal_path(d, 0)).unwrap();
            file.set_len(cut).unwrap();
        });
        assert_eq!(entries(&store), ["one", "two", "three"], "cut at {cut}");
        if cut == last_start {
            assert_eq!(recovery.tail, TailState::Clean);
        } else {
            assert!(
                matches!(recovery.tail, TailState::Torn { offset, .. } if offset == last_start),
                "cut at {cut}: {:?}",
                recovery.tail
            );
        }
        assert_eq!(
            file_len(&wal_path(dir.path(), 0)),
            last_start,
            "garbage cut off"
        );
        store.commit(ops(&["six"])).unwrap();
        drop(store);
        let (store, recovery) = open(dir.path());
        assert_eq!(
            entries(&store),
            ["one", "two", "three", "six"],
            "cut at {cut}"
        );
        assert_eq!(recovery.tail, TailState::Clean);
    }
}

#[test]
fn flipped_byte_in_last_frame_keeps_earlier_ops() {
    let image = tempfile::tempdir().unwrap();
    let (last_start, full) = image_with_last_frame(image.path());
    for position in last_start..full {
        let (dir, store, recovery) = reopen_damaged(image.path(), |d| {
            let path = wal_path(d, 0);
            let mut bytes = fs::read(&path).unwrap();
            bytes[position as usize] ^= 0x01;
            fs::write(&path, bytes).unwrap();
        });
        assert_eq!(
            entries(&store),
            ["one", "two", "three"],
            "flip at {position}"
        );
        match &recovery.tail {
            // A flipped length bit can make the frame look longer than the file.
            TailState::Torn { offset, .. } => assert_eq!(*offset, last_start),
            TailState::Corrupt { offset, .. } => {
                assert_eq!(*offset, last_start);
                let aside = dir.path().join(files::discarded_wal_name(0, last_start));
                assert_eq!(
                    file_len(&aside),
                    full - last_start,
                    "damaged bytes kept aside"
                );
            }
            TailState::Clean => panic!("flip at {position} went unnoticed"),
            TailState::Resynced { .. } => panic!("nothing valid follows the last frame"),
        }
        store.commit(ops(&["six"])).unwrap();
        drop(store);
        let (store, _) = open(dir.path());
        assert_eq!(entries(&store), ["one", "two", "three", "six"]);
    }
}

#[test]
fn frame_with_valid_checksum_that_does_not_decode_is_set_aside() {
    let image = tempfile::tempdir().unwrap();
    let (last_start, _) = image_with_last_frame(image.path());
    let (dir, store, recovery) = reopen_damaged(image.path(), |d| {
        let file = files::open_read_write(&wal_path(d, 0)).unwrap();
        file.set_len(last_start).unwrap();
        // A well-formed frame holding a map where a list of ops belongs.
        let frame = super::wal::encode_frame(&std::collections::BTreeMap::from([(1, 2)])).unwrap();
        use std::io::Write;
        fs::OpenOptions::new()
            .append(true)
            .open(wal_path(d, 0))
            .unwrap()
            .write_all(&frame)
            .unwrap();
    });
    assert_eq!(entries(&store), ["one", "two", "three"]);
    assert!(
        matches!(&recovery.tail, TailState::Corrupt { reason, .. } if reason.contains("decode")),
        "{:?}",
        recovery.tail
    );
    assert!(
        dir.path()
            .join(files::discarded_wal_name(0, last_start))
            .exists()
    );
}

/// Commits `a`, snapshots, commits `b`, then runs a snapshot that "crashes" at `point`, and
/// returns the directory as the crash left it.
fn crash_during_second_snapshot(point: CrashPoint) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["a"])).unwrap();
    store.snapshot().unwrap();
    store.commit(ops(&["b"])).unwrap();
    store.crash_snapshot_at(point);
    let err = store.snapshot().unwrap_err();
    assert!(err.to_string().contains("simulated crash"), "{err}");
    store.commit(ops(&["c"])).unwrap();
    drop(store);
    dir
}

#[test]
fn crash_after_wal_rotation_recovers_everything() {
    let dir = crash_during_second_snapshot(CrashPoint::WalRotated);
    let (store, recovery) = open(dir.path());
    assert_eq!(entries(&store), ["a", "b", "c"]);
    assert_eq!((recovery.snapshot_gen, recovery.ops_replayed), (1, 2));
    // The next snapshot continues the generation sequence after the orphaned rotation.
    assert_eq!(store.snapshot().unwrap().generation, 3);
    drop(store);
    let (store, _) = open(dir.path());
    assert_eq!(entries(&store), ["a", "b", "c"]);
}

#[test]
fn crash_before_snapshot_rename_discards_the_temp_file() {
    let dir = crash_during_second_snapshot(CrashPoint::TempWritten);
    let temp = dir.path().join(files::temp_name(&files::snapshot_name(2)));
    assert!(temp.exists());
    let (store, recovery) = open(dir.path());
    assert!(!temp.exists(), "stale temp removed");
    assert_eq!(entries(&store), ["a", "b", "c"]);
    assert_eq!(recovery.snapshot_gen, 1);
}

#[test]
fn crash_before_pruning_uses_the_new_snapshot() {
    let dir = crash_during_second_snapshot(CrashPoint::Published);
    let (store, recovery) = open(dir.path());
    assert_eq!(entries(&store), ["a", "b", "c"]);
    assert_eq!((recovery.snapshot_gen, recovery.ops_replayed), (2, 1));
}

#[test]
fn half_written_snapshot_temp_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["a"])).unwrap();
    drop(store);
    let temp = dir.path().join(files::temp_name(&files::snapshot_name(1)));
    fs::write(&temp, b"MEMDSNP\0 partial").unwrap();
    let (store, recovery) = open(dir.path());
    assert_eq!(entries(&store), ["a"]);
    assert_eq!(recovery.snapshot_gen, 0);
    assert!(!temp.exists());
}

/// Three snapshots: generations 2 and 3 are kept with segments 2 and 3.
fn three_snapshots(dir: &Path) {
    let (store, _) = open(dir);
    for round in ["a", "b", "c"] {
        store.commit(ops(&[round])).unwrap();
        store.snapshot().unwrap();
    }
    store.commit(ops(&["d"])).unwrap();
    drop(store);
}

fn flip_byte(path: &Path, index: usize) {
    let mut bytes = fs::read(path).unwrap();
    bytes[index] ^= 0xff;
    fs::write(path, bytes).unwrap();
}

#[test]
fn damaged_newest_snapshot_falls_back_to_the_previous_one() {
    let dir = tempfile::tempdir().unwrap();
    three_snapshots(dir.path());
    let newest = snapshot_path(dir.path(), 3);
    let len = file_len(&newest) as usize;
    flip_byte(&newest, len - 1);
    let (store, recovery) = open(dir.path());
    assert_eq!(entries(&store), ["a", "b", "c", "d"]);
    assert_eq!((recovery.snapshot_gen, recovery.ops_replayed), (2, 2));
    assert!(!newest.exists());
    assert!(dir.path().join(files::corrupt_snapshot_name(3)).exists());
    // New snapshots must not reuse the quarantined generation's segment chain wrongly.
    store.snapshot().unwrap();
    drop(store);
    let (store, _) = open(dir.path());
    assert_eq!(entries(&store), ["a", "b", "c", "d"]);
}

#[test]
fn damaged_only_snapshot_with_full_wal_replays_from_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["a"])).unwrap();
    store.snapshot().unwrap();
    store.commit(ops(&["b"])).unwrap();
    drop(store);
    flip_byte(&snapshot_path(dir.path(), 1), 33);
    let (store, recovery) = open(dir.path());
    assert_eq!(entries(&store), ["a", "b"]);
    assert_eq!((recovery.snapshot_gen, recovery.ops_replayed), (0, 2));
}

#[test]
fn no_readable_snapshot_and_no_full_wal_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    three_snapshots(dir.path());
    flip_byte(&snapshot_path(dir.path(), 3), 33);
    flip_byte(&snapshot_path(dir.path(), 2), 33);
    let err = Store::open(dir.path(), Log::default())
        .err()
        .expect("open must fail");
    assert!(err.is_corrupt(), "{err}");
    let text = err.to_string();
    assert!(text.contains("refusing to start empty"), "{text}");
    assert!(
        text.contains("snapshot 3 unusable: checksum mismatch"),
        "{text}"
    );
    // Nothing was moved or deleted: an operator can still repair the files.
    assert!(snapshot_path(dir.path(), 3).exists() && snapshot_path(dir.path(), 2).exists());
}

#[test]
fn missing_segment_in_the_chain_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["a"])).unwrap();
    drop(store);
    // Segment 1 exists but segment 0 (all ops so far) is gone.
    fs::rename(wal_path(dir.path(), 0), wal_path(dir.path(), 1)).unwrap();
    let err = Store::open(dir.path(), Log::default())
        .err()
        .expect("open must fail");
    assert!(err.is_corrupt(), "{err}");

    let dir = tempfile::tempdir().unwrap();
    three_snapshots(dir.path());
    fs::remove_file(wal_path(dir.path(), 3)).unwrap();
    fs::write(wal_path(dir.path(), 4), b"").unwrap();
    let err = Store::open(dir.path(), Log::default())
        .err()
        .expect("open must fail");
    assert!(
        err.to_string().contains("WAL segment 3 is missing"),
        "{err}"
    );
}

#[test]
fn damaged_segment_header_is_an_error_not_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["a"])).unwrap();
    drop(store);
    flip_byte(&wal_path(dir.path(), 0), 2);
    let before = fs::read(wal_path(dir.path(), 0)).unwrap();
    match Store::open(dir.path(), Log::default()) {
        Err(StoreError::Corrupt(m)) => assert!(m.contains("bad magic"), "{m}"),
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("opened a segment with a damaged header"),
    }
    assert_eq!(
        fs::read(wal_path(dir.path(), 0)).unwrap(),
        before,
        "left untouched"
    );
}

#[test]
fn snapshot_that_does_not_decode_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["a"])).unwrap();
    store.close().unwrap();
    // A valid file whose payload is not this machine's encoding.
    let path = snapshot_path(dir.path(), 1);
    let mut fake = b"MEMDSNP\0".to_vec();
    let payload = b"\xc1"; // reserved MessagePack byte
    fake.extend_from_slice(&1u32.to_le_bytes());
    fake.extend_from_slice(&1u64.to_le_bytes());
    fake.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    fake.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    fake.extend_from_slice(payload);
    fs::write(&path, fake).unwrap();
    let err = Store::open(dir.path(), Log::default())
        .err()
        .expect("open must fail");
    assert!(err.to_string().contains("cannot be decoded"), "{err}");
}

/// Issue 17: one flipped byte in the middle of the WAL dropped every record after it. The
/// frames after the damage are intact and carry their own checksums: recovery resynchronises
/// on them, sets only the damaged frame aside and rewrites the segment without it.
#[test]
fn damage_in_the_middle_loses_only_the_damaged_frame() {
    let image = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..40).map(|i| format!("op{i}")).collect();
    let mut starts = Vec::new();
    {
        let (store, _) = open(image.path());
        for name in &names {
            starts.push(file_len(&wal_path(image.path(), 0)));
            store.commit(ops(&[name])).unwrap();
        }
    }
    let (hit, next) = (starts[20], starts[21]);
    // A payload byte (checksum mismatch) and a length byte (the frame then looks longer than
    // the file, which alone would read as a torn tail).
    for position in [hit + 12, hit + 2] {
        let (dir, store, recovery) = reopen_damaged(image.path(), |d| {
            let path = wal_path(d, 0);
            let mut bytes = fs::read(&path).unwrap();
            bytes[position as usize] ^= 0x40;
            fs::write(&path, bytes).unwrap();
        });
        let expected: Vec<String> = names.iter().filter(|n| *n != "op20").cloned().collect();
        assert_eq!(entries(&store), expected, "flip at {position}");
        assert!(
            matches!(recovery.tail, TailState::Resynced { offset, skipped, .. }
                if offset == hit && skipped == next - hit),
            "{:?}",
            recovery.tail
        );
        let aside = dir.path().join(files::discarded_wal_name(0, hit));
        assert_eq!(file_len(&aside), next - hit, "the damaged frame kept aside");
        store.commit(ops(&["after"])).unwrap();
        drop(store);
        let (store, recovery) = open(dir.path());
        assert_eq!(recovery.tail, TailState::Clean, "the segment was rewritten");
        assert_eq!(entries(&store).len(), 40);
        assert_eq!(entries(&store).last().map(String::as_str), Some("after"));
    }
}
