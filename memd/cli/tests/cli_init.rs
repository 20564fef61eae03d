//! `memd init` / `memd uninstall` against realistic client configs, run as the real binary in
//! an isolated home: user entries survive, memd's are added once, dry runs write nothing,
//! malformed files stop everything, uninstall gives the user's documents back.

mod cli_support;

use cli_support::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cli");

struct Files {
    settings: PathBuf,
    claude_json: PathBuf,
    cursor_hooks: PathBuf,
    cursor_mcp: PathBuf,
}

fn files(user: &User) -> Files {
    let home = user.home();
    Files {
        settings: home.join(".claude/settings.json"),
        claude_json: home.join(".claude.json"),
        cursor_hooks: home.join(".cursor/hooks.json"),
        cursor_mcp: home.join(".cursor/mcp.json"),
    }
}

/// A user with both clients installed and every config file present.
fn user_with_configs() -> (User, Files) {
    let user = User::new();
    let f = files(&user);
    std::fs::create_dir_all(f.settings.parent().unwrap()).unwrap();
    std::fs::create_dir_all(f.cursor_hooks.parent().unwrap()).unwrap();
    for (name, path) in [
        ("settings.json", &f.settings),
        ("claude.json", &f.claude_json),
        ("cursor-hooks.json", &f.cursor_hooks),
        ("cursor-mcp.json", &f.cursor_mcp),
    ] {
        std::fs::copy(Path::new(FIXTURES).join(name), path).unwrap();
    }
    set_mode(&f.claude_json, 0o600);
    (user, f)
}

fn fixture(name: &str) -> Value {
    read_json(&Path::new(FIXTURES).join(name))
}

fn all_bytes(f: &Files) -> Vec<Option<Vec<u8>>> {
    [&f.settings, &f.claude_json, &f.cursor_hooks, &f.cursor_mcp]
        .iter()
        .map(|p| std::fs::read(p).ok())
        .collect()
}

fn init(user: &User, bin: &Path, extra: &[&str]) -> String {
    let bin = bin.to_string_lossy().to_string();
    let mut args = vec!["init", "--yes", "--bin-dir", bin.as_str()];
    args.extend_from_slice(extra);
    user.ok(&args)
}

/// This memd by its real path: what a stdio entry must start.
fn memd_path() -> String {
    std::fs::canonicalize(MEMD).unwrap().display().to_string()
}

/// The `[ok]`/`[FAIL]` line doctor prints for `check`.
fn doctor_line(report: &str, check: &str) -> String {
    report
        .lines()
        .find(|l| l.get(7..).is_some_and(|rest| rest.starts_with(check)))
        .unwrap_or_else(|| panic!("no {check} line in:\n{report}"))
        .to_string()
}

fn doctor_report(user: &User) -> String {
    text(&user.memd(&["doctor"]).stdout)
}

