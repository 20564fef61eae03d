//! One usearch HNSW index (cosine) holding the embedding of every memory in every collection.
//!
//! Owns the vectors (the store keeps none) and the locking around usearch; the on-disk framing
//! (checksum trailer, atomic replace) is in `vector_file`.
//! Must never know about collections or ranking: callers filter with a key predicate and fuse
//! results elsewhere.
//!
//! Why one index and not one per collection: a memory changes collection on promotion and
//! demotion, and with one index that is a store update, not a vector move between indexes.
//! Collection filtering happens inside the graph walk (usearch's filtered search), which keeps
//! walking until it has k admitted results, so recall holds (measured below with 50% and 5% kept).
//!
//! Quantisation: f32, chosen by measurement against i8. Data: real all-MiniLM-L6-v2 vectors
//! (memd's embedder) of 60k texts (LoCoMo turns and Rust doc comments), queries = 300 held-out
//! texts; plus 100k synthetic clustered unit vectors that are harder than real ones (top-1 vs
//! top-10 neighbour cos 0.62/0.57, real 0.66/0.50). Recall is against exact f32 brute force.
//! connectivity 16, expansion_add 128, usearch without SIMD kernels (`numkong` off), one
//! thread; latencies are thread CPU time on 2 shared, busy cores (load 4-11), so treat them as
//! upper bounds. "i8" is our own quantisation (see below); memory = usearch `memory_usage`
//! (includes reserved capacity) / process RSS growth.
//!
//! | data, n, storage | add/s | memory MiB | disk MiB | recall@5/@10, ef 128 | k=5 p50/p99 ms | 50% filter: recall@10, p50/p99 ms |
//! |---|---:|---:|---:|---|---|---|
//! | real 10k f32  | 3800 | 32 / 18  | 16.1 | 0.999 / 0.999 | 0.44 / 0.76 | 0.999, 0.65 / 1.05 |
//! | real 10k i8   | 4700 | 16 / 5.5 | 5.1  | 0.995 / 0.993 | 0.23 / 0.46 | 0.995, 0.36 / 0.65 |
//! | real 59k f32  | 960  | 145 / 102 | 94.8 | 0.996 / 0.997 | 1.17 / 1.71 | 0.999, 1.73 / 2.80 |
//! | real 59k i8   | 1280 | 49 / 35  | 30.0 | 0.991 / 0.991 | 1.03 / 1.59 | 0.995, 1.49 / 2.50 |
//! | synth 100k f32 | 590 | 273 / 173 | 160.7 | 0.939 / 0.922 | 1.84 / 3.41 | 0.944, 2.83 / 4.80 |
//! | synth 100k i8 | 820  | 81 / 59  | 50.8 | 0.913 / 0.900 | 1.45 / 2.72 | 0.939, 2.28 / 4.31 |
//!
//! Recall@10 on real vectors by expansion_search (59k, f32): 32 → 0.973, 64 → 0.989,
//! 96 → 0.995, 128 → 0.997, 192 → 0.999. 128 keeps ≥ 0.98 with margin for 100k real memories
//! (recall falls slowly with n); the synthetic set needs 256 for 0.96, a worst case.
//! Filtered search holds recall: with 50% or 5% of keys kept, recall@10 was as high as
//! unfiltered or higher. But a selective filter makes the walk slow (59k, 5% kept: p50 13-15 ms;
//! 1%: 41 ms), because rejected nodes must still be traversed; `search_among` scores a small
//! key set exactly instead (2950 keys: 2.0 ms, 590 keys: 0.46 ms; ~0.7 µs per key).
//!
//! Why i8, with our own scaling: it saves two thirds of memory and disk (at 100k memories
//! ~60 MiB instead of ~175 MiB of RSS, 51 instead of 161 MiB of file) and is ~1.3x faster,
//! while recall@10 stays at 0.99 on real vectors. Memory is the daemon's tightest budget: the
//! model alone takes ~120 MB. usearch's own f32→i8 cast divides by the L2 norm, which leaves
//! ~3 bits per component of a 384-d unit vector (recall@10 stalls at 0.96 real, 0.88 synthetic
//! whatever the expansion), so `quantize` scales each vector by its largest component instead.
//! Cosine ignores the per-vector scale, so no factor needs storing. The cost: similarities and
//! `get` are approximate, within ~0.01 of the f32 values (asserted in the tests below), far
//! below the gaps that relevance floors and duplicate thresholds rely on.

