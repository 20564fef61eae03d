//! Behaviour of an open store: commits, reads, snapshots, concurrency, failures, locking.
//!
//! Owns the tests of the live API on real files in temp dirs. Must never synchronise with
//! sleeps: writers are held back through the WAL lock and progress is observed via counters.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use super::test_machine::{Log, PANIC_OP, copy_image, entries, file_len, open, ops, wal_path};
use super::wal::Faults;
use super::{Store, StoreError, TailState};

#[test]
fn round_trip_through_close_and_open() {
    let dir = tempfile::tempdir().unwrap();
    let (store, recovery) = open(dir.path());
    assert_eq!((recovery.snapshot_gen, recovery.ops_replayed), (0, 0));
    assert_eq!(recovery.tail, TailState::Clean);
    assert_eq!(store.commit(ops(&["a", "b"])).unwrap(), vec![0, 1]);
    assert_eq!(store.commit(ops(&["c"])).unwrap(), vec![2]);
    assert_eq!(store.commit(Vec::new()).unwrap(), Vec::<usize>::new());
    assert_eq!(entries(&store), ["a", "b", "c"]);
    store.close().unwrap();

    let (store, recovery) = open(dir.path());
    assert_eq!(entries(&store), ["a", "b", "c"]);
    assert_eq!(recovery.snapshot_gen, 1, "close writes a final snapshot");
    assert_eq!(recovery.ops_replayed, 0);
    assert_eq!(store.ops_since_snapshot(), 0);
}

#[test]
fn drop_without_close_keeps_every_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    for i in 0..50 {
        store.commit(vec![format!("op{i}")]).unwrap();
    }
    drop(store);
    let (store, recovery) = open(dir.path());
    assert_eq!(recovery.snapshot_gen, 0);
    assert_eq!(recovery.ops_replayed, 50);
    assert_eq!(recovery.tail, TailState::Clean);
    let expected: Vec<String> = (0..50).map(|i| format!("op{i}")).collect();
    assert_eq!(entries(&store), expected);
    assert_eq!(store.ops_since_snapshot(), 50);
}

#[test]
fn image_copied_while_open_holds_every_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    let image = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["before"])).unwrap();
    store.snapshot().unwrap();
    store.commit(ops(&["after", "snapshot"])).unwrap();
    // The process is still running: the copy is what a power cut would leave.
    copy_image(dir.path(), image.path());
    let (copy, recovery) = open(image.path());
    assert_eq!(entries(&copy), ["before", "after", "snapshot"]);
    assert_eq!((recovery.snapshot_gen, recovery.ops_replayed), (1, 2));
    drop(store);
}

#[test]
fn snapshot_then_more_ops_then_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["a", "b", "c"])).unwrap();
    let info = store.snapshot().unwrap();
    assert_eq!((info.generation, info.ops_covered), (1, 3));
    assert_eq!(store.ops_since_snapshot(), 0);
    store.commit(ops(&["d"])).unwrap();
    store.commit(ops(&["e"])).unwrap();
    assert_eq!(store.ops_since_snapshot(), 2);
    assert!(store.disk_bytes() >= info.bytes);
    drop(store);

    let (store, recovery) = open(dir.path());
    assert_eq!(entries(&store), ["a", "b", "c", "d", "e"]);
    assert_eq!((recovery.snapshot_gen, recovery.ops_replayed), (1, 2));
    let side = store.read(|log| log.side_loaded);
    assert_eq!(
        side,
        Some((1, Some(3))),
        "side files match the snapshot they belong to"
    );
}

#[test]
fn snapshots_prune_old_files_but_keep_a_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    for round in 0..4 {
        store.commit(vec![format!("r{round}")]).unwrap();
        store.snapshot().unwrap();
    }
    let listing = super::files::scan(dir.path()).unwrap();
    assert_eq!(listing.snapshots, vec![3, 4]);
    assert_eq!(listing.segments, vec![3, 4]);
    let expected_bytes: u64 = [
        super::test_machine::snapshot_path(dir.path(), 3),
        super::test_machine::snapshot_path(dir.path(), 4),
        wal_path(dir.path(), 3),
        wal_path(dir.path(), 4),
    ]
    .iter()
    .map(|p| file_len(p))
    .sum();
    assert_eq!(store.disk_bytes(), expected_bytes);
}

