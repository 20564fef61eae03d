//! What `memd init` adds to and `memd uninstall` removes from Gemini CLI's
//! `~/.gemini/settings.json` and OpenCode's `opencode.json`.
//!
//! Pure functions over [`Json`] documents, with the same rules as the rest of `merge`: memd's
//! entries are the handlers that run `hook-prompt` / `hook-stop` and the server named `memd`;
//! nothing else is changed, reordered or removed; adding twice equals adding once.

use super::super::json::Json;
use super::{
    HOOK_PROMPT, HOOK_STOP, SERVER_NAME, STDIO_ARGS, ShapeError, hooks_add, object_member, root_mut,
};
use std::path::Path;

/// Gemini CLI events → (binary, timeout in **milliseconds**, tool matcher). The tool matcher
/// is a regular expression over Gemini's tool names: the shell, file reads and edits, and MCP
/// tools (`mcp_…`).
const GEMINI_HOOKS: [(&str, &str, i64, Option<&str>); 4] = [
    ("BeforeAgent", HOOK_PROMPT, 10_000, None),
    ("AfterAgent", HOOK_STOP, 30_000, None),
    ("BeforeTool", HOOK_PROMPT, 10_000, Some(GEMINI_GUARDED)),
    ("AfterTool", HOOK_STOP, 10_000, Some(GEMINI_EVIDENCE)),
];
const GEMINI_GUARDED: &str = "run_shell_command|read_file|mcp_.*";
const GEMINI_EVIDENCE: &str = "run_shell_command|write_file|replace";

/// Adds memd's hooks to Gemini CLI's settings (`hook-prompt --gemini`, `hook-stop --gemini`).
pub fn gemini_settings_add(doc: &mut Json, bin: &Path) -> Result<(), ShapeError> {
    hooks_add(
        doc,
        super::ClientKind::Gemini,
        bin,
        "--gemini",
        &GEMINI_HOOKS,
    )
}

/// Removes memd's hooks (Gemini CLI's have Claude Code's shape) and `mcpServers.memd`.
pub fn gemini_settings_remove(doc: &mut Json) -> Result<bool, ShapeError> {
    let hooks = super::claude_settings_remove(doc)?;
    let server = super::mcp_remove(doc)?;
    Ok(hooks || server)
}

pub fn gemini_events() -> impl Iterator<Item = &'static str> {
    GEMINI_HOOKS.iter().map(|(e, _, _, _)| *e)
}

/// Gemini CLI's `mcpServers.memd` for `--mcp http`: streamable HTTP goes under `httpUrl`
/// (`url` would be SSE there).
pub fn gemini_http_entry(url: &str, token: &str) -> Json {
    Json::object([
        ("httpUrl", Json::str(url)),
        (
            "headers",
            Json::object([("Authorization", Json::str(format!("Bearer {token}")))]),
        ),
    ])
}

/// Copilot CLI's `mcpServers.memd` (`~/.copilot/mcp-config.json`): `local` runs a command,
/// `http` calls a URL; `tools: ["*"]` offers all of memd's tools.
pub fn copilot_entry(memd_or_url: &str, token: Option<&str>) -> Json {
    let tools = Json::Array(vec![Json::str("*")]);
    match token {
        None => Json::object([
            ("type", Json::str("local")),
            ("command", Json::str(memd_or_url)),
            (
                "args",
                Json::Array(STDIO_ARGS.iter().map(|a| Json::str(*a)).collect()),
            ),
            ("tools", tools),
        ]),
        Some(token) => Json::object([
            ("type", Json::str("http")),
            ("url", Json::str(memd_or_url)),
            (
                "headers",
                Json::object([("Authorization", Json::str(format!("Bearer {token}")))]),
            ),
            ("tools", tools),
        ]),
    }
}

/// OpenCode's `mcp.memd` that starts `memd mcp` (a `local` server is a command array).
pub fn opencode_stdio_entry(memd: &Path) -> Json {
    let mut command = vec![Json::str(memd.to_string_lossy())];
    command.extend(STDIO_ARGS.iter().map(|a| Json::str(*a)));
    Json::object([
        ("type", Json::str("local")),
        ("command", Json::Array(command)),
        ("enabled", Json::Bool(true)),
    ])
}

