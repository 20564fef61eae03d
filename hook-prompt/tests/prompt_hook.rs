//! hook-prompt as a real process against a fake memd: requests, answers, failure paths.

mod support;

use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use support::hook::{Input, Sandbox, event_fixture, event_fixture_with};
use support::server::{FakeServer, Reply, closed_port};

const GET_CONTEXT: &str = "/api/hooks/get-context";

fn hook() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hook-prompt"))
}

/// A fake memd whose get-context answer carries `injection`.
fn memd_with(injection: &str) -> FakeServer {
    let answer = json!({
        "formatted_injection": injection,
        "relevant_memories": [],
        "scoring_required": false,
        "scoring_prompt": "",
        "scoring_memories": [],
    });
    FakeServer::start(move |req| {
        if req.path == GET_CONTEXT {
            Reply::json(200, &answer)
        } else {
            Reply::json(404, &json!({"error": "no such path"}))
        }
    })
}

#[test]
fn claude_prompt_gets_context_with_token() {
    let memd = memd_with("KNOWN CONTEXT\n- [id:patterns_1] bcrypt cost is 12");
    let sandbox = Sandbox::new(Some(&memd.url()));
    let run = sandbox.run(
        hook(),
        &[],
        &event_fixture("claude_user_prompt_submit.json"),
    );
    assert_eq!(
        run.json(),
        json!({"hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": "KNOWN CONTEXT\n- [id:patterns_1] bcrypt cost is 12"
        }})
    );
    let requests = memd.requests();
    assert_eq!(requests.len(), 1);
    let req = &requests[0];
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", GET_CONTEXT)
    );
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {}", sandbox.token).as_str())
    );
    assert!(req.header("user-agent").unwrap().starts_with("memd-hook/"));
    assert_eq!(
        req.json(),
        json!({
            "query": "The login form still rejects valid passwords — can you check the bcrypt cost setting?",
            "conversation_id": "3f2c9a7e-8b1d-4c55-9e0a-6d7b2f41c0aa",
            "cwd": "/home/dev/shop",
            "project_dir": "/home/dev/shop",
            "client": "claude-code",
            "session_start": false
        })
    );
    assert!(sandbox.log_lines().is_empty(), "success logs nothing");
}

#[test]
fn claude_without_context_prints_nothing() {
    let memd = memd_with("");
    let sandbox = Sandbox::new(Some(&memd.url()));
    sandbox
        .run(
            hook(),
            &[],
            &event_fixture("claude_user_prompt_submit.json"),
        )
        .assert_silent();
    assert_eq!(memd.requests().len(), 1);
}

