//! The vector index's files beside the snapshots: `vectors.<generation>.usearch`.
//!
//! Owns saving the index with each snapshot (dropping older generations) and loading the
//! newest usable one at open. Must never trust an index older than the snapshot it starts
//! from, and never fail an open over an unusable index: what is missing is re-embedded.

use super::MemState;
use crate::index::VectorIndex;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

impl MemState {
    pub(super) fn save_vectors(&self, dir: &Path, generation: u64) -> Result<()> {
        self.vectors.save(&vectors_file(dir, generation))?;
        for (g, path) in vector_files(dir) {
            if g < generation {
                std::fs::remove_file(path).ok();
            }
        }
        Ok(())
    }

    /// Takes the newest usable index (`prefetched`: already read beside the decode, with the
    /// time that took) and marks every record it lacks for embedding.
    pub(super) fn load_vectors(
        &mut self,
        dir: &Path,
        generation: u64,
        prefetched: Option<(Option<VectorIndex>, std::time::Duration)>,
    ) -> Result<()> {
        let started = std::time::Instant::now();
        let (index, took) = match prefetched {
            Some(read) => read,
            None => (
                read_index(dir, generation, self.vectors.dims()),
                Default::default(),
            ),
        };
        if let Some(ix) = index {
            self.vectors = Arc::new(ix);
            self.index_origin = "loaded".into();
        }
        if self.index_origin != "loaded" && !self.records.is_empty() {
            self.index_origin = "rebuilt".into();
        }
        let vectors = &self.vectors;
        self.pending = self
            .records
            .keys()
            .filter(|k| !vectors.contains(**k))
            .copied()
            .collect();
        if !self.records.is_empty() {
            let origin = self.index_origin.clone();
            self.note_open(format!(
                "vector index {origin} in {} ms ({} to embed)",
                (took + started.elapsed()).as_millis(),
                self.pending.len()
            ));
        }
        Ok(())
    }
}

/// The newest index in `dir` at least as new as snapshot `generation` that loads. Any such
/// index works: replaying the WAL on top of it is idempotent (upserts and removals); anything
/// missing is re-embedded in the background.
pub(super) fn read_index(dir: &Path, generation: u64, dims: usize) -> Option<VectorIndex> {
    for (g, path) in vector_files(dir) {
        if g < generation {
            break;
        }
        match VectorIndex::load(&path, dims) {
            Ok(ix) => return Some(ix),
            Err(e) => tracing::warn!("vector index {} unusable: {e}", path.display()),
        }
    }
    None
}

fn vectors_file(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("vectors.{generation:08}.usearch"))
}

/// Vector index files in `dir`, newest generation first.
fn vector_files(dir: &Path) -> Vec<(u64, PathBuf)> {
    crate::store::side_file::generations(dir, "vectors.", ".usearch")
}
