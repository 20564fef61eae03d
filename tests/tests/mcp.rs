//! memd's MCP tools driven by a real MCP client: the official Python SDK (`mcp` from PyPI, in a
//! venv cached under the target dir), over streamable HTTP in both protocol eras and over the
//! `memd mcp` stdio bridge, against a real daemon.
//!
//! The Python script (`tests/mcp_client/drive.py`) only performs calls and reports them as
//! JSON; every judgement is made here.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tests::Daemon;

/// The SDK version the tests pin (bump deliberately: the client's behaviour is part of the test).
const MCP_SDK: &str = "mcp==2.3.0";

const TOOLS: [&str; 8] = [
    "get_context_insights",
    "search_memory",
    "add_to_memory_bank",
    "update_memory",
    "archive_memory",
    "delete_memory",
    "score_response",
    "record_response",
];

// ---------------------------------------------------------------------------------------------
// The Python client

/// `target/py-mcp-venv/bin/python` with the pinned SDK installed; created once, then reused.
/// A file lock keeps parallel test processes from building it twice.
fn python() -> PathBuf {
    let target = tests::bin_dir().parent().expect("target dir").to_path_buf();
    let venv = target.join("py-mcp-venv");
    let py = venv.join("bin").join("python");
    let marker = venv.join(format!(".installed-{MCP_SDK}"));
    let _lock = FileLock::acquire(&target.join("py-mcp-venv.lock"));
    if marker.exists() && py.exists() {
        return py;
    }
    std::fs::remove_dir_all(&venv).ok();
    let base = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let check = Command::new(&base)
        .args([
            "-c",
            "import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)",
        ])
        .status();
    assert!(
        check.is_ok_and(|s| s.success()),
        "the MCP tests need Python 3.10+ as `{base}` (or set PYTHON=/path/to/python3)"
    );
    run_or_fail(
        Command::new(&base).arg("-m").arg("venv").arg(&venv),
        "python3 -m venv",
    );
    run_or_fail(
        Command::new(venv.join("bin").join("pip")).args([
            "install",
            "--disable-pip-version-check",
            "-q",
            MCP_SDK,
        ]),
        &format!("pip install {MCP_SDK} (the MCP tests need PyPI or a wheel cache)"),
    );
    std::fs::write(&marker, b"").expect("venv marker");
    py
}

fn run_or_fail(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

struct FileLock(std::fs::File);

impl FileLock {
    fn acquire(path: &Path) -> FileLock {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .expect("lock file");
        // Blocks until the other test process finished building the venv.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock {}", path.display());
        FileLock(f)
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("mcp_client")
        .join("drive.py")
}

/// Runs the driver and returns its report.
fn drive(args: &[&str], env: &[(String, String)]) -> Value {
    let mut cmd = Command::new(python());
    cmd.arg(script()).args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run drive.py");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "drive.py {args:?} failed ({}):\n{stderr}",
        out.status
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "drive.py printed no report ({e}):\n{}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A driver running the `restart` scenario, stopped after its first calls until [`resume`].
struct PausedDriver {
    child: std::process::Child,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

/// What drive.py prints on stderr when it waits for the test.
const PAUSE_MARKER: &str = "drive.py: paused, press enter";

impl PausedDriver {
    fn start(args: &[&str], env: &[(String, String)]) -> PausedDriver {
        use std::io::BufRead;
        let mut cmd = Command::new(python());
        cmd.arg(script())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("run drive.py");
        let stderr = child.stderr.take().expect("stderr");
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (paused_tx, paused_rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if line == PAUSE_MARKER {
                    let _ = paused_tx.send(());
                }
                sink.lock().expect("log").push_str(&format!("{line}\n"));
            }
        });
        let mut driver = PausedDriver { child, log };
        if paused_rx.recv_timeout(Duration::from_secs(120)).is_err() {
            driver.child.kill().ok();
            panic!("drive.py never paused:\n{}", driver.log());
        }
        driver
    }

    fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Lets the script finish and returns its report.
    fn resume(mut self) -> Value {
        use std::io::Write;
        if let Some(mut stdin) = self.child.stdin.take() {
            stdin.write_all(b"\n").expect("resume drive.py");
        }
        let mut stdout = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            use std::io::Read;
            out.read_to_string(&mut stdout).ok();
        }
        let status = self.child.wait().expect("drive.py exit");
        assert!(
            status.success(),
            "drive.py failed after resuming ({status}):\n{}",
            self.log()
        );
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("no report ({e}): {stdout}\n{}", self.log()))
    }
}

