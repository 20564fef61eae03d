//! Outcome learning: how outcomes change memories, when memories move between collections,
//! and the routing graph learned from outcomes.
//!
//! Owns the decisions only — pure functions over `Record`s and plain serializable graph
//! data. It must never do I/O, take locks, read a clock (callers pass `now` in Unix ms) or
//! apply a decision to the store; the caller does that and logs it.
//!
//! * `scoring`: outcome deltas, time weighting, Wilson, learned score, memory_bank quality,
//!   the ranking prior.
//! * `lifecycle`: promotion, demotion, deletion, expiry, and the moved record.
//! * `graph`: the routing graph (which collection helped for which concepts).
//! * `text`: deterministic concept extraction.

pub mod graph;
pub mod lifecycle;
pub mod scoring;
pub mod text;

#[cfg(test)]
mod graph_tests;
#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod scoring_tests;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod text_tests;

pub use graph::{ConceptRoutes, Graphs, KnowledgeGraphs, OutcomeTally, RoutingGraph};
pub use lifecycle::{
    DeleteReason, MoveError, Transition, deletion_threshold, entered_collection_at, expired,
    next_transition, promote,
};
pub use scoring::{
    NotMemoryBank, NotScorable, OutcomeEffect, apply_outcome, apply_prior, dynamic_weights,
    initial_score, learned_score, memory_bank_quality, outcome_prior, time_weight, track_use,
    wilson_lower, wilson_score,
};
pub use text::extract_concepts;

/// Which memories an outcome applies to, given the ids injected for the exchange
/// (`cached`) and the agent's optional `related` list (seed 001):
///
/// * `related` absent: every cached id;
/// * `related` empty: none (only the exchange itself is scored);
/// * `related` non-empty: exactly those ids, whether or not they are still cached (a search
///   between injection and scoring may have replaced the cache).
///
/// Duplicates are dropped; order is kept.
pub fn scoring_targets(cached: &[String], related: Option<&[String]>) -> Vec<String> {
    let chosen = related.unwrap_or(cached);
    let mut seen = std::collections::BTreeSet::new();
    chosen
        .iter()
        .filter(|id| !id.is_empty() && seen.insert(id.as_str()))
        .cloned()
        .collect()
}
