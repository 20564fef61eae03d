//! Gemini CLI 0.61.0, the real binary, headless (`gemini -p`) against a local Gemini API
//! stand-in (`GOOGLE_GEMINI_BASE_URL`), after `memd init --gemini` in a temp HOME, in real git
//! repositories: this project's memories reach the model through `BeforeAgent`, `rm -rf /` is
//! refused by `BeforeTool` with memd's reason in the function response the model reads, the
//! exchange is stored at `AfterAgent` under Gemini's session id, and the resumed session's
//! next turn carries the scoring request, answered by a `score_response` call (through
//! `memd mcp`) that memd records as the agent's; no token in any client file; doctor and
//! uninstall.

use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tests::clients::{
    FIRST_PROMPT, GEMINI, SECOND_PROMPT, Sandbox, assert_only_this_projects_context,
};
use tests::fake_model::agent::score_ids;
use tests::fake_model::gemini::Gemini;

const LIMIT: Duration = Duration::from_secs(180);

/// The user's own Gemini CLI settings before memd: API-key auth, nothing sent elsewhere.
fn user_settings() -> Value {
    json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false}
    })
}

fn write_user_settings(s: &Sandbox) {
    let dir = s.home.join(".gemini");
    std::fs::create_dir_all(&dir).expect("~/.gemini");
    std::fs::write(dir.join("settings.json"), user_settings().to_string()).expect("settings");
}

/// One `gemini -p` turn in `dir` (resuming the latest session when `resume`); its JSON output.
fn gemini(s: &Sandbox, dir: &Path, prompt: &str, resume: bool) -> Value {
    let mut cmd = s.command(&s.client_bin, dir);
    if resume {
        cmd.args(["--resume", "latest"]);
    }
    cmd.args([
        "-p",
        prompt,
        "--yolo",
        "--output-format",
        "json",
        "-m",
        "gemini-2.5-pro",
    ])
    .env("GEMINI_API_KEY", "fake-key-for-tests")
    .env("GOOGLE_GEMINI_BASE_URL", &s.model.base_url)
    // Gemini CLI runs hooks only in trusted folders; this one is the test's own.
    .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
    let run = s.run(cmd, LIMIT);
    if std::env::var_os("MEMD_CLIENT_OUTPUT").is_some() {
        eprintln!(
            "gemini stdout:\n{}\ngemini stderr:\n{}",
            run.stdout, run.stderr
        );
    }
    assert!(
        run.ok,
        "gemini -p failed after {:?}:\n{}\n{}",
        run.elapsed, run.stdout, run.stderr
    );
    let start = run.stdout.find('{').unwrap_or(0);
    serde_json::from_str(&run.stdout[start..])
        .unwrap_or_else(|e| panic!("gemini's JSON output ({e}):\n{}", run.stdout))
}

/// The conversations memd's trace ledger knows.
fn conversations(s: &Sandbox) -> Vec<String> {
    let path = s.daemon.data_dir().join("logs/trace.jsonl");
    let mut out: Vec<String> = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| e["conversation_id"].as_str().map(str::to_string))
        .collect();
    out.dedup();
    out
}

#[test]
fn gemini_gets_this_projects_context_and_is_guarded() {
    let s = Sandbox::new(GEMINI, Gemini);
    let p = s.two_projects();
    write_user_settings(&s);
    s.memd_init(&["--gemini"]);
    let before = conversations(&s);

    let out = gemini(&s, &p.alpha, FIRST_PROMPT, false);
    s.model.dump_if_asked("gemini turn 1");
    let agent: Vec<_> = s
        .model
        .requests()
        .into_iter()
        .filter(|r| r.target.contains(":streamGenerateContent"))
        .collect();
    let first = agent.first().expect("the model was called");
    let user_text = first.body["contents"].to_string();
    assert_only_this_projects_context(&user_text, "the first request");
    assert_eq!(score_ids(&user_text), None);
    let memd_tools: usize = first.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| {
            t["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|f| {
            f["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("mcp_memd_"))
        })
        .map(|f| f.to_string().len())
        .sum();
    let context = user_text
        .find("<hook_context>")
        .map_or(0, |i| user_text[i..].find("</hook_context>").unwrap_or(0));
    println!(
        "Gemini CLI {}: memd's tools add {memd_tools} bytes, its context {context} bytes (JSON-escaped) to the first request",
        GEMINI.version
    );
    let responses: String = agent
        .iter()
        .flat_map(|r| r.body["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.get("functionResponse").map(Value::to_string))
        .collect();
    assert!(
        responses.contains("memd guard") && responses.contains("recursive delete"),
        "no function response carries memd's refusal: {responses}"
    );
    let session = out["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session_id in {out}"))
        .to_string();
    assert!(
        conversations(&s).contains(&session) && !before.contains(&session),
        "memd's conversation is Gemini CLI's session"
    );
    s.assert_exchange_stored(&session);

    // The next turn of the same session carries the scoring request; the agent scores.
    s.model.clear();
    let out = gemini(&s, &p.alpha, SECOND_PROMPT, true);
    s.model.dump_if_asked("gemini turn 2");
    assert_eq!(
        out["session_id"].as_str(),
        Some(session.as_str()),
        "resumed"
    );
    let agent: Vec<_> = s
        .model
        .requests()
        .into_iter()
        .filter(|r| r.target.contains(":streamGenerateContent"))
        .collect();
    // Gemini CLI hands hook context to the model HTML-escaped.
    let text = agent.first().expect("the model was called").body["contents"]
        .to_string()
        .replace("&lt;", "<")
        .replace("&gt;", ">");
    assert_eq!(
        score_ids(&text),
        Some(vec![p.alpha_fact.clone()]),
        "the scoring request for the alpha fact did not reach the model"
    );
    s.assert_agent_scored(&session, &p.alpha_fact);
    s.assert_no_token_in_client_files();

    let checks = s.doctor();
    for name in ["gemini hooks", "gemini mcp"] {
        let status = checks.get(name).map(String::as_str).unwrap_or("missing");
        assert!(status.starts_with("ok"), "doctor {name}: {status}");
    }
    s.memd_uninstall();
    let left: Value = serde_json::from_str(
        &std::fs::read_to_string(s.home.join(".gemini/settings.json")).expect("settings"),
    )
    .expect("json");
    assert_eq!(left, user_settings(), "the user's settings.json, as it was");
}