impl Drop for PausedDriver {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

fn drive_http(d: &Daemon, mode: &str, scenario: &str, tag: &str) -> Value {
    let url = d.url("/mcp");
    let args = [
        "--transport",
        "http",
        "--url",
        &url,
        "--token",
        &d.token,
        "--mode",
        mode,
        "--scenario",
        scenario,
        "--tag",
        tag,
    ];
    drive(&args, &[])
}

fn drive_stdio(env: &[(String, String)], mode: &str, scenario: &str, tag: &str) -> Value {
    let memd = tests::bin("memd").display().to_string();
    let args = [
        "--transport",
        "stdio",
        "--memd",
        &memd,
        "--mode",
        mode,
        "--scenario",
        scenario,
        "--tag",
        tag,
    ];
    drive(&args, env)
}

// ---------------------------------------------------------------------------------------------
// Judging a report

struct Report(Value);

impl Report {
    fn call(&self, label: &str) -> &Value {
        let c = &self.0["calls"][label];
        assert!(
            c.is_object(),
            "no call {label} in the report: {}",
            self.0["calls"]
        );
        c
    }

    fn ok(&self, label: &str) -> String {
        let c = self.call(label);
        assert!(
            c.get("protocol_error").is_none(),
            "{label}: protocol error {c}"
        );
        assert_eq!(c["is_error"], false, "{label} failed: {}", c["text"]);
        c["text"].as_str().unwrap_or_default().to_string()
    }

    /// A tool error (not a protocol error) whose text names every one of `needles`.
    fn tool_error(&self, label: &str, needles: &[&str]) {
        let c = self.call(label);
        assert!(
            c.get("protocol_error").is_none(),
            "{label}: a bad argument must be a tool result, got {c}"
        );
        assert_eq!(c["is_error"], true, "{label} should fail: {}", c["text"]);
        let text = c["text"].as_str().unwrap_or_default();
        for n in needles {
            assert!(text.contains(n), "{label}: error text lacks {n:?}: {text}");
        }
    }

