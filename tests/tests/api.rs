//! The HTTP API against a real daemon: validation, limits, auth, search modes, memory bank.

use proto::*;
use serde_json::json;
use tests::Daemon;

fn search(d: &Daemon, body: serde_json::Value) -> (u16, serde_json::Value) {
    let (status, text) = d.post_raw("/api/search", body.to_string().as_bytes(), true);
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
    )
}

#[test]
fn search_validation_names_the_field_and_the_limit() {
    let d = tests::start_daemon();
    let (s, b) = search(&d, json!({}));
    assert_eq!(s, 400);
    assert_eq!(b["error"], "Provide at least one of: query, days_back, id");
    for (body, field) in [
        (json!({"days_back": 0}), "days_back"),
        (json!({"days_back": 366}), "days_back"),
        (json!({"query": "x", "limit": 0}), "limit"),
        (json!({"query": "x", "limit": 101}), "limit"),
        (json!({"query": "x", "limit": "ten"}), "limit"),
        (json!({"query": "x", "sort_by": "size"}), "sort_by"),
        (
            json!({"query": "x", "collections": ["nope"]}),
            "collections",
        ),
        (json!({"query": "x".repeat(2001)}), "query"),
        (json!({"id": "x".repeat(201)}), "id"),
        (
            json!({"query": "x", "metadata_filters": {"a": {"$regex": "b"}}}),
            "metadata_filters",
        ),
    ] {
        let (s, b) = search(&d, body.clone());
        assert!(s == 400 || s == 422, "{body} → {s} {b}");
        assert_eq!(b["field"], field, "{body} → {b}");
        assert!(b["error"].as_str().unwrap().contains(field), "{b}");
    }
    let (s, _) = search(&d, json!({"days_back": 365, "limit": 100}));
    assert_eq!(s, 200);
}

#[test]
fn malformed_bodies_are_400_never_500() {
    let d = tests::start_daemon();
    for path in [
        "/api/search",
        "/api/hooks/get-context",
        "/api/hooks/stop",
        "/api/record-outcome",
        "/api/memory-bank/add",
    ] {
        for body in [
            &b""[..],
            b"{",
            b"[]",
            b"null",
            b"{\"query\": 5}",
            b"\xff\xfe",
        ] {
            let (s, t) = d.post_raw(path, body, true);
            assert_eq!(s, 400, "{path} {body:?} → {s} {t}");
        }
    }
}

#[test]
fn only_the_user_gets_in() {
    let d = tests::start_daemon();
    assert_eq!(
        d.get_raw("/api/health", false).0,
        200,
        "health needs no token"
    );
    assert_eq!(d.get_raw("/api/stats", false).0, 401);
    let (s, t) = d.post_raw("/api/search", br#"{"days_back": 1}"#, false);
    assert_eq!((s, t.contains("unauthorized")), (401, true));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let auth = format!("Bearer {}", d.token);
    let status = |r: Result<ureq::http::Response<ureq::Body>, ureq::Error>| {
        r.map(|r| r.status().as_u16()).unwrap_or(0)
    };
    let bad_host = agent
        .get(&d.url("/api/stats"))
        .header("host", "evil.example")
        .header("authorization", &auth)
        .call();
    assert_eq!(status(bad_host), 403);
    let bad_origin = agent
        .get(&d.url("/api/stats"))
        .header("origin", "https://evil.example")
        .header("authorization", &auth)
        .call();
    assert_eq!(status(bad_origin), 403);
    let ok_origin = agent
        .get(&d.url("/api/stats"))
        .header("origin", "http://localhost:3000")
        .header("authorization", &auth)
        .call();
    let r = ok_origin.expect("answer");
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        r.headers().get("access-control-allow-origin").is_none(),
        "no CORS headers at all"
    );
}

#[test]
fn oversized_bodies_get_413_and_store_nothing() {
    let d = tests::start_daemon();
    let big = format!(
        r#"{{"content": "{}", "tags": []}}"#,
        "a".repeat(2 * 1024 * 1024)
    );
    let (s, _) = d.post_raw("/api/memory-bank/add", big.as_bytes(), true);
    assert_eq!(s, 413);
    let long = json!({"content": "b".repeat(601)}).to_string();
    let (s, t) = d.post_raw("/api/memory-bank/add", long.as_bytes(), true);
    assert_eq!(s, 422, "{t}");
    assert!(t.contains("600"), "{t}");
    let h: HealthResponse = d.get("/api/health");
    assert_eq!(h.counts["memory_bank"], 0);
}

