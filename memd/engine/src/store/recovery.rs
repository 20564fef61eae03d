//! Opening a store: rebuild the state from the newest usable snapshot plus the WAL after it.
//!
//! Owns choosing the base (newest snapshot that validates, else the previous one, else an
//! empty state when the WAL still starts at generation 0), replaying segments in order, and
//! repairing damage: when valid frames follow the damaged bytes (a flipped byte in the middle
//! of a segment), resynchronising on them, replaying them and rewriting the segment without the
//! damaged bytes; otherwise, for a damaged tail, truncation so new appends follow the last good
//! frame. One log line either way, and the damaged bytes copied aside when they fail a check
//! (not merely cut short). Must never panic on bad files, never start empty when data existed
//! but cannot be read, never drop intact frames that follow damage, and never replay across a
//! missing segment.

use std::fs;
use std::path::Path;
use std::time::Instant;

use super::error::StoreError;
use super::files::{self, Listing};
use super::snapshot;
use super::wal::{self, FrameRead, SegmentReader, WalWriter};
use super::{Machine, Recovery, TailState};

/// The rebuilt machine, the segment to append to, and what happened.
pub(crate) struct Recovered<M> {
    pub machine: M,
    pub wal: WalWriter,
    pub recovery: Recovery,
}

pub(crate) fn recover<M: Machine>(dir: &Path, mut machine: M) -> Result<Recovered<M>, StoreError> {
    let started = Instant::now();
    let io_err = |what: &str, e| StoreError::from_io(&format!("{what} in {}", dir.display()), e);
    let listing = files::scan(dir).map_err(|e| io_err("listing files", e))?;
    for temp in &listing.temps {
        // Half-written by a crash; the published files never depend on them.
        fs::remove_file(temp).map_err(|e| io_err("removing a stale temp file", e))?;
    }
    let mut base = choose_base(dir, &listing)?;
    machine.prefetch_side_files(dir, base.generation);
    // Taken, so the snapshot's bytes are freed once decoded, not held through the replay.
    if let Some(payload) = base.payload.take() {
        machine.decode(&payload).map_err(|e| {
            StoreError::Corrupt(format!(
                "snapshot {} in {} passes its checksum but cannot be decoded ({e:#}); \
                 it may come from an incompatible memd version",
                base.generation,
                dir.display()
            ))
        })?;
    }
    quarantine_rejected(dir, &base.rejected)?;
    machine
        .load_side_files(dir, base.generation)
        .map_err(|e| StoreError::from_machine("loading side files", e))?;

    let mut ops_replayed = 0;
    let mut tail = TailState::Clean;
    let mut active = None;
    for generation in listing.segments.iter().copied() {
        if generation < base.generation {
            continue;
        }
        let replayed = replay_segment(dir, generation, &mut machine)?;
        ops_replayed += replayed.ops;
        if tail == TailState::Clean {
            tail = replayed.tail;
        }
        active = Some((generation, replayed.good_len));
    }
    let wal = match active {
        Some((generation, len)) => {
            let path = dir.join(files::wal_name(generation));
            let file = files::open_read_write(&path).map_err(|e| io_err("opening the WAL", e))?;
            WalWriter::resume(file, generation, len)
        }
        None => WalWriter::create(dir, base.generation)
            .map_err(|e| io_err("creating the first WAL segment", e))?,
    };
    Ok(Recovered {
        machine,
        wal,
        recovery: Recovery {
            snapshot_gen: base.generation,
            ops_replayed,
            tail,
            elapsed: started.elapsed(),
        },
    })
}

/// Where replay starts: a snapshot's contents (or nothing) at a generation.
struct Base {
    generation: u64,
    payload: Option<snapshot::Payload>,
    /// Newer snapshots that failed validation, with the reason.
    rejected: Vec<(u64, String)>,
}

fn choose_base(dir: &Path, listing: &Listing) -> Result<Base, StoreError> {
    let mut rejected = Vec::new();
    for generation in listing.snapshots.iter().rev().copied() {
        match snapshot::read(dir, generation) {
            Ok(payload) => {
                check_chain(dir, listing, generation, &rejected)?;
                return Ok(Base {
                    generation,
                    payload: Some(payload),
                    rejected,
                });
            }
            Err(why) => rejected.push((generation, why)),
        }
    }
    // No usable snapshot: an empty state is right only when the WAL holds the whole history.
    let brand_new = listing.segments.is_empty() && rejected.is_empty();
    if !brand_new && listing.segments.first() != Some(&0) {
        let wal_start = match listing.segments.first() {
            Some(first) => format!("the WAL starts at generation {first}"),
            None => "there is no WAL".to_owned(),
        };
        return Err(StoreError::Corrupt(format!(
            "{}: no readable snapshot{}, and {wal_start}, so the data cannot be rebuilt; \
             refusing to start empty",
            dir.display(),
            describe_rejected(&rejected),
        )));
    }
    check_chain(dir, listing, 0, &rejected)?;
    Ok(Base {
        generation: 0,
        payload: None,
        rejected,
    })
}

