//! The Windows builds (`x86_64-pc-windows-gnu`) under Wine. The hooks read each client's hook
//! JSON and, with memd down, answer in that client's JSON and log under the Windows
//! `%LOCALAPPDATA%\memd`; against a real Linux memd on loopback they inject KNOWN CONTEXT and
//! store the exchange. The Windows daemon keeps its store in `%LOCALAPPDATA%\memd`, embeds with
//! the real model through the Windows ONNX Runtime, feeds the Windows hook, reads a PDF in its
//! confined child, keeps every acknowledged memory through SIGKILL and TerminateProcess, and is
//! started by a hook that finds it down. `memd.exe init` writes each client's Windows files.
//!
//! Runs only with `MEMD_WINDOWS=1` (`install/test.sh` sets it on Linux x86_64 unless
//! `MEMD_WINDOWS=0`), after `install/fetch-windows.sh` and `install/build-windows.sh`; then
//! anything missing fails the test. Without the variable it prints that it was skipped.
//! Timings are printed (`--nocapture`), never asserted.

use proto::{MemoryBankResponse, StatsResponse};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tests::wine::{Wine, WineDaemon, enabled, free_port, z};
use tests::wine_clients::{
    WIN_CWD, claude_prompt, claude_stop, fail_open_cases, hook_commands, other_clients_files,
    powershell_program,
};

/// The hooks' failure log in the prefix's `%LOCALAPPDATA%\memd\logs` (any Wine user name).
fn local_appdata_log(prefix: &Path) -> Option<PathBuf> {
    let users = std::fs::read_dir(prefix.join("drive_c/users")).ok()?;
    users
        .flatten()
        .map(|u| u.path().join("AppData/Local/memd/logs/hooks.log"))
        .find(|p| p.is_file())
}

/// memd down (and a hook input that is not JSON at all): each client's hook exits 0 with the
/// answer that client reads as "go on, nothing added", and logs one line naming the hook.
fn fail_open_in_each_clients_json(wine: &Wine, log: &Path, env: &[(&str, String)]) {
    let cases = fail_open_cases();
    let lines = || {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .count()
    };
    for (exe, flag, input, want) in cases {
        let before = lines();
        let args = [
            tests::wine::Arg::P(wine.bin().join(exe)),
            tests::wine::Arg::S(flag),
        ];
        let (code, out, err) = wine.run(&args, &input, env);
        let what = format!("{exe} {flag} {}", String::from_utf8_lossy(&input));
        assert_eq!((code, out.trim_end()), (0, want), "{what}: stderr {err}");
        if !want.is_empty() {
            serde_json::from_str::<Value>(&out).unwrap_or_else(|e| panic!("{what}: {e}"));
        }
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let added: Vec<&str> = text.lines().skip(before).collect();
        let stem = exe.trim_end_matches(".exe");
        assert!(
            !added.is_empty() && added.iter().all(|l| l.contains(stem)),
            "{what}: log lines {added:?}"
        );
    }
}