#[test]
fn delete_removes_one_memory_for_good() {
    let d = tests::start_daemon();
    let add: serde_json::Value = d.post(
        "/api/memory-bank/add",
        &json!({"content": "The CI cache lives in the ci-cache bucket"}),
    );
    let id = add["doc_id"].as_str().unwrap().to_string();
    let (s, body) = d.post_raw("/api/memory/delete", br#"{"id": "  "}"#, true);
    assert_eq!(
        (s, body.contains("\"field\":\"id\"")),
        (400, true),
        "{body}"
    );
    let (s, _) = d.post_raw(
        "/api/memory/delete",
        br#"{"id": "memory_bank_000000000000"}"#,
        true,
    );
    assert_eq!(s, 404);
    let r: serde_json::Value = d.post("/api/memory/delete", &json!({ "id": id }));
    assert_eq!(r, json!({"success": true, "id": id}));
    assert!(tests::lookup(&d, &id).is_none(), "gone for good");
    let (s, _) = d.post_raw(
        "/api/memory/delete",
        format!(r#"{{"id": "{id}"}}"#).as_bytes(),
        true,
    );
    assert_eq!(s, 404, "a second delete finds nothing");
}

#[test]
fn memory_bank_lifecycle_and_lookups() {
    let d = tests::start_daemon();
    let add: MemoryBankResponse = d.post(
        "/api/memory-bank/add",
        &json!({"content": "The user's name is Ada and she deploys with Nomad", "tags": ["identity"], "importance": 0.9, "confidence": 0.8}),
    );
    assert!(add.doc_id.starts_with("memory_bank_"));
    // Exact duplicate → same id, nothing stored twice.
    let again: MemoryBankResponse = d.post(
        "/api/memory-bank/add",
        &json!({"content": "The user's name is Ada and she deploys with Nomad"}),
    );
    assert_eq!(again.doc_id, add.doc_id);
    assert!(again.duplicate);
    // id lookup returns the normalized shape.
    let r: SearchResponse = d.post("/api/search", &json!({"id": add.doc_id}));
    assert_eq!(r.count, 1);
    let m = &r.results[0];
    assert_eq!(m.collection, "memory_bank");
    assert_eq!(m.importance, Some(0.9));
    assert_eq!(m.confidence, Some(0.8));
    assert_eq!(m.tags, vec!["identity"]);
    assert_eq!(m.wilson_score, 0.5);
    assert!(!m.created_at.is_empty() && !m.age.is_empty());
    // update, then archive: archived entries are not returned by default.
    let _: MemoryBankResponse = d.post("/api/memory-bank/update", &json!({"id": add.doc_id, "content": "The user's name is Ada; she deploys with Kubernetes now", "confidence": 0.9}));
    let r: SearchResponse = d.post("/api/search", &json!({"id": add.doc_id}));
    assert!(r.results[0].content.contains("Kubernetes"));
    let _: MemoryBankResponse = d.post("/api/memory-bank/archive", &json!({"id": add.doc_id}));
    let r: SearchResponse = d.post(
        "/api/search",
        &json!({"days_back": 1, "collections": ["memory_bank"]}),
    );
    assert_eq!(r.count, 0);
    let r: SearchResponse = d.post(
        "/api/search",
        &json!({"days_back": 1, "collections": ["memory_bank"], "include_archived": true}),
    );
    assert_eq!(r.count, 1);
    // unknown id: 404 on update, empty on lookup
    let (s, _) = d.post_raw(
        "/api/memory-bank/update",
        json!({"id": "memory_bank_000000000000", "content": "x"})
            .to_string()
            .as_bytes(),
        true,
    );
    assert_eq!(s, 404);
    let r: SearchResponse = d.post("/api/search", &json!({"id": "working_ffffffffffff"}));
    assert_eq!(r.count, 0);
}

#[test]
fn semantic_search_finds_by_meaning_and_reports_similarity() {
    let d = tests::start_daemon();
    for text in [
        "Run the database migrations with `make migrate` before starting the API server",
        "The CI pipeline caches the cargo registry between jobs",
        "Ada prefers tabs over spaces in Go code",
    ] {
        let _: RecordResponseResponse =
            d.post("/api/record-response", &json!({"key_takeaway": text}));
    }
    d.wait_embedded(std::time::Duration::from_secs(60));
    let r: SearchResponse = d.post(
        "/api/search",
        &json!({"query": "how do I apply schema changes to the db?", "limit": 3}),
    );
    assert_eq!(r.count, 3);
    assert!(
        r.results[0].content.contains("migrations"),
        "{:?}",
        r.results[0]
    );
    assert!(r.results[0].embedding_similarity.unwrap() > 0.3);
    assert!(r.results[0].final_rank_score.is_some());
    // days_back alone, sorted by recency: newest first.
    let r: SearchResponse = d.post(
        "/api/search",
        &json!({"days_back": 1, "sort_by": "recency"}),
    );
    assert_eq!(r.count, 3);
    assert!(r.results[0].content.contains("tabs"));
    let stats: StatsResponse = d.get("/api/stats");
    assert_eq!(stats.collections["working"].count, 3);
    assert_eq!(stats.index.vectors, 3);
    assert!(stats.disk_bytes > 0);
}

/// Raw bytes to the daemon's socket (the request asks to close the connection); the answer as
/// text (lossy), whatever it is.
fn raw_exchange(d: &Daemon, request: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok();
    // No half-close: a server may drop a request whose client closed its side first.
    s.write_all(request).expect("send");
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// The authority a request names is checked however it names it: the `Host` header, an
/// absolute request target (`GET http://evil.example/…`), and no HTTP/2 (cleartext h2 carries
/// it as `:authority`, which a Host check alone never sees): memd speaks HTTP/1.1 only.
#[test]
fn the_authority_is_checked_on_every_protocol() {
    let d = tests::start_daemon();
    let auth = format!("Bearer {}", d.token);
    let status = |answer: &str| answer.get(9..12).unwrap_or("").to_string();
    let absolute = raw_exchange(
        &d,
        format!(
            "GET http://evil.example/api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(status(&absolute), "403", "{absolute}");
    let loopback_absolute = raw_exchange(
        &d,
        format!(
            "GET http://127.0.0.1:{}/api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n",
            d.port
        )
        .as_bytes(),
    );
    assert_eq!(status(&loopback_absolute), "200", "{loopback_absolute}");
    // h2c by prior knowledge: the preface and a SETTINGS frame get no HTTP/2 answer.
    let h2 = raw_exchange(
        &d,
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    );
    assert!(
        h2.is_empty() || h2.starts_with("HTTP/1.1 4"),
        "no HTTP/2: {h2:?}"
    );
    // h2c by upgrade: not switched, and the Host is checked on the HTTP/1.1 request.
    let upgrade = |host: &str| {
        raw_exchange(
            &d,
            format!(
                "GET /api/stats HTTP/1.1\r\nHost: {host}\r\nAuthorization: {auth}\r\nConnection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n"
            )
            .as_bytes(),
        )
    };
    assert_eq!(status(&upgrade("evil.example")), "403");
    let local = upgrade("127.0.0.1");
    assert_eq!(
        status(&local),
        "200",
        "answered over HTTP/1.1, not switched: {local}"
    );
}

/// Issue 17: "Do not use Python 3.11" came back as a duplicate of "Use Python 3.11" and was
/// never stored. A near duplicate that says otherwise is a new fact; the old one is archived
/// (kept, findable), a plain restatement is still a duplicate.
#[test]
fn a_contradicting_fact_supersedes_the_old_one_instead_of_being_dropped() {
    let d = Daemon::start(tests::Spec {
        wait_model: true,
        ..tests::Spec::new()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let add = |content: &str| -> MemoryBankResponse {
        d.post("/api/memory-bank/add", &json!({"content": content}))
    };
    let old = add("Use Python 3.11 for the lantern service");
    let restated = add("Use Python 3.11 for the lantern service.");
    assert_eq!((restated.duplicate, &restated.doc_id), (true, &old.doc_id));
    let new = add("Do not use Python 3.11 for the lantern service");
    assert!(!new.duplicate, "stored: {new:?}");
    assert_ne!(new.doc_id, old.doc_id);
    assert_eq!(new.superseded.as_deref(), Some(old.doc_id.as_str()));
    let old_now = tests::lookup(&d, &old.doc_id).expect("kept");
    assert!(old_now.archived, "the old fact is archived, not lost");
    let new_now = tests::lookup(&d, &new.doc_id).unwrap();
    assert_eq!(
        new_now.metadata.get("supersedes").and_then(|v| v.as_str()),
        Some(old.doc_id.as_str())
    );
    let port = add("The lantern database listens on port 6543");
    let other_port = add("The lantern database listens on port 5432");
    assert_eq!(other_port.superseded.as_deref(), Some(port.doc_id.as_str()));
}