/// Every segment from `base` to the newest must be present: a gap would silently drop ops.
fn check_chain(
    dir: &Path,
    listing: &Listing,
    base: u64,
    rejected: &[(u64, String)],
) -> Result<(), StoreError> {
    let needed = listing.segments.iter().copied().filter(|g| *g >= base);
    for (expected, found) in (base..).zip(needed) {
        if expected != found {
            return Err(StoreError::Corrupt(format!(
                "{}: WAL segment {expected} is missing (replay from generation {base} would skip \
                 its ops){}",
                dir.display(),
                describe_rejected(rejected)
            )));
        }
    }
    Ok(())
}

fn describe_rejected(rejected: &[(u64, String)]) -> String {
    rejected
        .iter()
        .map(|(generation, why)| format!("; snapshot {generation} unusable: {why}"))
        .collect()
}

/// Moves snapshots that failed validation out of the way, once an older base has worked.
fn quarantine_rejected(dir: &Path, rejected: &[(u64, String)]) -> Result<(), StoreError> {
    for (generation, why) in rejected {
        tracing::warn!(
            "store: snapshot {generation} in {} is unusable ({why}); recovered from an \
             older base and moved it to {}",
            dir.display(),
            files::corrupt_snapshot_name(*generation)
        );
        fs::rename(
            dir.join(files::snapshot_name(*generation)),
            dir.join(files::corrupt_snapshot_name(*generation)),
        )
        .map_err(|e| StoreError::from_io("moving a damaged snapshot aside", e))?;
    }
    if !rejected.is_empty() {
        files::sync_dir(dir).map_err(|e| StoreError::from_io("syncing the data dir", e))?;
    }
    Ok(())
}

struct Replayed {
    ops: u64,
    /// End of the last good frame (the segment's length after repair).
    good_len: u64,
    tail: TailState,
}

fn replay_segment<M: Machine>(
    dir: &Path,
    generation: u64,
    machine: &mut M,
) -> Result<Replayed, StoreError> {
    let path = dir.join(files::wal_name(generation));
    let mut reader = SegmentReader::open(&path, generation)?;
    let mut ops = 0;
    let tail = loop {
        let offset = reader.offset();
        let payload = match reader.next_frame()? {
            FrameRead::End => break TailState::Clean,
            FrameRead::Torn(reason) => break TailState::Torn { offset, reason },
            FrameRead::Corrupt(reason) => break TailState::Corrupt { offset, reason },
            FrameRead::Frame(payload) => payload,
        };
        match rmp_serde::from_slice::<Vec<M::Op>>(&payload) {
            Ok(batch) => {
                for op in &batch {
                    machine.apply(op);
                }
                ops += batch.len() as u64;
            }
            Err(e) => {
                break TailState::Corrupt {
                    offset,
                    reason: format!("frame passes its checksum but does not decode: {e}"),
                };
            }
        }
    };
    let (offset, reason) = match &tail {
        TailState::Clean | TailState::Resynced { .. } => {
            return Ok(Replayed {
                ops,
                good_len: reader.file_len(),
                tail,
            });
        }
        TailState::Torn { offset, reason } | TailState::Corrupt { offset, reason } => {
            (*offset, reason.clone())
        }
    };
    if let Some(resynced) = resync::<M>(&path, offset)
        .map_err(|e| StoreError::from_io(&format!("reading {}", path.display()), e))?
    {
        for batch in &resynced.batches {
            for op in batch {
                machine.apply(op);
            }
            ops += batch.len() as u64;
        }
        let good_len = rewrite_without(dir, generation, offset, &resynced)?;
        return Ok(Replayed {
            ops,
            good_len,
            tail: TailState::Resynced {
                offset,
                skipped: resynced.skip as u64,
                reason,
            },
        });
    }
    repair_tail(dir, generation, &tail, offset, reader.file_len())?;
    Ok(Replayed {
        ops,
        good_len: offset,
        tail,
    })
}

