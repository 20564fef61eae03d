//! The snapshot encoding of `MemState`, and rebuilding the lookups a snapshot does not hold.
//!
//! Records are written in chunks of `CHUNK` records, each its own named-MessagePack byte
//! string, so a start decodes them on every core at once (and hashes their contents for the
//! duplicate lookup in the same pass). Snapshots written before chunks existed (one `records`
//! array) still load. Must never leave the lexical index half-built: `decode` leaves it empty
//! and `Machine::load_side_files` loads its image or rebuilds it (`lexical_file`).

use super::{MemState, ProjectSeen, SyncState, scoped_hash};
use crate::learn;
use crate::record::Record;
use anyhow::{Result, anyhow};
use serde::{Deserialize, Serialize};
use serde_bytes::Bytes;
use std::collections::BTreeMap;
use std::time::Instant;

/// Records per chunk: small enough to spread over the cores, large enough that the per-chunk
/// overhead is nothing.
const CHUNK: usize = 8192;

/// The serialised part of the state (a snapshot). Chunks are borrowed from the snapshot's
/// bytes when decoding, not copied.
#[derive(Serialize, Deserialize, Default)]
struct Persisted<'a> {
    /// Snapshots before chunking held every record here. Left out when empty, so a memd too
    /// old to know `record_chunks` refuses the snapshot (missing field) instead of starting
    /// with no memories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    records: Vec<Record>,
    #[serde(default, borrow)]
    record_chunks: Vec<&'a Bytes>,
    next_key: u64,
    sessions: super::Sessions,
    graph: learn::Graphs,
    counters: BTreeMap<String, u64>,
    sidecar_attempts: Vec<(i64, proto::SidecarAttempt)>,
    #[serde(default)]
    projects: BTreeMap<String, ProjectSeen>,
    #[serde(default)]
    sync: SyncState,
    #[serde(default)]
    cleanup_clock: Option<crate::clock::Trusted>,
}

impl MemState {
    pub(super) fn encode_snapshot(&self) -> Result<Vec<u8>> {
        let mut records: Vec<&Record> = self.records.values().collect();
        records.sort_unstable_by_key(|r| r.key);
        let chunks: Vec<&[&Record]> = records.chunks(CHUNK).collect();
        let encoded = on_all_cores(&chunks, rmp_serde::to_vec_named)
            .into_iter()
            .collect::<Result<Vec<Vec<u8>>, _>>()?;
        let p = Persisted {
            records: Vec::new(),
            record_chunks: encoded.iter().map(|c| Bytes::new(c)).collect(),
            next_key: self.next_key,
            sessions: self.sessions.clone(),
            graph: self.graph.clone(),
            counters: self.counters.clone(),
            sidecar_attempts: self.sidecar_attempts.iter().cloned().collect(),
            projects: self.projects.clone(),
            sync: self.sync.clone(),
            cleanup_clock: self.cleanup_clock,
        };
        Ok(rmp_serde::to_vec_named(&p)?)
    }

    pub(super) fn decode_snapshot(&mut self, bytes: &[u8]) -> Result<()> {
        let started = Instant::now();
        let mut p: Persisted = rmp_serde::from_slice(bytes)?;
        let decoded = on_all_cores(&p.record_chunks, |c| {
            rmp_serde::from_slice::<Vec<Record>>(c)
        });
        let mut records = std::mem::take(&mut p.records);
        for chunk in decoded {
            records.extend(chunk.map_err(|e| anyhow!("a chunk of records: {e}"))?);
        }
        let slices: Vec<&[Record]> = records.chunks(CHUNK).collect();
        let hashes: Vec<u64> = on_all_cores(&slices, |rs| {
            rs.iter()
                .map(|r| scoped_hash(r.project.as_deref(), &r.content))
                .collect::<Vec<u64>>()
        })
        .concat();
        self.next_key = p.next_key.max(1);
        self.sessions = p.sessions;
        self.graph = p.graph;
        self.counters = p.counters;
        self.sidecar_attempts = p.sidecar_attempts.into_iter().collect();
        self.projects = p.projects;
        self.sync = p.sync;
        self.cleanup_clock = p.cleanup_clock;
        self.rebuild_lookups(records, hashes);
        self.open_note = format!(
            "{} records decoded in {} ms",
            self.records.len(),
            started.elapsed().as_millis()
        );
        Ok(())
    }

