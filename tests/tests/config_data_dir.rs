//! `data_dir` set only in config.toml: the hooks, `memd status` and `memd mcp` find the daemon
//! that honours it, and none of them starts a second one in the default data dir.

use proto::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use tests::{Daemon, bin, run_hook};

/// The default data dir these processes would use without config.toml.
fn default_data_dir(d: &Daemon) -> std::path::PathBuf {
    d.data_dir().join("home/.local/share/memd")
}

fn command(d: &Daemon, name: &str) -> Command {
    let mut cmd = Command::new(bin(name));
    cmd.env_remove("MEMD_DATA_DIR")
        .env_remove("MEMD_PORT")
        .env_remove("MEMD_URL")
        .env_remove("XDG_DATA_HOME");
    for (k, v) in d.env() {
        cmd.env(k, v);
    }
    cmd
}

#[test]
fn hooks_status_and_mcp_find_the_daemon_through_config_toml() {
    let d = tests::start_daemon_data_dir_in_config();
    assert!(
        !d.env().iter().any(|(k, _)| k == "MEMD_DATA_DIR"),
        "the test must not hand the data dir over in the environment"
    );
    let fact = "The billing service deploys with `make ship` from the release branch";
    let added: MemoryBankResponse = d.post("/api/memory-bank/add", &json!({"content": fact}));
    d.wait_embedded(std::time::Duration::from_secs(60));

    // hook-prompt: its context comes from this daemon.
    let event = json!({
        "session_id": "cfg-1", "transcript_path": d.data_dir().join("t.jsonl"),
        "cwd": "/home/dev/billing", "hook_event_name": "UserPromptSubmit",
        "prompt": "how does the billing service deploy?"
    });
    let (code, out, _, _) = run_hook("hook-prompt", &[], event.to_string().as_bytes(), &d.env());
    assert_eq!(code, 0);
    assert!(
        out.contains(&added.doc_id) && out.contains("make ship"),
        "hook-prompt did not get this daemon's context: {out:?}"
    );

    // memd status: running, this daemon's pid.
    let health: HealthResponse = d.get("/api/health");
    let status = command(&d, "memd")
        .args(["status", "--json"])
        .stdin(Stdio::null())
        .output()
        .expect("memd status");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "memd status failed: {text}");
    let report: Value = serde_json::from_str(&text).expect("status JSON");
    assert_eq!(report["running"], true, "{report}");
    assert_eq!(report["health"]["pid"], health.pid, "{report}");
    assert_eq!(
        report["data_dir"],
        d.data_dir().display().to_string(),
        "{report}"
    );

    // memd mcp: the stdio bridge answers tools/call with this daemon's memory.
    let mut bridge = command(&d, "memd")
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memd mcp");
    let mut stdin = bridge.stdin.take().expect("stdin");
    let mut lines = BufReader::new(bridge.stdout.take().expect("stdout")).lines();
    let mut ask = |msg: Value, answered: bool| -> Option<Value> {
        writeln!(stdin, "{msg}").expect("write to the bridge");
        if !answered {
            return None;
        }
        let line = lines.next().expect("an answer").expect("read the bridge");
        Some(serde_json::from_str(&line).expect("JSON-RPC answer"))
    };
    let init = ask(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "config-test", "version": "1"}}}),
        true,
    )
    .unwrap();
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    ask(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        false,
    );
    let found = ask(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "search_memory", "arguments": {"query": "how does billing deploy"}}}),
        true,
    )
    .unwrap();
    drop(stdin);
    let _ = bridge.wait();
    assert!(
        found.to_string().contains("make ship"),
        "memd mcp did not reach this daemon: {found}"
    );

    // Nobody looked for (or started) a daemon in the default place.
    let default = default_data_dir(&d);
    assert!(
        !default.join("daemon.json").exists() && !default.join("spawn.stamp").exists(),
        "a second daemon was started in {}",
        default.display()
    );
}