fn commands(groups: &Value) -> Vec<String> {
    groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
        .filter_map(|h| h["command"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn init_merges_into_existing_configs_and_keeps_every_user_entry() {
    let (user, f) = user_with_configs();
    let bin = user.fake_bin_dir();
    let out = init(&user, &bin, &["--claude-code", "--cursor"]);
    let token = user.token();
    assert_eq!(
        token.len(),
        64,
        "init creates the token before the first start"
    );
    assert_eq!(mode(&user.data_dir().join("token")), 0o600);
    assert!(!out.contains(&token), "the token is never printed");

    // Claude settings: user hooks first and unchanged, ours appended with absolute paths.
    let s = read_json(&f.settings);
    let orig = fixture("settings.json");
    for key in [
        "$schema",
        "model",
        "env",
        "statusLine",
        "includeCoAuthoredBy",
        "cleanupPeriodDays",
    ] {
        assert_eq!(s[key], orig[key], "{key}");
    }
    // The user's PostToolUse group first and unchanged; memd's evidence hook after it.
    let post = s["hooks"]["PostToolUse"].as_array().unwrap();
    assert_eq!(post[0], orig["hooks"]["PostToolUse"][0]);
    assert_eq!(post.len(), 2, "{post:?}");
    assert_eq!(post[1]["matcher"], "Bash|Edit|Write|MultiEdit|NotebookEdit");
    let ups = s["hooks"]["UserPromptSubmit"].as_array().unwrap();
    assert_eq!(ups[0], orig["hooks"]["UserPromptSubmit"][0]);
    let prompt = bin.join("hook-prompt").display().to_string();
    let stop = bin.join("hook-stop").display().to_string();
    assert_eq!(
        ups[1],
        json!({"hooks": [{"type": "command", "command": prompt, "timeout": 10}]})
    );
    assert_eq!(
        commands(&s["hooks"]["Stop"]),
        vec!["notify-send 'Claude is done'".to_string(), stop.clone()]
    );
    assert_eq!(s["hooks"]["Stop"][1]["hooks"][0]["timeout"], 30);
    let allow: Vec<&str> = s["permissions"]["allow"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(&allow[..2], ["Bash(git status:*)", "Bash(cargo test:*)"]);
    assert!(
        allow.contains(&"mcp__memd__search_memory")
            && allow.contains(&"mcp__memd__record_response")
    );
    // The user's two, memd's eight, and memd-score's scoring tool.
    assert_eq!(allow.len(), 2 + 8 + 1);
    assert_eq!(s["permissions"]["deny"], orig["permissions"]["deny"]);
    assert_eq!(s["permissions"]["defaultMode"], "acceptEdits");
    // Key order of the user's file is kept.
    let text = std::fs::read_to_string(&f.settings).unwrap();
    assert!(text.find("\"$schema\"").unwrap() < text.find("\"model\"").unwrap());
    assert!(text.find("\"hooks\"").unwrap() < text.find("\"statusLine\"").unwrap());
    assert!(
        text.contains("\n    \"model\""),
        "the file's 4-space indentation is kept"
    );

    // ~/.claude.json: other servers, projects and counters untouched; mode kept.
    let c = read_json(&f.claude_json);
    let corig = fixture("claude.json");
    for key in [
        "numStartups",
        "projects",
        "tipsHistory",
        "userID",
        "hasCompletedOnboarding",
    ] {
        assert_eq!(c[key], corig[key], "{key}");
    }
    assert_eq!(c["mcpServers"]["github"], corig["mcpServers"]["github"]);
    assert_eq!(c["mcpServers"]["sentry"], corig["mcpServers"]["sentry"]);
    assert_eq!(
        c["mcpServers"]["memd"],
        json!({"type": "stdio", "command": memd_path(), "args": ["mcp"]})
    );
    assert_eq!(mode(&f.claude_json), 0o600, "the file's own mode is kept");

    // Cursor.
    let h = read_json(&f.cursor_hooks);
    let horig = fixture("cursor-hooks.json");
    assert_eq!(h["version"], 1);
    // The user's tool hooks first and unchanged; memd's guard and evidence hooks after them.
    for (event, ours) in [
        ("beforeShellExecution", "hook-prompt"),
        ("afterFileEdit", "hook-stop"),
    ] {
        let list = h["hooks"][event].as_array().unwrap();
        assert_eq!(list[0], horig["hooks"][event][0], "{event}");
        assert_eq!(list.len(), 2, "{event}: {list:?}");
        let command = list[1]["command"].as_str().unwrap();
        assert!(command.ends_with(&format!("{ours} --cursor")), "{command}");
    }
    assert_eq!(h["hooks"]["stop"][0], horig["hooks"]["stop"][0]);
    assert_eq!(h["hooks"]["stop"][1]["command"], format!("{stop} --cursor"));
    for event in ["sessionStart", "beforeSubmitPrompt"] {
        assert_eq!(
            h["hooks"][event][0]["command"],
            format!("{prompt} --cursor"),
            "{event}"
        );
    }
    assert_eq!(
        h["hooks"]["afterAgentResponse"][0]["command"],
        format!("{stop} --cursor")
    );
    let m = read_json(&f.cursor_mcp);
    let morig = fixture("cursor-mcp.json");
    assert_eq!(m["mcpServers"]["postgres"], morig["mcpServers"]["postgres"]);
    assert_eq!(m["mcpServers"]["linear"], morig["mcpServers"]["linear"]);
    assert_eq!(
        m["mcpServers"]["memd"],
        json!({"command": memd_path(), "args": ["mcp"]})
    );
    for p in [&f.claude_json, &f.cursor_mcp] {
        let written = std::fs::read_to_string(p).unwrap();
        assert!(!written.contains(&token), "{} holds no token", p.display());
    }

    // One backup per changed file, holding the original bytes.
    for (path, name) in [
        (&f.settings, "settings.json"),
        (&f.claude_json, "claude.json"),
        (&f.cursor_hooks, "cursor-hooks.json"),
    ] {
        let b = backups(path.parent().unwrap());
        let mine: Vec<_> = b
            .iter()
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&*path.file_name().unwrap().to_string_lossy())
            })
            .collect();
        assert_eq!(mine.len(), 1, "{b:?}");
        assert_eq!(
            std::fs::read(mine[0]).unwrap(),
            std::fs::read(Path::new(FIXTURES).join(name)).unwrap()
        );
    }
    assert_eq!(
        mode(
            &backups(&user.home())
                .into_iter()
                .find(|p| p.to_string_lossy().contains(".claude.json"))
                .unwrap()
        ),
        0o600
    );
}

#[test]
fn config_files_holding_the_token_become_private_and_doctor_flags_open_ones() {
    let (user, f) = user_with_configs();
    set_mode(&f.claude_json, 0o644);
    set_mode(&f.cursor_mcp, 0o644);
    let bin = user.fake_bin_dir();
    let http = ["--claude-code", "--cursor", "--mcp", "http"];
    let out = init(&user, &bin, &http);
    for p in [&f.claude_json, &f.cursor_mcp] {
        assert_eq!(mode(p), 0o600, "{} holds the token", p.display());
        assert!(
            out.contains(&format!("chmod     {} 644 -> 600", p.display())),
            "{out}"
        );
    }
    assert_eq!(
        mode(&f.settings),
        0o644,
        "a file without the token keeps its mode"
    );
    // A backup may hold an earlier token: private too.
    for b in backups(&user.home())
        .into_iter()
        .chain(backups(f.cursor_mcp.parent().unwrap()))
        .filter(|b| {
            b.to_string_lossy().contains("mcp.json") || b.to_string_lossy().contains(".claude.json")
        })
    {
        assert_eq!(mode(&b), 0o600, "{}", b.display());
    }

    // Opened again after memd wrote it: a re-run with nothing else to change narrows it.
    set_mode(&f.cursor_mcp, 0o644);
    let out = init(&user, &bin, &http);
    assert_eq!(mode(&f.cursor_mcp), 0o600);
    assert!(out.contains("644 -> 600"), "{out}");

    // Doctor names each file that is too open, its mode and the command that fixes it.
    set_mode(&f.cursor_mcp, 0o640);
    set_mode(&user.data_dir(), 0o750);
    set_mode(&user.data_dir().join("token"), 0o644);
    let run = user.memd(&["doctor"]);
    let report = text(&run.stdout);
    assert!(!run.status.success(), "{report}");
    for (check, path, open, fix) in [
        ("cursor mcp", f.cursor_mcp.clone(), "640", "chmod 600"),
        ("data dir", user.data_dir(), "750", "chmod 700"),
        ("token", user.data_dir().join("token"), "644", "chmod 600"),
    ] {
        let shown = path.display().to_string();
        assert!(
            report
                .lines()
                .any(|l| l.starts_with(&format!("[FAIL] {check}"))
                    && l.contains(&shown)
                    && l.contains(&format!("mode {open}"))),
            "{check}: {report}"
        );
        assert!(
            report.contains(&format!("fix: {fix} {shown}")),
            "{check}: {report}"
        );
    }
    assert!(
        !report.lines().any(|l| l.starts_with("[FAIL] claude mcp")),
        "~/.claude.json is private: {report}"
    );
}

#[test]
fn default_init_registers_the_stdio_bridge_and_no_token_anywhere() {
    let (user, f) = user_with_configs();
    set_mode(&f.claude_json, 0o644);
    let bin = user.fake_bin_dir();
    let out = init(&user, &bin, &["--claude-code", "--cursor"]);
    let token = user.token();
    assert_eq!(token.len(), 64);
    assert!(!out.contains("chmod"), "nothing to narrow: {out}");
    for p in [&f.claude_json, &f.cursor_mcp] {
        assert_eq!(mode(p), 0o644, "{} holds no token: mode kept", p.display());
        let entry = &read_json(p)["mcpServers"]["memd"];
        assert_eq!(entry["command"], memd_path(), "{}", p.display());
        assert_eq!(entry["args"], json!(["mcp"]));
        assert!(entry.get("env").is_none() && entry.get("headers").is_none());
    }
    assert_eq!(
        read_json(&f.claude_json)["mcpServers"]["memd"]["type"],
        "stdio"
    );
    for p in [&f.settings, &f.claude_json, &f.cursor_hooks, &f.cursor_mcp] {
        let written = std::fs::read_to_string(p).unwrap();
        assert!(!written.contains(&token), "{} holds the token", p.display());
    }
    let report = doctor_report(&user);
    for check in ["claude mcp", "cursor mcp"] {
        let line = doctor_line(&report, check);
        assert!(line.starts_with("[ok]") && line.contains("stdio"), "{line}");
    }

    // Doctor notices a bridge command that cannot run, and arguments that are not `mcp`.
    let mut doc = read_json(&f.cursor_mcp);
    doc["mcpServers"]["memd"]["command"] = json!(user.root.path().join("gone/memd"));
    std::fs::write(&f.cursor_mcp, doc.to_string()).unwrap();
    let mut doc = read_json(&f.claude_json);
    doc["mcpServers"]["memd"]["args"] = json!(["serve"]);
    std::fs::write(&f.claude_json, doc.to_string()).unwrap();
    let report = doctor_report(&user);
    let line = doctor_line(&report, "cursor mcp");
    assert!(
        line.starts_with("[FAIL]") && line.contains("missing or not executable"),
        "{line}"
    );
    let line = doctor_line(&report, "claude mcp");
    assert!(
        line.starts_with("[FAIL]") && line.contains("[\"mcp\"]"),
        "{line}"
    );
}

/// Starts the MCP server a client config entry names, as the client does (its command and args,
/// the user's environment, stdio), and returns the tool names `tools/list` answers.
fn tools_via_entry(user: &User, entry: &Value) -> Vec<String> {
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let mut cmd = Command::new(entry["command"].as_str().unwrap());
    cmd.args(&args)
        .current_dir(user.home())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    user.apply(&mut cmd);
    let mut child = cmd.spawn().expect("start the configured MCP command");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    // Answers arrive on a thread, so a silent bridge fails the test instead of hanging it.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Owns stdin: dropping it closes the bridge's input, which ends the bridge.
    let mut answer = move |msg: Value| -> Value {
        writeln!(stdin, "{msg}").unwrap();
        if msg.get("id").is_none() {
            return Value::Null; // a notification gets no answer
        }
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("an answer from the bridge");
        serde_json::from_str(&line).unwrap()
    };
    let init = answer(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "cli-init-test", "version": "1"}}}));
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    answer(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = answer(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}));
    drop(answer);
    assert!(
        child.wait().unwrap().success(),
        "the bridge exits when stdin closes"
    );
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn the_written_stdio_command_serves_memds_tools() {
    let user = User::new();
    let bin = user.fake_bin_dir();
    init(&user, &bin, &["--claude-code", "--cursor"]);
    let _daemon = Daemon::start(&user);
    let f = files(&user);
    for p in [&f.claude_json, &f.cursor_mcp] {
        let entry = read_json(p)["mcpServers"]["memd"].clone();
        let tools = tools_via_entry(&user, &entry);
        assert!(
            tools.iter().any(|t| t == "search_memory"),
            "{}: {tools:?}",
            p.display()
        );
    }
}

