//! What memd's MCP tools cost Claude Code 2.1.328, measured with the real client: the bytes
//! memd adds to every model request (tool schemas, the deferred-tool list, server
//! instructions; against the same session with no memd server) and the model round trips of a
//! scored turn, for each way of registering the server:
//!
//! - `deferred`: one `memd` entry; Claude Code defers its tools behind `ToolSearch`.
//! - `always-load`: the same entry with `"alwaysLoad": true` (every schema on every request).
//! - `score-entry`: `memd` deferred plus `memd-score` (`memd mcp --only score_response`,
//!   always loaded): what `memd init` ships.
//!
//! Prints the table (tokens estimated at 4 bytes each) and holds what ships to the targets: at
//! most 1,000 tokens of tool schemas per request, no round trip beyond the score call.

use serde_json::{Value, json};
use std::time::Duration;
use tests::clients::{CLAUDE_CODE, FIRST_PROMPT, SECOND_PROMPT, Sandbox};
use tests::fake_model::anthropic::{Messages, estimate_tokens};

const LIMIT: Duration = Duration::from_secs(180);

/// One configuration's figures.
#[derive(Debug)]
struct Cost {
    /// Request body bytes of turn 1's first request and of turn 2's first request.
    first_bytes: usize,
    second_bytes: usize,
    /// Model requests in the scored turn.
    scored_turn_requests: usize,
    /// Whether memd recorded the score.
    scored: bool,
}

fn claude(s: &Sandbox, dir: &std::path::Path, prompt: &str, resume: Option<&str>) -> Value {
    let mut cmd = s.command(&s.client_bin, dir);
    cmd.args(["-p", prompt, "--output-format", "json"]);
    if let Some(id) = resume {
        cmd.args(["--resume", id]);
    }
    cmd.env("ANTHROPIC_BASE_URL", &s.model.base_url)
        .env("ANTHROPIC_API_KEY", "sk-ant-fake-key-for-tests")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    let run = s.run(cmd, LIMIT);
    assert!(run.ok, "claude -p failed:\n{}\n{}", run.stdout, run.stderr);
    serde_json::from_str(run.stdout.trim()).expect("claude's JSON result")
}

/// What to do to the `mcpServers` `memd init` wrote.
enum Servers {
    Remove,
    Replace(Value),
    AsInitWrote,
}

/// Runs the two-turn scenario with `servers` as `~/.claude.json`'s `mcpServers`.
fn measure(servers: Servers) -> Cost {
    let s = Sandbox::new(CLAUDE_CODE, Messages::default());
    let p = s.two_projects();
    s.memd_init(&["--claude-code"]);
    let path = s.home.join(".claude.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    match servers {
        Servers::Replace(v) => doc["mcpServers"] = v,
        Servers::Remove => {
            doc.as_object_mut().unwrap().remove("mcpServers");
        }
        Servers::AsInitWrote => {
            let servers = &doc["mcpServers"];
            assert_eq!(servers["memd-score"]["alwaysLoad"], true, "{servers}");
            assert!(servers["memd"].get("alwaysLoad").is_none(), "{servers}");
        }
    }
    std::fs::write(&path, doc.to_string()).unwrap();
    let first = claude(&s, &p.alpha, FIRST_PROMPT, None);
    let session = first["session_id"].as_str().unwrap().to_string();
    let first_bytes = s.model.requests_to("/v1/messages")[0].body_bytes;
    s.model.clear();
    claude(&s, &p.alpha, SECOND_PROMPT, Some(&session));
    let turn2 = s.model.requests_to("/v1/messages");
    let scored = s
        .trace(&session)
        .iter()
        .any(|e| e["event"] == "record-outcome" && e["note"] == "agent");
    Cost {
        first_bytes,
        second_bytes: turn2[0].body_bytes,
        scored_turn_requests: turn2.len(),
        scored,
    }
}

#[test]
fn memd_tools_cost_claude_code_little_and_scoring_needs_no_extra_round_trip() {
    let memd = tests::bin("memd").display().to_string();
    let entry = json!({"type": "stdio", "command": memd, "args": ["mcp"]});
    let mut loaded = entry.clone();
    loaded["alwaysLoad"] = json!(true);
    let baseline = measure(Servers::Remove);
    let configs = [
        ("deferred", Servers::Replace(json!({"memd": entry}))),
        ("always-load", Servers::Replace(json!({"memd": loaded}))),
        ("score-entry", Servers::AsInitWrote),
    ];
    println!(
        "Claude Code {}: memd's MCP cost per request (4 bytes ≈ 1 token)",
        CLAUDE_CODE.version
    );
    println!(
        "{:<12} {:>10} {:>10} {:>22}",
        "config", "bytes", "≈tokens", "round trips/scored turn"
    );
    let mut shipped = None;
    for (name, servers) in configs {
        let c = measure(servers);
        assert!(c.scored, "{name}: memd never recorded the agent's score");
        let added = c.second_bytes.saturating_sub(baseline.second_bytes);
        // The scored turn's requests beyond the score call and the answer.
        let extra = c.scored_turn_requests.saturating_sub(2);
        println!(
            "{name:<12} {added:>10} {:>10} {extra:>22}   (turn 1: +{} bytes)",
            estimate_tokens(added),
            c.first_bytes.saturating_sub(baseline.first_bytes)
        );
        if name == "score-entry" {
            shipped = Some((added, extra));
        }
    }
    let (added, extra) = shipped.expect("the shipped configuration was measured");
    assert!(
        estimate_tokens(added) <= 1000,
        "memd adds {added} bytes per request"
    );
    assert_eq!(
        extra, 0,
        "a scored turn costs a round trip beyond the score call"
    );
}