    fn tool(&self, name: &str) -> &Value {
        self.0["tools"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"] == name))
            .unwrap_or_else(|| panic!("tool {name} not listed"))
    }

    fn description(&self, name: &str) -> String {
        self.tool(name)["description"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

fn check_catalog(r: &Report) {
    let mut names: Vec<&str> = r.0["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort_unstable();
    let mut want = TOOLS.to_vec();
    want.sort_unstable();
    assert_eq!(names, want);
    let sections = [
        (
            "get_context_insights",
            &[
                "HOW MEMD WORKS",
                "READING A MEMORY",
                "SEARCHING",
                "WORKFLOW",
                "MEMORY HYGIENE",
                "w:0.68",
                "[YY~N]",
                "days_back=7",
                "search_memory(id=",
            ][..],
        ),
        (
            "search_memory",
            &[
                "WHEN TO SEARCH",
                "MODES",
                "READING RESULTS",
                "VERIFICATION USE",
                "days_back",
                "1–20",
            ][..],
        ),
        (
            "score_response",
            &[
                "<memd-score-required>",
                "FINDING THE MEMORIES",
                "PER-MEMORY SCORES",
                "ACTIVE MEMORY MANAGEMENT",
                "MISLED",
            ][..],
        ),
        (
            "add_to_memory_bank",
            &[
                "STORAGE DISCIPLINE",
                "confidence 0.5",
                "One fact per memory",
            ][..],
        ),
        ("update_memory", &["memory_bank"][..]),
        ("delete_memory", &["soft delete"][..]),
        ("record_response", &["initial_score"][..]),
    ];
    for (tool, needles) in sections {
        let d = r.description(tool);
        for n in needles {
            assert!(d.contains(n), "{tool} description lacks {n:?}");
        }
    }
    for t in TOOLS {
        let d = r.description(t).to_lowercase();
        assert!(
            !d.contains("roampal") && !d.contains("http"),
            "{t}: foreign name or link in the description"
        );
    }
    let schema = &r.tool("search_memory")["input_schema"];
    assert_eq!(schema["properties"]["limit"]["maximum"], 20);
    assert_eq!(schema["properties"]["days_back"]["maximum"], 365);
    assert!(
        schema
            .get("required")
            .is_none_or(|req| req.as_array().is_some_and(|a| a.is_empty())),
        "{schema}"
    );
    let score = &r.tool("score_response")["input_schema"];
    assert_eq!(score["required"], serde_json::json!(["outcome"]));
    // A client pinned to 2026-07-28 skips discovery and so never receives the instructions.
    if r.0["protocol_version"] != "2026-07-28" || r.0["instructions"].is_string() {
        let i = &r.0["instructions"];
        assert!(
            i.as_str()
                .is_some_and(|i| i.contains("get_context_insights")),
            "{i}"
        );
    }
}

/// Everything the `full` scenario of drive.py did, judged.
fn check_full(r: &Report) {
    check_catalog(r);
    let bank_id = r.0["extra"]["bank_id"]
        .as_str()
        .expect("bank id")
        .to_string();
    let tag = |id: &str| format!("[id:{id}]");

    assert!(
        r.ok("add_ok")
            .starts_with(&format!("Stored in memory_bank as {}", tag(&bank_id)))
    );
    r.tool_error(
        "add_bad_importance",
        &["importance", "between 0 and 1", "1.5"],
    );
    r.tool_error("add_missing_content", &["content"]);
    r.tool_error("add_wrong_type", &["importance"]);

    let found = r.ok("search_query");
    let line = found
        .lines()
        .find(|l| l.contains(&tag(&bank_id)))
        .unwrap_or_else(|| panic!("search lacks the fact: {found}"));
    assert!(
        line.contains("[memory_bank] (") && line.contains("imp:0.9, conf:0.8)"),
        "{line}"
    );
    assert!(
        line.split_once(". [")
            .is_some_and(|(n, _)| n.parse::<u32>().is_ok()),
        "numbered: {line}"
    );
    r.tool_error(
        "search_none",
        &["at least one of", "query", "days_back", "id"],
    );
    r.tool_error("search_limit_high", &["limit", "between 1 and 20", "50"]);
    r.tool_error("search_limit_type", &["limit"]);
    r.tool_error("search_days_bad", &["days_back", "between 1 and 365"]);
    assert!(r.ok("search_days").contains(&tag(&bank_id)));
    let full = r.ok("search_id");
    for n in [
        tag(&bank_id),
        "importance: 0.90".into(),
        "confidence: 0.80".into(),
        "tags: identity".into(),
        "created:".into(),
    ] {
        assert!(full.contains(&n), "id lookup lacks {n}: {full}");
    }
    assert!(r.ok("search_id_missing").contains("No memory has the id"));
    r.tool_error("search_sort_bad", &["sort_by", "recency"]);
    r.tool_error("search_collection_bad", &["collections", "memory_bank"]);
    r.tool_error("search_unknown_arg", &["days", "days_back"]);
    r.tool_error("search_metadata_bad", &["metadata", "$regex"]);

    assert_eq!(r.ok("update_ok"), format!("Updated {}.", tag(&bank_id)));
    r.tool_error("update_nothing", &["Nothing to update"]);
    r.tool_error("update_missing", &["no memory with id"]);
    r.tool_error("update_bad_confidence", &["confidence", "between 0 and 1"]);

    for i in 1..=5 {
        let ctx = r.ok(&format!("context_{i}"));
        assert!(
            ctx.contains("KNOWN CONTEXT") && ctx.contains(&tag(&bank_id)),
            "context_{i}: {ctx}"
        );
        // memd's self-audit trigger: every 5th context that shows memory_bank facts.
        assert_eq!(ctx.contains("SELF-AUDIT"), i == 5, "context_{i}: {ctx}");
    }

    let kept = r.ok("record_ok");
    assert!(
        kept.contains("[id:working_") && kept.contains("starting score 0.70"),
        "{kept}"
    );
    r.tool_error("record_bad", &["initial_score", "worked"]);
    r.tool_error("record_empty", &["key_takeaway"]);
    r.tool_error(
        "score_bad",
        &["outcome", "worked", "failed", "partial", "unknown"],
    );
    r.tool_error("score_bad_memory", &["memory_scores"]);

    r.tool_error("archive_none", &["Provide id or content"]);
    assert!(
        r.ok("delete_ok")
            .starts_with(&format!("Archived {}", tag(&bank_id)))
    );
    assert!(
        !r.ok("search_after_delete").contains(&tag(&bank_id)),
        "an archived fact still shows"
    );
    r.tool_error("delete_missing", &["no memory with id"]);
    let unknown = r.call("unknown_tool");
    assert!(
        unknown["protocol_error"]
            .as_str()
            .is_some_and(|e| e.contains("unknown tool")),
        "{unknown}"
    );
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn tools_over_streamable_http_with_sessions() {
    let d = Daemon::start();
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
    let d = Daemon::start();
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
    let d = Daemon::start();
    let r = Report(drive_stdio(&d.env(), "legacy", "full", "stdio-legacy"));
    check_full(&r);
    let modern = Report(drive_stdio(&d.env(), "auto", "smoke", "stdio-auto"));
    assert_eq!(
        modern.0["protocol_version"], "2026-07-28",
        "the bridge relays the stateless protocol too"
    );
    assert!(modern.ok("search_days").starts_with("Found"));
}

#[test]
fn stdio_bridge_survives_a_daemon_restart() {
    let mut d = Daemon::start();
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
    let old_port = d.port;
    d.restart();
    assert_ne!(
        d.port, old_port,
        "the restarted daemon listens elsewhere (MEMD_PORT=0)"
    );
    let r = Report(paused.resume());
    let bank_id = r.0["extra"]["bank_id"]
        .as_str()
        .expect("stored before the restart")
        .to_string();
    // Same client session: the bridge found the new port, opened a new session and retried.
    assert!(r.ok("search_after").contains(&format!("[id:{bank_id}]")));
    assert!(r.ok("context_after").contains("KNOWN CONTEXT"));
}

#[test]
fn sigterm_ends_open_mcp_sessions_promptly() {
    let mut d = Daemon::start();
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
    let started = Instant::now();
    assert!(
        d.terminate(),
        "memd did not exit cleanly:\n{}",
        d.log_text()
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "shutdown waited {:?} on MCP streams",
        started.elapsed()
    );
    let log = d.log_text();
    assert!(log.contains("memd: stopped"), "{log}");
    // The MCP layer holds the core weakly, so the daemon gets the store back for its snapshot.
    assert!(!log.contains("core still shared"), "{log}");
    drop(paused);
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
            client: None,
        },
    )
}

#[test]
fn score_response_over_mcp_completes_the_hook_turn() {
    // Control (its own daemon: score_response takes the most recent pending exchange of any
    // conversation): the same turn without a score makes the stop hook ask for a sidecar.
    let control = Daemon::start();
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

    let d = Daemon::start();

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
    let d = Daemon::start();
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