#[test]
fn mcp_http_on_request_and_rerunning_init_switches_the_kind() {
    let (user, f) = user_with_configs();
    let bin = user.fake_bin_dir();
    let both = ["--claude-code", "--cursor"];
    let http = ["--claude-code", "--cursor", "--mcp", "http"];
    init(&user, &bin, &http);
    let token = user.token();
    let bearer = format!("Bearer {token}");
    assert_eq!(
        read_json(&f.claude_json)["mcpServers"]["memd"],
        json!({"type": "http", "url": "http://127.0.0.1:47111/mcp", "headers": {"Authorization": bearer}})
    );
    assert_eq!(
        read_json(&f.cursor_mcp)["mcpServers"]["memd"],
        json!({"url": "http://127.0.0.1:47111/mcp", "headers": {"Authorization": bearer}})
    );
    for p in [&f.claude_json, &f.cursor_mcp] {
        assert_eq!(mode(p), 0o600, "{} holds the token", p.display());
    }
    let report = doctor_report(&user);
    for check in ["claude mcp", "cursor mcp"] {
        let line = doctor_line(&report, check);
        assert!(line.starts_with("[ok]") && line.contains("http"), "{line}");
    }

    // Back to stdio: the token leaves both files; a backup that holds it stays private even
    // when the file was opened meanwhile, and the file itself is not narrowed for it.
    set_mode(&f.cursor_mcp, 0o644);
    let before_backups = backups(f.cursor_mcp.parent().unwrap());
    init(&user, &bin, &both);
    for p in [&f.claude_json, &f.cursor_mcp] {
        let written = std::fs::read_to_string(p).unwrap();
        assert!(!written.contains(&token), "{}", p.display());
        assert_eq!(read_json(p)["mcpServers"]["memd"]["args"], json!(["mcp"]));
    }
    assert_eq!(mode(&f.cursor_mcp), 0o644);
    let new_backup: Vec<_> = backups(f.cursor_mcp.parent().unwrap())
        .into_iter()
        .filter(|b| !before_backups.contains(b) && b.to_string_lossy().contains("mcp.json"))
        .collect();
    assert_eq!(new_backup.len(), 1, "{new_backup:?}");
    assert!(
        std::fs::read_to_string(&new_backup[0])
            .unwrap()
            .contains(&token)
    );
    assert_eq!(mode(&new_backup[0]), 0o600);
    let report = doctor_report(&user);
    assert!(
        doctor_line(&report, "cursor mcp").starts_with("[ok]"),
        "{report}"
    );

    // And to http again; uninstall then removes that kind too.
    init(&user, &bin, &http);
    assert_eq!(
        read_json(&f.cursor_mcp)["mcpServers"]["memd"]["headers"]["Authorization"],
        bearer
    );
    assert_eq!(mode(&f.cursor_mcp), 0o600);
    user.ok(&["uninstall"]);
    assert_eq!(read_json(&f.claude_json), fixture("claude.json"));
    assert_eq!(read_json(&f.cursor_mcp), fixture("cursor-mcp.json"));
}

