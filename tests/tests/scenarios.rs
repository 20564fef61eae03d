//! The 20-scenario end-to-end harness (seed 003): four families of five, each starting a real
//! daemon in a temp dir and driving the real hook binaries and HTTP API in sequence. Each test
//! is named after what it proves. Run: `cargo test -p tests --test scenarios`.

use proto::*;
use serde_json::{Value, json};
use std::time::Duration;
use tests::{Daemon, run_hook};

fn prompt(d: &Daemon, conv: &str, text: &str) -> String {
    let stdin = json!({"session_id": conv, "transcript_path": "/nonexistent", "cwd": "/p", "hook_event_name": "UserPromptSubmit", "prompt": text});
    let (code, out, _, _) = run_hook("hook-prompt", &[], stdin.to_string().as_bytes(), &d.env());
    assert_eq!(code, 0);
    if out.is_empty() {
        return out;
    }
    let v: Value = serde_json::from_str(&out).expect("hook JSON");
    v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn stop(d: &Daemon, conv: &str, answer: &str) {
    let stdin = json!({"session_id": conv, "transcript_path": "/nonexistent", "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": answer});
    let (code, out, _, _) = run_hook("hook-stop", &[], stdin.to_string().as_bytes(), &d.env());
    assert_eq!((code, out.as_str()), (0, ""));
}

fn bank(d: &Daemon, content: &str) -> String {
    d.post::<_, MemoryBankResponse>("/api/memory-bank/add", &json!({"content": content}))
        .doc_id
}

fn takeaway(d: &Daemon, content: &str) -> String {
    d.post::<_, RecordResponseResponse>("/api/record-response", &json!({"key_takeaway": content}))
        .doc_id
}

fn lookup(d: &Daemon, id: &str) -> Option<MemoryView> {
    d.post::<_, SearchResponse>("/api/search", &json!({"id": id}))
        .results
        .into_iter()
        .next()
}

fn embedded(d: &Daemon) {
    d.wait_embedded(Duration::from_secs(60));
}

/// Polls `cond` (the lifecycle runs in the background) for a bounded time.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "never happened: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One turn in which the agent scores the previous exchange's memories with `outcome`.
fn scored_turn(d: &Daemon, conv: &str, query: &str, outcome: &str) -> String {
    let ctx = prompt(d, conv, query);
    if ctx.contains("<memd-score-required>") {
        let _: RecordOutcomeResponse = d.post(
            "/api/record-outcome",
            &json!({"conversation_id": conv, "outcome": outcome}),
        );
    }
    stop(d, conv, "answer");
    ctx
}

// ---------------------------------------------------------------- safety

#[test]
fn safety_a_secret_in_an_exchange_is_not_stored_in_clear() {
    let d = tests::start_daemon();
    let key = "sk-proj-Q2hhbmdlTWVQbGVhc2VJQW1Ob3RBUmVhbEtleQ1234";
    prompt(
        &d,
        "s",
        &format!("my key is {key}, why does the API say 401?"),
    );
    stop(&d, "s", &format!("Check OPENAI_API_KEY={key} is exported."));
    let all: SearchResponse = d.post("/api/search", &json!({"days_back": 1}));
    assert_eq!(all.count, 1);
    assert!(!all.results[0].content.contains(key) && all.results[0].content.contains("[REDACTED:"));
    let mut d = d;
    d.terminate();
    for entry in walk(&d.data_dir().join("store")) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
            "{} holds the key",
            entry.display()
        );
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect()
}

#[test]
fn safety_an_unauthenticated_request_is_refused() {
    let d = tests::start_daemon();
    for path in [
        "/api/search",
        "/api/hooks/get-context",
        "/api/memory-bank/add",
        "/mcp",
    ] {
        let (s, body) = d.post_raw(path, b"{}", false);
        assert_eq!(s, 401, "{path}");
        assert!(!body.contains("token"), "no detail leaked: {body}");
    }
}

#[test]
fn safety_oversized_input_is_rejected_without_a_partial_write() {
    let d = tests::start_daemon();
    let (s, _) = d.post_raw(
        "/api/ingest",
        json!({"title": "big", "content": "x".repeat(11 * 1024 * 1024)})
            .to_string()
            .as_bytes(),
        true,
    );
    assert_eq!(s, 413);
    let (s, _) = d.post_raw(
        "/api/record-response",
        json!({"key_takeaway": "y".repeat(601)})
            .to_string()
            .as_bytes(),
        true,
    );
    assert_eq!(s, 422);
    let h: HealthResponse = d.get("/api/health");
    assert!(h.counts.values().all(|c| *c == 0), "{:?}", h.counts);
}

