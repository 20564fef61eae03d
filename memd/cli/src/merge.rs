//! What `memd init` adds to and `memd uninstall` removes from the clients' config documents.
//!
//! Pure functions over [`Json`] documents: Claude Code's `settings.json` (hooks, tool
//! permissions), the `mcpServers` map of `~/.claude.json` and `~/.cursor/mcp.json`, and Cursor's
//! `hooks.json`. memd's entries are recognised by what they run (an executable named
//! `hook-prompt` or `hook-stop`) or by the server name `memd`; everything else is the user's and
//! must never be changed, reordered or removed. Adding twice gives the same document as adding
//! once.

use super::clients::{ClientKind, Os};
use super::hookcmd;
use super::json::{Json, Obj};
use std::fmt;
use std::path::Path;

/// Our hook executables (file names).
pub const HOOK_PROMPT: &str = "hook-prompt";
pub const HOOK_STOP: &str = "hook-stop";
/// The MCP server name in every client.
pub const SERVER_NAME: &str = "memd";
/// Claude Code's second, always-loaded entry: `memd mcp --only score_response`.
pub const SCORE_SERVER: &str = "memd-score";
/// The scoring tool under that entry, pre-allowed like the others.
pub const SCORE_PERMISSION: &str = "mcp__memd-score__score_response";

/// Claude Code tools pre-allowed in `permissions.allow`.
pub const CLAUDE_TOOL_PERMISSIONS: [&str; 8] = [
    "mcp__memd__get_context_insights",
    "mcp__memd__search_memory",
    "mcp__memd__add_to_memory_bank",
    "mcp__memd__update_memory",
    "mcp__memd__archive_memory",
    "mcp__memd__delete_memory",
    "mcp__memd__score_response",
    "mcp__memd__record_response",
];

/// Claude Code events → (binary, timeout seconds, matcher). The tool events match only the
/// tools memd guards or learns from, so a search or a web fetch does not start a hook.
/// `PreCompact` runs hook-stop (a digest of the conversation before its context is cut).
const CLAUDE_HOOKS: [(&str, &str, i64, Option<&str>); 7] = [
    (
        "SessionStart",
        HOOK_PROMPT,
        10,
        Some("startup|resume|clear|compact"),
    ),
    ("UserPromptSubmit", HOOK_PROMPT, 10, None),
    ("Stop", HOOK_STOP, 30, None),
    ("PreCompact", HOOK_STOP, 10, Some("manual|auto")),
    ("PreToolUse", HOOK_PROMPT, 10, Some(GUARDED_TOOLS)),
    ("PostToolUse", HOOK_STOP, 10, Some(EVIDENCE_TOOLS)),
    ("PostToolUseFailure", HOOK_STOP, 10, Some(EVIDENCE_TOOLS)),
];
/// Tools the guard answers for: shell commands, file reads, MCP tools.
const GUARDED_TOOLS: &str = "Bash|Read|mcp__.*";
/// Tools whose results are evidence: shell commands and file edits.
const EVIDENCE_TOOLS: &str = "Bash|Edit|Write|MultiEdit|NotebookEdit";

/// Cursor events → (binary, timeout seconds); every command gets `--cursor`.
const CURSOR_HOOKS: [(&str, &str, i64); 9] = [
    ("sessionStart", HOOK_PROMPT, 10),
    ("beforeSubmitPrompt", HOOK_PROMPT, 10),
    ("afterAgentResponse", HOOK_STOP, 30),
    ("stop", HOOK_STOP, 30),
    ("beforeShellExecution", HOOK_PROMPT, 10),
    ("beforeMCPExecution", HOOK_PROMPT, 10),
    ("beforeReadFile", HOOK_PROMPT, 10),
    ("afterShellExecution", HOOK_STOP, 10),
    ("afterFileEdit", HOOK_STOP, 10),
];

/// The existing document has a different shape where memd needs to write.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeError {
    /// Where, as `hooks.Stop` or `(top level)`.
    pub at: String,
    pub expected: &'static str,
    pub found: &'static str,
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} should be {} but is {}",
            self.at, self.expected, self.found
        )
    }
}