#[test]
fn second_run_changes_nothing_and_says_so() {
    let (user, f) = user_with_configs();
    let bin = user.fake_bin_dir();
    init(&user, &bin, &["--claude-code", "--cursor"]);
    let before = all_bytes(&f);
    let backups_before = (
        backups(&user.home().join(".claude")).len(),
        backups(&user.home()).len(),
    );
    let out = init(&user, &bin, &["--claude-code", "--cursor"]);
    assert!(out.contains("Nothing to change"), "{out}");
    assert_eq!(all_bytes(&f), before);
    assert_eq!(
        (
            backups(&user.home().join(".claude")).len(),
            backups(&user.home()).len()
        ),
        backups_before
    );
}

#[test]
fn dry_run_prints_a_diff_and_writes_nothing() {
    let (user, f) = user_with_configs();
    // An existing token must not appear in the diff.
    std::fs::create_dir_all(user.data_dir()).unwrap();
    set_mode(&user.data_dir(), 0o700);
    let token = "ab".repeat(32);
    std::fs::write(user.data_dir().join("token"), &token).unwrap();
    set_mode(&user.data_dir().join("token"), 0o600);
    let bin = user.fake_bin_dir();
    let before = all_bytes(&f);
    let out = init(&user, &bin, &["--claude-code", "--cursor", "--dry-run"]);
    assert_eq!(all_bytes(&f), before);
    assert!(backups(&user.home().join(".claude")).is_empty());
    assert!(
        out.contains(&format!("--- {}", f.settings.display())),
        "{out}"
    );
    assert!(
        out.contains(&format!("+++ {}", f.claude_json.display())),
        "{out}"
    );
    let added = format!("\"command\": \"{}\"", bin.join("hook-prompt").display());
    assert!(
        out.lines()
            .any(|l| l.starts_with('+') && l.contains(&added)),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with('+') && l.contains(&format!("\"command\": \"{}\"", memd_path()))),
        "the stdio entry: {out}"
    );
    assert!(!out.contains("Bearer"), "no token by default: {out}");
    let out = init(
        &user,
        &bin,
        &["--claude-code", "--cursor", "--dry-run", "--mcp", "http"],
    );
    assert_eq!(all_bytes(&f), before);
    assert!(out.contains("Bearer <token>"), "{out}");
    assert!(!out.contains(&token), "token leaked into the diff");
    assert!(!user.config_dir().join("config.toml").exists());
}