#[test]
fn claude_context_is_capped_at_10000_chars() {
    let memd = memd_with(&"ü".repeat(12_000));
    let sandbox = Sandbox::new(Some(&memd.url()));
    let out = sandbox
        .run(
            hook(),
            &[],
            &event_fixture("claude_user_prompt_submit.json"),
        )
        .json();
    let context = out["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert_eq!(context.chars().count(), 10_000);
}

#[test]
fn claude_session_start_asks_for_start_context() {
    let memd = memd_with("KNOWN CONTEXT\n- recent work: cart rounding");
    let sandbox = Sandbox::new(Some(&memd.url()));
    let out = sandbox
        .run(hook(), &[], &event_fixture("claude_session_start.json"))
        .json();
    assert_eq!(out["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let body = memd.requests()[0].json();
    assert_eq!(body["session_start"], true);
    assert_eq!(body["query"], "");
}

#[test]
fn without_a_token_file_memd_cannot_be_verified_and_nothing_is_sent() {
    let memd = memd_with("ctx");
    let sandbox = Sandbox::new(Some(&memd.url()));
    std::fs::remove_file(sandbox.dir().join("token")).unwrap();
    let run = sandbox.run(
        hook(),
        &[],
        &event_fixture("claude_user_prompt_submit.json"),
    );
    assert_eq!((run.code, run.stdout.trim()), (Some(0), ""), "fail-open");
    assert!(
        memd.requests().is_empty(),
        "only the identity check, never the prompt: {:?}",
        memd.requests()
    );
}

#[test]
fn port_comes_from_daemon_json_without_memd_url() {
    let memd = memd_with("from daemon.json");
    let mut sandbox = Sandbox::new(None);
    sandbox.set("MEMD_PORT", &closed_port().to_string());
    let info = json!({"port": memd.port(), "pid": 1, "version": "0.1.0"});
    std::fs::write(sandbox.dir().join("daemon.json"), info.to_string()).unwrap();
    let out = sandbox
        .run(
            hook(),
            &[],
            &event_fixture("claude_user_prompt_submit.json"),
        )
        .json();
    assert_eq!(
        out["hookSpecificOutput"]["additionalContext"],
        "from daemon.json"
    );
    assert_eq!(memd.requests().len(), 1);
}

/// Claude Code tells hooks where the session was started; that names the project even when
/// the agent has `cd`ed elsewhere since (`cwd`).
#[test]
fn claude_project_dir_is_sent_as_the_project() {
    let memd = memd_with("KNOWN CONTEXT\n- [id:patterns_1] bcrypt cost is 12");
    let mut sandbox = Sandbox::new(Some(&memd.url()));
    sandbox.set("CLAUDE_PROJECT_DIR", "/home/dev/shop-root");
    let run = sandbox.run(
        hook(),
        &[],
        &event_fixture("claude_user_prompt_submit.json"),
    );
    assert_eq!(run.code, Some(0));
    let sent = memd.requests()[0].json();
    assert_eq!(sent["cwd"], "/home/dev/shop");
    assert_eq!(sent["project_dir"], "/home/dev/shop-root");
}

#[test]
fn cursor_session_start_returns_additional_context() {
    let memd = memd_with("KNOWN CONTEXT\n- checkout uses integer cents");
    let sandbox = Sandbox::new(Some(&memd.url()));
    let out = sandbox
        .run(
            hook(),
            &["--cursor"],
            &event_fixture("cursor_session_start.json"),
        )
        .json();
    assert_eq!(
        out,
        json!({"additional_context": "KNOWN CONTEXT\n- checkout uses integer cents"})
    );
    assert_eq!(
        memd.requests()[0].json(),
        json!({
            "query": "",
            "conversation_id": "c0ffee00-1111-4222-8333-944445555666",
            "cwd": "/home/dev/shop",
            "project_dir": "/home/dev/shop",
            "client": "cursor",
            "session_start": true
        })
    );
}

#[test]
fn cursor_session_start_without_context_prints_empty_object() {
    let memd = memd_with("");
    let sandbox = Sandbox::new(Some(&memd.url()));
    let out = sandbox
        .run(
            hook(),
            &["--cursor"],
            &event_fixture("cursor_session_start.json"),
        )
        .json();
    assert_eq!(out, json!({}));
}

#[test]
fn cursor_before_submit_records_the_prompt_and_continues() {
    let memd = memd_with("context Cursor cannot take here");
    let mut sandbox = Sandbox::new(Some(&memd.url()));
    sandbox.set("CURSOR_VERSION", "2.1.4");
    let out = sandbox
        .run(
            hook(),
            &["--cursor"],
            &event_fixture("cursor_before_submit_prompt.json"),
        )
        .json();
    assert_eq!(out, json!({"continue": true}));
    let body = memd.requests()[0].json();
    assert_eq!(body["query"], "Why does the checkout total round down?");
    assert_eq!(body["client"], "cursor");
    assert_eq!(body["session_start"], false);
}

#[test]
fn cursor_before_submit_continues_when_memd_fails() {
    let memd = FakeServer::start(|_| Reply::json(500, &json!({"error": "boom"})));
    let sandbox = Sandbox::new(Some(&memd.url()));
    let out = sandbox
        .run(
            hook(),
            &["--cursor"],
            &event_fixture("cursor_before_submit_prompt.json"),
        )
        .json();
    assert_eq!(out, json!({"continue": true}));
    assert_eq!(sandbox.log_kinds(), ["http_status"]);
    assert_eq!(sandbox.log_lines()[0]["event"], "beforeSubmitPrompt");
}

#[test]
fn cursor_version_guard_silences_the_claude_copy() {
    let memd = memd_with("ctx");
    let mut sandbox = Sandbox::new(Some(&memd.url()));
    sandbox.set("CURSOR_VERSION", "2.1.4");
    sandbox
        .run(
            hook(),
            &[],
            &event_fixture("cursor_via_claude_settings.json"),
        )
        .assert_silent();
    // Even a Claude-shaped input is ignored while Cursor runs the Claude config.
    sandbox
        .run(
            hook(),
            &[],
            &event_fixture("claude_user_prompt_submit.json"),
        )
        .assert_silent();
    assert!(
        memd.requests().is_empty(),
        "the Claude copy must not call memd inside Cursor"
    );
    assert!(sandbox.log_lines().is_empty());
}

#[test]
fn cursor_input_without_the_env_is_still_not_handled_as_claude() {
    let memd = memd_with("ctx");
    let sandbox = Sandbox::new(Some(&memd.url()));
    sandbox
        .run(
            hook(),
            &[],
            &event_fixture("cursor_via_claude_settings.json"),
        )
        .assert_silent();
    assert!(memd.requests().is_empty());
}

#[test]
fn malformed_stdin_is_logged_and_silent() {
    let memd = memd_with("ctx");
    let sandbox = Sandbox::new(Some(&memd.url()));
    sandbox
        .run(hook(), &[], b"{\"session_id\": \"abc\", \"prompt\": ")
        .assert_silent();
    sandbox.run(hook(), &[], b"").assert_silent();
    assert_eq!(sandbox.log_kinds(), ["bad_input", "bad_input"]);
    let line = &sandbox.log_lines()[0];
    assert_eq!(line["hook"], "hook-prompt");
    assert!(
        !line["message"].as_str().unwrap().contains("abc"),
        "no input text in the log"
    );
    assert!(memd.requests().is_empty());
}

#[test]
fn malformed_stdin_in_cursor_mode_still_continues() {
    let sandbox = Sandbox::new(Some("http://127.0.0.1:9"));
    let out = sandbox.run(hook(), &["--cursor"], b"not json").json();
    // Neutral for whichever event it was: a prompt continues, a tool is not objected to.
    assert_eq!(out, json!({"continue": true, "permission": "allow"}));
}

#[test]
fn ten_megabyte_stdin_is_refused_without_reading_it() {
    let memd = memd_with("ctx");
    let sandbox = Sandbox::new(Some(&memd.url()));
    let mut big = br#"{"session_id":"s","hook_event_name":"UserPromptSubmit","prompt":""#.to_vec();
    big.resize(10 * 1024 * 1024, b'a');
    let run = sandbox.run(hook(), &[], &big);
    run.assert_silent();
    assert!(run.elapsed < Duration::from_secs(2), "{:?}", run.elapsed);
    assert_eq!(sandbox.log_kinds(), ["stdin_too_large"]);
    assert!(memd.requests().is_empty());
}

#[test]
fn daemon_error_is_logged_and_silent() {
    let memd = FakeServer::start(|_| Reply::json(500, &json!({"error": "internal"})));
    let sandbox = Sandbox::new(Some(&memd.url()));
    sandbox
        .run(
            hook(),
            &[],
            &event_fixture("claude_user_prompt_submit.json"),
        )
        .assert_silent();
    assert_eq!(sandbox.log_kinds(), ["http_status"]);
    assert!(
        sandbox.log_lines()[0]["message"]
            .as_str()
            .unwrap()
            .contains("500")
    );
}

#[test]
fn daemon_answer_that_is_not_json_is_logged() {
    let memd = FakeServer::start(|_| Reply::Body {
        status: 200,
        headers: vec![],
        body: "<html>proxy login</html>".into(),
    });
    let sandbox = Sandbox::new(Some(&memd.url()));
    sandbox
        .run(
            hook(),
            &[],
            &event_fixture("claude_user_prompt_submit.json"),
        )
        .assert_silent();
    assert_eq!(sandbox.log_kinds(), ["bad_response"]);
}

#[test]
fn hanging_daemon_is_cut_off_at_the_deadline() {
    let memd = FakeServer::start(|_| Reply::Hang);
    let mut sandbox = Sandbox::new(Some(&memd.url()));
    sandbox.set("MEMD_HOOK_DEADLINE_MS", "300");
    let run = sandbox.run(
        hook(),
        &[],
        &event_fixture("claude_user_prompt_submit.json"),
    );
    run.assert_silent();
    assert!(
        run.elapsed < Duration::from_millis(1300),
        "{:?}",
        run.elapsed
    );
    assert_eq!(
        memd.requests().len(),
        1,
        "the request was sent before the wait"
    );
    let kinds = sandbox.log_kinds();
    assert!(kinds == ["timeout"] || kinds == ["deadline"], "{kinds:?}");
}

#[test]
fn hanging_daemon_in_cursor_mode_still_continues() {
    let memd = FakeServer::start(|_| Reply::Hang);
    let mut sandbox = Sandbox::new(Some(&memd.url()));
    sandbox.set("MEMD_HOOK_DEADLINE_MS", "300");
    let run = sandbox.run(
        hook(),
        &["--cursor"],
        &event_fixture("cursor_before_submit_prompt.json"),
    );
    assert_eq!(run.json(), json!({"continue": true}));
    assert!(
        run.elapsed < Duration::from_millis(1300),
        "{:?}",
        run.elapsed
    );
}

#[test]
fn stdin_that_never_closes_is_cut_off_by_the_watchdog() {
    let sandbox = {
        let mut s = Sandbox::new(Some("http://127.0.0.1:9"));
        s.set("MEMD_HOOK_DEADLINE_MS", "300");
        s
    };
    let run = sandbox.run_with(
        hook(),
        &["--cursor"],
        Input::NeverClose(br#"{"hook_event_name":"beforeSubmitPrompt""#.to_vec()),
    );
    // The watchdog prints Cursor's fallback answer and exits 0.
    assert_eq!(run.json(), json!({"continue": true, "permission": "allow"}));
    assert!(
        run.elapsed < Duration::from_millis(1300),
        "{:?}",
        run.elapsed
    );
    assert_eq!(sandbox.log_kinds(), ["deadline"]);
}

#[test]
fn no_daemon_is_logged_and_silent() {
    let sandbox = Sandbox::new(Some(&format!("http://127.0.0.1:{}", closed_port())));
    sandbox
        .run(
            hook(),
            &[],
            &event_fixture("claude_user_prompt_submit.json"),
        )
        .assert_silent();
    let lines = sandbox.log_lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["kind"], "unreachable");
    assert_eq!(lines[0]["event"], "UserPromptSubmit");
    // MEMD_URL names a daemon the hook does not manage: no start attempt.
    assert!(!sandbox.dir().join("spawn.stamp").exists());
}

#[test]
fn other_claude_events_are_ignored() {
    let memd = memd_with("ctx");
    let sandbox = Sandbox::new(Some(&memd.url()));
    let notification = event_fixture_with("claude_pre_tool_use.json", |v: &mut Value| {
        v["hook_event_name"] = json!("Notification");
    });
    sandbox.run(hook(), &[], &notification).assert_silent();
    assert!(memd.requests().is_empty());
    assert!(sandbox.log_lines().is_empty());
}

#[test]
fn prompt_text_never_reaches_the_log() {
    let memd = FakeServer::start(|_| Reply::json(503, &json!({})));
    let sandbox = Sandbox::new(Some(&memd.url()));
    let stdin = event_fixture_with("claude_user_prompt_submit.json", |v: &mut Value| {
        v["prompt"] = json!("SECRET-PROMPT-TEXT");
    });
    sandbox.run(hook(), &[], &stdin).assert_silent();
    let log = std::fs::read_to_string(sandbox.dir().join("logs/hooks.log")).unwrap();
    assert!(!log.contains("SECRET-PROMPT-TEXT"));
    assert_eq!(sandbox.log_kinds(), ["http_status"]);
}

/// A configuration the hook cannot use is still logged (in the data dir it can still find),
/// and the hook stays silent and exits 0.
#[test]
fn unusable_port_or_config_is_logged_not_lost() {
    let mut sandbox = Sandbox::new(None);
    sandbox.set("MEMD_PORT", "not-a-port");
    let run = sandbox.run(
        hook(),
        &[],
        &event_fixture("claude_user_prompt_submit.json"),
    );
    assert_eq!(run.code, Some(0));
    assert_eq!(run.stdout, "");
    assert_eq!(sandbox.log_kinds(), ["config"]);

    let mut sandbox = Sandbox::new(None);
    let config = sandbox.dir().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "data_dir = '''/elsewhere'''\n").unwrap();
    sandbox.set("MEMD_CONFIG_DIR", config.to_str().unwrap());
    sandbox.remove("MEMD_DATA_DIR");
    let xdg = sandbox.dir().join("xdg");
    sandbox.set("XDG_DATA_HOME", xdg.to_str().unwrap());
    let run = sandbox.run(
        hook(),
        &[],
        &event_fixture("claude_user_prompt_submit.json"),
    );
    assert_eq!(run.code, Some(0));
    assert_eq!(run.stdout, "");
    // Nothing usable names a data dir, so the line goes to the default one: XDG_DATA_HOME/memd.
    let log = xdg.join("memd/logs/hooks.log");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("\"config\""), "{}: {text}", log.display());
}
