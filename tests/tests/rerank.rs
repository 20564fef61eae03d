//! The cross-encoder on `/api/search`, end to end: a real daemon with `search.rerank` on loads
//! the reranker in the background and reorders the head of text searches by it; with it off
//! (the default) the fused order stands and nothing is loaded.

use proto::*;
use serde_json::json;
use std::time::Duration;
use tests::{Daemon, Spec, eventually};

const NOTES: [&str; 3] = [
    "The staging cluster reads its config from Bazel.",
    "Staging Postgres accepts connections on 5433.",
    "Lint with cargo clippy before every commit.",
];
const QUERY: &str = "which port does the staging database listen on?";

fn daemon(config: &str) -> Daemon {
    let d = Daemon::start(Spec {
        config_toml: Some(config.into()),
        ..Spec::new()
    })
    .expect("daemon");
    for note in NOTES {
        let _: MemoryBankResponse = d.post("/api/memory-bank/add", &json!({"content": note}));
    }
    d.wait_embedded(Duration::from_secs(60));
    d
}

#[test]
fn search_heads_are_reranked_when_it_is_on_and_only_then() {
    let on = daemon("[search]\nrerank = true\nrerank_depth = 3\n");
    eventually("the reranker loads", || {
        on.get::<HealthResponse>("/api/health").reranker_loaded
    });
    let found: SearchResponse = on.post("/api/search", &json!({"query": QUERY, "limit": 3}));
    assert_eq!(found.results[0].content, NOTES[1], "{found:?}");
    let scores: Vec<f64> = found
        .results
        .iter()
        .map(|m| m.rerank_score.expect("every head result carries its logit"))
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // Recency order is the user's choice: no reranking there.
    let recent: SearchResponse = on.post(
        "/api/search",
        &json!({"query": QUERY, "limit": 3, "sort_by": "recency"}),
    );
    assert!(recent.results.iter().all(|m| m.rerank_score.is_none()));

    let off = daemon("");
    assert!(!off.get::<HealthResponse>("/api/health").reranker_loaded);
    let fused: SearchResponse = off.post("/api/search", &json!({"query": QUERY, "limit": 3}));
    assert!(fused.results.iter().all(|m| m.rerank_score.is_none()));

    let (status, body) = Daemon::start(Spec {
        config_toml: Some("[search]\nrerank_depth = 0\n".into()),
        ..Spec::new()
    })
    .map(|_| (0, String::new()))
    .unwrap_or_else(|e| (1, format!("{e:#}")));
    assert_eq!(status, 1, "a depth of 0 is refused");
    assert!(body.contains("search.rerank_depth must be 1-100"), "{body}");
}
