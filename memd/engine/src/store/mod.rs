//! The durable storage engine of memd, generic over a deterministic state machine.
//!
//! Owns the data directory's durable files: a write-ahead log of checksummed MessagePack frames
//! (group-committed by one writer thread, fsync'd before any commit returns), snapshots written
//! atomically at generation boundaries, recovery from both, and the directory lock. Must never
//! acknowledge a commit before its ops are on disk, never apply an op that is not durable, never
//! apply part of a failed batch, and never start from an empty state when data existed but
//! could not be read.
//!
//! Files in the directory: `lock`, `snapshot.<gen>` (state before segment `<gen>`), `wal.<gen>`
//! (ops after that snapshot), transient `*.tmp`, and quarantine copies of damaged data
//! (`*.corrupt`, `*.discarded-<offset>`) that are never read back. The machine may keep
//! derived files beside them (`Machine::save_side_files`; `side_file` frames them with the
//! generation they reflect and a checksum); they are caches, never the truth.

mod error;
mod files;
mod lock;
mod recovery;
pub(crate) mod side_file;
mod snapshot;
mod wal;
mod writer;

/// The one directory fsync (Windows needs its own way to open a directory).
pub(crate) use files::{read_exact_at, sync_dir, write_all_at};

#[cfg(test)]
mod test_machine;
#[cfg(test)]
mod tests_crash;
#[cfg(test)]
mod tests_kill;
#[cfg(test)]
mod tests_store;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use error::StoreError;
pub use lock::{DirLock, LockError};

use wal::WalWriter;
use writer::{Reply, Request};

/// A deterministic state machine whose ops the store makes durable.
pub trait Machine: Send + Sync + 'static {
    type Op: Serialize + DeserializeOwned + Send + Sync + 'static;
    type Output: Send + 'static;
    /// Deterministic: the same ops in the same order give the same state. Called once per op,
    /// after the op is durable, both live and during recovery replay.
    fn apply(&mut self, op: &Self::Op) -> Self::Output;
    /// Snapshot encoding of the state (MessagePack via rmp-serde is expected).
    fn encode(&self) -> anyhow::Result<Vec<u8>>;
    /// Load a snapshot into a fresh machine.
    fn decode(&mut self, bytes: &[u8]) -> anyhow::Result<()>;
    /// Called while writers are paused during a snapshot, with the new generation, so the
    /// machine can save derived files (e.g. a vector index) that match the snapshot.
    fn save_side_files(&self, _dir: &Path, _gen: u64) -> anyhow::Result<()> {
        Ok(())
    }
    /// Called at open after decode (gen of the snapshot loaded, 0 if none) and before replay.
    fn load_side_files(&mut self, _dir: &Path, _gen: u64) -> anyhow::Result<()> {
        Ok(())
    }
    /// Called at open before decode, with what `load_side_files` will get: a machine may start
    /// reading its side files on other threads meanwhile (they must not need the state).
    fn prefetch_side_files(&mut self, _dir: &Path, _gen: u64) {}
}

/// How the end of the WAL looked at open (the first damage found, if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailState {
    Clean,
    /// A frame ran past the end of its segment (an append cut short by a crash); the segment
    /// was truncated at `offset`.
    Torn {
        offset: u64,
        reason: String,
    },
    /// A complete frame failed its checksum or did not decode; the bytes from `offset` were
    /// copied to `wal.<gen>.discarded-<offset>` and the segment truncated there.
    Corrupt {
        offset: u64,
        reason: String,
    },
    /// Damage in the middle of a segment: the `skipped` bytes from `offset` failed a check but
    /// valid frames follow them. Those bytes were copied to `wal.<gen>.discarded-<offset>`, the
    /// frames after them replayed, and the segment rewritten without the damaged bytes.
    Resynced {
        offset: u64,
        skipped: u64,
        reason: String,
    },
}

/// The outcome of a commit queued with `Store::enqueue`.
pub type Queued<O> = tokio::sync::oneshot::Receiver<Result<Vec<O>, StoreError>>;

