//! The second stage over the first stage's snapshot: late interaction (MaxSim) over the head,
//! then the cross-encoder over the best of that; both outside the store lock.
//!
//! Owns the reorders: inside each head the model's order alone (blending with the fused rank
//! gave back 0.13 of R@1 in the design study), below it the order before, every candidate kept.
//! A memory without token states keeps its place; MaxSim stops at the deadline and what it did
//! not reach keeps its place too. Must never fail: a model that errors leaves the order before
//! (logged).

use super::Candidate;
use crate::models::embed::{CrossEncoder, QueryStates};
use crate::models::late;
use std::sync::Arc;
use std::time::Instant;

/// What the second stage does.
#[derive(Default)]
pub struct Second<'a> {
    /// The query's late-interaction states and how deep MaxSim reorders; `None`: skipped.
    pub late: Option<(&'a QueryStates, usize)>,
    /// When MaxSim must stop (the prompt path's budget); `None`: it finishes.
    pub deadline: Option<Instant>,
    /// The cross-encoder and how many of the head it reorders (searches only: ~9 ms a pair).
    pub cross: Option<(Arc<CrossEncoder>, usize)>,
}

/// What happened in the second stage.
#[derive(Debug, Default, Clone, Copy)]
pub struct SecondReport {
    /// MaxSim ran out of time before the end of its head.
    pub late_cut_short: bool,
}

/// `cands` (fused order) reordered by the stages `how` asks for; `text` is the query.
pub async fn second_stage(
    states: &late::States,
    text: &str,
    cands: Vec<Candidate>,
    how: Second<'_>,
) -> (Vec<Candidate>, SecondReport) {
    let mut report = SecondReport::default();
    let mut cands = cands;
    if let Some((query, depth)) = how.late {
        let (order, finished) = late_order(states, query, &cands, depth, how.deadline);
        report.late_cut_short = !finished;
        cands = permute(cands, order);
    }
    if let Some((ce, depth)) = how.cross {
        cands = cross_encode(ce, text, cands, depth).await;
    }
    (cands, report)
}

/// MaxSim's order of the first `depth` of `cands` (indexes), and whether it finished.
fn late_order(
    states: &late::States,
    query: &QueryStates,
    cands: &[Candidate],
    depth: usize,
    deadline: Option<Instant>,
) -> (Vec<usize>, bool) {
    let keyed: Vec<late::Candidate> = cands
        .iter()
        .map(|c| {
            let cosine = c.hit.similarity.unwrap_or(0.0);
            (c.key(), c.view.content.as_str(), cosine)
        })
        .collect();
    late::reorder_within(states, query, &keyed, depth, deadline)
}

fn permute<T>(items: Vec<T>, order: Vec<usize>) -> Vec<T> {
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// `cands` with the first `depth` reordered by the cross-encoder's relevance to `query`; each
/// reranked view carries its logit in `rerank_score`.
pub async fn cross_encode(
    ce: Arc<CrossEncoder>,
    query: &str,
    mut cands: Vec<Candidate>,
    depth: usize,
) -> Vec<Candidate> {
    let n = depth.min(cands.len());
    if n < 2 {
        return cands;
    }
    let query = query.to_string();
    let passages: Vec<String> = cands[..n].iter().map(|c| c.view.content.clone()).collect();
    let scored = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
        ce.score(&query, &refs)
    })
    .await;
    let scores = match scored {
        Ok(Ok(scores)) if scores.len() == n => scores,
        Ok(Err(e)) => {
            tracing::warn!("reranking failed, keeping the fused order: {e:#}");
            return cands;
        }
        _ => return cands,
    };
    let rest = cands.split_off(n);
    let mut head: Vec<(f32, Candidate)> = scores.into_iter().zip(cands).collect();
    head.sort_by(|a, b| b.0.total_cmp(&a.0));
    head.into_iter()
        .map(|(score, mut c)| {
            c.view.rerank_score = Some((f64::from(score) * 10_000.0).round() / 10_000.0);
            c
        })
        .chain(rest)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::embed::TokenStates;
    use crate::search::Hit;

    fn candidate(key: u64, text: &str) -> Candidate {
        let mut r = crate::record::Record::new(proto::Collection::MemoryBank, text.into(), 0);
        r.key = key;
        let hit = Hit {
            key,
            similarity: Some(0.5),
            lexical: None,
            rank_score: 1.0 / key as f64,
        };
        let view = crate::search::view(&r, 0, Some(&hit));
        Candidate { hit, view }
    }

    fn keys(c: &[Candidate]) -> Vec<u64> {
        c.iter().map(Candidate::key).collect()
    }

    #[tokio::test]
    async fn late_interaction_reorders_the_snapshot_and_says_when_it_ran_out_of_time() {
        let states = late::States::default();
        // The fused order puts the weak match first; MaxSim prefers the strong one.
        states
            .insert(1, "weak", TokenStates::for_tests(&[0.2]))
            .unwrap();
        states
            .insert(2, "strong", TokenStates::for_tests(&[0.9]))
            .unwrap();
        let q = QueryStates::for_tests(&[1.0]);
        let cands = || vec![candidate(1, "weak"), candidate(2, "strong")];
        let how = |deadline| Second {
            late: Some((&q, 2)),
            deadline,
            cross: None,
        };
        let (done, report) = second_stage(&states, "q", cands(), how(None)).await;
        assert_eq!(keys(&done), vec![2, 1]);
        assert!(!report.late_cut_short);
        // A deadline already passed: the fused order stands, and the report says so.
        let (late, report) = second_stage(&states, "q", cands(), how(Some(Instant::now()))).await;
        assert_eq!(keys(&late), vec![1, 2]);
        assert!(report.late_cut_short);
        // No late-interaction states (skipped, shed or no model): the fused order, not cut short.
        let (kept, report) = second_stage(&states, "q", cands(), Second::default()).await;
        assert_eq!(keys(&kept), vec![1, 2]);
        assert!(!report.late_cut_short);
    }
}
