//! Claude Code 2.1.328, the real binary, headless (`claude -p`) against a local Anthropic
//! Messages stand-in, after `memd init --claude-code` in a temp HOME, in real git repositories.
//! What the model was sent and what memd recorded: this project's memories injected (not the
//! other project's), `rm -rf /` refused with memd's reason in the tool result, the exchange
//! stored, the scoring request answered by a `score_response` call (through the always-loaded
//! `memd-score` entry, without a `ToolSearch` first) memd records as the agent's, `/compact`
//! leaving a digest of the conversation (PreCompact) and bringing the brief back, no token in
//! any client file, and nothing the client complains about.

use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use tests::clients::{
    CLAUDE_CODE, FIRST_PROMPT, SECOND_PROMPT, Sandbox, assert_brief_shown_once,
    assert_only_this_projects_context,
};
use tests::fake_model::agent::score_ids;
use tests::fake_model::anthropic::Messages;

const LIMIT: Duration = Duration::from_secs(180);

/// One `claude -p` turn in `dir`; the parsed `--output-format json` result.
fn claude(s: &Sandbox, dir: &Path, prompt: &str, resume: Option<&str>) -> Value {
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
    assert!(
        run.ok,
        "claude -p failed after {:?}:\n{}\n{}",
        run.elapsed, run.stdout, run.stderr
    );
    assert_no_complaint(&run.stderr);
    let result: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("claude's JSON result: {e}: {}", run.stdout));
    assert_eq!(result["is_error"], false, "{result}");
    result
}

/// Claude Code reports settings and MCP problems on stderr; memd's files must cause none.
fn assert_no_complaint(stderr: &str) {
    let lower = stderr.to_lowercase();
    for word in ["error", "invalid", "failed"] {
        assert!(!lower.contains(word), "Claude Code complained: {stderr}");
    }
}

fn tool_results(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .cloned()
        .collect()
}

/// The tool calls (name, input) the model made, in order.
fn tool_uses(s: &Sandbox) -> Vec<(String, Value)> {
    let requests = s.model.requests_to("/v1/messages");
    let Some(last) = requests.last() else {
        return Vec::new();
    };
    last.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| {
            (
                b["name"].as_str().unwrap_or("").to_string(),
                b["input"].clone(),
            )
        })
        .collect()
}

#[test]
fn claude_code_gets_this_projects_context_is_guarded_and_scores() {
    let s = Sandbox::new(CLAUDE_CODE, Messages::default());
    let p = s.two_projects();
    s.memd_init(&["--claude-code"]);

    // Turn 1: a question memd has a memory for, and a catastrophic command.
    let first = claude(&s, &p.alpha, FIRST_PROMPT, None);
    let session = first["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    s.model.dump_if_asked("claude turn 1");
    let sent = s.model.requests_to("/v1/messages");
    let text = sent.first().expect("the model was called").text();
    assert_only_this_projects_context(&text, "the first request");
    assert_eq!(
        score_ids(&text),
        None,
        "nothing to score before the first exchange"
    );
    // SessionStart brought the project's brief; the prompt's context only points back at it.
    assert!(
        text.contains("SessionStart hook additional context"),
        "no SessionStart brief"
    );
    assert_brief_shown_once(&text);
    let refused = sent
        .iter()
        .flat_map(|r| tool_results(&r.body))
        .find(|b| b.to_string().contains("memd guard"))
        .unwrap_or_else(|| panic!("no tool result carries memd's refusal"));
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused.to_string().contains("recursive delete"),
        "{refused}"
    );
    let calls: Vec<String> = tool_uses(&s).into_iter().map(|(n, _)| n).collect();
    assert_eq!(calls, ["Bash"], "turn 1 needs one tool call");
    s.assert_exchange_stored(&session);

    // Turn 2 in the same session: memd asks for a score; the agent loads and calls the tool.
    s.model.clear();
    claude(&s, &p.alpha, SECOND_PROMPT, Some(&session));
    s.model.dump_if_asked("claude turn 2");
    let sent = s.model.requests_to("/v1/messages");
    assert_eq!(
        score_ids(&sent[0].text()),
        Some(vec![p.alpha_fact.clone()]),
        "the scoring request for the alpha fact did not reach the model"
    );
    let calls = tool_uses(&s);
    // The always-loaded scoring entry: no ToolSearch before the call.
    let names: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["Bash", "mcp__memd-score__score_response"],
        "turn 2's calls"
    );
    let score = &calls[1];
    assert_eq!(score.1["memory_scores"][&p.alpha_fact], "worked");
    let score_result = sent
        .last()
        .map(|r| tool_results(&r.body))
        .unwrap_or_default()
        .into_iter()
        .find(|b| b["tool_use_id"] != Value::Null && !b.to_string().contains("memd guard"))
        .expect("the score call's result");
    assert_ne!(score_result["is_error"], true, "{score_result}");
    s.assert_agent_scored(&session, &p.alpha_fact);
    s.assert_no_token_in_client_files();
    // Compaction empties the model's context: the SessionStart `compact` brief shows the
    // project's facts in full again, where a resumed session only points back at them.
    claude(&s, &p.alpha, "/compact", Some(&session));
    // PreCompact: before the context was cut, memd stored a digest of both exchanges in the
    // project they belong to.
    let digest = tests::digests(&s.daemon, &session);
    assert_eq!(digest.len(), 1, "one digest per compaction: {digest:?}");
    let text = digest[0]["content"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Conversation digest before /compact (2 exchanges):"),
        "{text}"
    );
    assert!(text.contains("How does the service deploy?"), "{text}");
    assert!(text.contains("What else should I check?"), "{text}");
    assert!(
        !text.contains("In progress"),
        "`/compact` is no turn: {text}"
    );
    let fact = tests::lookup(&s.daemon, &p.alpha_fact).expect("the alpha fact");
    assert_eq!(digest[0]["project"].as_str(), fact.project.as_deref());
    s.model.clear();
    claude(&s, &p.alpha, "And the tests?", Some(&session));
    s.model.dump_if_asked("claude after compact");
    let after = s.model.requests_to("/v1/messages")[0].text();
    assert!(
        !after.contains("How does the service deploy?"),
        "the history was compacted"
    );
    assert!(
        after.contains("make ship-alpha"),
        "the compact brief shows the fact in full"
    );

    let checks = s.doctor();
    for name in ["claude hooks", "claude mcp", "claude score"] {
        let status = checks.get(name).map(String::as_str).unwrap_or("missing");
        assert!(status.starts_with("ok"), "doctor {name}: {status}");
    }
}
