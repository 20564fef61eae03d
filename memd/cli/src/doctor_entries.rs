//! `memd doctor`'s checks of one client file's entries: memd's hooks in a Claude-style
//! `hooks` object, an MCP server entry (a stdio entry must start `memd mcp`; an HTTP entry must
//! carry the current URL and token, in a private file), Codex's trust entries and Claude Code's
//! always-loaded scoring entry. Which clients are checked is `agents`. Read-only: must never
//! change a file.

use super::super::codex;
use super::super::files;
use super::super::json::Json;
use super::super::merge;
use super::{ClientFiles, Report, is_executable, on_path};
use std::path::Path;

pub(super) fn read_json(path: &Path) -> Result<Option<Json>, String> {
    match files::read_optional(path) {
        Ok(None) => Ok(None),
        Ok(Some(text)) => files::parse_doc(path, Some(&text))
            .map(Some)
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// The client file at `path`, or `None` after reporting why it can't be checked (missing, or
/// not JSON memd can read).
fn read_or_report(r: &mut Report, name: &'static str, path: &Path) -> Option<Json> {
    match read_json(path) {
        Ok(Some(doc)) => Some(doc),
        Ok(None) => {
            r.fail(
                name,
                format!("{} does not exist", path.display()),
                "memd init",
            );
            None
        }
        Err(e) => {
            r.fail(
                name,
                e,
                format!("fix {} by hand, then `memd init`", path.display()),
            );
            None
        }
    }
}

pub(super) fn check_hooks<'a>(
    r: &mut Report,
    name: &'static str,
    path: &Path,
    events: impl Iterator<Item = &'a str>,
    commands: fn(&Json, &str) -> Vec<String>,
) {
    let Some(doc) = read_or_report(r, name, path) else {
        return;
    };
    let mut problems = Vec::new();
    for event in events {
        let cmds = commands(&doc, event);
        if cmds.is_empty() {
            problems.push(format!("no memd hook for {event}"));
        }
        for cmd in cmds {
            let program = merge::command_program(&cmd);
            if !is_executable(Path::new(&program)) {
                problems.push(format!(
                    "{event} runs {program}, which is missing or not executable"
                ));
            }
        }
    }
    if problems.is_empty() {
        r.ok(
            name,
            format!("{} points at installed hooks", path.display()),
        );
    } else {
        r.fail(
            name,
            format!("{}: {}", path.display(), problems.join("; ")),
            "install/install.sh, or `memd init --bin-dir <dir with hook-prompt>`",
        );
    }
}

pub(super) fn check_mcp(
    r: &mut Report,
    name: &'static str,
    path: &Path,
    expected_url: &str,
    token: &str,
) {
    let Some(doc) = read_or_report(r, name, path) else {
        return;
    };
    let Some(entry) = merge::mcp_registered(&doc) else {
        return r.fail(
            name,
            format!("no mcpServers.memd in {}", path.display()),
            "memd init",
        );
    };
    if merge::mcp_is_stdio(entry) {
        check_mcp_stdio(r, name, path, entry);
    } else {
        check_mcp_http(r, name, path, entry, expected_url, token);
    }
}

/// A stdio entry: the client must be able to start it, and it must start the bridge.
pub(super) fn check_mcp_stdio(r: &mut Report, name: &'static str, path: &Path, entry: &Json) {
    let command = entry.get("command").and_then(Json::as_str).unwrap_or("");
    let args: Option<Vec<&str>> = entry
        .get("args")
        .and_then(Json::as_array)
        .map(|a| a.iter().filter_map(Json::as_str).collect());
    if !stdio_command_runs(command) {
        r.fail(
            name,
            format!(
                "{} starts {command:?}, which is missing or not executable",
                path.display()
            ),
            "memd init (from the memd you use)",
        );
    } else if args.as_deref() != Some(&merge::STDIO_ARGS[..]) {
        r.fail(
            name,
            format!(
                "{} starts {command} without exactly the arguments [\"mcp\"]",
                path.display()
            ),
            "memd init",
        );
    } else {
        r.ok(
            name,
            format!("registered in {} (stdio: {command} mcp)", path.display()),
        );
    }
}

/// A bare program name is found on PATH, as the client would; a path must be executable.
fn stdio_command_runs(command: &str) -> bool {
    if command.is_empty() {
        return false;
    }
    // A path (either separator on Windows) is checked where it points; a bare name on PATH.
    let separators: &[char] = match crate::clients::Os::current() {
        crate::clients::Os::Unix => &['/'],
        crate::clients::Os::Windows => &['/', '\\'],
    };
    if command.contains(separators) {
        return is_executable(Path::new(command));
    }
    on_path(command).is_some()
}

/// An HTTP entry: today's URL and token, in a private file.
pub(super) fn check_mcp_http(
    r: &mut Report,
    name: &'static str,
    path: &Path,
    entry: &Json,
    expected_url: &str,
    token: &str,
) {
    // Gemini CLI names a streamable HTTP server's address `httpUrl`.
    let url = entry
        .get("url")
        .or_else(|| entry.get("httpUrl"))
        .and_then(Json::as_str)
        .unwrap_or("");
    let auth = entry
        .get("headers")
        .and_then(|h| h.get("Authorization"))
        .and_then(Json::as_str)
        .unwrap_or("");
    if url != expected_url {
        r.fail(
            name,
            format!(
                "{} points at {url:?}, memd listens on {expected_url}",
                path.display()
            ),
            "memd init",
        );
    } else if !token.is_empty() && auth != format!("Bearer {token}") {
        r.fail(
            name,
            format!("{} sends an outdated token", path.display()),
            "memd init",
        );
    } else {
        r.ok(name, format!("registered in {} (http)", path.display()));
    }
    if auth.starts_with("Bearer ") {
        check_secret_mode(r, name, path);
    }
}

/// A client config holding memd's token must be private: anyone who reads it can call memd.
fn check_secret_mode(r: &mut Report, name: &'static str, path: &Path) {
    if let Some(mode) = files::existing_mode(path).filter(|m| files::is_open(*m)) {
        r.fail(
            name,
            format!(
                "{} holds memd's token but has mode {:o}; other users could call memd",
                path.display(),
                mode & 0o777
            ),
            format!("chmod 600 {}", path.display()),
        );
    }
}

/// Codex: memd's MCP server in config.toml starts `memd mcp`, and every memd hook in hooks.json
/// is trusted under its current definition (Codex skips an untrusted or changed hook silently).
pub(super) fn check_codex(r: &mut Report, files: &ClientFiles) {
    let text = match files::read_optional(&files.codex_config) {
        Ok(Some(text)) => text,
        Ok(None) => {
            return r.fail(
                "codex mcp",
                format!("{} does not exist", files.codex_config.display()),
                "memd init --codex",
            );
        }
        Err(e) => {
            return r.fail(
                "codex mcp",
                e.to_string(),
                "fix the file, then memd init --codex",
            );
        }
    };
    match codex::mcp_registered(&text) {
        Some((command, args))
            if stdio_command_runs(&command) && args.first().is_some_and(|a| a == "mcp") =>
        {
            r.ok(
                "codex mcp",
                format!(
                    "registered in {} (stdio: {command} {})",
                    files.codex_config.display(),
                    args.join(" ")
                ),
            )
        }
        Some((command, _)) => r.fail(
            "codex mcp",
            format!(
                "{} starts {command:?} without a runnable `memd mcp`",
                files.codex_config.display()
            ),
            "memd init --codex",
        ),
        None => r.fail(
            "codex mcp",
            format!("no [mcp_servers.memd] in {}", files.codex_config.display()),
            "memd init --codex",
        ),
    }
    let hooks = match read_json(&files.codex_hooks) {
        Ok(Some(doc)) => doc,
        _ => return,
    };
    let trust = codex::trust_entries(&files.codex_hooks, &hooks);
    let untrusted: Vec<&str> = trust
        .iter()
        .filter(|t| codex::trusted_hash(&text, &t.key).as_deref() != Some(t.hash.as_str()))
        .map(|t| {
            t.key
                .rsplit_once(".json:")
                .map_or(t.key.as_str(), |(_, k)| k)
        })
        .collect();
    if untrusted.is_empty() {
        r.ok("codex trust", format!("{} memd hooks trusted", trust.len()));
    } else {
        r.fail(
            "codex trust",
            format!(
                "Codex will skip memd's hooks {} (not trusted under their current definition)",
                untrusted.join(", ")
            ),
            "memd init --codex",
        );
    }
}

/// A Claude Code that takes `alwaysLoad` should have memd's scoring entry, or each session's
/// first score costs a `ToolSearch` round trip.
pub(super) fn check_claude_score(r: &mut Report, path: &Path) {
    let Some(v) = super::super::claude::installed_version() else {
        return;
    };
    let registered = read_json(path).ok().flatten().is_some_and(|d| {
        d.get("mcpServers")
            .and_then(|s| s.get(merge::SCORE_SERVER))
            .is_some()
    });
    match (super::super::claude::takes_always_load(v), registered) {
        (true, true) => r.ok("claude score", "memd-score is always loaded: scoring needs no ToolSearch"),
        (true, false) => r.warn(
            "claude score",
            format!("Claude Code {}.{}.{} could load memd's scoring tool up front, but memd-score is not registered", v.0, v.1, v.2),
            "memd init",
        ),
        (false, _) => r.ok(
            "claude score",
            format!("Claude Code {}.{}.{} predates alwaysLoad: the first score of a session loads the tool with ToolSearch", v.0, v.1, v.2),
        ),
    }
}