#[test]
fn windows_hooks_under_wine_fail_open_then_inject_known_context() {
    if !enabled() {
        return;
    }
    let wine = Wine::new(&["hook-prompt.exe", "hook-stop.exe"]);

    // memd down: no data dir or config named, so the Windows defaults apply.
    let down = [("MEMD_PORT", free_port().to_string())];
    let t = r"C:\Users\dev\t.jsonl";
    let (code, out, err) = wine.exe(
        "hook-prompt.exe",
        &claude_prompt("w-down", "hi", t, WIN_CWD),
        &down,
    );
    assert_eq!((code, out.as_str()), (0, ""), "stderr: {err}");
    let (code, out, err) = wine.exe(
        "hook-stop.exe",
        &claude_stop("w-down", "ok", t, WIN_CWD),
        &down,
    );
    assert_eq!((code, out.as_str()), (0, ""), "stderr: {err}");
    let log = local_appdata_log(&wine.prefix())
        .expect("the failure is logged under %LOCALAPPDATA%\\memd\\logs");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("hook-prompt") && text.contains("hook-stop"),
        "{text}"
    );
    fail_open_in_each_clients_json(&wine, &log, &down);

    // A real Linux memd on loopback; the Windows hooks find it through its data dir.
    let d = tests::start_daemon();
    let fact = "The staging database for the billing service listens on port 5433, not 5432";
    let id = d
        .post::<_, MemoryBankResponse>("/api/memory-bank/add", &json!({"content": fact}))
        .doc_id;
    d.wait_embedded(Duration::from_secs(120));
    let up = [
        ("MEMD_DATA_DIR", z(&d.data_dir())),
        ("MEMD_CONFIG_DIR", z(&d.config_dir())),
    ];
    let transcript = d.data_dir().join("w-up.jsonl");
    // The daemon resolves the project directory on its own OS and refuses one that is not
    // absolute there: for this Linux daemon `C:\...` is not, so the client reports a Linux one
    // (the hook passes it through untouched).
    let cwd = d.root().display().to_string();
    std::fs::write(&transcript, "").unwrap();
    let t = z(&transcript);
    let prompt = "which port does the billing staging database use?";
    let (code, out, err) = wine.exe(
        "hook-prompt.exe",
        &claude_prompt("w-up", prompt, &t, &cwd),
        &up,
    );
    assert_eq!(code, 0, "stderr: {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| {
        let log = std::fs::read_to_string(d.data_dir().join("logs/hooks.log"));
        panic!(
            "not JSON {out:?}: {e}; stderr {err}; hooks.log: {log:?}; memd: {}",
            d.log_tail()
        )
    });
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        ctx.contains("KNOWN CONTEXT") && ctx.contains(&format!("[id:{id}]")),
        "{ctx}"
    );
    let turn = [
        json!({"type": "user", "message": {"role": "user", "content": prompt}, "uuid": "u", "isSidechain": false}),
        json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "5433."}]}, "uuid": "a"}),
    ];
    let lines: Vec<String> = turn.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&transcript, lines.concat()).unwrap();
    let (code, out, err) = wine.exe(
        "hook-stop.exe",
        &claude_stop("w-up", "5433.", &t, &cwd),
        &up,
    );
    assert_eq!((code, out.as_str()), (0, ""), "stderr: {err}");
    let s: StatsResponse = d.get("/api/stats");
    assert_eq!(
        s.collections["working"].count, 1,
        "the Windows stop hook stored the exchange"
    );
}

/// Runs `hook-prompt.exe` for `prompt` in the Windows project `cwd`; its context and how long
/// the whole Wine process took.
fn prompt_context(wine: &Wine, session: &str, prompt: &str, cwd: &str) -> (String, Duration) {
    let transcript = wine.root().join(format!("{session}.jsonl"));
    std::fs::write(&transcript, "").unwrap();
    let started = Instant::now();
    let (code, out, err) = wine.exe(
        "hook-prompt.exe",
        &claude_prompt(session, prompt, &z(&transcript), cwd),
        &[],
    );
    let took = started.elapsed();
    assert_eq!(code, 0, "stderr: {err}");
    let v: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("hook-prompt.exe answered {out:?} ({e}); stderr {err}"));
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    let ctx = v["hookSpecificOutput"]["additionalContext"].as_str();
    (ctx.unwrap_or_default().to_string(), took)
}

/// Facts stored just before the first kill, and before the second: distinct enough that none
/// is a near duplicate of another (which memd would merge).
const BURST_A: [&str; 4] = [
    "Our Postgres replicas are rebuilt every Sunday at 03:00 UTC from the base backup",
    "The mobile team wants snake_case field names in the public JSON API",
    "Jenkins agent win-07 has a 2 TB scratch disk mounted as drive D:",
    "The marketing site deploys when a tag starting with web- is pushed",
];
const BURST_B: [&str; 4] = [
    "Feature flags older than 90 days are deleted in the quarterly cleanup sprint",
    "The iOS app's crash reports go to the #mobile-alerts Slack channel",
    "Invoices are generated by a cron job on the billing host at 01:30 local time",
    "Never run the data migration scripts against production without a snapshot",
];

/// Stores `facts` one after another; each (id, content) once memd acknowledged it.
fn acknowledged_burst(d: &WineDaemon, facts: &[&str]) -> Vec<(String, String)> {
    let add = |fact: &&str| {
        let r: MemoryBankResponse = d.post("/api/memory-bank/add", &json!({"content": fact}));
        assert!(r.success && !r.duplicate, "{fact}: {r:?}");
        (r.doc_id, fact.to_string())
    };
    facts.iter().map(add).collect()
}