#[test]
fn dry_run_on_a_fresh_user_creates_no_token() {
    let user = User::new();
    let bin = user.fake_bin_dir();
    let out = init(&user, &bin, &["--claude-code", "--dry-run"]);
    assert!(out.contains("--- /dev/null"), "{out}");
    assert!(!user.data_dir().join("token").exists());
    assert!(!user.home().join(".claude.json").exists());
}

#[test]
fn missing_files_are_created_and_only_detected_clients_configured() {
    let user = User::new();
    std::fs::create_dir_all(user.home().join(".claude")).unwrap();
    let bin = user.fake_bin_dir();
    let out = init(&user, &bin, &[]);
    assert!(out.contains("Claude Code:"), "{out}");
    let f = files(&user);
    let s = read_json(&f.settings);
    assert_eq!(
        commands(&s["hooks"]["UserPromptSubmit"]),
        vec![bin.join("hook-prompt").display().to_string()]
    );
    assert_eq!(
        mode(&f.claude_json),
        0o644,
        "a new ~/.claude.json with the stdio entry holds no token"
    );
    assert!(
        !f.cursor_hooks.exists() && !f.cursor_mcp.exists(),
        "Cursor is not installed"
    );

    // `claude` on PATH also counts as Claude Code being installed.
    let other = User::new();
    let claude = other.path_dir.join("claude");
    std::fs::write(&claude, "#!/bin/sh\n").unwrap();
    set_mode(&claude, 0o755);
    let out = init(&other, &other.fake_bin_dir(), &[]);
    assert!(out.contains("`claude` is on PATH"), "{out}");
    assert!(files(&other).settings.exists());

    let nobody = User::new();
    let out = init(&nobody, &nobody.fake_bin_dir(), &[]);
    assert!(out.contains("no supported client found"), "{out}");
    assert!(!files(&nobody).settings.exists());
}