impl std::error::Error for ShapeError {}

pub(crate) fn root_mut(doc: &mut Json) -> Result<&mut Obj, ShapeError> {
    let found = doc.kind();
    doc.as_object_mut().ok_or(ShapeError {
        at: "(top level)".into(),
        expected: "an object",
        found,
    })
}

pub(crate) fn object_member<'a>(
    obj: &'a mut Obj,
    key: &str,
    at: &str,
) -> Result<&'a mut Obj, ShapeError> {
    let v = obj.get_or_insert_with(key, || Json::Object(Obj::new()));
    let found = v.kind();
    v.as_object_mut().ok_or(ShapeError {
        at: at.to_string(),
        expected: "an object",
        found,
    })
}

fn array_member<'a>(
    obj: &'a mut Obj,
    key: &str,
    at: &str,
) -> Result<&'a mut Vec<Json>, ShapeError> {
    let v = obj.get_or_insert_with(key, || Json::Array(Vec::new()));
    let found = v.kind();
    v.as_array_mut().ok_or(ShapeError {
        at: at.to_string(),
        expected: "an array",
        found,
    })
}

/// The program a hook command line runs: its first word, unquoted (see [`hookcmd::program_of`]).
pub fn command_program(cmd: &str) -> String {
    hookcmd::program_of(cmd)
}

/// True when the command runs one of memd's hook executables (wherever installed, `.exe` or
/// not).
pub fn is_memd_command(cmd: &str) -> bool {
    let program = command_program(cmd);
    let name = hookcmd::program_stem(&program);
    name == HOOK_PROMPT || name == HOOK_STOP
}

pub fn is_memd_handler(h: &Json) -> bool {
    h.get("command")
        .and_then(Json::as_str)
        .is_some_and(is_memd_command)
}

/// The command line for `client` on this OS (see `hookcmd` for each shell's quoting).
fn hook_command(client: ClientKind, bin: &Path, exe: &str, args: &str) -> String {
    hookcmd::hook_line(Os::current(), client, &bin.to_string_lossy(), exe, args)
}

/// Puts `ours` where the first memd entry of `list` is and drops any other memd entry; appends
/// it when there is none. `find` says whether an element holds memd entries and edits it.
fn replace_first_or_append(list: &mut Vec<Json>, ours: Json, is_ours: impl Fn(&Json) -> bool) {
    match list.iter().position(&is_ours) {
        Some(first) => {
            list[first] = ours;
            let mut i = 0;
            list.retain(|e| {
                let keep = i <= first || !is_ours(e);
                i += 1;
                keep
            });
        }
        None => list.push(ours),
    }
}

// ---- Claude Code settings.json ----

/// Adds memd's hooks and tool permissions to `~/.claude/settings.json`.
pub fn claude_settings_add(doc: &mut Json, bin: &Path) -> Result<(), ShapeError> {
    hooks_add(doc, ClientKind::ClaudeCode, bin, "", &CLAUDE_HOOKS)?;
    let root = root_mut(doc)?;
    let permissions = object_member(root, "permissions", "permissions")?;
    let allow = array_member(permissions, "allow", "permissions.allow")?;
    for tool in CLAUDE_TOOL_PERMISSIONS.iter().chain([&SCORE_PERMISSION]) {
        if !allow.iter().any(|e| e.as_str() == Some(tool)) {
            allow.push(Json::str(*tool));
        }
    }
    Ok(())
}

/// Adds one handler per `(event, binary, timeout, matcher)` of `table` to a Claude-style
/// `hooks` object (Claude Code's settings.json, Codex's hooks.json), each command run with
/// `args`.
pub fn hooks_add(
    doc: &mut Json,
    client: ClientKind,
    bin: &Path,
    args: &str,
    table: &[(&str, &str, i64, Option<&str>)],
) -> Result<(), ShapeError> {
    let root = root_mut(doc)?;
    let hooks = object_member(root, "hooks", "hooks")?;
    for &(event, exe, timeout, matcher) in table {
        let at = format!("hooks.{event}");
        let groups = array_member(hooks, event, &at)?;
        let handler = Json::object([
            ("type", Json::str("command")),
            ("command", Json::str(hook_command(client, bin, exe, args))),
            ("timeout", Json::int(timeout)),
        ]);
        upsert_claude_handler(groups, handler, matcher, &at)?;
    }
    Ok(())
}

