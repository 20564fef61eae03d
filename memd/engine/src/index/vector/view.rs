//! Opening a saved vector index as a read-only view of its file, and making it writable.
//!
//! A start only needs to search, and usearch can serve searches from the file's pages in
//! place (memory-mapped) instead of reading a million nodes into memory first (seconds at 1M
//! memories, bench/EVAL.md section 24). Writes cannot go to a view (usearch refuses them), so
//! the writable copy is loaded from the same file, on a thread once the open is done
//! (`load_writable_in_background`, which swaps it in itself) or at the first write, and
//! swapped in for the view.
//!
//! Owns that hand-over. Must never trust a file that fails `load`'s checks (trailer, checksum,
//! usearch's header: the view is checked as a load is), never let a write reach the view
//! (every write and `save` waits for the writable copy first), and never change what a search
//! returns across the swap (both are the same file's index).

use super::{Index, VectorIndex, checked, load_index, options, prepare};
use anyhow::{Result, anyhow};
use std::path::{Path, PathBuf};
use std::sync::{MutexGuard, PoisonError, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::Instant;

/// Where the writable copy of a viewed index comes from.
pub(super) enum Writable {
    /// Not started: the first write loads it from this file.
    Later(PathBuf),
    /// Being loaded on a thread (the file's path kept to retry if the thread failed). The
    /// thread returns the copy only when a writer was waiting for it (`None`: swapped in).
    Loading(JoinHandle<Result<Option<Index>>>, PathBuf),
}

impl VectorIndex {
    /// Opens an index saved by `save` as a read-only view of the file, after the same checks as
    /// `load` (so a damaged file fails here). Searches, `get` and `contains` work at once; the
    /// first write (or `save`) waits for the writable copy.
    pub fn view(path: &Path, dims: usize) -> Result<Self> {
        let path_str = checked(path, dims)?;
        let index = Index::new(&options(dims)).map_err(|e| anyhow!("create vector index: {e}"))?;
        index
            .view(path_str)
            .map_err(|e| anyhow!("view vector index {}: {e}", path.display()))?;
        let ix = Self::wrap(index, dims)?;
        *ix.pending() = Some(Writable::Later(path.to_path_buf()));
        Ok(ix)
    }

    /// Whether the index is still a view of its file (no writable copy swapped in yet).
    pub fn is_view(&self) -> bool {
        self.pending().is_some()
    }

    /// Starts loading a view's writable copy on a thread (no-op when writable or already
    /// loading), which swaps it in for the view when done (unless a writer is already waiting
    /// for it), so the file's pages and the copy are not both held for long.
    pub fn load_writable_in_background(&self) {
        let mut pending = self.pending();
        if let Some(Writable::Later(path)) = pending.take() {
            let (file, dims, contexts) = (path.clone(), self.dims, self.contexts.total);
            let (index, waiting) = (self.index.clone(), self.writable.clone());
            let thread = std::thread::Builder::new()
                .name("vector-index-load".into())
                .spawn(move || {
                    let started = Instant::now();
                    let full = load_index(&file, dims)?;
                    prepare(&full, contexts)?;
                    tracing::info!(
                        "vector index: writable copy loaded in {} ms",
                        started.elapsed().as_millis()
                    );
                    // A writer holding the lock is joining this thread: it takes the copy.
                    let Ok(mut pending) = waiting.try_lock() else {
                        return Ok(Some(full));
                    };
                    *index.write().unwrap_or_else(PoisonError::into_inner) = full;
                    *pending = None;
                    Ok(None)
                });
            *pending = Some(match thread {
                Ok(handle) => Writable::Loading(handle, path),
                Err(_) => Writable::Later(path),
            });
        }
    }

    /// The index under the write lock, the writable copy swapped in for a view first (waiting
    /// for its load, or loading it here). Writers wait on `writable` meanwhile, so none can
    /// reach the view; searches go on until the swap.
    pub(super) fn writable(&self) -> Result<RwLockWriteGuard<'_, Index>> {
        let mut pending = self.pending();
        if let Some(how) = pending.take() {
            let (loaded, path) = match how {
                Writable::Later(path) => (load_index(&path, self.dims).map(Some), path),
                Writable::Loading(handle, path) => {
                    let joined = handle
                        .join()
                        .unwrap_or_else(|_| Err(anyhow!("the thread loading it panicked")));
                    (joined, path)
                }
            };
            // A failed background load is tried once more here before writes fail.
            let full = match loaded {
                Ok(full) => full,
                Err(e) => {
                    tracing::warn!("vector index: loading the writable copy failed ({e:#})");
                    let again = load_index(&path, self.dims);
                    if again.is_err() {
                        *pending = Some(Writable::Later(path));
                    }
                    Some(again?)
                }
            };
            if let Some(full) = full {
                prepare(&full, self.contexts.total)?;
                *self.write() = full;
            }
        }
        Ok(self.write())
    }

    fn pending(&self) -> MutexGuard<'_, Option<Writable>> {
        self.writable.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{D, all, filled, unit};
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn saved(n: u64, seed: u64) -> (tempfile::TempDir, PathBuf, VectorIndex, Vec<Vec<f32>>) {
        let (ix, vs) = filled(n, seed);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("vectors.usearch");
        ix.save(&path).expect("save");
        (dir, path, ix, vs)
    }

    #[test]
    fn a_view_answers_as_the_loaded_index_and_becomes_writable_on_a_write() {
        let (_dir, path, ix, vs) = saved(1200, 11);
        let viewed = VectorIndex::view(&path, D).expect("view");
        assert!(viewed.is_view());
        assert_eq!(viewed.len(), ix.len());
        for q in vs.iter().step_by(60) {
            let a = ix.search(q, 10, &all).expect("a");
            assert_eq!(a, viewed.search(q, 10, &all).expect("b"));
        }
        assert_eq!(viewed.get(7), ix.get(7));
        // The first write loads the writable copy (not started: here, at the write).
        let mut rng = StdRng::seed_from_u64(12);
        let v = unit(&mut rng);
        viewed.upsert(5000, &v).expect("upsert on a view");
        assert!(!viewed.is_view());
        assert!(viewed.remove(3).expect("remove"));
        assert_eq!(viewed.len(), 1200);
        assert_eq!(viewed.search(&v, 1, &all).expect("search")[0].0, 5000);
        assert_eq!(viewed.search(&vs[9], 1, &all).expect("search")[0].0, 9);
    }

    #[test]
    fn writes_wait_for_the_background_copy_and_searches_run_meanwhile() {
        let (_dir, path, _ix, vs) = saved(1500, 13);
        let viewed = VectorIndex::view(&path, D).expect("view");
        viewed.load_writable_in_background();
        let mut rng = StdRng::seed_from_u64(14);
        let added: Vec<Vec<f32>> = (0..50).map(|_| unit(&mut rng)).collect();
        std::thread::scope(|s| {
            s.spawn(|| {
                for (i, v) in added.iter().enumerate() {
                    viewed.upsert(10_000 + i as u64, v).expect("upsert");
                }
            });
            for k in (0..1500).step_by(30) {
                let hits = viewed.search(&vs[k], 1, &all).expect("search");
                assert_eq!(hits[0].0, k as u64);
            }
        });
        assert!(!viewed.is_view());
        assert_eq!(viewed.len(), 1550);
        assert_eq!(viewed.search(&added[7], 1, &all).expect("s")[0].0, 10_007);
    }

    #[test]
    fn the_background_copy_swaps_itself_in_without_a_write() {
        let (_dir, path, ix, vs) = saved(1000, 17);
        let viewed = VectorIndex::view(&path, D).expect("view");
        assert!(viewed.is_view());
        viewed.load_writable_in_background();
        // Polls the condition (the thread's swap), bounded so a hang fails instead.
        let started = Instant::now();
        while viewed.is_view() {
            assert!(started.elapsed().as_secs() < 120, "never swapped in");
            std::thread::yield_now();
        }
        assert!(viewed.pending().is_none());
        assert_eq!(
            viewed.search(&vs[4], 5, &all).expect("a"),
            ix.search(&vs[4], 5, &all).expect("b")
        );
        viewed.upsert(4242, &vs[0]).expect("upsert");
        assert_eq!(viewed.len(), 1001);
    }

    #[test]
    fn saving_a_view_saves_its_writes_and_frees_the_file() {
        let (dir, path, _ix, vs) = saved(300, 15);
        let viewed = VectorIndex::view(&path, D).expect("view");
        viewed.load_writable_in_background();
        // Saving waits for the copy, so the viewed file can go once it is written.
        let next = dir.path().join("vectors.2.usearch");
        viewed.save(&next).expect("save a view");
        std::fs::remove_file(&path).expect("remove the viewed file");
        viewed
            .upsert(777, &vs[1])
            .expect("a write after the file went");
        assert_eq!(VectorIndex::load(&next, D).expect("load").len(), 300);
        assert_eq!(viewed.len(), 301);
    }

    #[test]
    fn a_damaged_file_is_not_viewed() {
        let (dir, path, _ix, _vs) = saved(300, 16);
        let mut bytes = std::fs::read(&path).expect("read");
        let at = bytes.len() / 3;
        bytes[at] ^= 0x40;
        let damaged = dir.path().join("damaged");
        std::fs::write(&damaged, &bytes).expect("write");
        let err = VectorIndex::view(&damaged, D).err().expect("must fail");
        assert!(err.to_string().contains("checksum"), "{err}");
        std::fs::write(&damaged, &bytes[..bytes.len() / 2]).expect("write");
        assert!(VectorIndex::view(&damaged, D).is_err(), "truncated");
        assert!(VectorIndex::view(&path, D + 1).is_err(), "dims");
    }
}
