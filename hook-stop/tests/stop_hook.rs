//! hook-stop as a real process against a fake memd: what it sends, what it prints, failure paths.

#[path = "../../hook-prompt/tests/support/mod.rs"]
mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::hook::{Sandbox, event_fixture, event_fixture_with};
use support::server::{FakeServer, Reply, closed_port};

const STOP: &str = "/api/hooks/stop";

fn hook() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hook-stop"))
}

fn transcript() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcript.jsonl")
}

/// A fake memd whose stop endpoint stores and needs no sidecar.
fn memd() -> FakeServer {
    FakeServer::start(|req| match req.path.as_str() {
        STOP => Reply::json(
            200,
            &json!({"stored": true, "doc_id": "working_1", "scoring_complete": true,
                    "should_block": false, "needs_sidecar": false}),
        ),
        _ => Reply::json(404, &json!({})),
    })
}

/// The Claude Stop fixture pointing at the transcript fixture, edited by `edit`.
fn claude_stop(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    event_fixture_with("claude_stop.json", |v| {
        v["transcript_path"] = json!(transcript().display().to_string());
        edit(v);
    })
}

#[test]
fn claude_stop_sends_the_exchange_and_prints_nothing() {
    let memd = memd();
    let sandbox = Sandbox::new(Some(&memd.url()));
    sandbox
        .run(hook(), &[], &claude_stop(|_| {}))
        .assert_silent();
    let requests = memd.requests_to(STOP);
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {}", sandbox.token).as_str())
    );
    assert_eq!(
        requests[0].json(),
        json!({
            "conversation_id": "3f2c9a7e-8b1d-4c55-9e0a-6d7b2f41c0aa",
            "user_message": "Thanks, that worked. Now fix the flaky test in tests/cart.rs",
            "assistant_response": "The cost factor was 4 in config/auth.toml while the stored hashes use 12; I set it back to 12 and the login test passes.",
            "client": "claude-code",
            "project_dir": "/home/dev/shop",
            "score_call_seen": false
        })
    );
    assert!(sandbox.log_lines().is_empty());
}

#[test]
fn claude_stop_without_last_message_uses_the_transcript() {
    let memd = memd();
    let sandbox = Sandbox::new(Some(&memd.url()));
    let stdin = claude_stop(|v| {
        v.as_object_mut().unwrap().remove("last_assistant_message");
    });
    sandbox.run(hook(), &[], &stdin).assert_silent();
    let body = memd.requests_to(STOP)[0].json();
    assert_eq!(
        body["assistant_response"],
        "Let me look at the test.\nThe test read the wall clock; I injected a fixed clock and it passes 500 runs in a row."
    );
}

#[test]
fn missing_transcript_sends_empty_user_text_and_logs() {
    let memd = memd();
    let sandbox = Sandbox::new(Some(&memd.url()));
    let stdin = claude_stop(|v| v["transcript_path"] = json!("/nonexistent/memd-test/t.jsonl"));
    sandbox.run(hook(), &[], &stdin).assert_silent();
    let body = memd.requests_to(STOP)[0].json();
    assert_eq!(body["user_message"], "");
    assert!(
        body["assistant_response"]
            .as_str()
            .unwrap()
            .starts_with("The cost factor")
    );
    assert_eq!(sandbox.log_kinds(), ["transcript"]);
}

#[test]
fn stop_hook_active_sends_nothing() {
    let memd = memd();
    let sandbox = Sandbox::new(Some(&memd.url()));
    sandbox
        .run(hook(), &[], &event_fixture("claude_stop_active.json"))
        .assert_silent();
    assert!(memd.requests().is_empty());
}

#[test]
fn cursor_version_guard_silences_the_claude_copy() {
    let memd = memd();
    let mut sandbox = Sandbox::new(Some(&memd.url()));
    sandbox.set("CURSOR_VERSION", "2.1.4");
    sandbox
        .run(hook(), &[], &claude_stop(|_| {}))
        .assert_silent();
    assert!(memd.requests().is_empty());
}

