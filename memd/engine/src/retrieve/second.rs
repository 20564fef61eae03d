//! The second stage over the first stage's snapshot: late interaction (MaxSim) over the head,
//! then the cross-encoder over the best of that; both outside the store lock.
//!
//! Owns the reorders and late interaction's score: MaxSim per query token plus the cosine
//! similarity at a weight read off the query's own candidates (`cosine_weight`), and how that
//! score meets the first stage's priors (`LateScore`; what ships: `LATE_SCORE`). Inside each
//! head the model's order alone (blending with the fused rank gave back 0.13 of R@1 in the
//! design study), below it the order before, every candidate kept.
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
    /// How late interaction's score meets the first stage's priors (`LATE_SCORE` ships).
    pub score: LateScore,
}

/// How late interaction's score (MaxSim + the weighted cosine) meets what the first stage knew
/// of each memory beside its text: its kind (exchanges weigh `Ranking::exchange_weight`) and
/// its outcome prior (`Hit::weight`). In a store of one kind with no outcomes yet every
/// variant orders the head alike; they differ where conversation turns and notes compete.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum LateScore {
    /// The same score for every memory: the priors act in the first stage only.
    #[default]
    Alike,
    /// The score times `Hit::weight` raised to this power (1: the first stage's own factor).
    Priors(f32),
    /// The score standardised within each kind of the scored head (exchanges, the rest),
    /// then times `Hit::weight` raised to the power, when one is given.
    ByKind(Option<f32>),
}

/// What the daemon ships: the late score times the first stage's factor (the exchange weight,
/// the outcome prior's) to the power 0.5, so an exchange (weight 0.7) scores ×0.84 against
/// notes. Exchanges are scored with their date (`indexed_text`), whose tokens can only raise
/// MaxSim; without the factor a note's question found the exchange about it first
/// (`tests/exchanges_beside_notes.rs`). bench/EVAL.md section 26 (c), one store of turns and
/// notes, projects kept, against `Alike` without dates: LoCoMo R@1 0.470 → 0.496, MRR 0.576 →
/// 0.594; coding set R@5 0.985 → 1.000, MRR 0.870 → 0.899; holdout set R@10 0.892 → 0.923
/// (0.25 and 1 measured too; with no projects the dates cost each note set a question). In a
/// store of one kind with no outcomes it orders as `Alike` (section 22).
pub const LATE_SCORE: LateScore = LateScore::Priors(0.5);

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
        let (order, finished) = late_order(states, query, &cands, depth, how.deadline, how.score);
        report.late_cut_short = !finished;
        cands = permute(cands, order);
    }
    if let Some((ce, depth)) = how.cross {
        cands = cross_encode(ce, text, cands, depth).await;
    }
    (cands, report)
}

/// How much the cosine counts beside MaxSim for one query: `COSINE_GAP_SCALE` × how far the
/// cosine's best candidate stands out of the next ones (`GAP_DEPTH`) over how far MaxSim's
/// does, at most `COSINE_WEIGHT_MAX`. Where MiniLM's vectors single one note out and MaxSim
/// hesitates (paraphrased coding notes), the cosine decides; where MaxSim is sure and the
/// cosines are flat (conversation turns that share a speaker's name), MaxSim does.
/// `memd-eval fusion` (bench/EVAL.md section 11), over late@40 + the vector list's first 100:
/// against a fixed 0.05, coding set R@5 0.851 → 0.896, MRR 0.695 → 0.740; LoCoMo R@5 0.737 →
/// 0.734, MRR 0.588 → 0.586; 0.015-0.025 measure within 0.01 of it on both sets.
pub const COSINE_GAP_SCALE: f32 = 0.02;
/// The cosine's weight never passes this (measured the same at 0.2, 0.3 and 1.0).
pub const COSINE_WEIGHT_MAX: f32 = 0.3;
/// A list's lead: its best score minus the mean of its next `GAP_DEPTH - 1`.
const GAP_DEPTH: usize = 10;

/// The best of `values` minus the mean of the next `GAP_DEPTH - 1` (0 with fewer than two).
fn lead(mut values: Vec<f32>) -> f32 {
    if values.len() < 2 {
        return 0.0;
    }
    values.sort_by(|a, b| b.total_cmp(a));
    let next = &values[1..values.len().min(GAP_DEPTH)];
    values[0] - next.iter().sum::<f32>() / next.len() as f32
}