    /// Takes `records` (with the content hash of each) and rebuilds every lookup but the
    /// search indexes: ids, duplicate hashes, per-collection counts, mirrored uids.
    fn rebuild_lookups(&mut self, records: Vec<Record>, hashes: Vec<u64>) {
        self.records.clear();
        self.ids.clear();
        self.hashes.clear();
        self.per_collection.clear();
        self.mirrored.clear();
        self.pending.clear();
        self.lexical = crate::index::Lexical::new();
        self.records.reserve(records.len());
        self.ids.reserve(records.len());
        self.hashes.reserve(records.len());
        for (r, hash) in records.into_iter().zip(hashes) {
            let key = r.key;
            if let Some(o) = &r.origin {
                self.mirrored.insert(o.uid.clone(), key);
            }
            self.ids.insert(r.id.clone(), key);
            for old in &r.former_ids {
                self.ids.insert(old.clone(), key);
            }
            *self.per_collection.entry(r.collection).or_default() += 1;
            self.hashes.insert((r.collection, hash), key);
            self.records.insert(key, r);
        }
    }
}

/// `f` over every item, the items spread over the available cores (at most 8 threads, none
/// when there is one item or one core); results in item order.
fn on_all_cores<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if items.len() < 2 || cores < 2 {
        return items.iter().map(&f).collect();
    }
    let per_thread = items.len().div_ceil(cores);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(per_thread)
            .map(|part| {
                let f = &f;
                s.spawn(move || part.iter().map(f).collect::<Vec<R>>())
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Machine;
    use proto::Collection;

    fn state_with(n: usize) -> MemState {
        let mut s = MemState::new(4).unwrap();
        for i in 0..n {
            let mut r = Record::new(Collection::Working, format!("note number {i}"), 1);
            r.project = (i % 3 == 0).then(|| "p1".to_owned());
            s.apply(&super::super::ops::Op::Insert(Box::new(r)));
        }
        s
    }

    #[test]
    fn chunked_snapshot_round_trips_every_record_and_lookup() {
        let s = state_with(CHUNK * 2 + 5);
        let bytes = s.encode_snapshot().unwrap();
        let mut back = MemState::new(4).unwrap();
        back.decode_snapshot(&bytes).unwrap();
        assert_eq!(back.len(), s.len());
        assert_eq!(back.next_key, s.next_key);
        for r in s.records() {
            assert_eq!(back.by_key(r.key), Some(r));
            assert_eq!(back.by_id(&r.id).map(|b| b.key), Some(r.key));
            let dup = back.duplicate_of(r.collection, r.project.as_deref(), &r.content);
            assert_eq!(dup, Some(r.id.as_str()));
        }
        assert_eq!(back.count(Collection::Working), s.len());
    }

    #[test]
    fn a_snapshot_with_one_records_array_still_loads() {
        let s = state_with(10);
        let mut records: Vec<Record> = s.records().cloned().collect();
        records.sort_by_key(|r| r.key);
        let old = Persisted {
            records,
            next_key: s.next_key,
            ..Persisted::default()
        };
        let mut back = MemState::new(4).unwrap();
        back.decode_snapshot(&rmp_serde::to_vec_named(&old).unwrap())
            .unwrap();
        assert_eq!(back.len(), 10);
        let first = s.records().next().unwrap();
        assert_eq!(back.by_id(&first.id), Some(first));
    }

    #[test]
    fn an_older_reader_refuses_a_chunked_snapshot() {
        /// What memd read before chunks: `records` is required.
        #[derive(Deserialize)]
        #[allow(dead_code)]
        struct OldPersisted {
            records: Vec<Record>,
        }
        let bytes = state_with(3).encode_snapshot().unwrap();
        assert!(rmp_serde::from_slice::<OldPersisted>(&bytes).is_err());
    }
}
