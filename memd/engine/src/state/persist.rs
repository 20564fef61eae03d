//! The snapshot encoding of `MemState`, and rebuilding the lookups a snapshot does not hold.
//!
//! Records are written in chunks of `CHUNK` records, each its own MessagePack byte string of
//! rows (`rows`: fields by position), so a start decodes them on every core at once (and hashes
//! their contents for the duplicate lookup in the same pass). Chunks of named maps (written
//! before rows) and snapshots written before chunks existed (one `records` array) still load.
//! Must never leave the lexical index half-built: `decode` leaves it empty and
//! `Machine::load_side_files` loads its image or rebuilds it (`lexical_file`).

use super::{MemState, ProjectSeen, SyncState, scoped_hash};
use crate::index::FastHash;
use crate::learn;
use crate::record::Record;
use anyhow::{Result, anyhow};
use proto::Collection;
use serde::{Deserialize, Serialize};
use serde_bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

#[cfg(test)]
thread_local! {
    /// Tests: snapshots taken on this thread say the vectors are of this indexed text's version
    /// (a store written before the current one).
    pub(super) static TEXT_VERSION_WRITTEN: std::cell::Cell<u32> =
        const { std::cell::Cell::new(crate::indexed_text::VERSION) };
}

fn snapshot_text_version() -> u32 {
    #[cfg(test)]
    return TEXT_VERSION_WRITTEN.with(|v| v.get());
    #[cfg(not(test))]
    crate::indexed_text::VERSION
}

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
    /// The version of the indexed text the vectors were made of (`indexed_text::VERSION`);
    /// missing (0) in snapshots from before exchanges carried their dates (version 1).
    #[serde(default)]
    indexed_text: u32,
    /// The re-embedding's cursor (`reindex`), while it runs.
    #[serde(default)]
    reindex: Option<u64>,
}

impl MemState {
    pub(super) fn encode_snapshot(&self) -> Result<Vec<u8>> {
        let mut records: Vec<&Record> = self.records().collect();
        records.sort_unstable_by_key(|r| r.key);
        let chunks: Vec<&[&Record]> = records.chunks(CHUNK).collect();
        let encoded = on_all_cores(&chunks, |c| super::rows::encode_chunk(c))
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
            indexed_text: snapshot_text_version(),
            reindex: self.reindex,
        };
        Ok(rmp_serde::to_vec_named(&p)?)
    }

    pub(super) fn decode_snapshot(&mut self, bytes: &[u8]) -> Result<()> {
        let started = Instant::now();
        let mut p: Persisted = rmp_serde::from_slice(bytes)?;
        // Each chunk is decoded, hashed and counted on one core and stays its own vector until
        // its records move into the map: no copy of every record into one list first.
        let mut chunks = on_all_cores(&p.record_chunks, |c| {
            let records: Vec<Box<Record>> = rmp_serde::from_slice(c)?;
            Ok::<_, rmp_serde::decode::Error>(Decoded::of(records))
        })
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("a chunk of records: {e}"))?;
        let old_records = std::mem::take(&mut p.records);
        if !old_records.is_empty() {
            chunks.push(Decoded::of(old_records.into_iter().map(Box::new).collect()));
        }
        let decoded = started.elapsed();
        self.next_key = p.next_key.max(1);
        self.sessions = p.sessions;
        self.graph = p.graph;
        self.counters = p.counters;
        self.sidecar_attempts = p.sidecar_attempts.into_iter().collect();
        self.projects = p.projects;
        self.sync = p.sync;
        self.cleanup_clock = p.cleanup_clock;
        // An older indexed text: every exchange is embedded again (counted once the vectors
        // are loaded, `count_reindex`).
        self.reindex = match p.indexed_text < crate::indexed_text::VERSION {
            true => Some(u64::MAX),
            false => p.reindex,
        };
        let lookups = Instant::now();
        self.rebuild_lookups(chunks);
        self.open_note = format!(
            "{} records decoded in {} ms (lookups built in {} ms of it)",
            self.records.len(),
            decoded.as_millis(),
            lookups.elapsed().as_millis()
        );
        Ok(())
    }

    /// Takes the records in decoded chunks and rebuilds every lookup but the search indexes:
    /// ids, duplicate hashes, mirrored uids, totals. The id map is built from the chunks as
    /// they are (no per-chunk id lists), beside the hashes on a second thread in large stores.
    fn rebuild_lookups(&mut self, chunks: Vec<Decoded>) {
        self.records.clear();
        self.pending.clear();
        self.lexical = crate::index::Lexical::new();
        let n: usize = chunks.iter().map(|c| c.records.len()).sum();
        let mut totals = super::totals::Totals::default();
        for c in &chunks {
            totals.merge(&c.totals);
        }
        self.totals = totals;
        let maps = (&mut self.ids, &mut self.hashes, &mut self.mirrored);
        let taken = fill_lookups(maps, &chunks, n >= IDS_ON_A_THREAD);
        self.records.reserve(n);
        for c in chunks {
            // Each record moves in as it was decoded (boxed), and its chunk's vectors go now.
            self.records
                .extend(c.records.into_iter().map(|r| (r.key, r)));
        }
        self.ids.settle(taken, &self.records);
    }
}

