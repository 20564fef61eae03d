//! Reading the side files (the lexical image, the vector index) on their own threads while the
//! snapshot's records decode: at 1M memories each took seconds after the decode.
//!
//! Owns the threads and handing over what they read. Must never decide whether what was read
//! fits the records (that is `lexical_file` and `vector_files`, after the decode, as before)
//! and never fail an open: a thread that died counts as a file that could not be read.

use super::{lexical_file, vector_files};
use crate::index::{Lexical, VectorIndex};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a prefetch read, with the time it took (for the open's log line).
pub(super) type Read<T> = (T, Duration);

pub(super) struct Prefetch {
    lexical: JoinHandle<Read<Result<Lexical, String>>>,
    vectors: JoinHandle<Read<Option<VectorIndex>>>,
}

impl Prefetch {
    /// Starts reading the side files of snapshot `generation` in `dir`.
    pub(super) fn start(dir: &Path, generation: u64, dims: usize) -> Prefetch {
        let (d1, d2) = (dir.to_path_buf(), dir.to_path_buf());
        let lexical = std::thread::spawn(move || {
            let t = Instant::now();
            (lexical_file::read_image(&d1, generation), t.elapsed())
        });
        let vectors = std::thread::spawn(move || {
            let t = Instant::now();
            (vector_files::read_index(&d2, generation, dims), t.elapsed())
        });
        Prefetch { lexical, vectors }
    }

    /// Waits for both reads.
    pub(super) fn join(self) -> (Read<Result<Lexical, String>>, Read<Option<VectorIndex>>) {
        let lexical = self.lexical.join().unwrap_or_else(|_| {
            (
                Err("reading it failed (thread panicked)".into()),
                Duration::ZERO,
            )
        });
        let vectors = self.vectors.join().unwrap_or((None, Duration::ZERO));
        (lexical, vectors)
    }
}
