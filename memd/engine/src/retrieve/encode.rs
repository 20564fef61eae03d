//! The query's two encodings: its embedding (first stage) and its late-interaction states
//! (second stage), computed in parallel, each on its own model.
//!
//! Owns how long each caller waits for the late-interaction states: a prompt until its
//! reranking deadline and not at all when a full batch of queries is already encoding or
//! waiting (load shedding: under load the prompt keeps the fused order instead of queueing
//! work it would not wait for); a search up to `SEARCH_QUERY_WAIT`. Must never fail: a missing model gives `None`.

use crate::models::Models;
use crate::models::embed::QueryStates;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A search waits at most this long for its query's token states (normally ~4 ms).
const SEARCH_QUERY_WAIT: Duration = Duration::from_secs(2);

/// Whether and how long to wait for the late-interaction states.
#[derive(Debug, Clone, Copy)]
pub enum LateWait {
    /// Not wanted (reranking off, a sort other than relevance, a follow-up prompt).
    Skip,
    /// A prompt: until this deadline, shed under load.
    Prompt(Instant),
    /// A search: waits, never shed.
    Search,
}

/// The query as the pipeline's stages take it.
#[derive(Default)]
pub struct Encoded {
    /// The embedding; `None` without a model (the first stage is then lexical only).
    pub vector: Option<Arc<Vec<f32>>>,
    /// The late-interaction states; `None` when skipped, shed, late or without a model.
    pub late: Option<QueryStates>,
}

impl Encoded {
    pub fn vector(&self) -> Option<&[f32]> {
        self.vector.as_deref().map(|v| &v[..])
    }
}

/// Both encodings of `text`, in parallel.
pub async fn encode(models: &Models, text: &str, late: LateWait) -> Encoded {
    let (vector, late) = tokio::join!(models.embed_query(text), async {
        match late {
            LateWait::Skip => None,
            LateWait::Prompt(deadline) => models.encode_late_query(text, deadline, true).await,
            LateWait::Search => {
                let deadline = Instant::now() + SEARCH_QUERY_WAIT;
                models.encode_late_query(text, deadline, false).await
            }
        }
    });
    Encoded { vector, late }
}
