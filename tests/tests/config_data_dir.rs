//! `data_dir` set only in config.toml: the hooks, `memd status` and `memd mcp` find the daemon
//! that honours it, and none of them starts a second one in the default data dir.

use proto::*;
use serde_json::{Value, json};
use std::process::Stdio;
use tests::project::{Bridge, memd_in};
use tests::{Daemon, run_hook};

/// The default data dir these processes would use without config.toml.
fn default_data_dir(d: &Daemon) -> std::path::PathBuf {
    d.data_dir().join("home/.local/share/memd")
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
    let status = memd_in(&d, d.root())
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
    let mut bridge = Bridge::start_in(&d, d.root());
    let found = bridge.tool("search_memory", json!({"query": "how does billing deploy"}));
    drop(bridge);
    assert!(
        found.contains("make ship"),
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