/// What `Store::open` did.
#[derive(Debug, Clone)]
pub struct Recovery {
    /// Generation of the snapshot loaded, 0 if none.
    pub snapshot_gen: u64,
    pub ops_replayed: u64,
    pub tail: TailState,
    pub elapsed: Duration,
}

/// What `Store::snapshot` wrote.
#[derive(Debug, Clone)]
pub struct SnapshotInfo {
    pub generation: u64,
    /// Size of the snapshot file.
    pub bytes: u64,
    /// Ops folded into this snapshot since the previous one.
    pub ops_covered: u64,
    /// How long commits were held back (encode + side files + WAL rotation).
    pub paused: Duration,
    pub elapsed: Duration,
}

/// Counters since open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Commit requests made durable and applied.
    pub commits: u64,
    pub ops: u64,
    /// Successful WAL fsyncs; `commits / wal_syncs` is the group-commit factor.
    pub wal_syncs: u64,
    /// Commit requests answered with an error by the writer.
    pub failed_commits: u64,
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    ops: AtomicU64,
    wal_syncs: AtomicU64,
    failed_commits: AtomicU64,
    #[cfg(test)]
    submitted: AtomicU64,
}

/// State shared by the store handle, the writer thread and snapshots. Lock order: `wal`
/// before `machine`.
pub(crate) struct Shared<M: Machine> {
    dir: PathBuf,
    machine: RwLock<M>,
    /// Held while appending and applying; holding it pauses all writers.
    wal: Mutex<WalWriter>,
    ops_since_snapshot: AtomicU64,
    snapshot_serial: Mutex<()>,
    counters: Counters,
    #[cfg(test)]
    crash_at: Mutex<Option<snapshot::CrashPoint>>,
}

/// A durable state machine in a directory owned by this process.
pub struct Store<M: Machine> {
    shared: Arc<Shared<M>>,
    queue: Option<Sender<Request<M>>>,
    writer: Option<JoinHandle<()>>,
    // Declared last: released only after the writer has stopped and the files are closed.
    _lock: DirLock,
}