use std::path::Path;
use std::sync::{Condvar, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use anyhow::{Result, anyhow, ensure};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use super::vector_file::{self, utf8_path};

const CONNECTIVITY: usize = 16;
const EXPANSION_ADD: usize = 128;
/// See the table above: recall@10 0.997 at 59k real vectors, margin for 100k.
const EXPANSION_SEARCH: usize = 128;
const INITIAL_CAPACITY: usize = 1024;
/// Approximate nearest-neighbour index keyed by the store's `u64` memory keys.
///
/// Thread safety: searches share a read lock and run in parallel with each other; upsert and
/// remove take the write lock, so a search waits at most one insert (~1-2 ms at 100k). usearch
/// itself allows search during add, but its searches read neighbour lists without locks while
/// an add rewrites them; under a stress test (many searching threads, one writer) that made an
/// exact self-query miss its own key now and then. Deterministic results are worth more here
/// than the microseconds. Every usearch call that needs one of its per-thread contexts holds a
/// permit from `contexts`, so more concurrent searches than reserved contexts wait instead of
/// failing with usearch's "reserve capacity ahead of searches".
pub struct VectorIndex {
    dims: usize,
    index: RwLock<Index>,
    contexts: Permits,
}

impl VectorIndex {
    pub fn new(dims: usize) -> Result<Self> {
        ensure!(dims > 0, "vector dimensions must be positive");
        let index = Index::new(&options(dims)).map_err(|e| anyhow!("create vector index: {e}"))?;
        Self::wrap(index, dims)
    }

    /// Inserts or replaces the vector for `key`. Repeating a call leaves the same state.
    pub fn upsert(&self, key: u64, v: &[f32]) -> Result<()> {
        self.check_vector(v)?;
        self.upsert_quantized(key, &quantize(v))
    }

    /// `upsert` for a vector already passed through `quantize`.
    pub fn upsert_quantized(&self, key: u64, q: &[i8]) -> Result<()> {
        ensure!(
            q.len() == self.dims,
            "vector has {} dimensions, index has {}",
            q.len(),
            self.dims
        );
        let ix = self.write();
        if ix.contains(key) {
            remove_key(&ix, key)?;
        }
        self.grow_if_full(&ix)?;
        // No reader holds a permit while the write lock is held, so this never waits.
        let _ctx = self.contexts.acquire();
        ix.add(key, q).map_err(|e| anyhow!("add vector {key}: {e}"))
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&self, key: u64) -> Result<bool> {
        remove_key(&self.write(), key)
    }

    pub fn contains(&self, key: u64) -> bool {
        self.read().contains(key)
    }

    pub fn len(&self) -> usize {
        self.read().size()
    }

    /// Bytes of the index in use (graph, vectors, the slot tables), for `memd stats`.
    /// usearch's `memory_usage` also counts the arenas' reserved tails: capacity reserved
    /// ahead (up to twice the vectors held, `grow_if_full`) in anonymous mappings whose pages
    /// are never touched until an add reaches them, so not resident. At 10,000 memories it
    /// reported 16.9 MB where 5.3 MB is in use.
    pub fn memory_bytes(&self) -> usize {
        let ix = self.read();
        let stats = ix.memory_stats();
        ix.memory_usage()
            .saturating_sub(stats.graph_reserved)
            .saturating_sub(stats.vectors_reserved)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Top `k` by cosine similarity (1 − distance), best first, among keys for which `keep`
    /// is true. `keep` runs inside the graph walk under the index's read lock: it must be cheap,
    /// must not panic (it is called through C++) and must not call back into this index.
    pub fn search(
        &self,
        q: &[f32],
        k: usize,
        keep: &(dyn Fn(u64) -> bool + Sync),
    ) -> Result<Vec<(u64, f32)>> {
        self.check_vector(q)?;
        if k == 0 {
            return Ok(Vec::new());
        }
        let ix = self.read();
        // usearch allocates result buffers of `k` entries up front.
        let k = k.min(ix.size());
        let _ctx = self.contexts.acquire();
        let found = ix
            .filtered_search(&quantize(q), k, keep)
            .map_err(|e| anyhow!("vector search: {e}"))?;
        Ok(found
            .keys
            .into_iter()
            .zip(found.distances)
            .map(|(key, d)| (key, 1.0 - d))
            .collect())
    }

    /// Exact top `k` among `keys` by cosine similarity, best first; unknown keys are skipped.
    /// For small candidate sets this beats `search` with a selective `keep`: the graph walk
    /// must wade through every rejected node, so a filter keeping 5% of 59k real vectors cost
    /// ~15 ms, while scoring those 2950 vectors directly cost ~2 ms (~0.7 µs per key). Prefer
    /// it when the kept set is known and smaller than a few thousand keys.
    pub fn search_among(&self, q: &[f32], k: usize, keys: &[u64]) -> Result<Vec<(u64, f32)>> {
        self.check_vector(q)?;
        let norm = q.iter().map(|x| x * x).sum::<f32>().sqrt();
        if k == 0 || norm == 0.0 {
            return Ok(Vec::new());
        }
        let ix = self.read();
        let mut buf = vec![0i8; self.dims];
        let mut scored: Vec<(u64, f32)> = Vec::with_capacity(keys.len());
        for &key in keys {
            if matches!(ix.get(key, &mut buf), Ok(n) if n > 0) {
                let (dot, vv) = buf.iter().zip(q).fold((0f32, 0f32), |(d, n), (&a, b)| {
                    let a = f32::from(a);
                    (d + a * b, n + a * a)
                });
                scored.push((key, dot / (norm * vv.sqrt()).max(f32::MIN_POSITIVE)));
            }
        }
        scored.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.dedup_by_key(|h| h.0);
        scored.truncate(k);
        Ok(scored)
    }

    /// The stored vector for `key`, if any, as a unit vector (approximate: see the module doc).
    pub fn get(&self, key: u64) -> Option<Vec<f32>> {
        let mut q = vec![0i8; self.dims];
        match self.read().get(key, &mut q) {
            Ok(n) if n > 0 => Some(dequantize(&q)),
            _ => None,
        }
    }

    /// Writes the index to `path` atomically: a temp file in the same directory, fsync, rename,
    /// fsync of the directory. Searches continue meanwhile; writers wait.
    pub fn save(&self, path: &Path) -> Result<()> {
        let ix = self.read();
        vector_file::save_atomically(path, self.dims, |tmp| {
            ix.save(utf8_path(tmp)?)
                .map_err(|e| anyhow!("save vector index {}: {e}", tmp.display()))
        })
    }

    /// Loads an index saved by `save` fully into memory (mutable). Fails, without touching the
    /// file, if it is truncated, fails its checksum, or holds vectors of other dimensions.
    pub fn load(path: &Path, dims: usize) -> Result<Self> {
        vector_file::verify(path, dims)?;
        let path_str = utf8_path(path)?;
        let meta = Index::metadata(path_str)
            .map_err(|e| anyhow!("read vector index header {}: {e}", path.display()))?;
        ensure!(
            meta.dimensions == dims as u64,
            "vector index {} has {} dimensions, expected {dims}",
            path.display(),
            meta.dimensions
        );
        ensure!(
            meta.metric == MetricKind::Cos && !meta.multi,
            "vector index {} was not built by memd (metric or multi-key mismatch)",
            path.display()
        );
        let index = Index::new(&options(dims)).map_err(|e| anyhow!("create vector index: {e}"))?;
        index
            .load(path_str)
            .map_err(|e| anyhow!("load vector index {}: {e}", path.display()))?;
        Self::wrap(index, dims)
    }

    fn wrap(index: Index, dims: usize) -> Result<Self> {
        let contexts = context_count();
        let capacity = index.capacity().max(INITIAL_CAPACITY);
        index
            .reserve_capacity_and_threads(capacity, contexts)
            .map_err(|e| anyhow!("reserve vector index: {e}"))?;
        index.change_expansion_search(EXPANSION_SEARCH);
        index.change_expansion_add(EXPANSION_ADD);
        Ok(Self {
            dims,
            index: RwLock::new(index),
            contexts: Permits::new(contexts),
        })
    }

    fn check_vector(&self, v: &[f32]) -> Result<()> {
        ensure!(
            v.len() == self.dims,
            "vector has {} dimensions, index has {}",
            v.len(),
            self.dims
        );
        ensure!(
            v.iter().all(|x| x.is_finite()),
            "vector has non-finite components"
        );
        Ok(())
    }

    /// Doubles the capacity when the next add would not fit. usearch's `size` excludes removed
    /// entries, whose slots the next adds recycle, so this never grows early.
    fn grow_if_full(&self, ix: &Index) -> Result<()> {
        if ix.size() < ix.capacity() {
            return Ok(());
        }
        let target = (ix.capacity() * 2).max(INITIAL_CAPACITY);
        ix.reserve_capacity_and_threads(target, self.contexts.total)
            .map_err(|e| anyhow!("grow vector index to {target}: {e}"))
    }

    fn read(&self) -> RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(PoisonError::into_inner)
    }
}

fn options(dims: usize) -> IndexOptions {
    IndexOptions {
        dimensions: dims,
        metric: MetricKind::Cos,
        quantization: ScalarKind::I8,
        connectivity: CONNECTIVITY,
        expansion_add: EXPANSION_ADD,
        expansion_search: EXPANSION_SEARCH,
        multi: false,
    }
}

/// Scales `v` so its largest component maps to ±127 and rounds. `check_vector` has already
/// ruled out non-finite components; an all-zero vector stays zero.
pub fn quantize(v: &[f32]) -> Vec<i8> {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return vec![0; v.len()];
    }
    let scale = 127.0 / max;
    v.iter()
        .map(|x| (x * scale).round().clamp(-127.0, 127.0) as i8)
        .collect()
}

