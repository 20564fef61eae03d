//! Applying one exchange's outcome scores (`Op::ScoreExchange`): exactly once per exchange,
//! each memory by any of its ids, collection-level learning once per collection.
//!
//! Owns the state side of scoring. Must never read the clock (the batch carries its time) and
//! never decide which ids may be scored (the caller did: `ops::context::accept`).

use super::MemState;
use super::ops::{Output, ScoreBatch, ScoreResult};
use crate::learn;
use proto::Collection;

impl MemState {
    pub(super) fn apply_scores(&mut self, b: &ScoreBatch) -> Output {
        if let Some((conv, doc)) = &b.exchange
            && !self.sessions.mark_scored(conv, doc)
        {
            return Output::AlreadyScored;
        }
        let mut result = ScoreResult::default();
        // Collection-level learning counts once per (exchange, collection), so one exchange
        // that surfaced three memories of a collection is one piece of evidence, not three.
        let mut seen_collections = Vec::new();
        for (id, outcome) in &b.scores {
            let Some(key) = self.ids.get(id, &self.records) else {
                result.skipped.push(id.clone());
                continue;
            };
            self.uncount(key);
            let Some(rec) = self.records.get_mut(&key) else {
                result.skipped.push(id.clone());
                continue;
            };
            // What the outcome changes is sent to the shared store only when one is configured.
            let before = self.sync.store_id.is_some().then(|| rec.clone());
            let collection = rec.collection;
            let applied = if collection == Collection::MemoryBank {
                learn::scoring::track_use(rec, *outcome, b.at).is_ok()
            } else {
                learn::scoring::apply_outcome(rec, *outcome, b.at, b.time_weighting).is_ok()
            };
            self.recount(key);
            // Collection-level learning happens for every collection, books included.
            if !seen_collections.contains(&collection) {
                seen_collections.push(collection);
                self.graph.routing.record(&b.concepts, collection, *outcome);
            }
            if applied {
                if let Some(before) = &before {
                    self.note_outcome(key, before, *outcome, b.at);
                }
                result.scored.push(id.clone());
            } else {
                result.skipped.push(id.clone());
            }
        }
        self.bump("outcomes_recorded");
        Output::Scored(result)
    }
}
