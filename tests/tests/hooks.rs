//! The real hook binaries against a real daemon, with Claude Code and Cursor stdin.

use proto::*;
use serde_json::{Value, json};
use std::path::Path;
use tests::{Daemon, run_hook};

fn claude_prompt(session: &str, prompt: &str, transcript: &Path) -> Vec<u8> {
    json!({
        "session_id": session, "transcript_path": transcript, "cwd": "/home/dev/project",
        "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": prompt
    })
    .to_string()
    .into_bytes()
}

fn claude_stop(session: &str, answer: &str, transcript: &Path) -> Vec<u8> {
    json!({
        "session_id": session, "transcript_path": transcript, "cwd": "/home/dev/project",
        "permission_mode": "default", "hook_event_name": "Stop", "stop_hook_active": false,
        "last_assistant_message": answer, "background_tasks": [], "session_crons": []
    })
    .to_string()
    .into_bytes()
}

/// Appends one user line and one assistant line in Claude Code's transcript format.
fn append_turn(transcript: &Path, user: &str, assistant: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(transcript)
        .unwrap();
    writeln!(f, "{}", json!({"type": "user", "message": {"role": "user", "content": user}, "uuid": "u", "isSidechain": false})).unwrap();
    writeln!(f, "{}", json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": assistant}]}, "uuid": "a"})).unwrap();
}

fn context_of(stdout: &str) -> String {
    if stdout.trim().is_empty() {
        return String::new();
    }
    let v: Value = serde_json::from_str(stdout)
        .unwrap_or_else(|e| panic!("hook printed non-JSON {stdout:?}: {e}"));
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string()
}

fn seed(d: &Daemon) -> Vec<String> {
    let ids: Vec<String> = [
        "The staging database for the billing service listens on port 5433, not 5432",
        "Run `make migrate` before starting the billing API locally",
    ]
    .iter()
    .map(|c| {
        d.post::<_, MemoryBankResponse>("/api/memory-bank/add", &json!({"content": c}))
            .doc_id
    })
    .collect();
    d.wait_embedded(std::time::Duration::from_secs(60));
    ids
}

fn stats(d: &Daemon) -> StatsResponse {
    d.get("/api/stats")
}

/// One Claude Code conversation of `turns` turns; `score` decides whether the agent calls
/// score_response each time it is asked. Returns the context printed at each turn.
fn conversation(d: &Daemon, session: &str, turns: usize, score: bool) -> Vec<String> {
    let transcript = d.data_dir().join(format!("{session}.jsonl"));
    let env = d.env();
    let mut contexts = Vec::new();
    for t in 0..turns {
        let prompt = format!("turn {t}: which port does the billing staging database use?");
        let (code, out, _, _) = run_hook(
            "hook-prompt",
            &[],
            &claude_prompt(session, &prompt, &transcript),
            &env,
        );
        assert_eq!(code, 0);
        let ctx = context_of(&out);
        if score && ctx.contains("<memd-score-required>") {
            let r: RecordOutcomeResponse = d.post(
                "/api/record-outcome",
                &json!({"conversation_id": session, "outcome": "worked"}),
            );
            assert!(!r.already_scored);
        }
        let answer = format!("It is 5433 (turn {t}).");
        append_turn(&transcript, &prompt, &answer);
        let (code, out, _, _) = run_hook(
            "hook-stop",
            &[],
            &claude_stop(session, &answer, &transcript),
            &env,
        );
        assert_eq!((code, out.as_str()), (0, ""));
        contexts.push(ctx);
    }
    contexts
}

#[test]
fn five_turns_with_score_response_inject_context_and_never_need_the_sidecar() {
    let d = tests::start_daemon();
    let ids = seed(&d);
    let ctx = conversation(&d, "sess-scored", 5, true);
    assert!(
        !ctx[0].contains("<memd-score-required>"),
        "never on the first message"
    );
    assert!(
        ctx[0].contains("KNOWN CONTEXT") && ctx[0].contains(&format!("[id:{}]", ids[0])),
        "{}",
        ctx[0]
    );
    assert!(ctx[0].contains("may be outdated or wrong"));
    for (t, c) in ctx.iter().enumerate().skip(1) {
        assert!(
            c.contains("<memd-score-required>"),
            "turn {t} asks for a score"
        );
        assert!(
            c.contains(&format!("\"{}\": \"___\"", ids[0])),
            "turn {t} lists last turn's ids: {c}"
        );
        // already shown in full at turn 0: referenced by id only
        assert!(c.contains(&format!("[id:{}] shown earlier", ids[0])), "{c}");
        assert!(
            !c.contains("listens on port 5433"),
            "no repeated memory text"
        );
    }
    let s = stats(&d);
    let log = std::fs::read_to_string(d.data_dir().join("logs/hooks.log")).unwrap_or_default();
    let learned: usize = ["working", "history", "patterns"]
        .iter()
        .map(|c| s.collections.get(*c).map_or(0, |x| x.count))
        .sum();
    assert_eq!(
        learned, 5,
        "every exchange stored (some promoted after repeated worked scores); hook log:\n{log}"
    );
    assert_eq!(
        s.sidecar.calls_today, 0,
        "the agent scored every turn: no sidecar run"
    );
    assert!(
        s.recent_hooks
            .iter()
            .any(|h| h.endpoint == "/api/hooks/get-context")
    );
    // the memory bank entry was used 4 times (turns 1-4 scored turns 0-3)
    let m: SearchResponse = d.post("/api/search", &json!({"id": ids[0]}));
    assert_eq!(m.results[0].uses, 4);
}

#[test]
fn five_turns_without_score_response_ask_for_the_sidecar() {
    let d = tests::start_daemon();
    seed(&d);
    let ctx = conversation(&d, "sess-unscored", 3, false);
    assert!(ctx[1].contains("<memd-score-required>"));
    // The default chain is local-only and nothing listens on the local ports here: memd handed
    // out sidecar runs (the daily counter moved), no model could be tried, nothing was scored.
    let s = stats(&d);
    assert!(
        s.sidecar.calls_today >= 1,
        "stop answered needs_sidecar when the agent did not score"
    );
    assert!(
        s.sidecar
            .attempts
            .iter()
            .all(|a| a.target == "ollama" || a.target == "lmstudio"),
        "{:?}",
        s.sidecar.attempts
    );
    let log = std::fs::read_to_string(d.data_dir().join("logs/hooks.log")).unwrap_or_default();
    assert!(log.contains("sidecar_unscored"), "{log}");
    assert_eq!(
        s.collections["working"].count, 3,
        "exchanges stored even when every target fails"
    );
}

#[test]
fn an_interrupted_turn_is_not_scored() {
    let d = tests::start_daemon();
    let env = d.env();
    let t = d.data_dir().join("t.jsonl");
    let prompt = |p: &str| run_hook("hook-prompt", &[], &claude_prompt("sess-int", p, &t), &env);
    prompt("first question");
    run_hook(
        "hook-stop",
        &[],
        &claude_stop("sess-int", "first answer", &t),
        &env,
    );
    let (_, out, _, _) = prompt("second question, interrupted");
    assert!(context_of(&out).contains("<memd-score-required>"));
    // no stop: the user interrupted; the next prompt must not ask for a score
    let (_, out, _, _) = prompt("third question");
    assert!(!context_of(&out).contains("<memd-score-required>"));
}

#[test]
fn bad_stdin_fails_open() {
    let d = tests::start_daemon();
    let env = d.env();
    for stdin in [
        b"".to_vec(),
        b"{not json".to_vec(),
        b"[1,2,3]".to_vec(),
        vec![b'x'; 10 * 1024 * 1024],
    ] {
        for hook in ["hook-prompt", "hook-stop"] {
            let (code, out, _, _) = run_hook(hook, &[], &stdin, &env);
            assert_eq!(
                (code, out.as_str()),
                (0, ""),
                "{hook} with {} bytes",
                stdin.len()
            );
        }
    }
    assert!(
        d.data_dir().join("logs/hooks.log").exists(),
        "failures are logged"
    );
    let log = std::fs::read_to_string(d.data_dir().join("logs/hooks.log")).unwrap();
    assert!(!log.contains("xxxxxxxx"), "the log never holds input text");
}

#[test]
fn cursor_events_and_the_double_fire_guard() {
    let d = tests::start_daemon();
    let mut env = d.env();
    seed(&d);
    let base = json!({"conversation_id": "cur-1", "generation_id": "g1", "cursor_version": "1.7.2", "workspace_roots": ["/p"]});
    let event = |name: &str, extra: Value| {
        let mut v = base.clone();
        v["hook_event_name"] = json!(name);
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v.to_string().into_bytes()
    };
    env.push(("CURSOR_VERSION".into(), "1.7.2".into()));
    let (code, out, _, _) = run_hook(
        "hook-prompt",
        &["--cursor"],
        &event(
            "beforeSubmitPrompt",
            json!({"prompt": "what port does billing staging use?"}),
        ),
        &env,
    );
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"continue": true})
    );
    let (code, out, _, _) = run_hook(
        "hook-stop",
        &["--cursor"],
        &event("afterAgentResponse", json!({"text": "5433"})),
        &env,
    );
    assert_eq!((code, out.trim()), (0, "{}"));
    let r: SearchResponse = d.post(
        "/api/search",
        &json!({"days_back": 1, "collections": ["working"]}),
    );
    assert_eq!(r.count, 1);
    assert!(
        r.results[0]
            .content
            .contains("what port does billing staging use?"),
        "the prompt recorded at beforeSubmitPrompt is the user side"
    );
    let (_, out, _, _) = run_hook(
        "hook-prompt",
        &["--cursor"],
        &event(
            "sessionStart",
            json!({"session_id": "cur-2", "conversation_id": "cur-2"}),
        ),
        &env,
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["additional_context"]
            .as_str()
            .unwrap_or("")
            .contains("5433"),
        "{out}"
    );
    // The same binaries invoked from ~/.claude/settings.json while Cursor runs them: no-ops.
    let calls_before = stats(&d).recent_hooks.len();
    let (code, out, _, _) = run_hook(
        "hook-prompt",
        &[],
        &claude_prompt("cur-1", "again", Path::new("/nonexistent")),
        &env,
    );
    assert_eq!((code, out.as_str()), (0, ""));
    let (code, out, _, _) = run_hook(
        "hook-stop",
        &[],
        &claude_stop("cur-1", "again", Path::new("/nonexistent")),
        &env,
    );
    assert_eq!((code, out.as_str()), (0, ""));
    assert_eq!(
        stats(&d).recent_hooks.len(),
        calls_before,
        "no request reached memd"
    );
}