#[test]
fn windows_memd_under_wine_stores_answers_the_hook_and_survives_a_kill() {
    if !enabled() {
        return;
    }
    let wine = Wine::new(&["memd.exe", "hook-prompt.exe", "hook-stop.exe"]);
    let runtime = wine.windows_runtime();
    // No data or config dir named: the Windows defaults (%LOCALAPPDATA%\memd, %APPDATA%\memd).
    let env = [
        ("MEMD_PORT", free_port().to_string()),
        ("MEMD_RUNTIME_DIR", z(&runtime)),
    ];
    let mut d = WineDaemon::start(&wine, &env);
    println!(
        "memd.exe under Wine: /api/health answered {:?} after spawn",
        d.healthy_after
    );
    assert!(
        d.data_dir().starts_with(wine.prefix()) && d.data_dir().join("store").is_dir(),
        "the store is in the prefix's %LOCALAPPDATA%\\memd: {}",
        d.data_dir().display()
    );

    // The real model through the Windows ONNX Runtime.
    let model_at = Instant::now();
    loop {
        let h: proto::HealthResponse = d.get("/api/health");
        if h.model_loaded {
            break;
        }
        let state = h.model_error.unwrap_or_default();
        assert!(
            state.contains("loading"),
            "model: {state}; {}",
            d.log_tail()
        );
        assert!(
            model_at.elapsed() < Duration::from_secs(300),
            "model still {state}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "memd.exe under Wine: model loaded {:?} after health",
        model_at.elapsed()
    );
    let fact = "The staging database for the billing service listens on port 5433, not 5432";
    let id = d
        .post::<_, MemoryBankResponse>("/api/memory-bank/add", &json!({"content": fact}))
        .doc_id;
    d.wait_embedded(Duration::from_secs(300));
    let found: proto::SearchResponse = d.post(
        "/api/search",
        &json!({"query": "which port does billing staging use", "limit": 3}),
    );
    assert_eq!(
        found.results.first().map(|m| m.id.as_str()),
        Some(id.as_str())
    );

    // The Windows hook against the Windows daemon, both finding it through %LOCALAPPDATA%.
    let profile = wine.profile().unwrap();
    std::fs::create_dir_all(profile.join("shop")).unwrap();
    let user = profile.file_name().unwrap().to_string_lossy().into_owned();
    let cwd = format!(r"C:\users\{user}\shop");
    let prompt = "which port does the billing staging database use?";
    let (ctx, first) = prompt_context(&wine, "w-d1", prompt, &cwd);
    assert!(
        ctx.contains("KNOWN CONTEXT") && ctx.contains(&format!("[id:{id}]")),
        "{ctx}; memd: {}",
        d.log_tail()
    );
    let (_, second) = prompt_context(&wine, "w-d2", prompt, &cwd);
    println!("hook-prompt.exe under Wine, whole process: {first:?} (first), {second:?} (second)");

    // A PDF read by the confined reader (a Job Object child of memd.exe ingest).
    let pdf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../memd/engine/tests/fixtures/sample.pdf");
    let (code, out, err) = wine.run(
        &[
            tests::wine::Arg::P(wine.bin().join("memd.exe")),
            tests::wine::Arg::S("ingest"),
            tests::wine::Arg::P(PathBuf::from(z(&pdf.canonicalize().unwrap()))),
            tests::wine::Arg::S("--json"),
        ],
        b"",
        &env,
    );
    assert_eq!(code, 0, "memd.exe ingest: {out} {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    assert!(v["chunks"].as_u64().unwrap_or(0) >= 1, "{v}");

    // Killed outright twice, right after a burst of acknowledged writes (not yet embedded):
    // first SIGKILL to the process Wine runs it as, then TerminateProcess (`taskkill /F`).
    // Each restart has every acknowledged write, the first fact and the book.
    let mut acked = vec![(id.clone(), fact.to_string())];
    for (how, facts) in [("SIGKILL", &BURST_A), ("TerminateProcess", &BURST_B)] {
        acked.extend(acknowledged_burst(&d, facts));
        if how == "SIGKILL" {
            d.kill9();
        } else {
            d.terminate(&wine);
        }
        d.spawn(&wine);
        println!(
            "memd.exe under Wine: restart after {how} answered in {:?}",
            d.healthy_after
        );
        for (id, content) in &acked {
            let again: proto::SearchResponse = d.post("/api/search", &json!({"id": id}));
            assert_eq!(
                again.results.first().map(|m| m.content.as_str()),
                Some(content.as_str()),
                "acknowledged {id} lost to {how}"
            );
        }
        let s: StatsResponse = d.get("/api/stats");
        assert!(s.collections["books"].count >= 1, "the PDF lost to {how}");
    }
    // The burst's embeddings, never computed before the kills, are computed after them, and
    // the real model finds a burst fact by meaning.
    d.wait_embedded(Duration::from_secs(300));
    let found: proto::SearchResponse = d.post(
        "/api/search",
        &json!({"query": "which drive letter is the scratch disk on the win-07 build agent", "limit": 3}),
    );
    let want = acked.iter().find(|(_, c)| c.contains("win-07")).unwrap();
    assert_eq!(
        found.results.first().map(|m| m.id.as_str()),
        Some(want.0.as_str()),
        "{:?}",
        found.results.iter().map(|m| &m.content).collect::<Vec<_>>()
    );

    // memd down: the hook fails open and starts `memd.exe serve` from beside itself, detached,
    // with stderr on logs\daemon.log, which then holds each of its lines once.
    d.kill9();
    let log = d.data_dir().join("logs/daemon.log");
    let count = |needle: &str| {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.matches(needle).count()
    };
    let (listening, capped) = ("listening on 127.0.0.1", "HTTP: at most");
    let before = (count(listening), count(capped));
    let transcript = wine.root().join("w-start.jsonl");
    std::fs::write(&transcript, "").unwrap();
    let (code, _, err) = wine.exe(
        "hook-prompt.exe",
        &claude_prompt("w-start", prompt, &z(&transcript), &cwd),
        &env,
    );
    assert_eq!(code, 0, "stderr: {err}");
    // The daemon logs the connection cap after the listening line, so by then a doubled
    // listening line would be in the file.
    let started = Instant::now();
    while count(capped) == before.1 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the hook started no memd.exe"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        count(listening),
        before.0 + 1,
        "the hook-started memd.exe logs each line once"
    );
    // Wine's drop ends the prefix's wineserver, and with it this daemon.
}

#[test]
fn windows_init_doctor_mcp_and_uninstall_under_wine() {
    if !enabled() {
        return;
    }
    let wine = Wine::new(&["memd.exe", "hook-prompt.exe", "hook-stop.exe"]);
    let runtime = wine.windows_runtime();
    let env = [
        ("MEMD_PORT", free_port().to_string()),
        ("MEMD_RUNTIME_DIR", z(&runtime)),
    ];
    let (code, out, err) = wine.memd(
        &[
            "init",
            "--claude-code",
            "--cursor",
            "--codex",
            "--gemini",
            "--opencode",
            "--yes",
        ],
        b"",
        &env,
    );
    assert_eq!(code, 0, "memd.exe init: {out} {err}");
    let profile = wine.profile().expect("a user profile");

    // Claude Code runs hooks through Git Bash: forward slashes, single quotes (the directory's
    // name has a space), `.exe`. Cursor through PowerShell: the call operator.
    let bin = z(&wine.bin());
    let claude_line = format!("'{}/hook-prompt.exe'", bin.replace('\\', "/"));
    let cursor_line = format!("& '{bin}\\hook-prompt.exe' --cursor");
    let settings = profile.join(".claude/settings.json");
    let doc: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    assert_eq!(
        hook_commands(&doc, "UserPromptSubmit"),
        vec![claude_line.clone()]
    );
    let cursor: Value =
        serde_json::from_slice(&std::fs::read(profile.join(".cursor/hooks.json")).unwrap())
            .unwrap();
    assert_eq!(
        hook_commands(&cursor, "beforeSubmitPrompt"),
        vec![cursor_line]
    );
    let mcp: Value =
        serde_json::from_slice(&std::fs::read(profile.join(".claude.json")).unwrap()).unwrap();
    assert_eq!(
        mcp["mcpServers"]["memd"]["command"].as_str(),
        Some(format!("{bin}\\memd.exe").as_str()),
        "{mcp}"
    );

    let others = other_clients_files(&wine, &profile);

    // The daemon up, one memory in it; the hook the settings name injects it.
    let d = WineDaemon::start(&wine, &env);
    let fact = "The Windows build server signs installers with the key in vault path ci/sign";
    let id = d
        .post::<_, MemoryBankResponse>("/api/memory-bank/add", &json!({"content": fact}))
        .doc_id;
    d.wait_embedded(Duration::from_secs(300));
    let program = claude_line.trim_matches('\'');
    std::fs::create_dir_all(profile.join("shop")).unwrap();
    let user = profile.file_name().unwrap().to_string_lossy().into_owned();
    let cwd = format!(r"C:\users\{user}\shop");
    let transcript = wine.root().join("w-init.jsonl");
    std::fs::write(&transcript, "").unwrap();
    let prompt = "which key signs the Windows installers?";
    let (code, out, err) = wine.run(
        &[tests::wine::Arg::P(PathBuf::from(program))],
        &claude_prompt("w-init", prompt, &z(&transcript), &cwd),
        &[],
    );
    assert_eq!(code, 0, "{program}: {err}");
    assert!(out.contains(&format!("[id:{id}]")), "{out} {err}");
    // So do the programs Codex's and Gemini's lines name, with the flag the line passes.
    for (line, event) in [
        (&others.codex_line, "UserPromptSubmit"),
        (&others.gemini_line, "BeforeAgent"),
    ] {
        let (program, flag) = powershell_program(line);
        let mut input: Value =
            serde_json::from_slice(&claude_prompt("w-other", prompt, &z(&transcript), &cwd))
                .unwrap();
        input["hook_event_name"] = json!(event);
        let args = [
            tests::wine::Arg::P(PathBuf::from(&program)),
            tests::wine::Arg::T(flag),
        ];
        let (code, out, err) = wine.run(&args, input.to_string().as_bytes(), &[]);
        assert_eq!(code, 0, "{line}: {err}");
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{line}: {e}: {out}"));
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], event, "{line}");
        let ctx = v["hookSpecificOutput"]["additionalContext"].as_str();
        assert!(
            ctx.unwrap_or("").contains(&format!("[id:{id}]")),
            "{line}: {out}"
        );
    }

    // doctor reads the Windows config files back. The token's owner-only DACL was set without
    // error (init would have failed), but Wine 8.0 does not keep a file's DACL (it stores no
    // security descriptor and leaves the mode bits), so doctor's read-back is printed only.
    let (_, out, err) = wine.memd(&["doctor", "--json"], b"", &env);
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    let status = |name: &str| {
        let checks = report["checks"].as_array().unwrap();
        let c = checks.iter().find(|c| c["check"] == name);
        c.map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["detail"].to_string(),
            )
        })
    };
    println!("memd.exe doctor under Wine, token: {:?}", status("token"));
    for name in [
        "claude hooks",
        "cursor hooks",
        "claude mcp",
        "codex hooks",
        "codex mcp",
        "gemini hooks",
        "gemini mcp",
        "opencode mcp",
        "opencode plugin",
    ] {
        let (level, detail) = status(name).unwrap_or_else(|| panic!("no {name} check: {report}"));
        assert_eq!(level, "ok", "{name}: {detail}");
    }

    // No Task Scheduler entry (Wine's schtasks could not test one): `memd service` says that
    // the hooks start memd.
    let (code, out, err) = wine.memd(&["service", "install"], b"", &env);
    assert!(
        code != 0 && err.contains("hook-prompt starts `memd serve`"),
        "memd.exe service install: {code} {out} {err}"
    );

    // `memd.exe mcp` over stdio: initialize, then tools/list, relayed to the daemon.
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "wine-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ];
    let stdin: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let (code, out, err) = wine.memd(&["mcp"], stdin.as_bytes(), &env);
    assert_eq!(code, 0, "memd.exe mcp: {err}");
    let answers: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let by_id = |id: i64| answers.iter().find(|a| a["id"] == id).cloned();
    let init = by_id(1).unwrap_or_else(|| panic!("no initialize answer: {out} {err}"));
    assert!(init["result"]["serverInfo"]["name"].is_string(), "{init}");
    let tools = by_id(2).unwrap_or_else(|| panic!("no tools/list answer: {out} {err}"));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(names.contains(&"search_memory"), "{tools}");

    // uninstall takes memd's entries out again.
    let (code, out, err) = wine.memd(&["uninstall", "--yes"], b"", &env);
    assert_eq!(code, 0, "memd.exe uninstall: {out} {err}");
    let left = std::fs::read_to_string(&settings).unwrap_or_default();
    assert!(
        !left.contains("hook-prompt") && !left.contains("hook-stop"),
        "{left}"
    );
    let left = std::fs::read_to_string(profile.join(".cursor/hooks.json")).unwrap_or_default();
    assert!(!left.contains("hook-prompt"), "{left}");
    for path in [
        &others.codex_hooks,
        &others.gemini_settings,
        &others.opencode_json,
    ] {
        let left = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            !left.contains("hook-prompt") && !left.contains("memd.exe"),
            "{}: {left}",
            path.display()
        );
    }
    let left = std::fs::read_to_string(&others.codex_config).unwrap_or_default();
    assert!(!left.contains("memd"), "config.toml: {left}");
    assert!(
        !others.opencode_plugin.exists(),
        "the OpenCode plugin is gone"
    );
}