/// Intact frames found after damage at `offset`.
struct Resync<Op> {
    /// Damaged bytes from `offset` up to the first frame of the intact run.
    skip: usize,
    /// The bytes of the intact run (every frame to the end of the segment).
    intact: Vec<u8>,
    batches: Vec<Vec<Op>>,
}

/// The first position after `offset` from which the rest of the segment is a run of valid
/// frames (checksums and decoding both pass) to its very end. `None` when there is none: the
/// damage is the tail itself. A chance match needs a CRC-32 collision that also decodes.
fn resync<M: Machine>(path: &Path, offset: u64) -> std::io::Result<Option<Resync<M::Op>>> {
    let rest = read_from(path, offset)?;
    for skip in 1..rest.len() {
        if let Some(batches) = decode_run::<M>(&rest[skip..]) {
            return Ok(Some(Resync {
                skip,
                intact: rest[skip..].to_vec(),
                batches,
            }));
        }
    }
    Ok(None)
}

/// Every frame of `bytes`, decoded, if `bytes` is exactly a run of valid frames.
fn decode_run<M: Machine>(mut bytes: &[u8]) -> Option<Vec<Vec<M::Op>>> {
    let mut batches = Vec::new();
    while !bytes.is_empty() {
        let (payload, len) = wal::frame_at(bytes)?;
        batches.push(rmp_serde::from_slice::<Vec<M::Op>>(payload).ok()?);
        bytes = &bytes[len..];
    }
    Some(batches)
}

/// Copies the damaged bytes aside, then replaces the segment by its good prefix and the intact
/// run (a temp file renamed over it, so a crash leaves one or the other). Returns the new
/// length, where appends continue.
fn rewrite_without<Op>(
    dir: &Path,
    generation: u64,
    offset: u64,
    resynced: &Resync<Op>,
) -> Result<u64, StoreError> {
    let path = dir.join(files::wal_name(generation));
    let io_err = |e| StoreError::from_io(&format!("repairing {}", path.display()), e);
    let mut bytes = fs::read(&path).map_err(io_err)?;
    let damaged_end = offset as usize + resynced.skip;
    let aside = dir.join(files::discarded_wal_name(generation, offset));
    files::write_private_durably(dir, &aside, &bytes[offset as usize..damaged_end])
        .map_err(io_err)?;
    bytes.truncate(offset as usize);
    bytes.extend_from_slice(&resynced.intact);
    let temp = dir.join(files::temp_name(&files::wal_name(generation)));
    files::write_private_durably(dir, &temp, &bytes).map_err(io_err)?;
    fs::rename(&temp, &path).map_err(io_err)?;
    files::sync_dir(dir).map_err(io_err)?;
    tracing::warn!(
        "store: {} damaged bytes in {} at offset {offset}, copied to {}; the {} frames after \
         them were replayed",
        resynced.skip,
        path.display(),
        aside.display(),
        resynced.batches.len()
    );
    Ok(bytes.len() as u64)
}

/// Cuts the segment back to its last good frame. Bytes that failed a check are copied aside
/// first: unlike a short tail (an append cut by a crash), they may be damaged acknowledged data.
fn repair_tail(
    dir: &Path,
    generation: u64,
    tail: &TailState,
    good_len: u64,
    file_len: u64,
) -> Result<(), StoreError> {
    let path = dir.join(files::wal_name(generation));
    let io_err = |e| StoreError::from_io(&format!("repairing {}", path.display()), e);
    let (kind, reason) = match tail {
        TailState::Torn { reason, .. } => ("torn", reason),
        TailState::Corrupt { reason, .. } => ("corrupt", reason),
        TailState::Clean | TailState::Resynced { .. } => return Ok(()),
    };
    let mut kept_at = String::new();
    if matches!(tail, TailState::Corrupt { .. }) {
        let discarded = read_from(&path, good_len).map_err(io_err)?;
        let aside = dir.join(files::discarded_wal_name(generation, good_len));
        files::write_private_durably(dir, &aside, &discarded).map_err(io_err)?;
        kept_at = format!(", copied to {}", aside.display());
    }
    tracing::warn!(
        "store: {kind} tail in {} at offset {good_len} ({reason}); discarding {} bytes{kept_at}",
        path.display(),
        file_len - good_len
    );
    let file = files::open_read_write(&path).map_err(io_err)?;
    file.set_len(good_len).map_err(io_err)?;
    file.sync_all().map_err(io_err)
}

fn read_from(path: &Path, offset: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = fs::File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}
