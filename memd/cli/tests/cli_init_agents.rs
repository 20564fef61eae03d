//! `memd init` / `memd uninstall` / `memd doctor` for Gemini CLI, OpenCode and Copilot CLI, run
//! as the real binary in an isolated home: the clients' own entries survive, memd's are added
//! once and removed exactly, no token lands in a client file, and a plugin file memd did not
//! write is never replaced.

mod cli_support;

use cli_support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

struct Files {
    gemini: PathBuf,
    opencode: PathBuf,
    plugin: PathBuf,
    other_plugin: PathBuf,
    copilot: PathBuf,
}

fn files(user: &User) -> Files {
    let opencode = user.root.path().join("xdg-config/opencode");
    Files {
        gemini: user.home().join(".gemini/settings.json"),
        opencode: opencode.join("opencode.json"),
        plugin: opencode.join("plugins/memd.ts"),
        other_plugin: opencode.join("plugins/notify.ts"),
        copilot: user.home().join(".copilot/mcp-config.json"),
    }
}

const GEMINI_USER: &str = r#"{
  "theme": "GitHub",
  "hooks": {
    "BeforeTool": [
      {"matcher": "write_file", "hooks": [{"type": "command", "command": "lint-staged", "timeout": 5000}]}
    ]
  },
  "mcpServers": {"github": {"httpUrl": "https://api.githubcopilot.com/mcp/"}}
}
"#;
const OPENCODE_USER: &str = r#"{
  "$schema": "https://opencode.ai/config.json",
  "theme": "tokyonight",
  "mcp": {"github": {"type": "remote", "url": "https://api.githubcopilot.com/mcp/"}}
}
"#;
const COPILOT_USER: &str = r#"{"mcpServers": {"playwright": {"type": "local", "command": "npx", "args": ["@playwright/mcp"], "tools": ["*"]}}}
"#;
const OTHER_PLUGIN: &str = "export const Notify = async () => ({})\n";

