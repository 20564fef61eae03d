//! What the learning session reads from the daemon's answers: a note's rank in a probe, each
//! topic's right / wrong / exchange counts in a top 5, whether the lifecycle still owes a move.
//!
//! Pure functions over `/api/search` results. Must never call the daemon.

use super::learning_report::TOP;
use super::scenario::{Role, Seed};
use memd_engine::clock;
use memd_engine::core::Core;
use memd_engine::learn;
use proto::{Collection, MemoryView, Value};

/// (rank, final_rank_score) of note `i` in a probe's results.
pub(super) fn rank_in(ranked: &[(Option<usize>, &MemoryView)], i: usize) -> Option<(usize, f64)> {
    ranked
        .iter()
        .position(|(s, _)| *s == Some(i))
        .map(|p| (p + 1, ranked[p].1.final_rank_score.unwrap_or(0.0)))
}

/// (correct, misleading, exchange records) of topic `t` among the top 5 of a probe, with
/// roles as they are at `turn`.
pub(super) fn top_counts(
    seeds: &[Seed],
    t: usize,
    turn: usize,
    ranked: &[(Option<usize>, &MemoryView)],
) -> (usize, usize, usize) {
    let exchange = Value::from("exchange");
    let mut counts = (0, 0, 0);
    for (seed, m) in ranked.iter().take(TOP) {
        match seed.map(|i| &seeds[i]) {
            Some(s) if s.topic == Some(t) => match s.role_at(turn) {
                Role::Correct => counts.0 += 1,
                Role::Misleading => counts.1 += 1,
                Role::Filler => {}
            },
            None if m.metadata.get("memory_type") == Some(&exchange) => counts.2 += 1,
            _ => {}
        }
    }
    counts
}

/// Would the lifecycle worker move or delete this memory now? (The worker's own rules.)
pub(super) fn transition_due(v: &MemoryView) -> bool {
    let Some(collection) = Collection::parse(&v.collection) else {
        return false;
    };
    let created = clock::parse_rfc3339(&v.created_at).unwrap_or(0);
    let mut rec = Core::new_record(collection, v.content.clone(), created);
    rec.score = v.score;
    rec.uses = v.uses;
    rec.success_count = v.success_count;
    learn::lifecycle::next_transition(&rec, clock::now_ms()).is_some()
}