#[test]
fn snapshots_taken_during_commits_match_their_side_files() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    let store = Arc::new(store);
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                for i in 0..60 {
                    store.commit(vec![format!("{t}:{i}")]).unwrap();
                }
            })
        })
        .collect();
    for _ in 0..5 {
        let info = store.snapshot().unwrap();
        let payload = super::snapshot::read(dir.path(), info.generation).unwrap();
        let in_snapshot: Vec<String> = rmp_serde::from_slice(&payload).unwrap();
        let side = std::fs::read_to_string(dir.path().join(format!("side.{}", info.generation)));
        assert_eq!(side.unwrap(), in_snapshot.len().to_string());
    }
    for writer in writers {
        writer.join().unwrap();
    }
    let log = entries(&store);
    assert_eq!(log.len(), 240);
    drop(Arc::into_inner(store).unwrap());
    let (store, _) = open(dir.path());
    assert_eq!(entries(&store), log);
}

#[test]
fn concurrent_commits_apply_exactly_once_in_one_order() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    let store = Arc::new(store);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                (0..PER_THREAD)
                    .map(|i| {
                        let out = store.commit(vec![format!("{t}:{i}")]).unwrap();
                        (format!("{t}:{i}"), out[0])
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let outputs: Vec<(String, usize)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let log = entries(&store);
    assert_eq!(log.len(), THREADS * PER_THREAD);
    for (op, index) in &outputs {
        assert_eq!(
            &log[*index], op,
            "output is the op's position in the applied order"
        );
    }
    let mut last_seen: BTreeMap<&str, i64> = BTreeMap::new();
    for entry in &log {
        let (thread_id, i) = entry.split_once(':').unwrap();
        let i: i64 = i.parse().unwrap();
        let previous = last_seen.insert(thread_id, i).unwrap_or(-1);
        assert_eq!(
            i,
            previous + 1,
            "each thread's ops in its order, none twice"
        );
    }
    assert!(store.stats().wal_syncs <= store.stats().commits);
    let store = Arc::into_inner(store).unwrap();
    drop(store);
    let (reopened, _) = open(dir.path());
    assert_eq!(entries(&reopened), log, "replay reproduces the same order");
}

#[test]
fn queued_commits_share_one_fsync() {
    const THREADS: u64 = 8;
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    let store = Arc::new(store);
    let before = store.stats();
    let handles = {
        let held = store.hold_writer();
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let store = Arc::clone(&store);
                thread::spawn(move || store.commit(vec![format!("t{t}")]).unwrap())
            })
            .collect();
        while store.submitted() < THREADS {
            thread::yield_now();
        }
        drop(held);
        handles
    };
    for handle in handles {
        handle.join().unwrap();
    }
    let after = store.stats();
    assert_eq!(after.commits - before.commits, THREADS);
    // The writer may have taken the first request before the rest queued behind the lock.
    let syncs = after.wal_syncs - before.wal_syncs;
    assert!(syncs <= 2, "{THREADS} queued commits took {syncs} fsyncs");
}

#[test]
fn second_open_of_a_dir_is_refused_with_the_pid() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    let Err(err) = Store::open(dir.path(), Log::default()) else {
        panic!("second open succeeded");
    };
    assert!(err.is_locked(), "{err}");
    let pid = std::process::id();
    assert!(matches!(err, StoreError::Locked { pid: Some(p), .. } if p == pid));
    assert_eq!(
        err.to_string(),
        format!(
            "another memd (pid {pid}) is already using {}",
            dir.path().display()
        )
    );
    drop(store);
    let (_again, _) = open(dir.path());
}

/// Covers the writer's failure path through the injection hook (a real ENOSPC needs a full
/// filesystem): a half-written batch is cut off, nothing is applied, every requester gets the
/// typed error, and the next commit succeeds and lands right after the last good frame.
#[test]
fn failed_write_applies_nothing_and_the_next_commit_works() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["kept"])).unwrap();
    let good_len = file_len(&wal_path(dir.path(), 0));

    store.inject_faults(Faults {
        write_enospc: 1,
        ..Faults::default()
    });
    let err = store.commit(ops(&["lost-enospc"])).unwrap_err();
    assert!(err.is_storage_full(), "{err}");
    assert_eq!(file_len(&wal_path(dir.path(), 0)), good_len);

    store.inject_faults(Faults {
        sync_eio: 1,
        ..Faults::default()
    });
    let err = store.commit(ops(&["lost-eio"])).unwrap_err();
    assert!(matches!(err, StoreError::Io(_)), "{err}");
    assert_eq!(file_len(&wal_path(dir.path(), 0)), good_len);
    assert_eq!(entries(&store), ["kept"]);
    assert_eq!(store.stats().failed_commits, 2);

    store.commit(ops(&["after"])).unwrap();
    assert_eq!(entries(&store), ["kept", "after"]);
    drop(store);
    let (store, recovery) = open(dir.path());
    assert_eq!(entries(&store), ["kept", "after"]);
    assert_eq!(recovery.tail, TailState::Clean);
}