/// Stores of at least this many records build the id map on a second thread; smaller ones
/// inline, where the thread saved little and its allocations landed in another malloc arena
/// (bench/EVAL.md section 23).
const IDS_ON_A_THREAD: usize = 100_000;

/// The maps `rebuild_lookups` fills from the chunks: ids, duplicate hashes, mirrored uids.
type Lookups<'a> = (
    &'a mut super::ids::Ids,
    &'a mut HashMap<(Collection, u64), u64, FastHash>,
    &'a mut HashMap<String, u64>,
);

/// Fills the lookups, the id map on a second thread meanwhile when `threaded`. Returns the
/// id claims to settle once the records are in the key map (`Ids::fill`).
fn fill_lookups(
    (ids, hashes, mirrored): Lookups,
    chunks: &[Decoded],
    threaded: bool,
) -> Vec<(String, u64)> {
    let n = chunks.iter().map(|c| c.records.len()).sum();
    // In record order (each id, then its former ids), so a later record's claim on an id wins
    // as it did when records were inserted one by one.
    let fill_ids = |ids: &mut super::ids::Ids| {
        ids.fill(
            chunks.iter().flat_map(|c| c.records.iter().map(|r| &**r)),
            n,
        )
    };
    if threaded {
        std::thread::scope(|scope| {
            let ids = scope.spawn(|| fill_ids(ids));
            fill_hashes(hashes, mirrored, chunks, n);
            ids.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
        })
    } else {
        let taken = fill_ids(ids);
        fill_hashes(hashes, mirrored, chunks, n);
        taken
    }
}

/// The duplicate lookup (from the hashes computed at decode) and the mirrored memories' uids.
fn fill_hashes(
    hashes: &mut HashMap<(Collection, u64), u64, FastHash>,
    mirrored: &mut HashMap<String, u64>,
    chunks: &[Decoded],
    n: usize,
) {
    hashes.clear();
    mirrored.clear();
    hashes.reserve(n);
    for c in chunks {
        for (r, hash) in c.records.iter().zip(&c.hashes) {
            if let Some(o) = &r.origin {
                mirrored.insert(o.uid.clone(), r.key);
            }
            hashes.insert((r.collection, *hash), r.key);
        }
    }
}

/// One chunk of records as decoded on its core: the records (boxed as the key map holds
/// them), the duplicate-lookup hash of each and their totals.
// Boxed on purpose: the key map holds `Box<Record>`, so each record moves in as it was
// decoded instead of being copied out of the chunk.
#[allow(clippy::vec_box)]
struct Decoded {
    records: Vec<Box<Record>>,
    hashes: Vec<u64>,
    totals: super::totals::Totals,
}

