use super::graph::*;
use proto::{Collection, Outcome};

fn concepts(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[test]
fn tally_ignores_unknown() {
    let mut tally = OutcomeTally::default();
    assert!(!tally.record(Outcome::Unknown));
    assert!(tally.record(Outcome::Worked));
    assert!(tally.record(Outcome::Partial));
    assert!(tally.record(Outcome::Failed));
    assert_eq!(tally.total(), 3);
    assert_eq!(tally.successes(), 1.5);
    assert_eq!(tally.success_rate(4), None);
    assert_eq!(tally.success_rate(3), Some(0.5));
}

#[test]
fn routing_boost_needs_three_outcomes() {
    let mut graph = RoutingGraph::default();
    let query = concepts(&["docker", "compose"]);
    graph.record(&query, Collection::Patterns, Outcome::Worked);
    graph.record(&query, Collection::Patterns, Outcome::Worked);
    assert!(graph.collection_boosts(&query).is_empty());
    assert_eq!(graph.boost_for(&query, Collection::Patterns), 1.0);
    graph.record(&query, Collection::Patterns, Outcome::Worked);
    assert_eq!(
        graph.collection_boosts(&query),
        [(Collection::Patterns, 1.1)]
    );
}

#[test]
fn routing_unknown_is_not_evidence() {
    let mut graph = RoutingGraph::default();
    let query = concepts(&["nginx"]);
    for _ in 0..5 {
        assert_eq!(
            graph.record(&query, Collection::History, Outcome::Unknown),
            0
        );
    }
    assert_eq!(graph.concept_count(), 0);
    assert!(graph.collection_boosts(&query).is_empty());
}

#[test]
fn routing_boosts_are_bounded() {
    let mut graph = RoutingGraph::default();
    let query = concepts(&["auth"]);
    for _ in 0..50 {
        graph.record(&query, Collection::Books, Outcome::Worked);
        graph.record(&query, Collection::History, Outcome::Failed);
    }
    for _ in 0..3 {
        graph.record(&query, Collection::Working, Outcome::Worked);
        graph.record(&query, Collection::Working, Outcome::Failed);
    }
    let boosts = graph.collection_boosts(&query);
    assert_eq!(
        boosts,
        [
            (Collection::Books, 1.1),
            (Collection::Working, 1.0),
            (Collection::History, 0.9)
        ]
    );
    for (_, boost) in boosts {
        assert!((1.0 - MAX_ROUTING_BOOST..=1.0 + MAX_ROUTING_BOOST).contains(&boost));
    }
}

#[test]
fn routing_pools_only_concepts_with_evidence() {
    let mut graph = RoutingGraph::default();
    for _ in 0..3 {
        graph.record(&concepts(&["rust"]), Collection::Patterns, Outcome::Worked);
    }
    // "serde" has two failures only: not enough to count, so it must not dilute "rust".
    graph.record(&concepts(&["serde"]), Collection::Patterns, Outcome::Failed);
    graph.record(&concepts(&["serde"]), Collection::Patterns, Outcome::Failed);
    let query = concepts(&["serde", "rust"]);
    assert_eq!(graph.boost_for(&query, Collection::Patterns), 1.1);
    graph.record(&concepts(&["serde"]), Collection::Patterns, Outcome::Failed);
    // Now 3 worked + 3 failed pooled.
    assert!((graph.boost_for(&query, Collection::Patterns) - 1.0).abs() < 1e-12);
}

#[test]
fn routing_counts_a_repeated_concept_once() {
    let mut graph = RoutingGraph::default();
    graph.record(
        &concepts(&["git", "git", " git ", ""]),
        Collection::History,
        Outcome::Worked,
    );
    let routes = graph.routes("git").expect("recorded");
    assert_eq!(routes.collections[&Collection::History].total(), 1);
    assert_eq!(graph.concept_count(), 1);
    assert_eq!(graph.outcome_count(), 1);
}

#[test]
fn routing_evicts_least_recent_concepts_when_full() {
    let mut graph = RoutingGraph::default();
    graph.record(&concepts(&["first"]), Collection::Working, Outcome::Worked);
    for i in 1..MAX_ROUTING_CONCEPTS {
        graph.record(&[format!("c{i}")], Collection::Working, Outcome::Worked);
    }
    // Refresh "first" so c1 … c{ROUTING_EVICT_BATCH} are now the oldest.
    graph.record(&concepts(&["first"]), Collection::Working, Outcome::Worked);
    assert_eq!(graph.concept_count(), MAX_ROUTING_CONCEPTS);
    graph.record(&concepts(&["newest"]), Collection::Working, Outcome::Worked);
    assert_eq!(
        graph.concept_count(),
        MAX_ROUTING_CONCEPTS - ROUTING_EVICT_BATCH + 1
    );
    assert!(graph.routes("c1").is_none());
    assert!(graph.routes(&format!("c{ROUTING_EVICT_BATCH}")).is_none());
    assert!(
        graph
            .routes(&format!("c{}", ROUTING_EVICT_BATCH + 1))
            .is_some()
    );
    assert!(graph.routes("first").is_some());
    assert!(graph.routes("newest").is_some());
    // Existing concepts never trigger eviction.
    graph.record(&concepts(&["first"]), Collection::Books, Outcome::Failed);
    assert_eq!(
        graph.concept_count(),
        MAX_ROUTING_CONCEPTS - ROUTING_EVICT_BATCH + 1
    );
}

#[test]
fn sizes_list_the_routing_graph() {
    let mut kg = Graphs::default();
    kg.routing.record(
        &concepts(&["jwt", "refresh token"]),
        Collection::Patterns,
        Outcome::Worked,
    );
    let sizes = kg.sizes();
    let expect = [("routing_concepts", 2), ("routing_outcomes", 2)];
    assert_eq!(sizes.len(), expect.len());
    for (name, n) in expect {
        assert_eq!(sizes.get(name), Some(&n), "{name}");
    }
}

fn sample_graphs() -> Graphs {
    let mut kg = Graphs::default();
    for outcome in [
        Outcome::Worked,
        Outcome::Failed,
        Outcome::Partial,
        Outcome::Worked,
    ] {
        kg.routing.record(
            &concepts(&["jwt", "refresh token"]),
            Collection::Books,
            outcome,
        );
    }
    kg
}

#[test]
fn replaying_the_same_calls_gives_the_same_graphs() {
    assert_eq!(sample_graphs(), sample_graphs());
}

#[test]
fn graphs_round_trip_through_msgpack_and_json() {
    let kg = sample_graphs();
    let compact: Graphs =
        rmp_serde::from_slice(&rmp_serde::to_vec(&kg).expect("encode")).expect("decode");
    assert_eq!(compact, kg);
    let named: Graphs =
        rmp_serde::from_slice(&rmp_serde::to_vec_named(&kg).expect("encode")).expect("decode");
    assert_eq!(named, kg);
    let json: Graphs =
        serde_json::from_str(&serde_json::to_string(&kg).expect("encode")).expect("decode");
    assert_eq!(json, kg);
    // 2.5 successes of 4: 1 + 0.1 × (2 × 0.625 − 1) = 1.025.
    let boost = json
        .routing
        .boost_for(&concepts(&["jwt"]), Collection::Books);
    assert!((boost - 1.025).abs() < 1e-12);
    let empty: Graphs = serde_json::from_str("{}").expect("defaults");
    assert_eq!(empty, Graphs::default());
}