/// Within an event's matcher groups: the first memd handler becomes `handler`, other memd
/// handlers go (and groups left empty by that), or a new group is appended.
fn upsert_claude_handler(
    groups: &mut Vec<Json>,
    handler: Json,
    matcher: Option<&str>,
    at: &str,
) -> Result<(), ShapeError> {
    let mut placed = false;
    for (i, group) in groups.iter_mut().enumerate() {
        let Some(handlers) = group.as_object_mut().and_then(|g| g.get_mut("hooks")) else {
            continue;
        };
        let found = handlers.kind();
        let Some(list) = handlers.as_array_mut() else {
            return Err(ShapeError {
                at: format!("{at}[{i}].hooks"),
                expected: "an array",
                found,
            });
        };
        if !list.iter().any(is_memd_handler) {
            continue;
        }
        if placed {
            list.retain(|h| !is_memd_handler(h));
        } else {
            replace_first_or_append(list, handler.clone(), is_memd_handler);
            placed = true;
        }
    }
    groups.retain(|g| !is_emptied_group(g));
    if !placed {
        let group = match matcher {
            Some(m) => Json::object([
                ("matcher", Json::str(m)),
                ("hooks", Json::Array(vec![handler])),
            ]),
            None => Json::object([("hooks", Json::Array(vec![handler]))]),
        };
        groups.push(group);
    }
    Ok(())
}

/// A matcher group whose handler list is empty (left so by removing ours).
fn is_emptied_group(g: &Json) -> bool {
    g.get("hooks")
        .and_then(Json::as_array)
        .is_some_and(Vec::is_empty)
}

/// Removes every memd hook (any event) and memd's tool permissions. Returns whether anything
/// was removed. Containers memd emptied are removed too; ones that were already empty stay.
pub fn claude_settings_remove(doc: &mut Json) -> Result<bool, ShapeError> {
    let root = root_mut(doc)?;
    let mut removed = false;
    if let Some(hooks) = root.get_mut("hooks").and_then(Json::as_object_mut) {
        let events: Vec<String> = hooks.keys().map(str::to_string).collect();
        let mut emptied = Vec::new();
        for event in events {
            let Some(groups) = hooks.get_mut(&event).and_then(Json::as_array_mut) else {
                continue;
            };
            let mut event_removed = false;
            for group in groups.iter_mut() {
                if let Some(list) = group
                    .as_object_mut()
                    .and_then(|g| g.get_mut("hooks"))
                    .and_then(Json::as_array_mut)
                {
                    let before = list.len();
                    list.retain(|h| !is_memd_handler(h));
                    event_removed |= list.len() != before;
                }
            }
            if event_removed {
                groups.retain(|g| !is_emptied_group(g));
                removed = true;
                if groups.is_empty() {
                    emptied.push(event);
                }
            }
        }
        for event in &emptied {
            hooks.remove(event);
        }
        if !emptied.is_empty() && hooks.is_empty() {
            root.remove("hooks");
        }
    }
    if let Some(permissions) = root.get_mut("permissions").and_then(Json::as_object_mut) {
        let mut emptied = false;
        if let Some(allow) = permissions.get_mut("allow").and_then(Json::as_array_mut) {
            let before = allow.len();
            allow.retain(|e| {
                !e.as_str()
                    .is_some_and(|s| CLAUDE_TOOL_PERMISSIONS.contains(&s) || s == SCORE_PERMISSION)
            });
            if allow.len() != before {
                removed = true;
                emptied = allow.is_empty();
            }
        }
        if emptied {
            permissions.remove("allow");
            if permissions.is_empty() {
                root.remove("permissions");
            }
        }
    }
    Ok(removed)
}

