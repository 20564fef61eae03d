//! The sidecar chain as a real hook-stop process: fake memd asking for a sidecar, a fake
//! OpenAI-compatible server with misbehaving models, and the record-outcome and report bodies.

#[path = "../../hook-prompt/tests/support/mod.rs"]
mod support;

use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use support::hook::{Sandbox, event_fixture_with};
use support::server::{FakeServer, Recorded, Reply};

const STOP: &str = "/api/hooks/stop";
const RECORD: &str = "/api/record-outcome";
const REPORT: &str = "/api/sidecar/report";

fn hook() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hook-stop"))
}

fn transcript() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcript.jsonl")
}

fn stop_stdin() -> Vec<u8> {
    event_fixture_with("claude_stop.json", |v| {
        v["transcript_path"] = json!(transcript().display().to_string());
    })
}

/// A `chat.completion` body whose message content is `content`.
fn completion(model: &str, content: &str) -> Value {
    json!({
        "id": "chatcmpl-7f3a", "object": "chat.completion", "created": 1_790_000_000u64,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 612, "completion_tokens": 48, "total_tokens": 660}
    })
}

const VERDICT: &str = r#"{"exchange_outcome": "partial", "memory_scores": {"patterns_a1": "worked", "history_b2": "nonsense", "invented_9": "failed"}, "exchange_summary": "Restored bcrypt cost 12; login works but the reset flow is untested."}"#;

/// The fake OpenAI-compatible server: behaviour per model id; `429` models rate-limit once.
fn llm() -> FakeServer {
    let calls: Mutex<HashMap<String, u32>> = Mutex::new(HashMap::new());
    FakeServer::start(move |req: &Recorded| {
        if req.method == "GET" && req.path.ends_with("/models") {
            return Reply::json(
                200,
                &json!({"object": "list", "data": [
                    {"id": "z1-free", "object": "model", "created": 1, "owned_by": "opencode"},
                    {"id": "gpt-paid", "object": "model", "created": 1, "owned_by": "opencode"},
                    {"id": "big-pickle", "object": "model", "created": 1, "owned_by": "opencode"}
                ]}),
            );
        }
        let model = req.json()["model"].as_str().unwrap_or("").to_string();
        let n = {
            let mut calls = calls.lock().unwrap();
            let n = calls.entry(model.clone()).or_insert(0);
            *n += 1;
            *n
        };
        match model.as_str() {
            "z1-free" | "big-pickle" => Reply::json(
                403,
                &json!({"type": "error", "error": {"type": "FreeTierError",
                        "message": "Free models are only available to the vendor's own client."}}),
            ),
            "m-500" => Reply::json(
                500,
                &json!({"error": {"message": "upstream failure", "type": "server_error"}}),
            ),
            "m-hang" | "m-hang2" | "m-hang3" | "m-hang4" => Reply::Hang,
            "m-reset" => Reply::Reset,
            "m-invalid" => Reply::json(
                200,
                &completion(
                    &model,
                    r#"{"exchange_outcome": "great", "memory_scores": {}}"#,
                ),
            ),
            "m-unparseable" => Reply::json(
                200,
                &completion(&model, "The user seems satisfied overall."),
            ),
            "m-429" if n == 1 => Reply::json(429, &json!({"error": {"message": "rate limited"}}))
                .with_header("retry-after", "1"),
            "m-429" => Reply::json(
                200,
                &completion(&model, &format!("```json\n{VERDICT}\n```")),
            ),
            "m-429-long" => Reply::json(429, &json!({"error": {"message": "come back tomorrow"}}))
                .with_header("retry-after", "3600"),
            "m-prose" => Reply::json(
                200,
                &completion(
                    &model,
                    &format!("Here is the assessment you asked for:\n{VERDICT}\nHope this helps."),
                ),
            ),
            "m-prose-bad-ids" => Reply::json(
                200,
                &completion(
                    &model,
                    r#"Sure. {"exchange_outcome": "worked", "memory_scores": {"nope_1": "worked"}, "exchange_summary": "Fixed."}"#,
                ),
            ),
            _ => Reply::json(404, &json!({"error": {"message": "model not found"}})),
        }
    })
}

