//! memd's MCP tools driven by a real MCP client: the official Python SDK (`mcp` from PyPI, in a
//! venv cached under the target dir), over streamable HTTP in both protocol eras and over the
//! `memd mcp` stdio bridge, against a real daemon.
//!
//! The Python script (`tests/mcp_client/drive.py`) only performs calls and reports them as
//! JSON; every judgement is made here.

#[path = "mcp/client.rs"]
mod client;
#[path = "mcp/judge.rs"]
mod judge;

use client::{PausedDriver, drive_http, drive_stdio};
use judge::{Report, check_catalog, check_full};
use serde_json::Value;
use std::time::{Duration, Instant};
use tests::Daemon;

#[test]
fn tools_over_streamable_http_with_sessions() {
    let d = tests::start_daemon();
    let r = Report(drive_http(&d, "legacy", "full", "http-legacy"));
    assert!(
        r.0["protocol_version"]
            .as_str()
            .is_some_and(|v| v < "2026-07-28"),
        "{}",
        r.0["protocol_version"]
    );
    check_full(&r);
}

#[test]
fn tools_over_streamable_http_stateless_2026() {
    let d = tests::start_daemon();
    let r = Report(drive_http(&d, "2026-07-28", "full", "http-modern"));
    assert_eq!(r.0["protocol_version"], "2026-07-28");
    check_full(&r);
    // A client that probes (`server/discover`) lands on the modern protocol too.
    let probed = Report(drive_http(&d, "auto", "smoke", "http-auto"));
    assert_eq!(probed.0["protocol_version"], "2026-07-28");
    assert!(
        probed.0["instructions"].is_string(),
        "discovery carries the instructions"
    );
    check_catalog(&probed);
    assert!(probed.ok("search_days").starts_with("Found"));
}

#[test]
fn tools_over_the_stdio_bridge() {
    let d = tests::start_daemon();
    let r = Report(drive_stdio(&d.env(), "legacy", "full", "stdio-legacy"));
    check_full(&r);
    let modern = Report(drive_stdio(&d.env(), "auto", "smoke", "stdio-auto"));
    assert_eq!(
        modern.0["protocol_version"], "2026-07-28",
        "the bridge relays the stateless protocol too"
    );
    assert!(modern.ok("search_days").starts_with("Found"));
}

/// Runs drive.py's `restart` scenario over the bridge around `restart_daemon`, and checks the
/// calls after the restart worked in the same client session.
fn bridge_across_restart(restart_daemon: impl FnOnce(&mut Daemon)) {
    let mut d = tests::start_daemon();
    let memd = tests::bin("memd").display().to_string();
    let args = [
        "--transport",
        "stdio",
        "--memd",
        &memd,
        "--mode",
        "legacy",
        "--scenario",
        "restart",
        "--tag",
        "restart",
    ];
    let paused = PausedDriver::start(&args, &d.env());
    restart_daemon(&mut d);
    let (report, stderr) = paused.resume();
    let r = Report(report);
    assert!(
        stderr.contains("memd mcp: the daemon lost the session"),
        "the bridge re-opened its session: {stderr}"
    );
    let bank_id = r.0["extra"]["bank_id"]
        .as_str()
        .expect("stored before the restart")
        .to_string();
    assert!(r.ok("search_after").contains(&format!("[id:{bank_id}]")));
    assert!(r.ok("context_after").contains("KNOWN CONTEXT"));
}

#[test]
fn stdio_bridge_follows_a_daemon_restarted_elsewhere() {
    // Nothing answers on the old port: the bridge finds the new one and opens a new session.
    bridge_across_restart(|d| {
        let old_port = d.port;
        d.restart();
        assert_ne!(d.port, old_port, "MEMD_PORT=0 picks a new port");
    });
}

#[test]
fn stdio_bridge_reopens_a_session_the_daemon_forgot() {
    // Same port, so the first answer is 404 for the unknown session id.
    bridge_across_restart(|d| {
        let port = d.port.to_string();
        assert!(d.terminate());
        d.spawn(&[("MEMD_PORT", port.as_str())]);
        assert_eq!(d.port.to_string(), port);
    });
}

