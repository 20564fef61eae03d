//! OpenCode 1.18.33, the real binary, headless (`opencode run`) against a local OpenAI Chat
//! Completions stand-in (a custom `@ai-sdk/openai-compatible` provider in the user's
//! `opencode.json`), after `memd init --opencode` in a temp HOME, in real git repositories.
//! The same checks as the other clients: this project's memories reach the model (in the
//! system prompt, never in the user's message), `rm -rf /` is refused with memd's reason in
//! the tool result the model reads, the exchange is stored when the session goes idle, the
//! scoring request (with its SCORING REFERENCE) is answered by a `score_response` call memd
//! records as the agent's, no token in any client file; doctor and uninstall.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tests::clients::{
    FIRST_PROMPT, OPENCODE, SECOND_PROMPT, Sandbox, assert_only_this_projects_context,
};
use tests::fake_model::Request;
use tests::fake_model::agent::score_ids;
use tests::fake_model::chat_completions::ChatCompletions;

const LIMIT: Duration = Duration::from_secs(180);
const PATH: &str = "/v1/chat/completions";

fn config_dir(s: &Sandbox) -> PathBuf {
    s.home.join(".config/opencode")
}

/// The user's own OpenCode settings before memd: the stand-in as the only provider.
fn user_config(s: &Sandbox) -> Value {
    json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
            "options": {"baseURL": format!("{}/v1", s.model.base_url), "apiKey": "sk-fake"},
            "models": {"fake-model": {"name": "fake-model"}}}},
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "autoupdate": false,
        "share": "disabled"
    })
}

fn write_user_config(s: &Sandbox) {
    let dir = config_dir(s);
    std::fs::create_dir_all(&dir).expect("opencode config dir");
    std::fs::write(dir.join("opencode.json"), user_config(s).to_string()).expect("opencode.json");
}

