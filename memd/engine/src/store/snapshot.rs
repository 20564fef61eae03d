//! Snapshots: the encoded state at a generation boundary, and WAL compaction.
//!
//! File `snapshot.<gen>` = header `[8 magic]["u32 LE version"]["u64 LE generation"]
//! ["u64 LE payload length"]["u32 LE crc32 of payload"]`, then the machine's encoding. It holds
//! every op of the WAL segments older than `<gen>`; segment `wal.<gen>` starts right after it.
//! Owns taking a snapshot (pause writers only to encode and rotate the WAL, write the file
//! outside the pause), reading one back with full validation, and pruning: the two newest
//! bases are kept with every segment the older one needs, so a damaged newest snapshot can
//! still be recovered from. Must never publish a snapshot that is not fully on disk (temp file,
//! fsync, rename, directory fsync) and never delete anything before the new snapshot is durable.

use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::error::StoreError;
use super::files;
use super::wal::WalWriter;
use super::{Machine, Shared, SnapshotInfo, lock_mutex, read_lock};

const MAGIC: [u8; 8] = *b"MEMDSNP\0";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 32;
/// Bases kept after a snapshot is published (the newest plus one fallback).
const SNAPSHOTS_KEPT: usize = 2;

/// Points inside `take` where tests simulate a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CrashPoint {
    /// The new WAL segment exists, no snapshot file yet.
    WalRotated,
    /// The snapshot temp file is written and synced, not renamed.
    TempWritten,
    /// The snapshot is published, older files are not pruned.
    Published,
}

pub(crate) fn take<M: Machine>(shared: &Shared<M>) -> Result<SnapshotInfo, StoreError> {
    let started = Instant::now();
    let _one_at_a_time = lock_mutex(&shared.snapshot_serial);
    let paused_at = Instant::now();
    let (generation, payload, ops_covered) = encode_and_rotate(shared)?;
    let paused = paused_at.elapsed();
    crash_here(shared, CrashPoint::WalRotated)?;
    let bytes = publish(shared, generation, &payload)?;
    shared
        .ops_since_snapshot
        .fetch_sub(ops_covered, Ordering::SeqCst);
    crash_here(shared, CrashPoint::Published)?;
    if let Err(err) = prune(&shared.dir) {
        // Harmless: the files are only kept longer; the next snapshot retries.
        tracing::warn!("store: pruning old snapshots and WAL segments failed: {err}");
    }
    Ok(SnapshotInfo {
        generation,
        bytes,
        ops_covered,
        paused,
        elapsed: started.elapsed(),
    })
}

/// The part done with writers paused: encode, let the machine save matching side files, and
/// start the new segment so later commits land after the snapshot's contents.
fn encode_and_rotate<M: Machine>(shared: &Shared<M>) -> Result<(u64, Vec<u8>, u64), StoreError> {
    let mut wal = lock_mutex(&shared.wal);
    if shared.machine.is_poisoned() {
        return Err(StoreError::Corrupt(
            "a Machine::apply panicked; the in-memory state may be partial, so it is not \
             snapshotted (the WAL is intact: restart to recover)"
                .to_owned(),
        ));
    }
    let machine = read_lock(&shared.machine);
    let payload = machine
        .encode()
        .map_err(|e| StoreError::from_machine("encoding the snapshot", e))?;
    let generation = wal.generation() + 1;
    machine
        .save_side_files(&shared.dir, generation)
        .map_err(|e| StoreError::from_machine("saving side files", e))?;
    let next = WalWriter::create(&shared.dir, generation)
        .map_err(|e| StoreError::from_io("starting a new WAL segment", e))?;
    *wal = next;
    Ok((
        generation,
        payload,
        shared.ops_since_snapshot.load(Ordering::SeqCst),
    ))
}

fn publish<M: Machine>(
    shared: &Shared<M>,
    generation: u64,
    payload: &[u8],
) -> Result<u64, StoreError> {
    let dir = &shared.dir;
    let final_name = files::snapshot_name(generation);
    let temp_path = dir.join(files::temp_name(&final_name));
    let io_err = |e| StoreError::from_io(&format!("writing snapshot {generation}"), e);
    let bytes = write_temp(&temp_path, generation, payload).map_err(|e| {
        // A partial temp only wastes space (e.g. on a full disk); open would remove it anyway.
        let _ = fs::remove_file(&temp_path);
        io_err(e)
    })?;
    crash_here(shared, CrashPoint::TempWritten)?;
    fs::rename(&temp_path, dir.join(&final_name)).map_err(io_err)?;
    files::sync_dir(dir).map_err(io_err)?;
    Ok(bytes)
}

fn write_temp(path: &Path, generation: u64, payload: &[u8]) -> io::Result<u64> {
    let mut file = files::create_private_file(path)?;
    let header = header(generation, payload);
    file.write_all(&header)?;
    file.write_all(payload)?;
    file.sync_all()?;
    Ok((header.len() + payload.len()) as u64)
}

fn header(generation: u64, payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header[12..20].copy_from_slice(&generation.to_le_bytes());
    header[20..28].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    header[28..32].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    header
}

/// A snapshot file's bytes, validated; derefs to its payload (the header is skipped in place:
/// moving hundreds of MB down by 32 bytes cost a start ~0.1 s at 1M memories).
pub(crate) struct Payload(Vec<u8>);

