//! Reranking a search's result list (`/api/search`, MCP): late interaction over the fused
//! head, then the cross-encoder over the best of that, off the async threads.
//!
//! Owns the search-side reorder: inside each head the model's order alone (blending with the
//! fused rank gave back 0.13 of R@1 in the design study), below it the order before, every
//! result kept. Must never fail a search: when a model is missing or errors, the order before
//! stands (logged). The prompt path reranks in `context::select` under its budget instead.

use crate::core::Core;
use crate::embed::CrossEncoder;
use proto::MemoryView;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A search waits at most this long for its query's token states (normally ~4 ms).
const SEARCH_QUERY_WAIT: Duration = Duration::from_secs(2);

/// A search's late-interaction query states (no budget, no shedding: searches may wait).
pub async fn search_query(core: &Arc<Core>, query: &str) -> Option<crate::embed::QueryStates> {
    crate::late::encode_query(core, query, Instant::now() + SEARCH_QUERY_WAIT, false).await
}

/// `views` (fused order) reordered by late interaction (`late_q`, from `search_query`) over
/// `search.rerank_depth`, then by the cross-encoder over `search.cross_encoder_depth`; each
/// model that is not loaded is skipped.
pub async fn search_head(
    core: &Arc<Core>,
    query: &str,
    late_q: Option<crate::embed::QueryStates>,
    views: Vec<MemoryView>,
) -> Vec<MemoryView> {
    let mut views = views;
    if let Some(q) = late_q {
        let order = core.store.read(|s| {
            let keyed: Vec<crate::late::Candidate> = views
                .iter()
                .map(|v| {
                    let cosine = v.embedding_similarity.unwrap_or(0.0) as f32;
                    match s.by_id(&v.id) {
                        Some(r) => (r.key, r.content.as_str(), cosine),
                        None => (u64::MAX, "", cosine),
                    }
                })
                .collect();
            crate::late::reorder(
                &core.late_states,
                &q,
                &keyed,
                core.cfg.search.rerank_depth,
                None,
            )
        });
        let mut slots: Vec<Option<MemoryView>> = views.into_iter().map(Some).collect();
        views = order.into_iter().filter_map(|i| slots[i].take()).collect();
    }
    match core.reranker() {
        Some(ce) if core.cfg.search.cross_encoder_depth > 0 => {
            head(ce, query, views, core.cfg.search.cross_encoder_depth).await
        }
        _ => views,
    }
}

/// `views` (fused order) with the first `depth` reordered by relevance to `query`; each
/// reranked view carries its logit in `rerank_score`.
pub async fn head(
    ce: Arc<CrossEncoder>,
    query: &str,
    mut views: Vec<MemoryView>,
    depth: usize,
) -> Vec<MemoryView> {
    let n = depth.min(views.len());
    if n < 2 {
        return views;
    }
    let query = query.to_string();
    let passages: Vec<String> = views[..n].iter().map(|v| v.content.clone()).collect();
    let scored = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
        ce.score(&query, &refs)
    })
    .await;
    let scores = match scored {
        Ok(Ok(scores)) if scores.len() == n => scores,
        Ok(Err(e)) => {
            tracing::warn!("reranking failed, keeping the fused order: {e:#}");
            return views;
        }
        _ => return views,
    };
    let rest = views.split_off(n);
    let mut head: Vec<(f32, MemoryView)> = scores.into_iter().zip(views).collect();
    head.sort_by(|a, b| b.0.total_cmp(&a.0));
    head.into_iter()
        .map(|(score, mut v)| {
            v.rerank_score = Some((f64::from(score) * 10_000.0).round() / 10_000.0);
            v
        })
        .chain(rest)
        .collect()
}
