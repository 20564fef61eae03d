//! The query's two encodings: its embedding (first stage) and its late-interaction states
//! (second stage), computed in parallel, each on its own model.
//!
//! Owns how long each caller waits for the late-interaction states. A search waits up to
//! `SEARCH_QUERY_WAIT`, after both encodings. A prompt starts its late encoding beside its
//! embedding but waits for it only after the first stage, until its reranking deadline
//! (`search.prompt_budget_ms` after the first stage), and not at all when the head has fewer
//! than two candidates (nothing to reorder) or when the encoding is shed before it starts
//! (`Models::start_late_query`: a full batch already waiting, or the encodings in flight would
//! make it late; under load the prompt keeps the fused order instead of queueing work it would
//! not wait for). Must never fail: a missing model gives `None`.

use crate::models::embed::QueryStates;
use crate::models::{LateQuery, Models};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A search waits at most this long for its query's token states (normally ~4 ms).
const SEARCH_QUERY_WAIT: Duration = Duration::from_secs(2);

/// Whether a search waits for the late-interaction states.
#[derive(Debug, Clone, Copy)]
pub enum LateWait {
    /// Not wanted (reranking off, a sort other than relevance).
    Skip,
    /// Waited for, never shed.
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

/// Both encodings of a search's `text`, in parallel.
pub async fn encode(models: &Models, text: &str, late: LateWait) -> Encoded {
    let (vector, late) = tokio::join!(models.embed_query(text), async {
        match late {
            LateWait::Skip => None,
            LateWait::Search => {
                let deadline = Instant::now() + SEARCH_QUERY_WAIT;
                models.encode_late_query(text, deadline, false).await
            }
        }
    });
    Encoded { vector, late }
}

/// A prompt's query after `encode_prompt`: its embedding, and its late-interaction encoding
/// still running (or finished) beside the first stage.
#[derive(Default)]
pub struct PromptEncoding {
    pub vector: Option<Arc<Vec<f32>>>,
    pub late: Option<LateQuery>,
}

impl PromptEncoding {
    pub fn vector(&self) -> Option<&[f32]> {
        self.vector.as_deref().map(|v| &v[..])
    }
}

/// A prompt's embedding, with its late-interaction encoding started first when `late` (not
/// when it is not wanted or there is nothing to rerank). The embedding is awaited; the late
/// encoding is not (`late_for_head`), so it overlaps the embedding and the first stage.
pub async fn encode_prompt(models: &Models, text: &str, late: bool) -> PromptEncoding {
    let late = late.then(|| models.start_late_query(text, true)).flatten();
    let vector = models.embed_query(text).await;
    PromptEncoding { vector, late }
}

/// The prompt's late-interaction states for a first-stage head of `head` candidates, waited
/// for until `deadline`. With fewer than two candidates there is nothing to reorder: the
/// encoding is abandoned (if it has not started, it never runs) and the prompt goes on.
pub async fn late_for_head(
    models: &Models,
    late: Option<LateQuery>,
    head: usize,
    deadline: Instant,
) -> Option<QueryStates> {
    let late = late?;
    if head < 2 {
        drop(late);
        models.nothing_to_rerank();
        return None;
    }
    models.wait_late_query(late, deadline).await
}