impl<M: Machine> Store<M> {
    /// Locks `dir` (creating it 0700), recovers the state and starts the writer thread.
    pub fn open(dir: &Path, machine: M) -> Result<(Store<M>, Recovery), StoreError> {
        files::create_private_dir(dir)
            .map_err(|e| StoreError::from_io(&format!("creating {}", dir.display()), e))?;
        let lock = DirLock::acquire(dir)?;
        let recovered = recovery::recover(dir, machine)?;
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            machine: RwLock::new(recovered.machine),
            wal: Mutex::new(recovered.wal),
            ops_since_snapshot: AtomicU64::new(recovered.recovery.ops_replayed),
            snapshot_serial: Mutex::new(()),
            counters: Counters::default(),
            #[cfg(test)]
            crash_at: Mutex::new(None),
        });
        let (queue, requests) = mpsc::channel();
        let writer = writer::spawn(Arc::clone(&shared), requests)
            .map_err(|e| StoreError::from_io("starting the WAL writer thread", e))?;
        let store = Store {
            shared,
            queue: Some(queue),
            writer: Some(writer),
            _lock: lock,
        };
        Ok((store, recovered.recovery))
    }

    /// Blocking. Returns once every op is fsync'd and applied, outputs in order. The ops are
    /// all-or-nothing: after a crash either all of them replay or none.
    pub fn commit(&self, ops: Vec<M::Op>) -> Result<Vec<M::Output>, StoreError> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(ops, Reply::Blocking(tx))?;
        rx.recv().map_err(|_| StoreError::Closed)?
    }

    /// Same as `commit`, for async callers: waits without blocking the runtime thread. Dropping
    /// the future does not withdraw the commit.
    pub async fn commit_async(&self, ops: Vec<M::Op>) -> Result<Vec<M::Output>, StoreError> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(ops, Reply::Async(tx))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Queues `ops` now (their place in the log is fixed by this call) without waiting for
    /// them to be durable; the receiver yields the outcome. For state whose loss in a crash is
    /// harmless but whose order relative to later commits matters.
    pub fn enqueue(&self, ops: Vec<M::Op>) -> Result<Queued<M::Output>, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(ops, Reply::Async(tx))?;
        Ok(rx)
    }

    fn submit(&self, ops: Vec<M::Op>, reply: Reply<M::Output>) -> Result<(), StoreError> {
        let frame = wal::encode_frame(&ops)?;
        let queue = self.queue.as_ref().ok_or(StoreError::Closed)?;
        queue
            .send(Request { frame, ops, reply })
            .map_err(|_| StoreError::Closed)?;
        #[cfg(test)]
        self.shared
            .counters
            .submitted
            .fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Runs `f` on the current state under the shared lock (every acknowledged commit is in it).
    pub fn read<R>(&self, f: impl FnOnce(&M) -> R) -> R {
        f(&read_lock(&self.shared.machine))
    }

    /// Writes a snapshot and drops WAL segments no kept snapshot needs. Commits wait only while
    /// the state is encoded and the WAL rotated, not while the file is written.
    pub fn snapshot(&self) -> Result<SnapshotInfo, StoreError> {
        snapshot::take(&self.shared)
    }

    /// Ops applied (including those replayed at open) that no snapshot holds yet.
    pub fn ops_since_snapshot(&self) -> u64 {
        self.shared.ops_since_snapshot.load(Ordering::SeqCst)
    }

    /// Bytes of snapshot and WAL files on disk (0 if the directory cannot be listed).
    pub fn disk_bytes(&self) -> u64 {
        files::data_bytes(&self.shared.dir).unwrap_or(0)
    }

    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    pub fn stats(&self) -> StoreStats {
        let c = &self.shared.counters;
        StoreStats {
            commits: c.commits.load(Ordering::Relaxed),
            ops: c.ops.load(Ordering::Relaxed),
            wal_syncs: c.wal_syncs.load(Ordering::Relaxed),
            failed_commits: c.failed_commits.load(Ordering::Relaxed),
        }
    }

    /// Serves every queued commit, stops the writer, and writes a final snapshot when some ops
    /// are only in the WAL. On error the data is still safe in the WAL.
    pub fn close(mut self) -> Result<(), StoreError> {
        self.stop_writer()?;
        if self.ops_since_snapshot() > 0 {
            self.snapshot()?;
        }
        Ok(())
    }

    fn stop_writer(&mut self) -> Result<(), StoreError> {
        // Closing the queue lets the writer finish what is queued, then return.
        self.queue.take();
        match self.writer.take().map(JoinHandle::join) {
            Some(Err(_)) => Err(StoreError::Io(std::io::Error::other(
                "the WAL writer thread panicked (a Machine::apply panicked); the WAL is intact",
            ))),
            _ => Ok(()),
        }
    }
}

impl<M: Machine> Drop for Store<M> {
    /// Without `close`: queued commits are still served, but no snapshot is written; the next
    /// open replays the WAL, exactly as after a crash.
    fn drop(&mut self) {
        let _ = self.stop_writer();
    }
}

// Test hooks: failure injection and a way to hold writers back deterministically.
#[cfg(test)]
impl<M: Machine> Store<M> {
    fn inject_faults(&self, faults: wal::Faults) {
        lock_mutex(&self.shared.wal).faults = faults;
    }

    fn crash_snapshot_at(&self, point: snapshot::CrashPoint) {
        *lock_mutex(&self.shared.crash_at) = Some(point);
    }

    /// While the guard lives, the writer cannot append (it blocks on the WAL lock).
    fn hold_writer(&self) -> MutexGuard<'_, WalWriter> {
        lock_mutex(&self.shared.wal)
    }

    fn submitted(&self) -> u64 {
        self.shared.counters.submitted.load(Ordering::SeqCst)
    }
}

// A panic in `Machine::apply` poisons the locks; the data on disk is unaffected, so readers
// keep working on what is in memory and snapshots refuse (see `snapshot::take`).
fn lock_mutex<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read_lock<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_lock<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}
