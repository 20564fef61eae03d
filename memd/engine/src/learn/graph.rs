//! The routing graph learned from outcomes (concept → which collection helped) and the
//! persisted bundle that holds it. Search reads its boosts only with `learning.graph_boosts`
//! on (off by default: no measured gain, bench/EVAL.md section 4); it is recorded either way,
//! so switching the boosts on starts from the evidence gathered so far.
//!
//! Plain serializable data: the caller persists it (store snapshot) and rebuilds it by
//! replaying the same calls in the same order (every update is deterministic).
//! It must never do I/O, read a clock or a random source, and its boosts must stay within
//! `[1 − MAX_ROUTING_BOOST, 1 + MAX_ROUTING_BOOST]` and appear only with enough evidence.

pub use super::text::extract_concepts;

use super::text::MAX_CONCEPTS;
use proto::{Collection, Outcome};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Outcomes a (concept, collection) pair needs before it may boost anything.
pub const MIN_ROUTING_EVIDENCE: u32 = 3;
/// The largest routing adjustment: boosts are multipliers in `[0.9, 1.1]`.
pub const MAX_ROUTING_BOOST: f64 = 0.1;
/// Concepts kept; reaching it drops the least recently recorded `ROUTING_EVICT_BATCH`.
pub const MAX_ROUTING_CONCEPTS: usize = 20_000;
/// How many concepts one eviction drops (a tenth of the cap).
pub const ROUTING_EVICT_BATCH: usize = MAX_ROUTING_CONCEPTS / 10;
const MAX_CONCEPT_CHARS: usize = 128;

/// Counts of the outcomes that carry a signal (`unknown` is never counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeTally {
    #[serde(default)]
    pub worked: u32,
    #[serde(default)]
    pub partial: u32,
    #[serde(default)]
    pub failed: u32,
}

impl OutcomeTally {
    /// Counts one outcome; returns false (and counts nothing) for `unknown`.
    pub fn record(&mut self, outcome: Outcome) -> bool {
        let slot = match outcome {
            Outcome::Worked => &mut self.worked,
            Outcome::Partial => &mut self.partial,
            Outcome::Failed => &mut self.failed,
            Outcome::Unknown => return false,
        };
        *slot = slot.saturating_add(1);
        true
    }

    pub fn total(&self) -> u32 {
        self.worked
            .saturating_add(self.partial)
            .saturating_add(self.failed)
    }

    /// worked counts 1, partial 0.5.
    pub fn successes(&self) -> f64 {
        f64::from(self.worked) + 0.5 * f64::from(self.partial)
    }

    /// Success rate once `total() ≥ min_evidence`, else None.
    pub fn success_rate(&self, min_evidence: u32) -> Option<f64> {
        let total = self.total();
        (total >= min_evidence.max(1)).then(|| self.successes() / f64::from(total))
    }
}

/// What one concept has seen per collection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConceptRoutes {
    #[serde(default)]
    pub collections: BTreeMap<Collection, OutcomeTally>,
    /// The routing graph's record counter when this concept was last recorded.
    #[serde(default)]
    pub last_seen: u64,
}

/// Concept → collection → outcomes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoutingGraph {
    #[serde(default)]
    concepts: BTreeMap<String, ConceptRoutes>,
    /// Counts `record` calls; orders concepts by recency without a clock.
    #[serde(default)]
    tick: u64,
}

impl RoutingGraph {
    /// Records that memories from `collection` had `outcome` for a query with these
    /// concepts. `unknown` is ignored. Returns how many concepts were updated.
    pub fn record(
        &mut self,
        concepts: &[String],
        collection: Collection,
        outcome: Outcome,
    ) -> usize {
        if outcome == Outcome::Unknown {
            return 0;
        }
        let concepts = usable_concepts(concepts);
        if concepts.is_empty() {
            return 0;
        }
        self.tick = self.tick.saturating_add(1);
        for concept in &concepts {
            if !self.concepts.contains_key(*concept) {
                self.make_room();
            }
            let routes = self.concepts.entry((*concept).to_string()).or_default();
            routes
                .collections
                .entry(collection)
                .or_default()
                .record(outcome);
            routes.last_seen = self.tick;
        }
        concepts.len()
    }

