//! memd's search indexes: approximate nearest neighbours over embeddings (`vector`), BM25 over
//! memory text (`lexical`) and reciprocal rank fusion of their results (`fuse`).
//!
//! Owns derived data only: everything here can be rebuilt from the store, and the files that
//! cache it are only ever a shortcut (the vector index's own file format in `vector_file`, the
//! lexical index's image in `lexical_image`). Must never own memory records or decide
//! relevance policy (boosts, floors, outcome priors).

pub mod fuse;
mod fxhash;
pub mod lexical;
pub mod tokenize;
pub mod vector;
mod vector_file;

pub use fuse::reciprocal_rank_fusion;
pub(crate) use fxhash::FastHash;
pub use lexical::Lexical;
pub use vector::{VectorIndex, quantize};