#[test]
fn cursor_after_agent_response_sends_the_text() {
    let memd = memd();
    let mut sandbox = Sandbox::new(Some(&memd.url()));
    sandbox.set("CURSOR_VERSION", "2.1.4");
    let out = sandbox
        .run(
            hook(),
            &["--cursor"],
            &event_fixture("cursor_after_agent_response.json"),
        )
        .json();
    assert_eq!(out, json!({}));
    assert_eq!(
        memd.requests_to(STOP)[0].json(),
        json!({
            "conversation_id": "c0ffee00-1111-4222-8333-944445555666",
            "user_message": "",
            "assistant_response": "The total is computed in f32 and truncated with `as u64`; I switched it to integer cents.",
            "client": "cursor",
            "project_dir": "/home/dev/shop"
        })
    );
}

#[test]
fn cursor_stop_prints_empty_object_and_sends_nothing() {
    let memd = memd();
    let sandbox = Sandbox::new(Some(&memd.url()));
    let out = sandbox
        .run(hook(), &["--cursor"], &event_fixture("cursor_stop.json"))
        .json();
    assert_eq!(out, json!({}), "never a followup_message");
    assert!(memd.requests().is_empty());
}

#[test]
fn failures_are_silent_and_logged() {
    let broken = FakeServer::start(|_| Reply::json(500, &json!({"error": "internal"})));
    let sandbox = Sandbox::new(Some(&broken.url()));
    sandbox
        .run(hook(), &[], &claude_stop(|_| {}))
        .assert_silent();
    sandbox
        .run(hook(), &[], b"{\"hook_event_name\":\"Stop\"")
        .assert_silent();
    sandbox.run(hook(), &[], b"").assert_silent();
    assert_eq!(
        sandbox.log_kinds(),
        ["http_status", "bad_input", "bad_input"]
    );
    let log = std::fs::read_to_string(sandbox.dir().join("logs/hooks.log")).unwrap();
    assert!(!log.contains("cost factor"), "no response text in the log");
    assert!(log.contains("\"hook\":\"hook-stop\""));
}

#[test]
fn cursor_failures_still_print_empty_object() {
    let sandbox = Sandbox::new(Some(&format!("http://127.0.0.1:{}", closed_port())));
    let out = sandbox
        .run(
            hook(),
            &["--cursor"],
            &event_fixture("cursor_after_agent_response.json"),
        )
        .json();
    assert_eq!(out, json!({}));
    assert_eq!(sandbox.log_kinds(), ["unreachable"]);
}

#[test]
fn ten_megabyte_stdin_is_refused() {
    let memd = memd();
    let sandbox = Sandbox::new(Some(&memd.url()));
    let big = vec![b' '; 10 * 1024 * 1024];
    let run = sandbox.run(hook(), &[], &big);
    run.assert_silent();
    assert!(run.elapsed < Duration::from_secs(2), "{:?}", run.elapsed);
    assert_eq!(sandbox.log_kinds(), ["stdin_too_large"]);
}

#[test]
fn hanging_daemon_is_cut_off_at_the_deadline() {
    let memd = FakeServer::start(|_| Reply::Hang);
    let mut sandbox = Sandbox::new(Some(&memd.url()));
    sandbox.set("MEMD_HOOK_DEADLINE_MS", "300");
    let run = sandbox.run(hook(), &[], &claude_stop(|_| {}));
    run.assert_silent();
    assert!(
        run.elapsed < Duration::from_millis(1300),
        "{:?}",
        run.elapsed
    );
    assert_eq!(memd.requests_to(STOP).len(), 1);
}

#[test]
fn no_daemon_is_logged_and_silent() {
    let sandbox = Sandbox::new(Some(&format!("http://127.0.0.1:{}", closed_port())));
    sandbox
        .run(hook(), &[], &claude_stop(|_| {}))
        .assert_silent();
    assert_eq!(sandbox.log_kinds(), ["unreachable"]);
    assert_eq!(sandbox.log_lines()[0]["event"], "Stop");
}