fn dequantize(q: &[i8]) -> Vec<f32> {
    let norm = q.iter().map(|&x| f32::from(x).powi(2)).sum::<f32>().sqrt();
    let norm = norm.max(f32::MIN_POSITIVE);
    q.iter().map(|&x| f32::from(x) / norm).collect()
}

/// usearch contexts to reserve: enough for every core plus callers blocked on I/O elsewhere.
fn context_count() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cores * 2).clamp(4, 64)
}

fn remove_key(ix: &Index, key: u64) -> Result<bool> {
    let removed = ix
        .remove(key)
        .map_err(|e| anyhow!("remove vector {key}: {e}"))?;
    Ok(removed > 0)
}

/// A counting semaphore for usearch's per-thread contexts.
struct Permits {
    total: usize,
    free: Mutex<usize>,
    released: Condvar,
}

struct Permit<'a>(&'a Permits);

impl Permits {
    fn new(total: usize) -> Self {
        Self {
            total,
            free: Mutex::new(total),
            released: Condvar::new(),
        }
    }

    fn acquire(&self) -> Permit<'_> {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            free = self
                .released
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut free = self.0.free.lock().unwrap_or_else(PoisonError::into_inner);
        *free += 1;
        self.0.released.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::super::vector_file::temp_path;
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::fs;