/// A fake memd whose stop answer asks for a sidecar run against `targets`.
fn memd_needing_sidecar(
    targets: Value,
    per_model_ms: u64,
    total_ms: u64,
    skip: Value,
) -> FakeServer {
    let answer = json!({
        "stored": true, "doc_id": "working_2", "scoring_complete": false, "should_block": false,
        "needs_sidecar": true,
        "sidecar_data": {
            "conversation_id": "3f2c9a7e-8b1d-4c55-9e0a-6d7b2f41c0aa",
            "exchange": {"user": "The login form rejects valid passwords.",
                         "assistant": "The bcrypt cost was lowered to 4; I restored 12."},
            "memories": [
                {"id": "patterns_a1", "content": "bcrypt cost must match the stored hashes"},
                {"id": "history_b2", "content": "login tests live in tests/auth.rs"}
            ],
            "current_user_message": "Thanks, that worked. Now fix the flaky test in tests/cart.rs",
            "targets": targets,
            "per_model_ms": per_model_ms,
            "total_ms": total_ms,
            "skip": skip
        }
    });
    FakeServer::start(move |req| match req.path.as_str() {
        STOP => Reply::json(200, &answer),
        RECORD => Reply::json(
            200,
            &json!({"success": true, "outcome": "partial", "documents_scored": 2}),
        ),
        REPORT => Reply::json(200, &json!({"ok": true})),
        _ => Reply::json(404, &json!({})),
    })
}