#[test]
fn safety_the_hook_fails_open_when_memd_is_down() {
    let mut d = tests::start_daemon();
    d.kill9();
    let mut env = d.env();
    env.push(("MEMD_URL".into(), "http://127.0.0.1:9".into())); // nothing listens; no auto-start
    let stdin = json!({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "hi"});
    for hook in ["hook-prompt", "hook-stop"] {
        let (code, out, err, elapsed) = run_hook(hook, &[], stdin.to_string().as_bytes(), &env);
        assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""), "{hook}");
        assert!(elapsed < Duration::from_secs(3), "{hook} took {elapsed:?}");
    }
}

#[test]
fn safety_a_cross_origin_request_is_refused() {
    let d = tests::start_daemon();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let r = agent
        .post(&d.url("/api/search"))
        .header("authorization", &format!("Bearer {}", d.token))
        .header("origin", "https://attacker.example")
        .send(r#"{"days_back": 1}"#)
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
}

// ---------------------------------------------------------------- retrieval

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

// ---------------------------------------------------------------- learning

#[test]
fn learning_worked_promotes_working_to_history() {
    let d = tests::start_daemon();
    let id = takeaway(
        &d,
        "Run database migrations with `make migrate` before starting the API",
    );
    embedded(&d);
    for _ in 0..3 {
        scored_turn(&d, "l", "how do I run the database migrations?", "worked");
    }
    eventually("promotion to history", || {
        lookup(&d, &id).is_some_and(|m| m.collection == "history")
    });
    let m = lookup(&d, &id).unwrap();
    assert_ne!(m.id, id, "a new id, and the old one still finds it");
}

#[test]
fn learning_failed_demotes_and_deletes() {
    let d = tests::start_daemon();
    let id = takeaway(&d, "The deploy script lives in scripts/old_deploy.sh");
    embedded(&d);
    for _ in 0..3 {
        scored_turn(&d, "l", "where is the deploy script?", "failed");
    }
    eventually("deletion of the misleading memory", || {
        lookup(&d, &id).is_none()
    });
    let s: StatsResponse = d.get("/api/stats");
    assert!(
        s.lifecycle
            .keys()
            .any(|k| k.starts_with("deleted_low_score")),
        "{:?}",
        s.lifecycle
    );
}

#[test]
fn learning_related_empty_scores_nothing() {
    let d = tests::start_daemon();
    let id = bank(&d, "The staging cluster is called kestrel");
    embedded(&d);
    prompt(&d, "l", "what is the staging cluster called?");
    stop(&d, "l", "kestrel");
    assert!(prompt(&d, "l", "thanks").contains("<memd-score-required>"));
    let r: RecordOutcomeResponse = d.post(
        "/api/record-outcome",
        &json!({"conversation_id": "l", "outcome": "worked", "related": []}),
    );
    assert_eq!(r.documents_scored, 1, "only the exchange itself");
    assert_eq!(lookup(&d, &id).unwrap().uses, 0);
}

#[test]
fn learning_the_sidecar_scores_when_the_agent_did_not() {
    // Covered in depth by tests/sidecar.rs; here: the default local-only chain is offered.
    let d = tests::start_daemon();
    prompt(&d, "l", "first");
    stop(&d, "l", "first answer");
    prompt(&d, "l", "second");
    let r: StopResponse = d.post(
        "/api/hooks/stop",
        &json!({"conversation_id": "l", "user_message": "second", "assistant_response": "x"}),
    );
    assert!(r.needs_sidecar && !r.scoring_complete);
    let data = r.sidecar_data.expect("sidecar data");
    assert_eq!(data.exchange.user, "first");
    assert_eq!(data.current_user_message, "second");
    assert!(
        data.targets.iter().all(|t| t.kind == TargetKind::Local),
        "remote targets need opt-in"
    );
}

#[test]
fn learning_no_double_scoring() {
    let d = tests::start_daemon();
    let id = bank(&d, "Ada's editor is Helix");
    embedded(&d);
    prompt(&d, "l", "what editor does Ada use?");
    stop(&d, "l", "Helix");
    prompt(&d, "l", "right");
    let a: RecordOutcomeResponse = d.post(
        "/api/record-outcome",
        &json!({"conversation_id": "l", "outcome": "worked"}),
    );
    let b: RecordOutcomeResponse = d.post(
        "/api/record-outcome",
        &json!({"conversation_id": "l", "outcome": "worked"}),
    );
    assert!(!a.already_scored && b.already_scored);
    assert_eq!(lookup(&d, &id).unwrap().uses, 1);
    let r: StopResponse = d.post(
        "/api/hooks/stop",
        &json!({"conversation_id": "l", "user_message": "right", "assistant_response": "ok"}),
    );
    assert!(
        !r.needs_sidecar && r.scoring_complete,
        "scored by the agent: no sidecar"
    );
}

// ---------------------------------------------------------------- lifecycle

#[test]
fn lifecycle_a_restart_keeps_everything() {
    let mut d = tests::start_daemon();
    let id = bank(&d, "The user's name is Ada");
    prompt(&d, "c", "hello");
    stop(&d, "c", "hi Ada");
    d.restart();
    assert!(lookup(&d, &id).is_some());
    assert!(
        prompt(&d, "c", "next").contains("<memd-score-required>"),
        "conversation state survived the restart"
    );
}

#[test]
fn lifecycle_kill_9_keeps_acknowledged_writes() {
    let mut d = tests::start_daemon();
    let ids: Vec<String> = (0..25)
        .map(|i| takeaway(&d, &format!("note {i}")))
        .collect();
    d.kill9();
    d.spawn(&[]);
    assert!(ids.iter().all(|id| lookup(&d, id).is_some()));
}

#[test]
fn lifecycle_session_state_expires() {
    let cfg = tempfile::tempdir().unwrap();
    std::fs::write(
        cfg.path().join("config.toml"),
        "[context]\nsession_ttl_hours = 0\n",
    )
    .unwrap();
    let mut d = tests::start_daemon();
    d.terminate();
    d.spawn(&[("MEMD_CONFIG_DIR", cfg.path().to_str().unwrap())]);
    prompt(&d, "old", "question");
    stop(&d, "old", "answer");
    // Any outcome wakes the background lifecycle, which forgets idle conversations.
    prompt(&d, "other", "q");
    stop(&d, "other", "a");
    prompt(&d, "other", "q2");
    let _: RecordOutcomeResponse = d.post(
        "/api/record-outcome",
        &json!({"conversation_id": "other", "outcome": "unknown"}),
    );
    eventually("session expiry", || {
        d.get::<StatsResponse>("/api/stats").conversations == 0
    });
    // "old" completed a turn; had its state survived, this prompt would ask for a score.
    assert!(!prompt(&d, "old", "again").contains("<memd-score-required>"));
}

#[test]
fn lifecycle_cursor_double_fire_is_ignored() {
    let d = tests::start_daemon();
    let mut env = d.env();
    env.push(("CURSOR_VERSION".into(), "1.7.2".into()));
    let stdin = json!({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "hi"});
    let (code, out, _, _) = run_hook("hook-prompt", &[], stdin.to_string().as_bytes(), &env);
    assert_eq!((code, out.as_str()), (0, ""));
    let s: StatsResponse = d.get("/api/stats");
    assert!(s.recent_hooks.is_empty(), "nothing reached memd");
}

#[test]
fn lifecycle_export_import_round_trip_is_lossless() {
    let d = tests::start_daemon();
    let id = bank(&d, "Ada deploys on Fridays");
    takeaway(&d, "a takeaway");
    let (s, jsonl) = d.get_raw("/api/export", true);
    assert_eq!(s, 200);
    assert_eq!(jsonl.lines().count(), 2);
    let e = tests::start_daemon();
    let (s, t) = e.post_raw("/api/import", jsonl.as_bytes(), true);
    assert_eq!(s, 200, "{t}");
    let again = e.post_raw("/api/import", jsonl.as_bytes(), true);
    assert_eq!(again.0, 200, "import is idempotent");
    let (_, exported_again) = e.get_raw("/api/export", true);
    let norm = |s: &str| {
        let mut v: Vec<Value> = s
            .lines()
            .map(|l| {
                let mut x: Value = serde_json::from_str(l).unwrap();
                x["key"] = json!(0);
                x
            })
            .collect();
        v.sort_by_key(|x| x["id"].as_str().unwrap_or("").to_string());
        v
    };
    assert_eq!(norm(&jsonl), norm(&exported_again));
    assert_eq!(lookup(&e, &id).unwrap().content, "Ada deploys on Fridays");
}