fn user_with_configs() -> (User, Files) {
    let user = User::new();
    let f = files(&user);
    for (path, text) in [
        (&f.gemini, GEMINI_USER),
        (&f.opencode, OPENCODE_USER),
        (&f.other_plugin, OTHER_PLUGIN),
        (&f.copilot, COPILOT_USER),
    ] {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    (user, f)
}

fn memd_path() -> String {
    std::fs::canonicalize(MEMD).unwrap().display().to_string()
}

fn init(user: &User, bin: &Path, extra: &[&str]) -> String {
    let bin = bin.to_string_lossy().to_string();
    let mut args = vec!["init", "--yes", "--bin-dir", bin.as_str()];
    args.extend_from_slice(extra);
    user.ok(&args)
}

/// The hook commands of one Gemini CLI event, with their timeouts.
fn gemini_hooks(doc: &Value, event: &str) -> Vec<(String, i64)> {
    doc["hooks"][event]
        .as_array()
        .unwrap_or_else(|| panic!("no hooks.{event} in {doc}"))
        .iter()
        .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
        .map(|h| {
            (
                h["command"].as_str().unwrap_or("").to_string(),
                h["timeout"].as_i64().unwrap_or(0),
            )
        })
        .collect()
}

fn doctor_line(report: &str, check: &str) -> String {
    report
        .lines()
        .find(|l| l.get(7..).is_some_and(|rest| rest.starts_with(check)))
        .unwrap_or_else(|| panic!("no {check} line in:\n{report}"))
        .to_string()
}

#[test]
fn init_wires_gemini_opencode_and_copilot_and_uninstall_gives_the_files_back() {
    let (user, f) = user_with_configs();
    let bin = user.fake_bin_dir();
    let out = init(&user, &bin, &["--gemini", "--opencode", "--copilot"]);
    let token = user.token();
    assert_eq!(token.len(), 64);
    assert!(!out.contains(&token));
    let prompt = bin.join("hook-prompt").display().to_string();
    let stop = bin.join("hook-stop").display().to_string();

    // Gemini CLI: the user's group first, memd's hooks in milliseconds, the stdio server.
    let g = read_json(&f.gemini);
    assert_eq!(g["theme"], "GitHub");
    assert_eq!(
        gemini_hooks(&g, "BeforeAgent"),
        vec![(format!("{prompt} --gemini"), 10_000)]
    );
    assert_eq!(
        gemini_hooks(&g, "AfterAgent"),
        vec![(format!("{stop} --gemini"), 30_000)]
    );
    assert_eq!(
        gemini_hooks(&g, "BeforeTool"),
        vec![
            ("lint-staged".to_string(), 5000),
            (format!("{prompt} --gemini"), 10_000)
        ]
    );
    assert_eq!(
        g["hooks"]["AfterTool"][0]["matcher"],
        "run_shell_command|write_file|replace"
    );
    assert_eq!(
        g["mcpServers"]["memd"],
        json!({"command": memd_path(), "args": ["mcp"]})
    );
    assert!(g["mcpServers"]["github"].is_object());

    // OpenCode: the plugin names the hook directory; the local server starts `memd mcp`.
    let plugin = std::fs::read_to_string(&f.plugin).unwrap();
    assert!(plugin.starts_with("// memd for OpenCode:"));
    let decl = format!(
        "const HOOK_DIR: string = {};",
        json!(bin.display().to_string())
    );
    assert!(plugin.contains(&decl), "{decl} not in the plugin");
    assert!(!plugin.contains("__MEMD_HOOK_DIR__"));
    let o = read_json(&f.opencode);
    assert_eq!(
        o["mcp"]["memd"],
        json!({"type": "local", "command": [memd_path(), "mcp"], "enabled": true})
    );
    assert_eq!(o["theme"], "tokyonight");

    // Copilot CLI: only the MCP server.
    let c = read_json(&f.copilot);
    assert_eq!(
        c["mcpServers"]["memd"],
        json!({"type": "local", "command": memd_path(), "args": ["mcp"], "tools": ["*"]})
    );
    for path in [&f.gemini, &f.opencode, &f.plugin, &f.copilot] {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(!text.contains(&token), "token in {}", path.display());
    }

    let again = init(&user, &bin, &["--gemini", "--opencode", "--copilot"]);
    assert!(again.contains("Nothing to change"), "{again}");

    let report = text(&user.memd(&["doctor"]).stdout);
    for check in [
        "gemini hooks",
        "gemini mcp",
        "opencode plugin",
        "opencode mcp",
        "copilot mcp",
    ] {
        let line = doctor_line(&report, check);
        assert!(line.starts_with("[ok]"), "{line}");
    }

    user.ok(&["uninstall"]);
    for (path, original) in [
        (&f.gemini, GEMINI_USER),
        (&f.opencode, OPENCODE_USER),
        (&f.copilot, COPILOT_USER),
    ] {
        let now: Value = read_json(path);
        let then: Value = serde_json::from_str(original).unwrap();
        assert_eq!(now, then, "{}", path.display());
    }
    assert!(!f.plugin.exists(), "memd's plugin is removed");
    assert_eq!(
        std::fs::read_to_string(&f.other_plugin).unwrap(),
        OTHER_PLUGIN
    );
    let report = text(&user.memd(&["doctor"]).stdout);
    assert!(doctor_line(&report, "opencode plugin").starts_with("[FAIL]"));
}

#[test]
fn a_plugin_memd_did_not_write_stops_init_before_anything_is_written() {
    let (user, f) = user_with_configs();
    std::fs::write(&f.plugin, OTHER_PLUGIN).unwrap();
    let bin = user.fake_bin_dir();
    let bin = bin.to_string_lossy().to_string();
    let out = user.memd(&["init", "--yes", "--bin-dir", &bin, "--gemini", "--opencode"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("not written by memd"), "{err}");
    assert_eq!(std::fs::read_to_string(&f.plugin).unwrap(), OTHER_PLUGIN);
    assert_eq!(std::fs::read_to_string(&f.gemini).unwrap(), GEMINI_USER);
    assert_eq!(std::fs::read_to_string(&f.opencode).unwrap(), OPENCODE_USER);
    // Uninstall leaves it alone too.
    user.ok(&["uninstall"]);
    assert_eq!(std::fs::read_to_string(&f.plugin).unwrap(), OTHER_PLUGIN);
}

#[test]
fn http_entries_carry_the_token_in_private_files() {
    let (user, f) = user_with_configs();
    let bin = user.fake_bin_dir();
    init(&user, &bin, &["--gemini", "--opencode", "--mcp", "http"]);
    let token = user.token();
    let g = read_json(&f.gemini);
    assert_eq!(
        g["mcpServers"]["memd"]["httpUrl"],
        "http://127.0.0.1:47111/mcp"
    );
    assert_eq!(
        g["mcpServers"]["memd"]["headers"]["Authorization"],
        format!("Bearer {token}")
    );
    let o = read_json(&f.opencode);
    assert_eq!(o["mcp"]["memd"]["type"], "remote");
    assert_eq!(o["mcp"]["memd"]["url"], "http://127.0.0.1:47111/mcp");
    for path in [&f.gemini, &f.opencode] {
        assert_eq!(mode(path) & 0o077, 0, "{} holds the token", path.display());
    }
    let report = text(&user.memd(&["doctor"]).stdout);
    assert!(doctor_line(&report, "gemini mcp").starts_with("[ok]"));
}