#[test]
fn malformed_json_names_file_and_position_and_nothing_is_written() {
    let (user, f) = user_with_configs();
    std::fs::copy(Path::new(FIXTURES).join("malformed.json"), &f.settings).unwrap();
    let before = all_bytes(&f);
    let bin = user.fake_bin_dir().display().to_string();
    let out = user.memd(&[
        "init",
        "--yes",
        "--claude-code",
        "--cursor",
        "--bin-dir",
        &bin,
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains(&f.settings.display().to_string()), "{err}");
    assert!(err.contains("line 5"), "{err}");
    assert_eq!(
        all_bytes(&f),
        before,
        "no file was touched, not even the valid ones"
    );
    assert!(backups(&user.home()).is_empty() && backups(&user.home().join(".claude")).is_empty());
}

#[test]
fn unexpected_shapes_are_refused_with_the_key_named() {
    let (user, f) = user_with_configs();
    std::fs::write(
        &f.cursor_hooks,
        "{\"version\": 1, \"hooks\": [\"not an object\"]}",
    )
    .unwrap();
    let bin = user.fake_bin_dir().display().to_string();
    let out = user.memd(&["init", "--yes", "--cursor", "--bin-dir", &bin]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("hooks.json") && err.contains("hooks should be an object"),
        "{err}"
    );
}

#[test]
fn uninstall_gives_back_the_users_documents() {
    let (user, f) = user_with_configs();
    let bin = user.fake_bin_dir();
    init(&user, &bin, &["--claude-code", "--cursor"]);

    let installed = all_bytes(&f);
    let out = user.ok(&["uninstall", "--dry-run"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with('-') && l.contains("hook-prompt")),
        "{out}"
    );
    assert_eq!(all_bytes(&f), installed, "dry run wrote nothing");

    let out = user.ok(&["uninstall"]);
    assert!(out.contains("Memories kept"), "{out}");
    assert_eq!(read_json(&f.settings), fixture("settings.json"));
    assert_eq!(read_json(&f.claude_json), fixture("claude.json"));
    assert_eq!(read_json(&f.cursor_hooks), fixture("cursor-hooks.json"));
    assert_eq!(read_json(&f.cursor_mcp), fixture("cursor-mcp.json"));
    assert!(
        user.data_dir().join("token").exists(),
        "data kept without --purge"
    );
    let out = user.ok(&["uninstall"]);
    assert!(out.contains("No memd entries"), "{out}");
}

#[test]
fn uninstall_removes_files_init_created_and_purge_deletes_data() {
    let user = User::new();
    let bin = user.fake_bin_dir();
    init(&user, &bin, &["--claude-code", "--cursor"]);
    let f = files(&user);
    assert!(f.cursor_hooks.exists() && f.claude_json.exists());
    user.ok(&["uninstall", "--purge", "--yes"]);
    for p in [&f.settings, &f.claude_json, &f.cursor_hooks, &f.cursor_mcp] {
        assert!(!p.exists(), "{} should be gone", p.display());
    }
    assert!(!user.data_dir().exists(), "purged");
}

#[test]
fn purge_refuses_a_directory_that_is_not_memds() {
    let user = User::new();
    std::fs::create_dir_all(user.data_dir().join("photos")).unwrap();
    let out = user.memd(&["uninstall", "--purge", "--yes"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("does not look like a memd data dir"));
    assert!(user.data_dir().join("photos").exists());
}

#[test]
fn remote_sidecar_is_written_with_a_key_file_path_only() {
    let user = User::new();
    let bin = user.fake_bin_dir().display().to_string();
    let key = user.root.path().join("key");
    std::fs::write(&key, "sk-test-secret-value").unwrap();
    set_mode(&key, 0o644);
    let key_arg = key.display().to_string();
    let args = [
        "init",
        "--claude-code",
        "--bin-dir",
        &bin,
        "--sidecar",
        "remote",
        "--sidecar-url",
        "https://llm.example/v1/",
        "--sidecar-models",
        "small-a, small-b",
        "--sidecar-key-file",
        &key_arg,
    ];
    let out = user.memd(&args);
    assert!(
        !out.status.success(),
        "a world-readable key file is refused"
    );
    assert!(
        text(&out.stderr).contains("chmod 600"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        !files(&user).settings.exists(),
        "refused before anything was written"
    );

    set_mode(&key, 0o600);
    user.ok(&args);
    let cfg = std::fs::read_to_string(user.config_dir().join("config.toml")).unwrap();
    let table: toml::Table = toml::from_str(&cfg).unwrap();
    let s = &table["sidecar"];
    assert_eq!(s["remote"].as_bool(), Some(true));
    assert_eq!(s["url"].as_str(), Some("https://llm.example/v1"));
    assert_eq!(s["models"].as_array().unwrap().len(), 2);
    assert_eq!(s["key_file"].as_str(), Some(key_arg.as_str()));
    assert!(!cfg.contains("sk-test-secret-value"));
    // The daemon's own config loader accepts what init wrote (status loads it before anything).
    let out = user.memd_env(&["status", "--json"], &[("MEMD_PORT", "1")]);
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out.stderr)));
    assert_eq!(v["running"], false);
}