// ---- MCP registration (~/.claude.json, ~/.cursor/mcp.json) ----

/// The arguments that make `memd` the stdio MCP server (`memd mcp`).
pub const STDIO_ARGS: [&str; 1] = ["mcp"];

/// The default `mcpServers.memd` entry: the client starts `memd mcp`, which reads the token from
/// the private data dir itself, so the client's file holds no secret. Claude Code is given
/// `type: stdio`; Cursor infers stdio from `command`. No `env`: the bridge inherits the client's
/// environment, exactly as the hooks do, so both reach the same daemon.
pub fn mcp_stdio_entry(memd: &Path, with_type: bool) -> Json {
    let command = Json::str(memd.to_string_lossy());
    let args = Json::Array(STDIO_ARGS.iter().map(|a| Json::str(*a)).collect());
    if with_type {
        Json::object([
            ("type", Json::str("stdio")),
            ("command", command),
            ("args", args),
        ])
    } else {
        Json::object([("command", command), ("args", args)])
    }
}

/// The `--mcp http` entry for Claude Code (`type: http`) or Cursor (no `type`): the bearer token
/// sits in the client's file, which is why that file is kept private.
pub fn mcp_http_entry(url: &str, token: &str, with_type: bool) -> Json {
    let headers = Json::object([("Authorization", Json::str(format!("Bearer {token}")))]);
    if with_type {
        Json::object([
            ("type", Json::str("http")),
            ("url", Json::str(url)),
            ("headers", headers),
        ])
    } else {
        Json::object([("url", Json::str(url)), ("headers", headers)])
    }
}

/// Sets root `mcpServers.memd`, keeping its position and every other server.
pub fn mcp_add(doc: &mut Json, entry: Json) -> Result<(), ShapeError> {
    let root = root_mut(doc)?;
    let servers = object_member(root, "mcpServers", "mcpServers")?;
    servers.insert(SERVER_NAME, entry);
    Ok(())
}

/// Claude Code's always-loaded scoring entry: only `score_response`, with a one-line
/// description, so a scored turn needs no `ToolSearch` round trip (Claude Code 2.1.121+).
pub fn mcp_score_entry(memd: &Path) -> Json {
    let args = ["mcp", "--only", "score_response"];
    Json::object([
        ("type", Json::str("stdio")),
        ("command", Json::str(memd.to_string_lossy())),
        (
            "args",
            Json::Array(args.iter().map(|a| Json::str(*a)).collect()),
        ),
        ("alwaysLoad", Json::Bool(true)),
    ])
}

/// Sets (`Some`) or removes (`None`) root `mcpServers.memd-score`.
pub fn mcp_set_score(doc: &mut Json, entry: Option<Json>) -> Result<(), ShapeError> {
    let root = root_mut(doc)?;
    match entry {
        Some(e) => {
            object_member(root, "mcpServers", "mcpServers")?.insert(SCORE_SERVER, e);
        }
        None => {
            if let Some(servers) = root.get_mut("mcpServers").and_then(Json::as_object_mut) {
                servers.remove(SCORE_SERVER);
            }
        }
    }
    Ok(())
}

/// Removes root `mcpServers.memd` and `memd-score` (and `mcpServers` if that emptied it).
pub fn mcp_remove(doc: &mut Json) -> Result<bool, ShapeError> {
    let root = root_mut(doc)?;
    let Some(servers) = root.get_mut("mcpServers").and_then(Json::as_object_mut) else {
        return Ok(false);
    };
    let score = servers.remove(SCORE_SERVER).is_some();
    if servers.remove(SERVER_NAME).is_none() && !score {
        return Ok(false);
    }
    if servers.is_empty() {
        root.remove("mcpServers");
    }
    Ok(true)
}

/// The registered memd MCP entry, if any.
pub fn mcp_registered(doc: &Json) -> Option<&Json> {
    doc.get("mcpServers")?.get(SERVER_NAME)
}

