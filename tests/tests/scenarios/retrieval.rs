//! Retrieval: what gets injected and what search returns.

use super::*;
use proto::*;
use serde_json::json;

#[test]
fn retrieval_a_relevant_memory_is_injected() {
    let d = tests::start_daemon();
    let id = bank(&d, "The billing staging database listens on port 5433");
    embedded(&d);
    let ctx = prompt(&d, "r", "what port is the billing staging database on?");
    assert!(
        ctx.contains(&format!("[id:{id}]")) && ctx.contains("5433"),
        "{ctx}"
    );
}

#[test]
fn retrieval_an_irrelevant_query_injects_nothing() {
    let d = tests::start_daemon();
    bank(&d, "The billing staging database listens on port 5433");
    bank(&d, "Ada prefers tabs over spaces in Go code");
    embedded(&d);
    let ctx = prompt(&d, "r", "write me a haiku about autumn leaves falling");
    assert_eq!(ctx, "", "below the relevance floor: nothing injected");
}

#[test]
fn retrieval_days_back_returns_only_recent_memories() {
    let d = tests::start_daemon();
    let id = takeaway(&d, "fresh note about the release checklist");
    let old = json!({"content": "an old note from last year"});
    let _: MemoryBankResponse = d.post("/api/memory-bank/add", &old);
    // An imported record keeps its timestamps: make one 40 days old.
    let line = json!({"key": 0, "id": "history_00000000abcd", "collection": "history", "content": "forty days old", "created_at": 1,
        "updated_at": 1, "score": 0.5, "uses": 0, "success_count": 0.0, "outcome_history": [], "last_outcome": null, "last_used": null,
        "tags": [], "importance": null, "confidence": null, "archived": false, "former_ids": [], "metadata": {}});
    let (s, t) = d.post_raw("/api/import", format!("{line}\n").as_bytes(), true);
    assert_eq!(s, 200, "{t}");
    let recent: SearchResponse = d.post("/api/search", &json!({"days_back": 7}));
    assert_eq!(
        recent.count,
        2,
        "{:?}",
        recent
            .results
            .iter()
            .map(|r| &r.content)
            .collect::<Vec<_>>()
    );
    assert!(recent.results.iter().any(|r| r.id == id));
    assert!(recent.results.iter().all(|r| r.content != "forty days old"));
}

#[test]
fn retrieval_an_id_lookup_returns_the_full_normalized_memory() {
    let d = tests::start_daemon();
    let id = takeaway(&d, "use `cargo nextest` for the integration suite");
    let m = lookup(&d, &id).expect("found");
    assert_eq!(
        (m.collection.as_str(), m.score, m.uses, m.wilson_score),
        ("working", 0.5, 0, 0.5)
    );
    assert!(m.importance.is_none() && m.tags.is_empty() && !m.age.is_empty());
}

#[test]
fn retrieval_a_book_chunk_is_found() {
    let d = tests::start_daemon();
    let text = "# Runbook\n\nTo rotate the TLS certificates, run `certctl rotate --all` on the bastion host.\n\n".repeat(3)
        + &"Unrelated filler about office plants and lunch menus. ".repeat(60);
    let r: IngestResponse = d.post(
        "/api/ingest",
        &json!({"title": "ops runbook", "content": text}),
    );
    assert!(r.chunks >= 2);
    embedded(&d);
    let s: SearchResponse = d.post(
        "/api/search",
        &json!({"query": "how do I rotate certificates?", "collections": ["books"], "limit": 1}),
    );
    assert!(
        s.results[0].content.contains("certctl rotate"),
        "{:?}",
        s.results[0]
    );
    assert_eq!(
        s.results[0].metadata["title"],
        proto::Value::String("ops runbook".into())
    );
}