#[test]
fn every_command_has_help() {
    let user = User::new();
    let top = user.ok(&["--help"]);
    let cmds = [
        "serve",
        "init",
        "uninstall",
        "status",
        "stats",
        "doctor",
        "search",
        "ingest",
        "books",
        "remove",
        "export",
        "import",
        "service",
    ];
    for c in cmds {
        assert!(top.contains(c), "{c} missing from --help");
        user.ok(&[c, "--help"]);
    }
    for c in ["install", "uninstall", "status"] {
        user.ok(&["service", c, "--help"]);
    }
}

#[test]
fn service_dry_run_prints_the_unit() {
    let user = User::new();
    let out = user.ok(&["service", "install", "--dry-run"]);
    if cfg!(target_os = "linux") {
        assert!(out.contains("memd.service"), "{out}");
        assert!(out.contains("Restart=on-failure"), "{out}");
        let exe = std::fs::canonicalize(MEMD).unwrap();
        assert!(
            out.contains(&format!("ExecStart={} serve", exe.display())),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "Environment=\"MEMD_DATA_DIR={}\"",
                user.data_dir().display()
            )),
            "{out}"
        );
    }
    assert!(
        !user.home().join(".config/systemd").exists()
            && !user.root.path().join("xdg-config/systemd").exists()
    );
}