impl Decoded {
    #[allow(clippy::vec_box)]
    fn of(records: Vec<Box<Record>>) -> Decoded {
        let hashes = records
            .iter()
            .map(|r| scoped_hash(r.project.as_deref(), &r.content))
            .collect();
        let totals = super::totals::Totals::of(records.iter().map(|r| &**r));
        Decoded {
            records,
            hashes,
            totals,
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

    /// `s`'s records in key order, in chunks written as named maps (snapshots before rows).
    fn named_chunks(s: &MemState) -> Vec<Vec<u8>> {
        let mut records: Vec<&Record> = s.records().collect();
        records.sort_unstable_by_key(|r| r.key);
        records
            .chunks(CHUNK)
            .map(|c| rmp_serde::to_vec_named(c).unwrap())
            .collect()
    }

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
        let walked = super::super::totals::Totals::of(back.records());
        assert_eq!(back.totals(), &walked, "totals at open are a walk's");
        assert_eq!(back.totals().bytes(), s.totals().bytes());
    }

    /// What a start spends decoding records, in parts (not a pass/fail test: run with
    /// `--ignored --nocapture` in release, `MEMD_DECODE_N` records shaped like the bench's).
    #[test]
    #[ignore]
    fn decode_timing() {
        let n: usize = std::env::var("MEMD_DECODE_N").map_or(100_000, |v| v.parse().unwrap());
        let mut s = MemState::new(4).unwrap();
        for i in 0..n {
            let r = super::super::footprint_tests::bench_record(i);
            s.apply(&super::super::ops::Op::Insert(Box::new(r)));
        }
        let bytes = s.encode_snapshot().unwrap();
        let p: Persisted = rmp_serde::from_slice(&bytes).unwrap();
        // The same chunks as named maps, as snapshots held them before rows.
        let named = named_chunks(&s);
        let t = Instant::now();
        for c in &named {
            let _: Vec<Box<Record>> = rmp_serde::from_slice(c).unwrap();
        }
        let decode_named = t.elapsed();
        let t = Instant::now();
        let decoded: Vec<Vec<Box<Record>>> = p
            .record_chunks
            .iter()
            .map(|c| rmp_serde::from_slice(c).unwrap())
            .collect();
        let decode = t.elapsed();
        let mb = |n: usize| n >> 20;
        eprintln!(
            "rows {} MB decoded (one core) in {decode:?}; named maps {} MB in {decode_named:?}",
            mb(p.record_chunks.iter().map(|c| c.len()).sum()),
            mb(named.iter().map(Vec::len).sum())
        );
        let t = Instant::now();
        let _h: Vec<u64> = decoded
            .iter()
            .flatten()
            .map(|r| scoped_hash(r.project.as_deref(), &r.content))
            .collect();
        let hash = t.elapsed();
        drop(decoded);
        // The metadata alone, read as now and as serde's untagged enum read it before.
        #[derive(Deserialize)]
        #[serde(untagged)]
        #[allow(dead_code)]
        enum Untagged {
            Null,
            Bool(bool),
            Number(f64),
            String(String),
            List(Vec<Untagged>),
            Map(BTreeMap<String, Untagged>),
        }
        #[derive(Deserialize)]
        #[allow(dead_code)]
        struct Meta<V> {
            metadata: BTreeMap<String, V>,
        }
        let t = Instant::now();
        for c in &p.record_chunks {
            let _: Vec<Meta<proto::Value>> = rmp_serde::from_slice(c).unwrap();
        }
        let meta_now = t.elapsed();
        let t = Instant::now();
        for c in &p.record_chunks {
            let _: Vec<Meta<Untagged>> = rmp_serde::from_slice(c).unwrap();
        }
        let meta_before = t.elapsed();
        eprintln!("metadata only: {meta_now:?} (untagged derive: {meta_before:?})");
        let t = Instant::now();
        let mut back = MemState::new(4).unwrap();
        back.decode_snapshot(&bytes).unwrap();
        eprintln!(
            "{n} records of {} bytes, {} MB: decode (one core) {decode:?}, hash (one core) {hash:?}, \
             whole decode_snapshot {:?}",
            size_of::<Record>(),
            bytes.len() >> 20,
            t.elapsed()
        );
        assert_eq!(back.len(), n);
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
    fn lookups_built_inline_and_on_a_thread_are_the_same() {
        let s = state_with(50);
        let mut records: Vec<Box<Record>> = s.records().cloned().map(Box::new).collect();
        records.sort_by_key(|r| r.key);
        // A later record claiming an earlier one's id as a former id takes it, in both ways.
        let taken = records[0].id.clone();
        records[7].former_ids.push(taken.clone());
        records[9].origin = Some(Box::new(crate::record::Origin {
            uid: "store:9".into(),
            owner: "bob".into(),
        }));
        let second = records.split_off(30);
        let chunks = [Decoded::of(records), Decoded::of(second)];
        let all: super::super::Records = chunks
            .iter()
            .flat_map(|c| &c.records)
            .map(|r| (r.key, r.clone()))
            .collect();
        let build = |threaded| {
            let (mut ids, mut hashes, mut mirrored) = Default::default();
            let claims = fill_lookups((&mut ids, &mut hashes, &mut mirrored), &chunks, threaded);
            ids.settle(claims, &all);
            // Every record's own id leads to it; the id claimed twice, to the later claimer.
            let mut others = all.values().filter(|r| r.id != taken);
            let own = others.all(|r| ids.get(&r.id, &all) == Some(r.key));
            (own, ids.get(&taken, &all), hashes, mirrored)
        };
        let (inline, threaded) = (build(false), build(true));
        assert_eq!(inline, threaded);
        assert!(inline.0);
        assert_eq!(inline.1, Some(chunks[0].records[7].key));
        assert_eq!(inline.2.len(), 50);
        assert_eq!(inline.3["store:9"], chunks[0].records[9].key);
    }

    #[test]
    fn a_snapshot_of_named_map_chunks_still_loads() {
        let s = state_with(CHUNK + 3);
        let chunks = named_chunks(&s);
        let old = Persisted {
            record_chunks: chunks.iter().map(|c| Bytes::new(c)).collect(),
            next_key: s.next_key,
            ..Persisted::default()
        };
        let mut back = MemState::new(4).unwrap();
        back.decode_snapshot(&rmp_serde::to_vec_named(&old).unwrap())
            .unwrap();
        assert_eq!(back.len(), s.len());
        for r in s.records() {
            assert_eq!(back.by_id(&r.id), Some(r));
        }
        // Written again, the chunks are rows: no field names.
        let again = back.encode_snapshot().unwrap();
        let p: Persisted = rmp_serde::from_slice(&again).unwrap();
        assert!(!p.record_chunks[0].windows(7).any(|w| w == b"content"));
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