impl std::ops::Deref for Payload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0[HEADER_LEN..]
    }
}

/// Reads and fully validates snapshot `generation`; `Err` says why it cannot be used.
pub(crate) fn read(dir: &Path, generation: u64) -> Result<Payload, String> {
    let bytes = fs::read(dir.join(files::snapshot_name(generation))).map_err(|e| e.to_string())?;
    if bytes.len() < HEADER_LEN {
        return Err(format!("{} bytes, shorter than the header", bytes.len()));
    }
    if bytes[..8] != MAGIC {
        return Err("not a memd snapshot (bad magic)".to_owned());
    }
    let version = u32::from_le_bytes(le_array(&bytes[8..12]));
    if version != VERSION {
        return Err(format!(
            "snapshot format version {version} is not supported (this build reads {VERSION})"
        ));
    }
    let found = u64::from_le_bytes(le_array(&bytes[12..20]));
    if found != generation {
        return Err(format!("header says generation {found}"));
    }
    let declared = u64::from_le_bytes(le_array(&bytes[20..28]));
    let actual = (bytes.len() - HEADER_LEN) as u64;
    if declared != actual {
        return Err(format!("payload is {actual} bytes, header says {declared}"));
    }
    let crc = u32::from_le_bytes(le_array(&bytes[28..32]));
    if crc32fast::hash(&bytes[HEADER_LEN..]) != crc {
        return Err("checksum mismatch".to_owned());
    }
    Ok(Payload(bytes))
}

fn le_array<const N: usize>(slice: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(slice);
    out
}

/// Deletes snapshots beyond the newest two, then the segments neither kept base needs. The
/// empty state at generation 0 counts as a base, so a single snapshot still has a fallback.
/// Snapshots go first so every remaining snapshot keeps a complete chain at every step.
pub(crate) fn prune(dir: &Path) -> io::Result<()> {
    let listing = files::scan(dir)?;
    let bases: Vec<u64> = std::iter::once(0)
        .chain(listing.snapshots.iter().copied().filter(|g| *g > 0))
        .collect();
    let oldest_kept = bases[bases.len().saturating_sub(SNAPSHOTS_KEPT)];
    for generation in listing.snapshots.iter().filter(|g| **g < oldest_kept) {
        remove_if_present(&dir.join(files::snapshot_name(*generation)))?;
    }
    for generation in listing.segments.iter().filter(|g| **g < oldest_kept) {
        remove_if_present(&dir.join(files::wal_name(*generation)))?;
    }
    files::sync_dir(dir)
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Test builds stop here when told to, as if the process died at `point`.
fn crash_here<M: Machine>(shared: &Shared<M>, point: CrashPoint) -> Result<(), StoreError> {
    #[cfg(test)]
    if *lock_mutex(&shared.crash_at) == Some(point) {
        return Err(StoreError::Io(io::Error::other(format!(
            "simulated crash {point:?}"
        ))));
    }
    #[cfg(not(test))]
    let _ = (shared, point);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_snapshot(dir: &Path, generation: u64, payload: &[u8]) {
        let final_path = dir.join(files::snapshot_name(generation));
        write_temp(&final_path, generation, payload).unwrap();
    }

    #[test]
    fn snapshot_file_round_trips_and_rejects_damage() {
        let dir = tempfile::tempdir().unwrap();
        write_snapshot(dir.path(), 4, b"state bytes");
        assert_eq!(&*read(dir.path(), 4).unwrap(), b"state bytes");

        let path = dir.path().join(files::snapshot_name(4));
        let good = fs::read(&path).unwrap();
        for index in 0..good.len() {
            let mut bad = good.clone();
            bad[index] ^= 0x40;
            fs::write(&path, &bad).unwrap();
            assert!(read(dir.path(), 4).is_err(), "flip at {index} accepted");
        }
        for cut in 0..good.len() {
            fs::write(&path, &good[..cut]).unwrap();
            assert!(read(dir.path(), 4).is_err(), "cut at {cut} accepted");
        }
    }

    #[test]
    fn prune_keeps_two_snapshots_and_their_segments() {
        let dir = tempfile::tempdir().unwrap();
        for generation in [1, 3, 4] {
            write_snapshot(dir.path(), generation, b"s");
        }
        for generation in 0..=4 {
            fs::write(dir.path().join(files::wal_name(generation)), b"w").unwrap();
        }
        prune(dir.path()).unwrap();
        let listing = files::scan(dir.path()).unwrap();
        assert_eq!(listing.snapshots, vec![3, 4]);
        assert_eq!(listing.segments, vec![3, 4]);
    }

    #[test]
    fn prune_keeps_the_whole_wal_while_only_one_snapshot_exists() {
        let dir = tempfile::tempdir().unwrap();
        write_snapshot(dir.path(), 1, b"s");
        for generation in 0..=1 {
            fs::write(dir.path().join(files::wal_name(generation)), b"w").unwrap();
        }
        prune(dir.path()).unwrap();
        let listing = files::scan(dir.path()).unwrap();
        assert_eq!(listing.snapshots, vec![1]);
        assert_eq!(listing.segments, vec![0, 1]);
    }
}