#[test]
fn status_and_doctor_say_clearly_when_the_daemon_is_down() {
    let user = User::new();
    let out = user.memd_env(&["status"], &[("MEMD_PORT", "1")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("memd is not running"),
        "{}",
        text(&out.stdout)
    );
    let out = user.memd_env(&["status", "--json"], &[("MEMD_PORT", "1")]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["running"], false);

    let out = user.memd_env(&["doctor"], &[("MEMD_PORT", "1")]);
    assert_eq!(out.status.code(), Some(1));
    let s = text(&out.stdout);
    assert!(s.contains("[FAIL] daemon"), "{s}");
    assert!(s.contains("fix: `memd serve`"), "{s}");
}

#[test]
fn the_scoring_entry_is_always_loaded_only_where_claude_code_takes_it() {
    for (version, always) in [
        ("2.1.328 (Claude Code)", true),
        ("2.1.120 (Claude Code)", false),
    ] {
        let user = User::new();
        let claude = user.path_dir.join("claude");
        std::fs::write(&claude, format!("#!/bin/sh\necho '{version}'\n")).unwrap();
        set_mode(&claude, 0o755);
        let out = init(&user, &user.fake_bin_dir(), &[]);
        let servers = read_json(&files(&user).claude_json)["mcpServers"].clone();
        assert!(servers["memd"].get("alwaysLoad").is_none(), "{servers}");
        if always {
            assert_eq!(servers["memd-score"]["alwaysLoad"], true, "{out}");
            assert_eq!(
                servers["memd-score"]["args"],
                json!(["mcp", "--only", "score_response"])
            );
        } else {
            assert!(servers.get("memd-score").is_none(), "{version}: {servers}");
            assert!(out.contains("predates alwaysLoad"), "{out}");
        }
        user.memd(&["uninstall", "-y"]);
        assert!(
            !files(&user).claude_json.exists(),
            "uninstall removes both entries"
        );
    }
}