#[test]
fn hook_starts_the_daemon_when_it_is_not_running() {
    let dir = tempfile::tempdir().unwrap();
    let env = vec![
        (
            "MEMD_DATA_DIR".to_string(),
            dir.path().display().to_string(),
        ),
        (
            "MEMD_CONFIG_DIR".to_string(),
            dir.path().join("config").display().to_string(),
        ),
        ("MEMD_PORT".to_string(), "0".to_string()),
        (
            "MEMD_RUNTIME_DIR".to_string(),
            tests::runtime_dir().display().to_string(),
        ),
        ("HOME".to_string(), dir.path().display().to_string()),
    ];
    let (code, out, _, elapsed) = run_hook(
        "hook-prompt",
        &[],
        &claude_prompt("s", "hello", Path::new("/x")),
        &env,
    );
    assert_eq!((code, out.as_str()), (0, ""), "no context this turn");
    assert!(
        elapsed < std::time::Duration::from_secs(2),
        "did not wait for the daemon: {elapsed:?}"
    );
    // The detached daemon announces itself; stop it.
    let info = dir.path().join("daemon.json");
    let start = std::time::Instant::now();
    while !info.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "daemon never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&info).unwrap()).unwrap();
    let pid = v["pid"].as_i64().unwrap() as i32;
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    while info.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "daemon did not stop"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn cursor_rules_file_is_kept_current_when_enabled() {
    let d0 = tempfile::tempdir().unwrap();
    let cfg_dir = d0.path().join("config");
    std::fs::create_dir_all(&cfg_dir).unwrap();
    std::fs::write(cfg_dir.join("config.toml"), "[cursor]\nrules_file = true\n").unwrap();
    let mut d = tests::start_daemon();
    // restart with the config dir that enables the rules file
    d.terminate();
    d.spawn(&[("MEMD_CONFIG_DIR", cfg_dir.to_str().unwrap())]);
    seed(&d);
    let workspace = tempfile::tempdir().unwrap();
    let mut env = d.env();
    env.push(("CURSOR_VERSION".into(), "1.7.2".into()));
    let stdin = json!({"conversation_id": "c", "generation_id": "g", "cursor_version": "1.7.2", "hook_event_name": "beforeSubmitPrompt",
        "workspace_roots": [workspace.path()], "prompt": "which port does billing staging use?"});
    let (code, _, _, _) = run_hook(
        "hook-prompt",
        &["--cursor"],
        stdin.to_string().as_bytes(),
        &env,
    );
    assert_eq!(code, 0);
    let rules = workspace.path().join(".cursor/rules/memd-context.mdc");
    let start = std::time::Instant::now();
    while !rules.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "rules file never written"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let text = std::fs::read_to_string(&rules).unwrap();
    assert!(
        text.starts_with("---\ndescription:") && text.contains("alwaysApply: true"),
        "{text}"
    );
    assert!(text.contains("5433"), "{text}");
}
