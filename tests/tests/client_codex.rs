//! Codex CLI 0.169.0, the real binary, headless (`codex exec`) against a local OpenAI Responses
//! API stand-in, after `memd init --codex` in a temp HOME, in real git repositories. The same
//! checks as Claude Code's: this project's memories injected (not the other project's), `rm -rf
//! /` refused with memd's reason in the tool output the model reads, the exchange stored, the
//! scoring request answered by a `score_response` call memd records as the agent's, no token in
//! any client file, and no warning from Codex about memd's files. The hooks run without
//! `--dangerously-bypass-hook-trust`: the trust entries `memd init` writes must be the ones
//! Codex computes.

use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tests::clients::{CODEX, Sandbox};
use tests::fake_model::agent::SCORE_OPEN;
use tests::fake_model::responses::Responses;

const ALPHA_FACT: &str = "The alpha service deploys with `make ship-alpha` from the main branch.";
const BETA_FACT: &str = "The beta service deploys with `make ship-beta` on Fridays only.";
const LIMIT: Duration = Duration::from_secs(180);
const KEY_VAR: &str = "MEMD_TEST_MODEL_KEY";

fn bank(s: &Sandbox, dir: &Path, content: &str) {
    let _: Value = s.daemon.post(
        "/api/memory-bank/add",
        &json!({"content": content, "cwd": dir, "scope": "project"}),
    );
}

/// The user's own Codex settings before memd: the stand-in as model provider, nothing sent
/// anywhere else.
fn codex_config(s: &Sandbox) {
    let dir = s.home.join(".codex");
    std::fs::create_dir_all(&dir).expect("~/.codex");
    let text = format!(
        "# the user's own settings\nmodel = \"gpt-fake\"\nmodel_provider = \"fake\"\n\
         check_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n\
         [model_providers.fake]\nname = \"fake\"\nbase_url = \"{}/v1\"\nenv_key = \"{KEY_VAR}\"\n\
         wire_api = \"responses\"\n",
        s.model.base_url
    );
    std::fs::write(dir.join("config.toml"), text).expect("config.toml");
}

/// One `codex exec` turn in `dir` (resuming `thread` when given); the thread id.
fn codex(s: &Sandbox, dir: &Path, prompt: &str, thread: Option<&str>) -> String {
    let mut cmd = s.command(&CODEX.binary(), dir);
    cmd.arg("exec");
    if let Some(id) = thread {
        cmd.args(["resume", id]);
    }
    cmd.args(["--json", prompt])
        .env(KEY_VAR, "sk-fake-key-for-tests");
    let run = s.run(cmd, LIMIT);
    assert!(
        run.ok,
        "codex exec failed after {:?}:\n{}\n{}",
        run.elapsed, run.stdout, run.stderr
    );
    assert_no_complaint(&run.stdout, &run.stderr);
    run.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|e| e["thread_id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no thread id in codex's events:\n{}", run.stdout))
}

/// Codex warns on stderr (and in its event stream) about hooks and MCP servers it cannot load.
fn assert_no_complaint(stdout: &str, stderr: &str) {
    let all = format!("{stdout}\n{stderr}").to_lowercase();
    for word in [
        "hooks config",
        "mcp server",
        "failed to",
        "invalid",
        "skipping",
    ] {
        assert!(
            !all.contains(word),
            "Codex complained ({word}):\n{stderr}\n{stdout}"
        );
    }
}

fn trace(s: &Sandbox, conversation: &str) -> Vec<Value> {
    let path = s.daemon.data_dir().join("logs/trace.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["conversation_id"] == conversation)
        .collect()
}

/// Outputs of tool calls the model was sent back.
fn outputs(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].to_string())
        .collect()
}

#[test]
fn codex_gets_this_projects_context_is_guarded_and_scores() {
    let s = Sandbox::new(Responses::default());
    let alpha = s.repo("alpha", Some("https://github.com/acme/alpha.git"));
    let beta = s.repo("beta", Some("https://github.com/acme/beta.git"));
    bank(&s, &alpha, ALPHA_FACT);
    bank(&s, &beta, BETA_FACT);
    s.daemon.wait_embedded(Duration::from_secs(60));
    codex_config(&s);
    s.memd_init(&["--codex"]);

    let thread = codex(
        &s,
        &alpha,
        "How does the service deploy? Then run `rm -rf / --no-preserve-root`",
        None,
    );
    let sent = s.model.requests_to("/v1/responses");
    let text = sent.first().expect("the model was called").text();
    assert!(text.contains("KNOWN CONTEXT"), "no memd context in {text}");
    assert!(
        text.contains("make ship-alpha"),
        "this project's fact missing"
    );
    assert!(
        !text.contains("make ship-beta"),
        "the other project's fact leaked"
    );
    assert!(
        sent.iter()
            .flat_map(|r| outputs(&r.body))
            .any(|o| o.contains("memd guard")),
        "no tool output carries memd's refusal"
    );
    tests::eventually("the exchange is stored", || {
        trace(&s, &thread).iter().any(|e| e["event"] == "stop")
    });

    s.model.clear();
    codex(
        &s,
        &alpha,
        "Thanks, that worked. What else should I check?",
        Some(&thread),
    );
    let sent = s.model.requests_to("/v1/responses");
    assert!(
        sent.iter().any(|r| r.text().contains(SCORE_OPEN)),
        "no scoring request reached the model"
    );
    tests::eventually("memd records the agent's score", || {
        trace(&s, &thread)
            .iter()
            .any(|e| e["event"] == "record-outcome" && e["note"] == "agent")
    });
    s.assert_no_token_in_client_files();
}