#[test]
fn unrecoverable_write_failure_refuses_writes_until_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["kept"])).unwrap();
    store.inject_faults(Faults {
        write_enospc: 1,
        rollback_eio: 1,
        ..Faults::default()
    });
    assert!(store.commit(ops(&["lost"])).unwrap_err().is_storage_full());
    let err = store.commit(ops(&["refused"])).unwrap_err();
    assert!(err.is_read_only(), "{err}");
    assert_eq!(entries(&store), ["kept"]);
    drop(store);
    // The half frame left behind is a torn tail to the next open.
    let (store, recovery) = open(dir.path());
    assert_eq!(entries(&store), ["kept"]);
    assert!(
        matches!(recovery.tail, TailState::Torn { .. }),
        "{:?}",
        recovery.tail
    );
    store.commit(ops(&["works"])).unwrap();
}

/// Issue 17: a data dir deleted under the running daemon swallowed every later write while
/// answering success. The writer notices its segment is gone and refuses (HTTP 503).
#[test]
fn writes_are_refused_once_the_wal_was_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["kept"])).unwrap();
    std::fs::remove_dir_all(dir.path()).unwrap();
    for _ in 0..2 {
        let err = store.commit(ops(&["lost"])).unwrap_err();
        assert!(err.is_read_only(), "{err}");
        assert!(err.to_string().contains("deleted"), "{err}");
    }
    assert_eq!(entries(&store), ["kept"], "nothing refused was applied");
}

#[test]
fn async_commits_are_ordered_and_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let outputs = runtime.block_on(async {
        let first = store.commit_async(ops(&["x", "y"])).await.unwrap();
        let (a, b) = tokio::join!(
            store.commit_async(ops(&["p"])),
            store.commit_async(ops(&["q"]))
        );
        (first, a.unwrap(), b.unwrap())
    });
    assert_eq!(outputs.0, vec![0, 1]);
    let mut rest = vec![outputs.1[0], outputs.2[0]];
    rest.sort_unstable();
    assert_eq!(rest, vec![2, 3]);
    drop(store);
    let (store, _) = open(dir.path());
    assert_eq!(entries(&store).len(), 4);
}

#[test]
fn files_are_private() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("data");
    let (store, _) = open(&dir);
    store.commit(ops(&["a"])).unwrap();
    store.snapshot().unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("wal.") || name.starts_with("snapshot.") || name == "lock" {
            assert_eq!(mode(&path), 0o600, "{name}");
        }
    }
}

#[test]
fn commits_after_close_report_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, _) = open(dir.path());
    store.stop_writer().unwrap();
    assert!(store.commit(ops(&["late"])).unwrap_err().is_closed());
}

#[test]
fn panicking_machine_fails_commits_instead_of_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    store.commit(ops(&["fine"])).unwrap();
    assert!(store.commit(ops(&[PANIC_OP])).unwrap_err().is_closed());
    assert!(store.commit(ops(&["next"])).unwrap_err().is_closed());
    let err = store.snapshot().unwrap_err();
    assert!(
        err.is_corrupt(),
        "a half-applied state is never snapshotted: {err}"
    );
    assert_eq!(entries(&store), ["fine"]);
}

#[test]
fn store_and_its_futures_can_cross_threads() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    fn assert_send<T: Send>(_: T) {}
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path());
    assert_send_sync(&store);
    assert_send(store.commit_async(ops(&["x"])));
}

/// Commit rate with 1 and 8 committing threads (each commit waits for its fsync).
/// Run: cargo test commit_rate -- --ignored --nocapture
#[test]
#[ignore]
fn commit_rate() {
    for (threads, per_thread) in [(1usize, 400usize), (8, 200)] {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = open(dir.path());
        let store = Arc::new(store);
        let started = Instant::now();
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let store = Arc::clone(&store);
                thread::spawn(move || {
                    for i in 0..per_thread {
                        store
                            .commit(vec![format!("thread {t} op {i} {}", "x".repeat(200))])
                            .unwrap();
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        let secs = started.elapsed().as_secs_f64();
        let stats = store.stats();
        let commits = (threads * per_thread) as u64;
        assert_eq!(stats.commits, commits);
        println!(
            "{threads} thread(s): {commits} commits in {secs:.2}s = {:.0} commits/s, \
             {} fsyncs ({:.1} commits per fsync)",
            commits as f64 / secs,
            stats.wal_syncs,
            commits as f64 / stats.wal_syncs as f64
        );
    }
}