/// The cosine's weight for candidates scored (MaxSim per query token, cosine).
pub fn cosine_weight(scored: &[(f32, f32)]) -> f32 {
    let maxsim = lead(scored.iter().map(|s| s.0).collect());
    let cosine = lead(scored.iter().map(|s| s.1).collect());
    (COSINE_GAP_SCALE * cosine / maxsim.max(1e-6)).clamp(0.0, COSINE_WEIGHT_MAX)
}

/// Late interaction's order of the first `depth` of `cands` (indexes), and whether MaxSim
/// finished before the deadline.
fn late_order(
    states: &late::States,
    query: &QueryStates,
    cands: &[Candidate],
    depth: usize,
    deadline: Option<Instant>,
    score: LateScore,
) -> (Vec<usize>, bool) {
    let keyed: Vec<late::Candidate> = cands
        .iter()
        .map(|c| (c.key(), c.indexed_text(), cosine(c)))
        .collect();
    let (maxsim, finished) = late::maxsim_within(states, query, &keyed, depth, deadline);
    let pairs: Vec<(f32, f32)> = maxsim.iter().map(|&(i, m)| (m, keyed[i].2)).collect();
    let w = cosine_weight(&pairs);
    let scored = maxsim
        .into_iter()
        .map(|(i, m)| (i, m + w * keyed[i].2))
        .collect();
    let scored = with_priors(scored, cands, score);
    (late::order_within(scored, cands.len()), finished)
}

/// `scored` (index into `cands`, late score) as `how` combines it with the first stage's
/// priors.
fn with_priors(
    mut scored: Vec<(usize, f32)>,
    cands: &[Candidate],
    how: LateScore,
) -> Vec<(usize, f32)> {
    let power = match how {
        LateScore::Alike => return scored,
        LateScore::Priors(p) => Some(p),
        LateScore::ByKind(p) => {
            for kind in [true, false] {
                standardise(&mut scored, |i| is_exchange(&cands[i]) == kind);
            }
            p
        }
    };
    if let Some(p) = power {
        for (i, s) in &mut scored {
            let factor = (cands[*i].hit.weight as f32).max(0.0).powf(p);
            // As `apply_prior`: a negative score moves down too.
            *s += (factor - 1.0) * s.abs();
        }
    }
    scored
}

/// The scores of the entries `member` picks, as standard scores among themselves.
fn standardise(scored: &mut [(usize, f32)], member: impl Fn(usize) -> bool) {
    let picked: Vec<f32> = scored.iter().filter(|e| member(e.0)).map(|e| e.1).collect();
    if picked.is_empty() {
        return;
    }
    let n = picked.len() as f32;
    let mean = picked.iter().sum::<f32>() / n;
    let sd = (picked.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / n).sqrt();
    for e in scored.iter_mut().filter(|e| member(e.0)) {
        e.1 = (e.1 - mean) / sd.max(1e-6);
    }
}

/// A raw conversation turn, as the stop hook files it (`memory_type` "exchange").
fn is_exchange(c: &Candidate) -> bool {
    c.view
        .metadata
        .get("memory_type")
        .and_then(proto::Value::as_str)
        == Some("exchange")
}