fn attempts(report: &Value) -> Vec<(String, String, u64, String)> {
    report["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["target"].as_str().unwrap().to_string(),
                a["model"].as_str().unwrap().to_string(),
                a["status"].as_u64().unwrap(),
                a["result"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn row(target: &str, model: &str, status: u64, result: &str) -> (String, String, u64, String) {
    (target.into(), model.into(), status, result.into())
}

#[test]
fn chain_walks_every_failure_kind_then_scores() {
    let llm = llm();
    let targets = json!([
        {"name": "zen", "kind": "zen", "base_url": format!("{}/zen/v1", llm.url()),
         "models": ["fallback-free"], "api_key": "test-key", "discover_models": true},
        {"name": "local", "kind": "local", "base_url": format!("{}/local/v1/", llm.url()),
         "models": ["m-skipped", "m-500", "m-hang", "m-reset", "m-invalid", "m-unparseable", "m-429", "m-prose"]}
    ]);
    let memd = memd_needing_sidecar(targets, 1000, 15_000, json!(["local/m-skipped"]));
    let sandbox = Sandbox::new(Some(&memd.url()));
    let run = sandbox.run(hook(), &[], &stop_stdin());
    run.assert_silent();
    // hang 1 s (per-model cap) + retry-after 1 s + fast failures: well inside the 15 s budget.
    assert!(run.elapsed < Duration::from_secs(16), "{:?}", run.elapsed);
    assert!(
        run.elapsed >= Duration::from_secs(2),
        "the hang and the retry-after both cost time"
    );

    let report = memd.requests_to(REPORT);
    assert_eq!(report.len(), 1);
    let report = report[0].json();
    assert_eq!(
        report["conversation_id"],
        "3f2c9a7e-8b1d-4c55-9e0a-6d7b2f41c0aa"
    );
    assert_eq!(report["scored"], true);
    assert_eq!(
        attempts(&report),
        vec![
            // Discovered free models; the refusal skips big-pickle on the same target.
            row("zen", "z1-free", 403, "refused:FreeTierError"),
            row("local", "m-500", 500, "http:500"),
            row("local", "m-hang", 0, "timeout"),
            row("local", "m-reset", 0, "reset"),
            row("local", "m-invalid", 200, "invalid_outcome"),
            row("local", "m-unparseable", 200, "unparseable"),
            row("local", "m-429", 429, "rate_limited"),
            row("local", "m-429", 200, "ok:partial"),
        ]
    );
    let hang = &report["attempts"][2];
    let latency = hang["latency_ms"].as_u64().unwrap();
    assert!(
        (900..2000).contains(&latency),
        "per-model timeout honoured: {latency}"
    );
    assert!(hang["at"].as_str().unwrap().ends_with('Z'));
    let report_text = String::from_utf8_lossy(&memd.requests_to(REPORT)[0].body).into_owned();
    assert!(
        !report_text.contains("bcrypt"),
        "no exchange text in the report"
    );

    let record = memd.requests_to(RECORD);
    assert_eq!(record.len(), 1);
    assert_eq!(
        record[0].json(),
        json!({
            "conversation_id": "3f2c9a7e-8b1d-4c55-9e0a-6d7b2f41c0aa",
            "outcome": "partial",
            "memory_scores": {"patterns_a1": "worked"},
            "exchange_summary": "Restored bcrypt cost 12; login works but the reset flow is untested.",
            "source": "sidecar"
        })
    );
    assert!(
        record[0].at < memd.requests_to(REPORT)[0].at,
        "outcome is recorded before the report"
    );

    // What went over the wire to the model endpoint.
    let chats: Vec<Recorded> = llm
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(chats.len(), 8);
    assert!(
        llm.requests()
            .iter()
            .any(|r| r.method == "GET" && r.path == "/zen/v1/models")
    );
    let zen = &chats[0];
    assert_eq!(zen.path, "/zen/v1/chat/completions");
    assert_eq!(zen.header("authorization"), Some("Bearer test-key"));
    assert!(
        zen.header("user-agent")
            .unwrap()
            .starts_with("memd-sidecar/")
    );
    let local = &chats[1];
    assert_eq!(local.path, "/local/v1/chat/completions");
    assert_eq!(local.header("authorization"), None);
    let body = local.json();
    assert_eq!(body["model"], "m-500");
    assert_eq!(body["temperature"], 0);
    assert!(body["max_tokens"].as_u64().unwrap() > 0);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["role"], "user");
    let prompt = body["messages"][1]["content"].as_str().unwrap();
    assert!(prompt.contains("The bcrypt cost was lowered to 4"));
    assert!(prompt.contains("Thanks, that worked."));
    assert!(prompt.contains("patterns_a1"));
    assert!(!chats.iter().any(|r| r.json()["model"] == "m-skipped"));
    assert!(sandbox.log_lines().is_empty(), "{:?}", sandbox.log_lines());
}

#[test]
fn chain_stops_at_the_total_budget() {
    let llm = llm();
    let targets = json!([
        {"name": "local", "kind": "local", "base_url": format!("{}/v1", llm.url()),
         "models": ["m-hang", "m-hang2", "m-hang3", "m-hang4"]}
    ]);
    // Total 2.5 s is above the hook's default 2 s deadline: the deadline must be extended.
    let memd = memd_needing_sidecar(targets, 1000, 2500, json!([]));
    let sandbox = Sandbox::new(Some(&memd.url()));
    let run = sandbox.run(hook(), &[], &stop_stdin());
    run.assert_silent();
    assert!(
        run.elapsed >= Duration::from_millis(2400),
        "{:?}",
        run.elapsed
    );
    assert!(
        run.elapsed < Duration::from_millis(2500 + 1000),
        "{:?}",
        run.elapsed
    );

    let report = memd.requests_to(REPORT)[0].json();
    assert_eq!(report["scored"], false);
    let rows = attempts(&report);
    assert_eq!(rows.len(), 3, "two full hangs and one cut short: {rows:?}");
    assert!(rows.iter().all(|r| r.3 == "timeout"));
    let last_latency = report["attempts"][2]["latency_ms"].as_u64().unwrap();
    assert!(
        last_latency < 700,
        "the last call only gets what is left: {last_latency}"
    );
    assert!(memd.requests_to(RECORD).is_empty());
    assert_eq!(sandbox.log_kinds(), ["sidecar_unscored"]);
    assert!(!sandbox.log_lines().iter().any(|l| l["kind"] == "deadline"));
}

#[test]
fn long_retry_after_moves_on_and_bad_ids_mean_no_memory_scores() {
    let llm = llm();
    let targets = json!([
        {"name": "user", "kind": "user", "base_url": format!("{}/v1", llm.url()),
         "models": ["m-429-long", "m-prose-bad-ids"]}
    ]);
    let memd = memd_needing_sidecar(targets, 6000, 15_000, json!([]));
    let sandbox = Sandbox::new(Some(&memd.url()));
    let run = sandbox.run(hook(), &[], &stop_stdin());
    run.assert_silent();
    assert!(
        run.elapsed < Duration::from_secs(3),
        "no 1 h wait: {:?}",
        run.elapsed
    );
    let report = memd.requests_to(REPORT)[0].json();
    assert_eq!(
        attempts(&report),
        vec![
            row("user", "m-429-long", 429, "rate_limited"),
            row("user", "m-prose-bad-ids", 200, "ok:worked"),
        ]
    );
    // No valid per-memory score: memory_scores is omitted so memd applies the outcome to all.
    assert_eq!(
        memd.requests_to(RECORD)[0].json(),
        json!({
            "conversation_id": "3f2c9a7e-8b1d-4c55-9e0a-6d7b2f41c0aa",
            "outcome": "worked",
            "exchange_summary": "Fixed.",
            "source": "sidecar"
        })
    );
}

#[test]
fn unreachable_target_is_skipped_and_reported() {
    let llm = llm();
    let dead = format!("http://127.0.0.1:{}/v1", support::server::closed_port());
    let targets = json!([
        {"name": "ollama", "kind": "local", "base_url": dead, "models": ["qwen3:4b", "llama3.2:3b"]},
        {"name": "user", "kind": "user", "base_url": format!("{}/v1", llm.url()), "models": ["m-prose"]}
    ]);
    let memd = memd_needing_sidecar(targets, 6000, 15_000, json!([]));
    let sandbox = Sandbox::new(Some(&memd.url()));
    sandbox.run(hook(), &[], &stop_stdin()).assert_silent();
    let report = memd.requests_to(REPORT)[0].json();
    assert_eq!(
        attempts(&report),
        vec![
            row("ollama", "qwen3:4b", 0, "unreachable"),
            row("user", "m-prose", 200, "ok:partial"),
        ]
    );
    assert_eq!(report["scored"], true);
}