    const D: usize = 384;

    /// How far an i8 similarity may be from the exact f32 one (module doc).
    const QUANT_TOL: f32 = 0.01;

    fn unit(rng: &mut StdRng) -> Vec<f32> {
        let mut v: Vec<f32> = (0..D).map(|_| rng.random::<f32>() - 0.5).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    fn filled(n: u64, seed: u64) -> (VectorIndex, Vec<Vec<f32>>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let ix = VectorIndex::new(D).expect("new");
        let vs: Vec<Vec<f32>> = (0..n).map(|_| unit(&mut rng)).collect();
        for (k, v) in vs.iter().enumerate() {
            ix.upsert(k as u64, v).expect("upsert");
        }
        (ix, vs)
    }

    fn all(_: u64) -> bool {
        true
    }

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn upsert_replace_remove_contains_len() {
        let (ix, vs) = filled(20, 1);
        assert_eq!(ix.len(), 20);
        assert!(ix.contains(3));
        let hits = ix.search(&vs[3], 1, &all).expect("search");
        assert_eq!(hits[0].0, 3);
        assert!(
            (hits[0].1 - 1.0).abs() < 1e-4,
            "self-similarity {}",
            hits[0].1
        );

        // replacing moves the key to the new vector, without growing len
        ix.upsert(3, &vs[7]).expect("replace");
        ix.upsert(3, &vs[7]).expect("idempotent replace");
        assert_eq!(ix.len(), 20);
        let got = ix.get(3).expect("get");
        assert!(dot(&got, &vs[7]) > 0.9999);
        let hits = ix.search(&vs[7], 2, &all).expect("search");
        let mut top: Vec<u64> = hits.iter().map(|h| h.0).collect();
        top.sort_unstable();
        assert_eq!(top, [3, 7]);

        assert!(ix.remove(3).expect("remove"));
        assert!(!ix.remove(3).expect("remove again"));
        assert!(!ix.remove(999).expect("remove missing"));
        assert!(!ix.contains(3));
        assert_eq!(ix.len(), 19);
        assert!(ix.get(3).is_none());
        let hits = ix.search(&vs[7], usize::MAX, &all).expect("search");
        assert_eq!(hits.len(), 19);
        assert!(hits.iter().all(|h| h.0 != 3));

        // a removed key can come back, recycling the removed slot
        ix.upsert(3, &vs[3]).expect("re-add");
        assert!(ix.contains(3));
        assert_eq!(ix.len(), 20);
        assert_eq!(ix.search(&vs[3], 1, &all).expect("search")[0].0, 3);
    }

    #[test]
    fn rejects_bad_vectors() {
        let ix = VectorIndex::new(D).expect("new");
        assert!(ix.upsert(1, &[0.5; 10]).is_err());
        let mut v = vec![0.0; D];
        v[0] = f32::NAN;
        assert!(ix.upsert(1, &v).is_err());
        assert!(ix.search(&[1.0; 3], 5, &all).is_err());
        assert!(ix.is_empty());
        assert!(VectorIndex::new(0).is_err());
        assert!(
            ix.search(&vec![0.1; D], 5, &all)
                .expect("empty search")
                .is_empty()
        );
    }

    #[test]
    fn grows_past_initial_capacity() {
        let n = INITIAL_CAPACITY as u64 * 2 + 100;
        let (ix, vs) = filled(n, 2);
        assert_eq!(ix.len(), n as usize);
        assert!(ix.read().capacity() >= n as usize);
        for k in [0, INITIAL_CAPACITY as u64, n - 1] {
            assert_eq!(ix.search(&vs[k as usize], 1, &all).expect("search")[0].0, k);
        }
    }

    #[test]
    fn the_memory_figure_leaves_out_capacity_reserved_ahead() {
        let n = INITIAL_CAPACITY * 2 + 100;
        let (ix, _) = filled(n as u64, 4);
        let (used, usage, capacity) = (
            ix.memory_bytes(),
            ix.read().memory_usage(),
            ix.read().capacity(),
        );
        assert!(used >= n * D, "{used} < the vectors' own {} bytes", n * D);
        assert!(
            used + (capacity - n) * D <= usage,
            "{used} counts the {} reserved slots (usearch: {usage})",
            capacity - n
        );
    }

    #[test]
    fn churn_recycles_slots_without_growing() {
        let (ix, vs) = filled(200, 3);
        let capacity = ix.read().capacity();
        for round in 0..5u64 {
            for k in 0..200u64 {
                ix.remove(round * 1000 + k).expect("remove");
                ix.upsert((round + 1) * 1000 + k, &vs[k as usize])
                    .expect("upsert");
            }
        }
        assert_eq!(ix.len(), 200);
        assert_eq!(ix.read().capacity(), capacity);
        assert_eq!(ix.search(&vs[42], 1, &all).expect("search")[0].0, 5042);
    }

    #[test]
    fn filtered_search_returns_only_kept_keys_and_the_true_best() {
        let (ix, vs) = filled(600, 4);
        let keep = |k: u64| k.is_multiple_of(3);
        let mut rng = StdRng::seed_from_u64(44);
        for _ in 0..20 {
            let q = unit(&mut rng);
            let hits = ix.search(&q, 10, &keep).expect("search");
            assert_eq!(hits.len(), 10);
            assert!(hits.iter().all(|h| keep(h.0)));
            assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
            let best = (0..600u64)
                .filter(|k| keep(*k))
                .max_by(|a, b| dot(&vs[*a as usize], &q).total_cmp(&dot(&vs[*b as usize], &q)));
            assert_eq!(Some(hits[0].0), best);
            assert!((hits[0].1 - dot(&vs[hits[0].0 as usize], &q)).abs() < QUANT_TOL);
        }
        assert!(ix.search(&vs[0], 5, &|_| false).expect("search").is_empty());
    }

    #[test]
    fn search_among_is_exact_over_the_given_keys() {
        let (ix, vs) = filled(400, 8);
        let mut rng = StdRng::seed_from_u64(88);
        let q = unit(&mut rng);
        let keys: Vec<u64> = (0..400u64)
            .filter(|k| k % 7 == 0)
            .chain([9999, 14, 14])
            .collect();
        let hits = ix.search_among(&q, 5, &keys).expect("search_among");
        let mut truth: Vec<(u64, f32)> = (0..400u64)
            .filter(|k| k % 7 == 0)
            .map(|k| (k, dot(&vs[k as usize], &q)))
            .collect();
        truth.sort_by(|a, b| b.1.total_cmp(&a.1));
        assert_eq!(hits.len(), 5);
        for (h, t) in hits.iter().zip(&truth) {
            assert_eq!(h.0, t.0);
            assert!((h.1 - t.1).abs() < QUANT_TOL, "{h:?} vs exact {t:?}");
        }
        let all_keys: Vec<u64> = (0..400).collect();
        assert_eq!(
            ix.search_among(&vs[3], 400, &all_keys).expect("all").len(),
            400
        );
        assert!(ix.search_among(&q, 5, &[]).expect("empty").is_empty());
        assert!(ix.search_among(&q, 0, &keys).expect("k=0").is_empty());
        assert!(ix.search_among(&q[..10], 5, &keys).is_err());
    }

    #[test]
    fn save_load_round_trip_gives_identical_results() {
        let (ix, vs) = filled(1500, 5);
        ix.remove(10).expect("remove");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("vectors.usearch");
        ix.save(&path).expect("save");
        assert!(!temp_path(&path).exists());
        let loaded = VectorIndex::load(&path, D).expect("load");
        assert_eq!(loaded.len(), ix.len());
        assert!(!loaded.contains(10));
        let keep = |k: u64| k % 2 == 1;
        for q in vs.iter().step_by(50) {
            assert_eq!(
                ix.search(q, 10, &all).expect("a"),
                loaded.search(q, 10, &all).expect("b")
            );
            assert_eq!(
                ix.search(q, 5, &keep).expect("a"),
                loaded.search(q, 5, &keep).expect("b")
            );
        }
        assert_eq!(loaded.get(7), ix.get(7));
        // the loaded index stays mutable, recycles the removed slot and can grow
        let mut rng = StdRng::seed_from_u64(55);
        for k in 5000..5700u64 {
            loaded
                .upsert(k, &unit(&mut rng))
                .expect("upsert after load");
        }
        assert_eq!(loaded.len(), 1499 + 700);
        assert_eq!(loaded.search(&vs[20], 1, &all).expect("search")[0].0, 20);
        // and saves again over the old file
        loaded.save(&path).expect("save again");
        assert_eq!(VectorIndex::load(&path, D).expect("reload").len(), 2199);
    }

    #[test]
    fn damaged_or_mismatched_files_are_errors() {
        let (ix, _) = filled(300, 6);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("v.usearch");
        ix.save(&path).expect("save");
        let bytes = fs::read(&path).expect("read");

        assert!(VectorIndex::load(&path, D + 1).is_err(), "dims mismatch");
        assert!(VectorIndex::load(&dir.path().join("missing"), D).is_err());

        let damaged = dir.path().join("damaged");
        for cut in [0, 10, 100, bytes.len() / 2, bytes.len() - 1] {
            fs::write(&damaged, &bytes[..cut]).expect("write");
            assert!(
                VectorIndex::load(&damaged, D).is_err(),
                "truncated at {cut}"
            );
        }
        let mut flipped = bytes.clone();
        flipped[bytes.len() / 3] ^= 0x40;
        fs::write(&damaged, &flipped).expect("write");
        let err = VectorIndex::load(&damaged, D)
            .err()
            .expect("corrupt must fail");
        assert!(err.to_string().contains("checksum"), "{err}");
        fs::write(
            &damaged,
            b"not an index at all, just some text padding it out",
        )
        .expect("write");
        assert!(VectorIndex::load(&damaged, D).is_err());
        // the intact file still loads
        assert_eq!(VectorIndex::load(&path, D).expect("load").len(), 300);
    }

    #[test]
    fn searches_run_while_writers_insert() {
        let (ix, vs) = filled(300, 7);
        let threads = context_count() * 3;
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut rng = StdRng::seed_from_u64(77);
                for k in 1000..1600u64 {
                    ix.upsert(k, &unit(&mut rng)).expect("upsert");
                    if k % 5 == 4 {
                        ix.remove(k - 3).expect("remove");
                    }
                }
            });
            for t in 0..threads {
                let (ix, vs) = (&ix, &vs);
                s.spawn(move || {
                    for i in 0..40 {
                        let k = (t * 40 + i) % 300;
                        let hits = ix.search(&vs[k], 3, &all).expect("search during writes");
                        assert_eq!(hits[0].0, k as u64, "{hits:?}");
                    }
                });
            }
        });
        assert_eq!(ix.len(), 300 + 600 - 120);
    }
}
