//! What Windows clients hand memd's hooks and what `memd.exe init` writes for them under Wine:
//! the hook inputs, the hook lines read back out of each client's config in the prefix's
//! `%USERPROFILE%`, and the program a PowerShell line runs.
//!
//! Owns only building inputs and reading config files; must never start a Wine process (that
//! is [`crate::wine`]).

use crate::wine::{Wine, z};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The project directory Claude Code on Windows reports.
pub const WIN_CWD: &str = r"C:\Users\dev\shop";

/// Claude Code's `UserPromptSubmit` hook input (Codex CLI sends the same fields).
pub fn claude_prompt(session: &str, prompt: &str, transcript: &str, cwd: &str) -> Vec<u8> {
    json!({
        "session_id": session, "transcript_path": transcript, "cwd": cwd,
        "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": prompt
    })
    .to_string()
    .into_bytes()
}

/// Claude Code's `Stop` hook input.
pub fn claude_stop(session: &str, answer: &str, transcript: &str, cwd: &str) -> Vec<u8> {
    json!({
        "session_id": session, "transcript_path": transcript, "cwd": cwd,
        "permission_mode": "default", "hook_event_name": "Stop", "stop_hook_active": false,
        "last_assistant_message": answer
    })
    .to_string()
    .into_bytes()
}

/// With memd down: (hook, client flag, what the client sends, the hook's whole answer): the
/// answer each client reads as "go on, nothing added" (Codex and Gemini: nothing; Cursor's JSON
/// per event, and for input that is not JSON at all the one that suits every Cursor event).
pub fn fail_open_cases() -> Vec<(&'static str, &'static str, Vec<u8>, &'static str)> {
    let roots = json!([WIN_CWD]);
    let bytes = |v: Value| v.to_string().into_bytes();
    vec![
        (
            "hook-prompt.exe",
            "--codex",
            claude_prompt("w-cx", "hi", r"C:\t.jsonl", WIN_CWD),
            "",
        ),
        (
            "hook-prompt.exe",
            "--gemini",
            bytes(
                json!({"session_id": "w-gm", "hook_event_name": "BeforeAgent", "prompt": "hi",
                   "cwd": WIN_CWD, "transcript_path": r"C:\t.json"}),
            ),
            "",
        ),
        (
            "hook-prompt.exe",
            "--cursor",
            bytes(
                json!({"conversation_id": "w-cu", "hook_event_name": "beforeSubmitPrompt",
                   "prompt": "hi", "workspace_roots": roots}),
            ),
            r#"{"continue":true}"#,
        ),
        (
            "hook-prompt.exe",
            "--cursor",
            bytes(
                json!({"conversation_id": "w-cu", "hook_event_name": "beforeShellExecution",
                   "command": "git status", "cwd": WIN_CWD, "workspace_roots": roots}),
            ),
            r#"{"permission":"allow"}"#,
        ),
        (
            "hook-prompt.exe",
            "--cursor",
            b"not json".to_vec(),
            r#"{"continue":true,"permission":"allow"}"#,
        ),
        ("hook-stop.exe", "--codex", b"{".to_vec(), ""),
    ]
}

/// The memd hook commands a Claude-style `hooks` object holds for `event`.
pub fn hook_commands(doc: &Value, event: &str) -> Vec<String> {
    let groups = doc["hooks"][event].as_array().cloned().unwrap_or_default();
    groups
        .iter()
        .flat_map(|g| {
            let list = g.get("hooks").and_then(Value::as_array);
            list.cloned().unwrap_or_else(|| vec![g.clone()])
        })
        .filter_map(|h| h["command"].as_str().map(str::to_string))
        .filter(|c| c.contains("hook-prompt") || c.contains("hook-stop"))
        .collect()
}

/// Where `memd.exe init --codex --gemini --opencode` wrote, and the hook lines it wrote there.
pub struct OtherClients {
    pub codex_hooks: PathBuf,
    pub codex_config: PathBuf,
    pub codex_line: String,
    pub gemini_settings: PathBuf,
    pub gemini_line: String,
    pub opencode_json: PathBuf,
    pub opencode_plugin: PathBuf,
}

/// Codex CLI, Gemini CLI and OpenCode's files under `%USERPROFILE%`: the hook lines are for
/// PowerShell (the call operator and a single-quoted path, since the directory's name has a
/// space), the MCP entries name `memd.exe` directly, OpenCode's plugin names the hook directory.
pub fn other_clients_files(wine: &Wine, profile: &Path) -> OtherClients {
    let bin = z(&wine.bin());
    let read = |path: &Path| -> Value {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let o = OtherClients {
        codex_hooks: profile.join(".codex/hooks.json"),
        codex_config: profile.join(".codex/config.toml"),
        codex_line: format!("& '{bin}\\hook-prompt.exe' --codex"),
        gemini_settings: profile.join(".gemini/settings.json"),
        gemini_line: format!("& '{bin}\\hook-prompt.exe' --gemini"),
        opencode_json: profile.join(".config/opencode/opencode.json"),
        opencode_plugin: profile.join(".config/opencode/plugins/memd.ts"),
    };
    let memd = format!("{bin}\\memd.exe");
    assert_eq!(
        hook_commands(&read(&o.codex_hooks), "UserPromptSubmit"),
        vec![o.codex_line.clone()]
    );
    let toml = std::fs::read_to_string(&o.codex_config).unwrap();
    assert!(
        toml.contains("[mcp_servers.memd]") && toml.contains(&format!("'{memd}'")),
        "{toml}"
    );
    let gemini = read(&o.gemini_settings);
    assert_eq!(
        hook_commands(&gemini, "BeforeAgent"),
        vec![o.gemini_line.clone()]
    );
    assert_eq!(
        gemini["mcpServers"]["memd"]["command"],
        json!(memd),
        "{gemini}"
    );
    let opencode = read(&o.opencode_json);
    assert_eq!(
        opencode["mcp"]["memd"]["command"][0],
        json!(memd),
        "{opencode}"
    );
    let plugin = std::fs::read_to_string(&o.opencode_plugin).unwrap();
    let decl = format!("const HOOK_DIR: string = {};", json!(bin));
    assert!(plugin.contains(&decl), "{decl} not in the plugin");
    o
}

/// The program and the one argument of a PowerShell line `& '<program>' <arg>`.
pub fn powershell_program(line: &str) -> (String, String) {
    let rest = line.strip_prefix("& '").unwrap_or_else(|| panic!("{line}"));
    let (program, arg) = rest.split_once("' ").unwrap_or_else(|| panic!("{line}"));
    (program.replace("''", "'"), arg.to_string())
}
