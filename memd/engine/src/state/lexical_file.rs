//! The lexical index's file beside the snapshots: `lexical.<generation>.bm25`.
//!
//! Owns saving the index's image with each snapshot (framed by `store::side_file` with the
//! snapshot's generation and a checksum; older files dropped) and, at open, loading the image
//! made for exactly the snapshot the state came from, or rebuilding the index from the records
//! when there is none or it fails any check (and then saving that rebuild, which is still
//! exactly the snapshot's, before the WAL is replayed on top). Must never use an image of
//! another generation (the WAL replayed on top would then miss or repeat changes), of another
//! tokenizer (`tokenize::TERMS_VERSION`), or whose documents are not exactly the records, and
//! never fail an open or a snapshot over this cache.

use super::MemState;
use crate::index::Lexical;
use crate::store::side_file::{self, SideKind};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The image's layout (3: flat arrays; 2 kept a term list per document), the tokenizer's
/// version and the version of the indexed text (`indexed_text::VERSION`), so any change
/// rebuilds the index: a store indexed before exchanges carried their dates is indexed again
/// at its first start.
pub(super) const KIND: SideKind = SideKind {
    magic: *b"MEMDBM25",
    version: 1000 * crate::index::tokenize::TERMS_VERSION + 100 * crate::indexed_text::VERSION + 3,
};

impl MemState {
    /// Writes the image for snapshot `generation`; a failure only costs a rebuild at the next
    /// start, so it is logged, not returned.
    pub(super) fn save_lexical(&self, dir: &Path, generation: u64) {
        let path = lexical_file(dir, generation);
        if let Err(e) = side_file::write(&path, KIND, generation, &self.lexical.to_image()) {
            tracing::warn!("saving the lexical index to {} failed: {e}", path.display());
            return;
        }
        for (g, old) in lexical_files(dir) {
            if g < generation {
                std::fs::remove_file(old).ok();
            }
        }
    }

    /// Loads the image of snapshot `generation` (`prefetched`: already read beside the
    /// decode, with the time that took), or rebuilds the index from the records.
    pub(super) fn load_lexical(
        &mut self,
        dir: &Path,
        generation: u64,
        prefetched: Option<(Result<Lexical, String>, std::time::Duration)>,
    ) {
        let started = Instant::now();
        if self.records.is_empty() {
            self.lexical = Lexical::new();
            self.lexical_origin = "empty".into();
            return;
        }
        let path = lexical_file(dir, generation);
        let (image, took) = match prefetched {
            Some(read) => read,
            None => (read_image(dir, generation), Default::default()),
        };
        let why = match image.and_then(|ix| self.check_image(ix)) {
            Ok(ix) => {
                self.lexical = ix;
                self.lexical_origin = "loaded".into();
                let took = took + started.elapsed();
                self.note_open(format!("lexical index loaded in {} ms", took.as_millis()));
                return;
            }
            Err(why) => why,
        };
        tracing::warn!(
            "lexical index {} not used ({why}); rebuilding it from {} records",
            path.display(),
            self.records.len()
        );
        let mut keys: Vec<u64> = self.records.keys().copied().collect();
        keys.sort_unstable();
        let mut ix = Lexical::new();
        for key in keys {
            if let Some(r) = self.records.get(&key) {
                ix.insert(key, &crate::indexed_text::of(r));
            }
        }
        ix.compact();
        self.lexical = ix;
        self.lexical_origin = "rebuilt".into();
        self.note_open(format!("lexical index rebuilt in {} ms", ms(started)));
        if generation > 0 {
            // Before the WAL is replayed the index is exactly the snapshot's: save it now, so
            // the next start loads it even if no snapshot is taken before then (an upgrade).
            self.save_lexical(dir, generation);
        }
    }

    /// `ix` when its documents are exactly the records.
    fn check_image(&self, ix: Lexical) -> Result<Lexical, String> {
        if ix.len() != self.records.len() {
            return Err(format!(
                "{} documents for {} records",
                ix.len(),
                self.records.len()
            ));
        }
        if let Some(k) = ix.indexed_keys().find(|k| !self.records.contains_key(k)) {
            return Err(format!("document {k} has no record"));
        }
        Ok(ix)
    }

    pub(super) fn note_open(&mut self, what: String) {
        if !self.open_note.is_empty() {
            self.open_note.push_str(", ");
        }
        self.open_note.push_str(&what);
    }
}

fn ms(since: Instant) -> u128 {
    since.elapsed().as_millis()
}

/// The image of snapshot `generation` in `dir`, checked as a file (frame, generation,
/// checksum, layout); whether it fits the records is `check_image`'s.
pub(super) fn read_image(dir: &Path, generation: u64) -> Result<Lexical, String> {
    let bytes = side_file::read(&lexical_file(dir, generation), KIND, generation)?;
    Lexical::from_image(&bytes)
}

pub(super) fn lexical_file(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("lexical.{generation:08}.bm25"))
}

/// Lexical index files in `dir` with their generation.
fn lexical_files(dir: &Path) -> Vec<(u64, PathBuf)> {
    side_file::generations(dir, "lexical.", ".bm25")
}