/// An entry the client starts as a process: `type: stdio`, or no `type` and a `command` (how
/// Cursor and older Claude Code entries say it). Anything else is reached by URL.
pub fn mcp_is_stdio(entry: &Json) -> bool {
    match entry.get("type").and_then(Json::as_str) {
        // Copilot CLI calls a command server `local`.
        Some(t) => t == "stdio" || t == "local",
        None => entry.get("command").is_some(),
    }
}

// ---- Cursor hooks.json ----

/// Adds memd's Cursor hooks (`version: 1` format).
pub fn cursor_hooks_add(doc: &mut Json, bin: &Path) -> Result<(), ShapeError> {
    let root = root_mut(doc)?;
    if root.get("version").is_none() {
        let rest = std::mem::take(root);
        root.insert("version", Json::int(1));
        for (k, v) in rest.iter() {
            root.insert(k, v.clone());
        }
    }
    let hooks = object_member(root, "hooks", "hooks")?;
    for (event, exe, timeout) in CURSOR_HOOKS {
        let entries = array_member(hooks, event, &format!("hooks.{event}"))?;
        let entry = Json::object([
            (
                "command",
                Json::str(hook_command(ClientKind::Cursor, bin, exe, "--cursor")),
            ),
            ("timeout", Json::int(timeout)),
        ]);
        replace_first_or_append(entries, entry, is_memd_handler);
    }
    Ok(())
}

/// Removes every memd entry from Cursor's hooks (any event).
pub fn cursor_hooks_remove(doc: &mut Json) -> Result<bool, ShapeError> {
    let root = root_mut(doc)?;
    let Some(hooks) = root.get_mut("hooks").and_then(Json::as_object_mut) else {
        return Ok(false);
    };
    let events: Vec<String> = hooks.keys().map(str::to_string).collect();
    let mut removed = false;
    for event in events {
        let Some(entries) = hooks.get_mut(&event).and_then(Json::as_array_mut) else {
            continue;
        };
        let before = entries.len();
        entries.retain(|e| !is_memd_handler(e));
        if entries.len() != before {
            removed = true;
            if entries.is_empty() {
                hooks.remove(&event);
            }
        }
    }
    if removed && hooks.is_empty() {
        root.remove("hooks");
    }
    Ok(removed)
}

/// True when nothing but what memd would create is left (`{}` or `{"version": 1}`): the file
/// can go.
pub fn is_leftover_shell(doc: &Json) -> bool {
    let Some(root) = doc.as_object() else {
        return false;
    };
    root.is_empty() || (root.len() == 1 && root.get("version") == Some(&Json::int(1)))
}

// ---- inspection (doctor) ----

/// Commands of memd hooks configured for `event` in a Claude settings document.
pub fn claude_hook_commands(doc: &Json, event: &str) -> Vec<String> {
    let groups = doc
        .get("hooks")
        .and_then(|h| h.get(event))
        .and_then(Json::as_array);
    groups
        .into_iter()
        .flatten()
        .filter_map(|g| g.get("hooks").and_then(Json::as_array))
        .flatten()
        .filter_map(|h| h.get("command").and_then(Json::as_str))
        .filter(|c| is_memd_command(c))
        .map(str::to_string)
        .collect()
}

/// Commands of memd hooks configured for `event` in a Cursor hooks document.
pub fn cursor_hook_commands(doc: &Json, event: &str) -> Vec<String> {
    doc.get("hooks")
        .and_then(|h| h.get(event))
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|h| h.get("command").and_then(Json::as_str))
        .filter(|c| is_memd_command(c))
        .map(str::to_string)
        .collect()
}

/// Events memd hooks into, per client (for doctor).
pub fn claude_events() -> impl Iterator<Item = &'static str> {
    CLAUDE_HOOKS.iter().map(|(e, _, _, _)| *e)
}

pub fn cursor_events() -> impl Iterator<Item = &'static str> {
    CURSOR_HOOKS.iter().map(|(e, _, _)| *e)
}

#[path = "merge_agents.rs"]
pub mod agents;

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