    /// When the graph is full, drops the least recently recorded tenth in one pass, so the
    /// full scan is paid once per `ROUTING_EVICT_BATCH` new concepts, not on every one.
    fn make_room(&mut self) {
        if self.concepts.len() < MAX_ROUTING_CONCEPTS {
            return;
        }
        let mut by_age: Vec<(u64, &String)> = self
            .concepts
            .iter()
            .map(|(name, routes)| (routes.last_seen, name))
            .collect();
        let cut = ROUTING_EVICT_BATCH.min(by_age.len());
        // (last_seen, name) pairs are distinct, so the split is the same on every run.
        if cut < by_age.len() {
            by_age.select_nth_unstable(cut);
        }
        let doomed: Vec<String> = by_age[..cut]
            .iter()
            .map(|(_, name)| (*name).clone())
            .collect();
        for name in doomed {
            self.concepts.remove(&name);
        }
    }

    /// Multipliers for the collections these concepts have enough evidence about, in
    /// collection order: `1 + 0.1 × (2 × rate − 1)`, where `rate` pools the outcomes of
    /// every query concept with at least `MIN_ROUTING_EVIDENCE` outcomes for that
    /// collection. Collections without such evidence are absent (multiplier 1).
    pub fn collection_boosts(&self, concepts: &[String]) -> Vec<(Collection, f64)> {
        let mut pooled: BTreeMap<Collection, (f64, u32)> = BTreeMap::new();
        for concept in usable_concepts(concepts) {
            let Some(routes) = self.concepts.get(concept) else {
                continue;
            };
            for (collection, tally) in &routes.collections {
                if tally.total() < MIN_ROUTING_EVIDENCE {
                    continue;
                }
                let entry = pooled.entry(*collection).or_insert((0.0, 0));
                entry.0 += tally.successes();
                entry.1 = entry.1.saturating_add(tally.total());
            }
        }
        pooled
            .into_iter()
            .map(|(collection, (successes, total))| {
                let rate = successes / f64::from(total);
                (collection, 1.0 + MAX_ROUTING_BOOST * (2.0 * rate - 1.0))
            })
            .collect()
    }

    /// The multiplier for one collection (1.0 without evidence).
    pub fn boost_for(&self, concepts: &[String], collection: Collection) -> f64 {
        self.collection_boosts(concepts)
            .into_iter()
            .find(|(c, _)| *c == collection)
            .map_or(1.0, |(_, boost)| boost)
    }

    /// What one concept has seen.
    pub fn routes(&self, concept: &str) -> Option<&ConceptRoutes> {
        self.concepts.get(concept)
    }

    pub fn concept_count(&self) -> usize {
        self.concepts.len()
    }

    /// Outcomes recorded over all (concept, collection) pairs.
    pub fn outcome_count(&self) -> u64 {
        self.concepts
            .values()
            .flat_map(|routes| routes.collections.values())
            .map(|tally| u64::from(tally.total()))
            .sum()
    }
}

/// Distinct, non-empty, bounded concepts, at most `MAX_CONCEPTS`, in the caller's order.
fn usable_concepts(concepts: &[String]) -> Vec<&str> {
    let mut seen = BTreeSet::new();
    concepts
        .iter()
        .map(|c| c.trim())
        .filter(|c| !c.is_empty() && c.chars().count() <= MAX_CONCEPT_CHARS)
        .filter(|c| seen.insert(*c))
        .take(MAX_CONCEPTS)
        .collect()
}

/// The graphs, persisted together in the store snapshot. Snapshots written before the action
/// and content graphs were removed also hold `actions` and `content`: decoding ignores them
/// (named MessagePack maps; `state` tests decode such a snapshot).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KnowledgeGraphs {
    #[serde(default)]
    pub routing: RoutingGraph,
}

/// The name the state machine uses.
pub type Graphs = KnowledgeGraphs;

impl KnowledgeGraphs {
    /// Sizes for `/api/stats`: `routing_concepts`, `routing_outcomes`.
    pub fn sizes(&self) -> BTreeMap<String, usize> {
        let as_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        [
            ("routing_concepts", self.routing.concept_count()),
            ("routing_outcomes", as_usize(self.routing.outcome_count())),
        ]
        .into_iter()
        .map(|(name, n)| (name.to_string(), n))
        .collect()
    }
}