/// One `opencode run` turn in `dir` (continuing `session` when given); the session id.
fn opencode(s: &Sandbox, dir: &Path, prompt: &str, session: Option<&str>) -> String {
    let mut cmd = s.command(&s.client_bin, dir);
    cmd.arg("run").args(["--format", "json"]);
    if let Some(id) = session {
        cmd.args(["--session", id]);
    }
    cmd.arg(prompt);
    // Nothing fetched from the network: no model catalogue, no update check, no LSP download.
    for k in [
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_SHARE",
    ] {
        cmd.env(k, "1");
    }
    let run = s.run(cmd, LIMIT);
    if std::env::var_os("MEMD_CLIENT_OUTPUT").is_some() {
        eprintln!(
            "opencode stdout:\n{}\nopencode stderr:\n{}",
            run.stdout, run.stderr
        );
    }
    assert!(
        run.ok,
        "opencode run failed after {:?}:\n{}\n{}",
        run.elapsed, run.stdout, run.stderr
    );
    run.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|e| {
            e["sessionID"]
                .as_str()
                .or_else(|| e["part"]["sessionID"].as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no session id in opencode's events:\n{}", run.stdout))
}

/// Agent requests (the ones offering tools; OpenCode's title request offers none).
fn agent_requests(s: &Sandbox) -> Vec<Request> {
    s.model
        .requests_to(PATH)
        .into_iter()
        .filter(|r| r.body["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .collect()
}

fn messages_of<'a>(r: &'a Request, role: &str) -> Vec<&'a Value> {
    r.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == role)
        .collect()
}

fn text_of(messages: &[&Value]) -> String {
    messages.iter().map(|m| m["content"].to_string()).collect()
}

#[test]
fn opencode_gets_context_in_the_system_prompt_is_guarded_and_scores() {
    let s = Sandbox::new(OPENCODE, ChatCompletions::default());
    let p = s.two_projects();
    write_user_config(&s);
    s.memd_init(&["--opencode"]);
    assert!(config_dir(&s).join("plugins/memd.ts").is_file());

    let session = opencode(&s, &p.alpha, FIRST_PROMPT, None);
    s.model.dump_if_asked("opencode turn 1");
    let sent = agent_requests(&s);
    let first = sent.first().expect("the model was called");
    let system = text_of(&messages_of(first, "system"));
    let user = text_of(&messages_of(first, "user"));
    assert_only_this_projects_context(&system, "the system prompt");
    assert!(
        !user.contains("KNOWN CONTEXT") && !user.contains("ship-alpha"),
        "memd wrote into the user's message: {user}"
    );
    assert_eq!(
        score_ids(&system),
        None,
        "nothing to score before the first exchange"
    );
    let memd_tools: usize = first.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| {
            t["function"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("memd_"))
        })
        .map(|t| t.to_string().len())
        .sum();
    let context: usize = messages_of(first, "system")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .filter(|t| t.contains("KNOWN CONTEXT"))
        .map(|t| t[t.find("memd is").unwrap_or(0)..].len())
        .sum();
    println!(
        "OpenCode {}: memd's tools add {memd_tools} bytes, its context {context} bytes to each request",
        OPENCODE.version
    );
    let tool_results: String = sent
        .iter()
        .flat_map(|r| messages_of(r, "tool"))
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        tool_results.contains("memd guard") && tool_results.contains("recursive delete"),
        "no tool result carries memd's refusal: {tool_results}"
    );
    s.assert_exchange_stored(&session);

    s.model.clear();
    opencode(&s, &p.alpha, SECOND_PROMPT, Some(&session));
    s.model.dump_if_asked("opencode turn 2");
    let sent = agent_requests(&s);
    let system = text_of(&messages_of(&sent[0], "system"));
    assert!(
        system.contains("SCORING REFERENCE"),
        "no SCORING REFERENCE in {system}"
    );
    assert_eq!(
        score_ids(&system),
        Some(vec![p.alpha_fact.clone()]),
        "the scoring request for the alpha fact did not reach the model"
    );
    let called: Vec<String> = sent
        .iter()
        .flat_map(|r| messages_of(r, "assistant"))
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["function"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(
        called.iter().any(|n| n == "memd_score_response"),
        "no score call in {called:?}"
    );
    s.assert_agent_scored(&session, &p.alpha_fact);
    // Once scored, the rest of the turn is not asked again.
    let after = text_of(&messages_of(sent.last().expect("answer request"), "system"));
    assert_eq!(
        score_ids(&after),
        None,
        "the scoring request outlived the score"
    );
    s.assert_exchange_stored(&session);
    s.assert_no_token_in_client_files();

    let checks = s.doctor();
    for name in ["opencode plugin", "opencode mcp"] {
        let status = checks.get(name).map(String::as_str).unwrap_or("missing");
        assert!(status.starts_with("ok"), "doctor {name}: {status}");
    }
    s.memd_uninstall();
    assert!(!config_dir(&s).join("plugins/memd.ts").exists());
    let left: Value = serde_json::from_str(
        &std::fs::read_to_string(config_dir(&s).join("opencode.json")).expect("opencode.json"),
    )
    .expect("json");
    assert_eq!(left, user_config(&s), "the user's opencode.json, as it was");
}

/// The plugin fails open: with memd's hooks gone (an uninstalled or moved memd), OpenCode
/// answers as if memd were not there, and the command runs unguarded by memd only because
/// OpenCode's own permissions allow it (the stand-in asks for a harmless one).
#[test]
fn opencode_works_on_when_memds_hooks_are_missing() {
    let s = Sandbox::new(OPENCODE, ChatCompletions::default());
    let repo = s.repo("gamma", None);
    write_user_config(&s);
    s.memd_init(&["--opencode"]);
    let plugin_path = config_dir(&s).join("plugins/memd.ts");
    let plugin = std::fs::read_to_string(&plugin_path).expect("plugin");
    let gone = s.root().join("no-such-dir");
    let hook_dir = tests::bin("hook-prompt")
        .parent()
        .expect("bin dir")
        .display()
        .to_string();
    std::fs::write(
        &plugin_path,
        plugin.replace(&hook_dir, &gone.display().to_string()),
    )
    .expect("rewrite the plugin");

    opencode(&s, &repo, "What is here? Then run `ls`", None);
    let sent = agent_requests(&s);
    let system = text_of(&messages_of(
        sent.first().expect("the model was called"),
        "system",
    ));
    assert!(!system.contains("KNOWN CONTEXT"));
    let results: String = sent
        .iter()
        .flat_map(|r| messages_of(r, "tool"))
        .map(|m| m["content"].to_string())
        .collect();
    assert!(results.contains("README.md"), "`ls` ran: {results}");
}
