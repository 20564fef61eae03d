//! Sentence embeddings: text in, 384-d unit vectors out.
//!
//! Owns the `Embed` trait that the rest of memd depends on, where the embedding runtime lives
//! on disk (`RuntimePaths`), and the real implementation (`OnnxEmbedder`: all-MiniLM-L6-v2 run
//! by ONNX Runtime, loaded at run time from a shared library). Also the cross-encoder that
//! reranks search results (`CrossEncoder`: ms-marco-MiniLM-L-12-v2 on the same runtime) and
//! the late-interaction model that reranks the prompt path (`LateInteraction`: ColBERT MaxSim).
//!
//! Must never: download anything (install/fetch-runtime.sh provisions the files), panic on a
//! missing or broken runtime (every load problem is an error naming the fix), or hold the
//! model lock while tokenising.

mod batch;
pub mod colbert;
mod dot_i8;
mod gate;
mod int8_matmul;
mod int8_tables;
mod onnx;
mod onnx_wire;
mod rerank;
mod runtime;
mod vocab;
mod wordpiece;

pub use colbert::{LateInteraction, QueryStates, TokenStates};
pub use gate::{Urgent, urgent};
pub use onnx::{MAX_TOKENS, OnnxEmbedder};
pub use rerank::CrossEncoder;
pub use runtime::{
    FETCH_COMMAND, RuntimePaths, late_interaction_dir, late_interaction_dir_in, reranker_dir,
};

/// Width of every vector produced by memd's embedding model (all-MiniLM-L6-v2).
pub const DIMS: usize = 384;

/// Turns texts into L2-normalised vectors, so the dot product of two results is their cosine
/// similarity. Implementations are shared across threads.
pub trait Embed: Send + Sync {
    /// Length of every returned vector.
    fn dims(&self) -> usize;

    /// One vector per input text, in input order. An empty slice gives an empty result.
    /// Background work: a query waiting for the model goes first.
    fn embed(&self, texts: &[&str]) -> anyhow::Result<Vec<Vec<f32>>>;

    /// One query's vector, for a prompt or a search waiting on it: ahead of background work,
    /// batched with the queries that arrive at the same time.
    fn embed_query(&self, text: &str) -> anyhow::Result<Vec<f32>> {
        self.embed(&[text])?
            .pop()
            .ok_or_else(|| anyhow::anyhow!("no vector for the query"))
    }
}