/// OpenCode's `mcp.memd` for `--mcp http` (`remote`, with the bearer token).
pub fn opencode_http_entry(url: &str, token: &str) -> Json {
    Json::object([
        ("type", Json::str("remote")),
        ("url", Json::str(url)),
        (
            "headers",
            Json::object([("Authorization", Json::str(format!("Bearer {token}")))]),
        ),
        ("enabled", Json::Bool(true)),
    ])
}

/// Sets root `mcp.memd` in `opencode.json`, keeping every other server.
pub fn opencode_mcp_add(doc: &mut Json, entry: Json) -> Result<(), ShapeError> {
    let root = root_mut(doc)?;
    let servers = object_member(root, "mcp", "mcp")?;
    servers.insert(SERVER_NAME, entry);
    Ok(())
}

/// Removes root `mcp.memd` (and `mcp` if that emptied it).
pub fn opencode_mcp_remove(doc: &mut Json) -> Result<bool, ShapeError> {
    let root = root_mut(doc)?;
    let Some(servers) = root.get_mut("mcp").and_then(Json::as_object_mut) else {
        return Ok(false);
    };
    if servers.remove(SERVER_NAME).is_none() {
        return Ok(false);
    }
    if servers.is_empty() {
        root.remove("mcp");
    }
    Ok(true)
}

/// The registered `mcp.memd` of an OpenCode config, if any.
pub fn opencode_mcp_registered(doc: &Json) -> Option<&Json> {
    doc.get("mcp")?.get(SERVER_NAME)
}

/// The command an OpenCode `local` entry runs, as program and arguments.
pub fn opencode_command(entry: &Json) -> Option<(String, Vec<String>)> {
    let parts: Vec<String> = entry
        .get("command")?
        .as_array()?
        .iter()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    let (program, args) = parts.split_first()?;
    Some((program.clone(), args.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::super::super::json;
    use super::super::{claude_hook_commands, claude_settings_remove, is_leftover_shell};
    use super::*;

    fn parse(text: &str) -> Json {
        json::parse(text).unwrap()
    }

    #[test]
    fn gemini_hooks_have_millisecond_timeouts_and_keep_the_users() {
        let mut doc = parse(
            r#"{"hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "lint.sh"}]}]}, "theme": "x"}"#,
        );
        gemini_settings_add(&mut doc, Path::new("/opt/memd bin")).unwrap();
        let again = doc.clone();
        gemini_settings_add(&mut doc, Path::new("/opt/memd bin")).unwrap();
        assert_eq!(doc, again, "adding twice equals adding once");
        let before = claude_hook_commands(&doc, "BeforeAgent");
        assert_eq!(before, ["'/opt/memd bin/hook-prompt' --gemini"]);
        let groups = doc.get("hooks").unwrap().get("BeforeTool").unwrap();
        let groups = groups.as_array().unwrap();
        assert_eq!(groups.len(), 2, "the user's group stays, memd's is added");
        let ours = groups[1].get("hooks").unwrap().as_array().unwrap()[0].clone();
        assert_eq!(ours.get("timeout"), Some(&Json::int(10_000)));
        assert_eq!(
            groups[1].get("matcher").and_then(Json::as_str),
            Some(GEMINI_GUARDED)
        );
        assert!(claude_settings_remove(&mut doc).unwrap());
        assert_eq!(
            doc,
            parse(
                r#"{"hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "lint.sh"}]}]}, "theme": "x"}"#
            )
        );
    }

    #[test]
    fn opencode_mcp_entry_round_trip() {
        let mut doc = parse(r#"{"mcp": {"github": {"type": "remote", "url": "u"}}}"#);
        opencode_mcp_add(&mut doc, opencode_stdio_entry(Path::new("/bin/memd"))).unwrap();
        let entry = opencode_mcp_registered(&doc).unwrap();
        assert_eq!(
            opencode_command(entry),
            Some(("/bin/memd".to_string(), vec!["mcp".to_string()]))
        );
        assert!(opencode_mcp_remove(&mut doc).unwrap());
        assert_eq!(
            doc,
            parse(r#"{"mcp": {"github": {"type": "remote", "url": "u"}}}"#)
        );
        let mut alone = parse("{}");
        opencode_mcp_add(&mut alone, opencode_http_entry("http://x/mcp", "t")).unwrap();
        assert!(opencode_mcp_remove(&mut alone).unwrap());
        assert!(is_leftover_shell(&alone));
        assert!(!opencode_mcp_remove(&mut alone).unwrap());
    }
}