#[test]
fn sigterm_ends_open_mcp_sessions_promptly() {
    let mut d = tests::start_daemon();
    let url = d.url("/mcp");
    let token = d.token.clone();
    let args = [
        "--transport",
        "http",
        "--url",
        &url,
        "--token",
        &token,
        "--mode",
        "legacy",
        "--scenario",
        "restart",
    ];
    // The SDK holds a GET event stream open for the whole session.
    let paused = PausedDriver::start(&args, &[]);
    assert_eq!(
        terminate_within(&mut d, Duration::from_secs(10)),
        Some(true),
        "memd must exit cleanly and promptly with an MCP session open:\n{}",
        d.log_text()
    );
    let log = d.log_text();
    assert!(log.lines().any(|l| l.ends_with(" stopped")), "{log}");
    // The MCP layer holds the core weakly, so the daemon gets the store back for its snapshot.
    assert!(!log.contains("core still shared"), "{log}");
    drop(paused);
}

/// SIGTERM, then at most `limit` for the exit: Some(clean exit) or None (killed after `limit`).
fn terminate_within(d: &mut Daemon, limit: Duration) -> Option<bool> {
    let mut child = d.child.take().expect("daemon running");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status.success());
        }
        if Instant::now() >= deadline {
            child.kill().ok();
            child.wait().ok();
            return None;
        }
        // Watching a process exit has no event to wait on without a reaper thread; poll briefly.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops a daemon the bridge started, even when an assertion fails first.
struct StartedDaemon {
    pid: Option<i32>,
}

impl Drop for StartedDaemon {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[test]
fn stdio_bridge_starts_the_daemon_when_none_runs() {
    let dir = tempfile::Builder::new()
        .prefix("memd-e2e-bridge")
        .tempdir()
        .expect("tempdir");
    let env: Vec<(String, String)> = vec![
        (
            "MEMD_DATA_DIR".into(),
            dir.path().join("data").display().to_string(),
        ),
        (
            "MEMD_CONFIG_DIR".into(),
            dir.path().join("config").display().to_string(),
        ),
        ("HOME".into(), dir.path().join("home").display().to_string()),
        ("MEMD_PORT".into(), "0".into()),
    ];
    let mut started = StartedDaemon { pid: None };
    let started_at = Instant::now();
    let r = Report(drive_stdio(&env, "legacy", "smoke", "autostart"));
    let info: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("data/daemon.json")).expect("daemon.json written"),
    )
    .expect("daemon.json");
    let pid = info["pid"].as_i64().expect("pid") as i32;
    started.pid = Some(pid);
    check_catalog(&r);
    assert!(
        r.ok("search_days").contains("No memories matched"),
        "a new store is empty"
    );
    assert!(started_at.elapsed() < Duration::from_secs(60));
    // The daemon outlives the bridge (it serves hooks and other clients) until told to stop.
    assert_eq!(
        unsafe { libc::kill(pid, 0) },
        0,
        "the daemon stopped with the bridge"
    );
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    while unsafe { libc::kill(pid, 0) } == 0 {
        assert!(
            Instant::now() < deadline,
            "the started daemon ignored SIGTERM"
        );
        // Waiting for another process (not our child) to exit: only polling can see it.
        std::thread::sleep(Duration::from_millis(20));
    }
    started.pid = None;
}

fn prompt(d: &Daemon, conv: &str, text: &str) -> proto::GetContextResponse {
    d.post(
        "/api/hooks/get-context",
        &proto::GetContextRequest {
            query: text.into(),
            conversation_id: conv.into(),
            ..Default::default()
        },
    )
}

fn stop(d: &Daemon, conv: &str, user: &str, answer: &str) -> proto::StopResponse {
    d.post(
        "/api/hooks/stop",
        &proto::StopRequest {
            conversation_id: conv.into(),
            user_message: user.into(),
            assistant_response: answer.into(),
            ..Default::default()
        },
    )
}

