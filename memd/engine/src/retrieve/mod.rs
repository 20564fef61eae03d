//! The one retrieval pipeline: prompts (get-context), searches (`/api/search`, MCP `search`)
//! and the dashboard all find memories through it.
//!
//! Stages, in order: the query's encodings (its embedding and its late-interaction states,
//! computed in parallel: `encode`) → the first stage (vectors + BM25, fused, filtered) with the
//! candidates' views, taken under one short read of the store (`first_stage`) → late
//! interaction over the head → the optional cross-encoder over the best of that
//! (`second_stage`) → the caller's cut. Everything after the first stage works on that
//! snapshot, outside the store lock, so reranking never holds up a commit or another reader.
//!
//! Owns the candidate snapshot and the stages' order; the callers own what may be a candidate
//! (filters, relevance floor) and where to cut. Must never write, never call a model while
//! holding the store lock, and never fail a read because a model is missing, failing or late:
//! the fused order is always an answer.

mod encode;
mod second;

pub use encode::{Encoded, LateWait, encode};
pub use second::{Second, SecondReport, second_stage};

use crate::search::{self, Hit, Query, Ranking};
use crate::state::MemState;
use proto::MemoryView;

/// One memory found by the first stage: how it ranked, and the normalized shape every read
/// returns (its text is what the second stage scores).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub hit: Hit,
    pub view: MemoryView,
}

impl Candidate {
    pub fn key(&self) -> u64 {
        self.hit.key
    }

    /// A candidate for `hit`, when its record still exists.
    pub fn of(s: &MemState, hit: Hit, now: i64) -> Option<Candidate> {
        let view = search::view(s.by_key(hit.key)?, now, Some(&hit));
        Some(Candidate { hit, view })
    }
}

/// What the first stage ranks: the validated query, its text and embedding, the signals.
pub struct FirstStage<'a> {
    pub query: &'a Query,
    pub text: &'a str,
    pub vector: Option<&'a [f32]>,
    pub ranking: &'a Ranking,
}

/// The first `depth` fused candidates that `keep` admits, in the query's `sort_by` order
/// (relevance: the fused order), with their views: the snapshot the rest of the pipeline works
/// on. Runs under the caller's read of the store (index lookups and a view per candidate, no
/// model).
pub fn first_stage(
    s: &MemState,
    stage: &FirstStage,
    depth: usize,
    keep: impl Fn(&Hit) -> bool,
    now: i64,
) -> Vec<Candidate> {
    let mut hits: Vec<Hit> = search::rank(
        s,
        stage.query,
        stage.text,
        stage.vector,
        stage.ranking,
        depth,
    )
    .into_iter()
    .filter(|h| keep(h))
    .collect();
    search::sort_hits(s, &mut hits, stage.query.sort_by);
    hits.into_iter()
        .take(depth)
        .filter_map(|h| Candidate::of(s, h, now))
        .collect()
}
