//! `memd doctor`'s per-client checks: which clients are installed and, for each, its hooks (or
//! OpenCode's plugin file) and MCP entry. Read-only, like the rest of doctor.

use super::super::merge::{self, agents};
use super::super::opencode;
use super::{
    ClientFiles, ClientKind, Json, Report, check_claude_score, check_codex, check_hooks, check_mcp,
    check_mcp_http, check_mcp_stdio, is_executable, read_json,
};
use std::path::Path;

pub(super) fn check_clients(r: &mut Report, files: &ClientFiles, port: u16, token: &str) {
    let detected: Vec<ClientKind> = ClientKind::ALL
        .into_iter()
        .filter(|k| files.detected(*k).is_some())
        .collect();
    if detected.is_empty() {
        r.warn(
            "clients",
            "none of Claude Code, Codex CLI, Cursor, Gemini CLI, OpenCode or Copilot CLI found",
            "install one, then `memd init`",
        );
        return;
    }
    let expected_url = format!("http://127.0.0.1:{port}/mcp");
    for kind in detected {
        match kind {
            ClientKind::ClaudeCode => {
                check_hooks(
                    r,
                    "claude hooks",
                    &files.claude_settings,
                    merge::claude_events(),
                    merge::claude_hook_commands,
                );
                check_mcp(r, "claude mcp", &files.claude_json, &expected_url, token);
                check_claude_score(r, &files.claude_json);
            }
            ClientKind::Codex => {
                check_hooks(
                    r,
                    "codex hooks",
                    &files.codex_hooks,
                    super::super::codex::events(),
                    merge::claude_hook_commands,
                );
                check_codex(r, files);
            }
            ClientKind::Cursor => {
                check_hooks(
                    r,
                    "cursor hooks",
                    &files.cursor_hooks,
                    merge::cursor_events(),
                    merge::cursor_hook_commands,
                );
                check_mcp(r, "cursor mcp", &files.cursor_mcp, &expected_url, token);
            }
            ClientKind::Gemini => {
                check_hooks(
                    r,
                    "gemini hooks",
                    &files.gemini_settings,
                    agents::gemini_events(),
                    merge::claude_hook_commands,
                );
                check_mcp(
                    r,
                    "gemini mcp",
                    &files.gemini_settings,
                    &expected_url,
                    token,
                );
            }
            ClientKind::Opencode => {
                check_opencode(r, files, &expected_url, token);
            }
            ClientKind::Copilot => {
                check_mcp(r, "copilot mcp", &files.copilot_mcp, &expected_url, token);
            }
        }
    }
}

fn check_opencode(r: &mut Report, files: &ClientFiles, expected_url: &str, token: &str) {
    check_plugin(r, &files.opencode_plugin);
    let path = &files.opencode_config;
    let doc = match read_json(path) {
        Ok(Some(doc)) => doc,
        Ok(None) => {
            return r.fail(
                "opencode mcp",
                format!("{} does not exist", path.display()),
                "memd init --opencode",
            );
        }
        Err(e) => {
            return r.fail(
                "opencode mcp",
                e,
                format!(
                    "fix {} by hand, then `memd init --opencode`",
                    path.display()
                ),
            );
        }
    };
    let Some(entry) = agents::opencode_mcp_registered(&doc) else {
        return r.fail(
            "opencode mcp",
            format!("no mcp.memd in {}", path.display()),
            "memd init --opencode",
        );
    };
    match agents::opencode_command(entry) {
        // A `local` server: the same checks as any stdio entry, on its command array.
        Some((program, args)) => {
            let as_stdio = Json::object([
                ("command", Json::str(program)),
                (
                    "args",
                    Json::Array(args.into_iter().map(Json::str).collect()),
                ),
            ]);
            check_mcp_stdio(r, "opencode mcp", path, &as_stdio);
        }
        None => check_mcp_http(r, "opencode mcp", path, entry, expected_url, token),
    }
}

/// The plugin must be memd's, and run hooks that exist.
fn check_plugin(r: &mut Report, path: &Path) {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(_) => {
            return r.fail(
                "opencode plugin",
                format!("{} does not exist", path.display()),
                "memd init --opencode",
            );
        }
    };
    if !opencode::is_ours(&text) {
        return r.fail(
            "opencode plugin",
            format!("{} was not written by memd", path.display()),
            "move it away, then `memd init --opencode`",
        );
    }
    let Some(dir) = opencode::hook_dir_of(&text) else {
        return r.fail(
            "opencode plugin",
            format!("{} names no hook directory", path.display()),
            "memd init --opencode",
        );
    };
    let missing: Vec<String> = [merge::HOOK_PROMPT, merge::HOOK_STOP]
        .iter()
        .map(|exe| dir.join(crate::clients::Os::current().exe(exe)))
        .filter(|p| !is_executable(p))
        .map(|p| p.display().to_string())
        .collect();
    if !missing.is_empty() {
        r.fail(
            "opencode plugin",
            format!(
                "{} runs {}, missing or not executable",
                path.display(),
                missing.join(", ")
            ),
            "install/install.sh, or `memd init --opencode --bin-dir <dir with hook-prompt>`",
        );
    } else if text != opencode::render(&dir) {
        r.warn(
            "opencode plugin",
            format!("{} is from another memd version", path.display()),
            "memd init --opencode",
        );
    } else {
        r.ok(
            "opencode plugin",
            format!("{} runs the hooks in {}", path.display(), dir.display()),
        );
    }
}
