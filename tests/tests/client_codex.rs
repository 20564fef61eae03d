//! Codex CLI 0.169.0, the real binary, headless (`codex exec`) against a local OpenAI Responses
//! API stand-in, after `memd init --codex` in a temp HOME, in real git repositories. The same
//! checks as Claude Code's: this project's memories injected (not the other project's; the
//! SessionStart brief first, the prompt's context pointing back at it), `rm -rf
//! /` refused with memd's reason in the tool output the model reads, the exchange stored, the
//! scoring request answered by a `score_response` call memd records as the agent's, no token in
//! any client file, and no warning from Codex about memd's files. The hooks run without
//! `--dangerously-bypass-hook-trust`: the trust entries `memd init` writes must be the ones
//! Codex computes.

use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use tests::clients::{
    CODEX, FIRST_PROMPT, SECOND_PROMPT, Sandbox, assert_brief_shown_once,
    assert_only_this_projects_context,
};
use tests::fake_model::agent::score_ids;
use tests::fake_model::responses::Responses;

const LIMIT: Duration = Duration::from_secs(180);
const KEY_VAR: &str = "MEMD_TEST_MODEL_KEY";

/// The user's own Codex settings before memd: the stand-in as model provider, nothing sent
/// anywhere else.
fn codex_config(s: &Sandbox) {
    let dir = s.home.join(".codex");
    std::fs::create_dir_all(&dir).expect("~/.codex");
    std::fs::write(dir.join("config.toml"), user_config(s)).expect("config.toml");
}

fn user_config(s: &Sandbox) -> String {
    format!(
        "# the user's own settings\nmodel = \"gpt-fake\"\nmodel_provider = \"fake\"\n\
         check_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n\
         [model_providers.fake]\nname = \"fake\"\nbase_url = \"{}/v1\"\nenv_key = \"{KEY_VAR}\"\n\
         wire_api = \"responses\"\n",
        s.model.base_url
    )
}

/// One `codex exec` turn in `dir` (resuming `thread` when given); the thread id.
fn codex(s: &Sandbox, dir: &Path, prompt: &str, thread: Option<&str>) -> String {
    let mut cmd = s.command(&s.client_bin, dir);
    cmd.arg("exec");
    if let Some(id) = thread {
        cmd.args(["resume", id]);
    }
    cmd.args(["--json", prompt])
        .env(KEY_VAR, "sk-fake-key-for-tests");
    // For a person chasing a failure: Codex's own log on stderr (its warnings then fail the
    // complaint check, which is skipped).
    let log = std::env::var("MEMD_CODEX_RUST_LOG").ok();
    if let Some(v) = &log {
        cmd.env("RUST_LOG", v);
    }
    let run = s.run(cmd, LIMIT);
    assert!(
        run.ok,
        "codex exec failed after {:?}:\n{}\n{}",
        run.elapsed, run.stdout, run.stderr
    );
    if std::env::var_os("MEMD_CLIENT_OUTPUT").is_some() {
        eprintln!(
            "codex stdout:\n{}\ncodex stderr:\n{}",
            run.stdout, run.stderr
        );
    }
    if log.is_none() {
        assert_no_complaint(&run.stdout, &run.stderr);
    }
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

/// The function calls (name, arguments) the model made, in order.
fn calls(s: &Sandbox) -> Vec<(String, Value)> {
    let requests = s.model.requests_to("/v1/responses");
    let Some(last) = requests.last() else {
        return Vec::new();
    };
    last.body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call")
        .map(|i| {
            let args = serde_json::from_str(i["arguments"].as_str().unwrap_or("{}"));
            let ns = i["namespace"]
                .as_str()
                .map(|n| format!("{n}/"))
                .unwrap_or_default();
            let name = format!("{ns}{}", i["name"].as_str().unwrap_or(""));
            (name, args.unwrap_or(Value::Null))
        })
        .collect()
}

#[test]
fn codex_gets_this_projects_context_is_guarded_and_scores() {
    let s = Sandbox::new(CODEX, Responses::default());
    let p = s.two_projects();
    codex_config(&s);
    s.memd_init(&["--codex"]);

    let thread = codex(&s, &p.alpha, FIRST_PROMPT, None);
    s.model.dump_if_asked("codex turn 1");
    let sent = s.model.requests_to("/v1/responses");
    let text = sent.first().expect("the model was called").text();
    assert_only_this_projects_context(&text, "the first request");
    assert_eq!(
        score_ids(&text),
        None,
        "nothing to score before the first exchange"
    );
    // SessionStart brought the project's brief before the prompt; the prompt's context only
    // points back at it.
    let input = sent[0].body["input"].as_array().expect("input items");
    let at = |needle: &str| input.iter().position(|i| i.to_string().contains(needle));
    let brief = at("make ship-alpha").expect("the brief");
    assert!(brief < at("How does the service deploy").expect("the prompt"));
    assert_brief_shown_once(&text);
    assert!(
        sent.iter()
            .flat_map(|r| outputs(&r.body))
            .any(|o| o.contains("memd guard") && o.contains("recursive delete")),
        "no tool output carries memd's refusal"
    );
    s.assert_exchange_stored(&thread);

    // memd's tool schemas in every request: the scoring surface only.
    let memd_tools: Vec<&Value> = sent[0].body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["name"] == "mcp__memd")
        .collect();
    assert_eq!(memd_tools.len(), 1, "memd's namespace is offered");
    let bytes = memd_tools[0].to_string().len();
    println!(
        "Codex {}: memd's tools add {bytes} bytes (≈{} tokens) per request",
        CODEX.version,
        bytes.div_ceil(4)
    );
    assert!(
        bytes.div_ceil(4) <= 1000,
        "memd's tools cost {bytes} bytes per request"
    );

    s.model.clear();
    codex(&s, &p.alpha, SECOND_PROMPT, Some(&thread));
    s.model.dump_if_asked("codex turn 2");
    let sent = s.model.requests_to("/v1/responses");
    assert_eq!(
        score_ids(&sent[0].text()),
        Some(vec![p.alpha_fact.clone()]),
        "the scoring request for the alpha fact did not reach the model"
    );
    let made = calls(&s);
    let score = made
        .iter()
        .find(|(n, _)| n == "mcp__memd/score_response")
        .unwrap_or_else(|| panic!("no score_response call in {made:?}"));
    assert_eq!(score.1["memory_scores"][&p.alpha_fact], "worked");
    assert_eq!(
        sent.len(),
        2,
        "the scored turn: the score call and the answer, nothing more"
    );
    s.assert_agent_scored(&thread, &p.alpha_fact);
    s.assert_no_token_in_client_files();

    // doctor sees what init wrote; uninstall takes exactly that away again.
    let checks = s.doctor();
    for name in ["codex hooks", "codex mcp", "codex trust"] {
        let status = checks.get(name).map(String::as_str).unwrap_or("missing");
        assert!(status.starts_with("ok"), "doctor {name}: {status}");
    }
    s.memd_uninstall();
    assert!(
        !s.home.join(".codex/hooks.json").exists(),
        "hooks.json held only memd's hooks"
    );
    let config = std::fs::read_to_string(s.home.join(".codex/config.toml")).expect("config.toml");
    assert_eq!(
        config.trim_end(),
        user_config(&s).trim_end(),
        "the user's config.toml, as it was"
    );
}