#[test]
fn score_response_over_mcp_completes_the_hook_turn() {
    // Control (its own daemon: score_response takes the most recent pending exchange of any
    // conversation): the same turn without a score makes the stop hook ask for a sidecar.
    let control = tests::start_daemon();
    prompt(&control, "control", "How do I rotate the staging keys?");
    stop(
        &control,
        "control",
        "How do I rotate the staging keys?",
        "Run the rotate script.",
    );
    assert!(prompt(&control, "control", "Thanks, that worked").scoring_required);
    let unscored = stop(
        &control,
        "control",
        "Thanks, that worked",
        "Glad it helped.",
    );
    assert!(
        unscored.needs_sidecar && !unscored.scoring_complete,
        "control: {unscored:?}"
    );

    let d = tests::start_daemon();

    prompt(&d, "turns", "Which port does the staging database use?");
    stop(
        &d,
        "turns",
        "Which port does the staging database use?",
        "It listens on 5433.",
    );
    let second = prompt(&d, "turns", "Great, that was right");
    assert!(
        second.scoring_required && second.formatted_injection.contains("<memd-score-required>")
    );
    // A fact the hook did not inject last turn, which the agent then recalls over MCP.
    let fact: proto::MemoryBankResponse = d.post(
        "/api/memory-bank/add",
        &proto::MemoryBankAdd {
            content: "The staging database listens on port 5433".into(),
            ..Default::default()
        },
    );
    let query = "staging database port 5433";
    let r = Report(drive_http(&d, "legacy", "score", query));
    assert!(r.ok("context").contains(&format!("[id:{}]", fact.doc_id)));
    let scored = r.ok("score");
    assert!(
        scored.starts_with("Scored ") && scored.contains(" as worked"),
        "{scored}"
    );
    let again = r.ok("score_again");
    assert!(
        again.starts_with("Nothing to score"),
        "exactly once: {again}"
    );
    let done = stop(&d, "turns", "Great, that was right", "Anything else?");
    assert!(!done.needs_sidecar && done.scoring_complete, "{done:?}");
    let looked_up: proto::SearchResponse = d.post(
        "/api/search",
        &proto::SearchRequest {
            id: Some(fact.doc_id.clone()),
            ..Default::default()
        },
    );
    assert_eq!(
        looked_up.results.first().map(|m| m.uses),
        Some(1),
        "the recalled fact shared the exchange's outcome"
    );
}

/// Raw POST to /mcp with chosen headers; (status, session id header).
fn raw_initialize(
    d: &Daemon,
    token: Option<&str>,
    origin: Option<&str>,
    accept: &str,
) -> (u16, Option<String>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut req = agent
        .post(&d.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", accept);
    if let Some(t) = token {
        req = req.header("authorization", &format!("Bearer {t}"));
    }
    if let Some(o) = origin {
        req = req.header("origin", o);
    }
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let resp = req.send(body).expect("POST /mcp");
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (resp.status().as_u16(), session)
}

#[test]
fn mcp_endpoint_requires_the_token_and_a_loopback_origin() {
    let d = tests::start_daemon();
    let both = "application/json, text/event-stream";
    let token = d.token.clone();
    assert_eq!(raw_initialize(&d, None, None, both).0, 401, "no token");
    assert_eq!(
        raw_initialize(&d, Some("0".repeat(64).as_str()), None, both).0,
        401,
        "wrong token"
    );
    assert_eq!(
        raw_initialize(&d, Some(&token), Some("https://evil.example"), both).0,
        403,
        "foreign origin"
    );
    let (status, session) = raw_initialize(&d, Some(&token), Some("http://localhost:3000"), both);
    assert_eq!(status, 200, "a loopback page may call");
    assert!(
        session.is_some_and(|s| !s.is_empty()),
        "legacy initialize opens a session"
    );
    assert_eq!(
        raw_initialize(&d, Some(&token), None, "application/json").0,
        406,
        "clients must accept SSE"
    );
}
