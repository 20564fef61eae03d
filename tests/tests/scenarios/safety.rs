//! Safety: secrets, authentication, limits, fail-open hooks, origins.

use super::*;
use proto::*;
use serde_json::json;
use tests::run_hook;

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