/// The first stage's cosine similarity (0 when the vector signal is missing).
fn cosine(c: &Candidate) -> f32 {
    c.hit.similarity.unwrap_or(0.0)
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
        candidate_at(key, text, 0.5)
    }

    fn candidate_at(key: u64, text: &str, cosine: f32) -> Candidate {
        let mut r = crate::record::Record::new(proto::Collection::MemoryBank, text.into(), 0);
        r.key = key;
        let hit = Hit {
            key,
            similarity: Some(cosine),
            vector_rank: None,
            lexical: None,
            rank_score: 1.0 / key as f64,
            weight: 1.0,
        };
        let view = crate::search::view(&r, 0, Some(&hit));
        Candidate {
            hit,
            view,
            indexed: None,
        }
    }

    /// A conversation turn as the stop hook files it, which the first stage weighed `weight`.
    fn exchange_at(key: u64, text: &str, weight: f64) -> Candidate {
        let mut c = candidate(key, text);
        c.view
            .metadata
            .insert("memory_type".into(), proto::Value::from("exchange"));
        c.hit.weight = weight;
        c
    }

    /// Ranks `cands` (key, text, MaxSim) by late interaction scored `score`; cosines level.
    async fn ranked(cands: Vec<(Candidate, f32)>, score: LateScore) -> Vec<u64> {
        let states = late::States::default();
        for (c, maxsim) in &cands {
            let stored = TokenStates::for_tests(&[*maxsim]);
            states.insert(c.key(), &c.view.content, stored).unwrap();
        }
        let q = QueryStates::for_tests(&[1.0]);
        let how = Second {
            late: Some((&q, cands.len())),
            score,
            ..Second::default()
        };
        let cands = cands.into_iter().map(|(c, _)| c).collect();
        keys(&second_stage(&states, "q", cands, how).await.0)
    }

    /// A turn MaxSim prefers a little stays first when the score ignores the priors, and
    /// falls below the note when the exchange weight (0.7) carries into the late score;
    /// at a quarter of it (0.7^0.25 ≈ 0.91) the turn's lead holds.
    #[tokio::test]
    async fn the_first_stages_priors_carry_into_the_late_score_when_asked() {
        let head = || {
            vec![
                (exchange_at(1, "turn", 0.7), 0.90),
                (candidate(2, "note"), 0.80),
            ]
        };
        assert_eq!(ranked(head(), LateScore::Alike).await, [1, 2]);
        assert_eq!(ranked(head(), LateScore::Priors(1.0)).await, [2, 1]);
        assert_eq!(ranked(head(), LateScore::Priors(0.25)).await, [1, 2]);
    }

    /// Standardised within each kind, the note that stands out among notes outranks the turn
    /// that stands out less among turns, although every turn has the higher raw score.
    #[tokio::test]
    async fn by_kind_compares_each_memory_with_its_own_kind() {
        let head = vec![
            (exchange_at(1, "turn a", 1.0), 0.90),
            (exchange_at(2, "turn b", 1.0), 0.88),
            (exchange_at(3, "turn c", 1.0), 0.86),
            (candidate(4, "note a"), 0.70),
            (candidate(5, "note b"), 0.50),
            (candidate(6, "note c"), 0.50),
            (candidate(7, "note d"), 0.50),
        ];
        let order = ranked(head.clone(), LateScore::ByKind(None)).await;
        assert_eq!(order[0], 4);
        assert_eq!(ranked(head, LateScore::Alike).await[..4], [1, 2, 3, 4]);
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
            score: LATE_SCORE,
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

    /// The cosine decides where it singles one note out and MaxSim hesitates, and counts for
    /// nothing where MaxSim is sure and the cosines are flat.
    #[test]
    fn the_cosine_weighs_by_how_far_its_best_stands_out() {
        // (MaxSim per query token, cosine): MaxSim flat, one cosine far ahead.
        let paraphrase = [(0.80, 0.60), (0.81, 0.30), (0.80, 0.31), (0.79, 0.29)];
        assert_eq!(cosine_weight(&paraphrase), COSINE_WEIGHT_MAX);
        // MaxSim sure of one, the cosines level.
        let named = [(0.90, 0.50), (0.70, 0.50), (0.71, 0.50), (0.69, 0.50)];
        assert_eq!(cosine_weight(&named), 0.0);
        // In between: the ratio of the leads, scaled.
        let both = [(0.90, 0.60), (0.80, 0.50), (0.80, 0.50)];
        assert!((cosine_weight(&both) - COSINE_GAP_SCALE).abs() < 1e-4);
        // Fewer than two candidates: nothing to weigh.
        assert_eq!(cosine_weight(&[(0.9, 0.9)]), 0.0);
        assert_eq!(cosine_weight(&[]), 0.0);
    }

    /// MaxSim prefers note 1 a little; the cosine singles note 2 out: the per-query weight lets
    /// the cosine decide (a fixed 0.05 would keep note 1 first: 0.865 against 0.845).
    #[tokio::test]
    async fn a_cosine_that_stands_out_outweighs_a_hesitant_maxsim() {
        let states = late::States::default();
        let notes = [
            (1, 0.85, 0.30),
            (2, 0.80, 0.90),
            (3, 0.80, 0.30),
            (4, 0.79, 0.29),
        ];
        let mut cands = Vec::new();
        for (key, maxsim, cosine) in notes {
            let text = format!("note {key}");
            states
                .insert(key, &text, TokenStates::for_tests(&[maxsim]))
                .unwrap();
            cands.push(candidate_at(key, &text, cosine));
        }
        let q = QueryStates::for_tests(&[1.0]);
        let how = Second {
            late: Some((&q, 4)),
            ..Second::default()
        };
        let (done, _) = second_stage(&states, "q", cands, how).await;
        assert_eq!(keys(&done)[0], 2);
    }
}
