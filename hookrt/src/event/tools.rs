//! Tool events: the calls the agent is about to make, and the ones it made.
//!
//! Owns turning each client's tool payload (Claude Code `tool_name` + `tool_input`; Cursor's
//! per-event `command`, `file_path`, `url`) into one [`ToolCall`]. Must never keep a tool's
//! output: only whether it failed and its exit code reach memd.

use proto::{ToolCall, ToolKind};
use serde_json::Value;

/// Which before-event a guard answer goes to (each client event has its own answer shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeforeEvent {
    /// Claude Code `PreToolUse`: `permissionDecision` allow | ask | deny.
    ClaudePreToolUse,
    /// Cursor `beforeShellExecution` / `beforeMCPExecution`: `permission` allow | ask | deny.
    CursorPermission,
    /// Cursor `beforeReadFile`: `permission` allow | deny only.
    CursorReadFile,
    /// Gemini CLI `BeforeTool`: `decision` deny | ask, nothing when memd does not object.
    GeminiBeforeTool,
    /// memd's OpenCode plugin before a tool: `decision` deny, nothing when memd does not object.
    Opencode,
}

/// Longest command sent to memd (a longer one is cut; the guard reads its start).
const COMMAND_MAX_CHARS: usize = proto::limits::COMMAND_MAX_CHARS;

/// A Claude Code tool call from `tool_name` and `tool_input`.
pub fn claude_tool(name: &str, input: Option<&Value>) -> ToolCall {
    let field = |key: &str| input.and_then(|i| i.get(key)).and_then(Value::as_str);
    let mut call = ToolCall {
        name: clip(name, proto::limits::ID_MAX_CHARS),
        ..ToolCall::default()
    };
    match name {
        "Bash" => {
            call.kind = ToolKind::Shell;
            call.command = field("command").map(|c| clip(c, COMMAND_MAX_CHARS));
        }
        "Read" => {
            call.kind = ToolKind::Read;
            call.path = field("file_path").map(str::to_string);
        }
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => {
            call.kind = ToolKind::Edit;
            call.path = field("file_path")
                .or_else(|| field("notebook_path"))
                .map(str::to_string);
        }
        // `mcp__<server>__<tool>`; a server name may itself hold underscores.
        _ => {
            if let Some((server, _tool)) = name
                .strip_prefix("mcp__")
                .and_then(|rest| rest.rsplit_once("__"))
            {
                call.kind = ToolKind::Mcp;
                call.server = Some(server.to_string());
            }
        }
    }
    call
}

/// A Gemini CLI tool call (`run_shell_command`, `read_file`, `write_file`, `replace`, MCP
/// tools, whose server `mcp_context.server_name` names).
pub fn gemini_tool(name: &str, input: Option<&Value>, mcp_context: Option<&Value>) -> ToolCall {
    let field = |key: &str| input.and_then(|i| i.get(key)).and_then(Value::as_str);
    let mut call = ToolCall {
        name: clip(name, proto::limits::ID_MAX_CHARS),
        ..ToolCall::default()
    };
    let server = mcp_context
        .and_then(|c| c.get("server_name"))
        .and_then(Value::as_str);
    match (name, server) {
        (_, Some(server)) => {
            call.kind = ToolKind::Mcp;
            call.server = Some(clip(server, proto::limits::ID_MAX_CHARS));
        }
        ("run_shell_command", _) => {
            call.kind = ToolKind::Shell;
            call.command = field("command").map(|c| clip(c, COMMAND_MAX_CHARS));
        }
        ("read_file", _) => {
            call.kind = ToolKind::Read;
            call.path = field("file_path").map(str::to_string);
        }
        ("write_file" | "replace", _) => {
            call.kind = ToolKind::Edit;
            call.path = field("file_path").map(str::to_string);
        }
        _ => {}
    }
    call
}

/// Whether a Gemini CLI `tool_response` says the tool failed (`error`, or a shell's nonzero
/// `Exit Code:` line in `llmContent`), and the exit code if any.
pub fn gemini_failure(response: Option<&Value>) -> (bool, Option<i32>) {
    let Some(r) = response else {
        return (false, None);
    };
    let errored = r.get("error").is_some_and(|e| !e.is_null());
    let code = r
        .get("llmContent")
        .and_then(Value::as_str)
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix("Exit Code:"))
        })
        .and_then(|c| c.trim().parse::<i32>().ok());
    (errored || code.is_some_and(|c| c != 0), code)
}

/// An OpenCode tool call as memd's plugin passes it (`bash` with `command`, `read` / `edit` /
/// `write` with `filePath`).
pub fn opencode_tool(name: &str, input: Option<&Value>) -> ToolCall {
    let field = |key: &str| input.and_then(|i| i.get(key)).and_then(Value::as_str);
    let mut call = ToolCall {
        name: clip(name, proto::limits::ID_MAX_CHARS),
        ..ToolCall::default()
    };
    match name {
        "bash" => {
            call.kind = ToolKind::Shell;
            call.command = field("command").map(|c| clip(c, COMMAND_MAX_CHARS));
        }
        "read" => {
            call.kind = ToolKind::Read;
            call.path = field("filePath").map(str::to_string);
        }
        "edit" | "write" | "patch" => {
            call.kind = ToolKind::Edit;
            call.path = field("filePath").map(str::to_string);
        }
        _ => {}
    }
    call
}

/// A Cursor shell command.
pub fn cursor_shell(command: &str) -> ToolCall {
    ToolCall {
        kind: ToolKind::Shell,
        name: "shell".into(),
        command: Some(clip(command, COMMAND_MAX_CHARS)),
        ..ToolCall::default()
    }
}

/// A Cursor file event (`read` or `edit`).
pub fn cursor_file(kind: ToolKind, path: &str) -> ToolCall {
    ToolCall {
        kind,
        name: if kind == ToolKind::Read {
            "read_file"
        } else {
            "edit_file"
        }
        .into(),
        path: Some(path.to_string()),
        ..ToolCall::default()
    }
}

/// A Cursor MCP call: the server by the name in `mcp.json` (`mcp_server_name`) when Cursor
/// sends it, else by its `url` or `command` (the hook then recognises memd's own by its port).
pub fn cursor_mcp(
    tool: &str,
    server_name: Option<&str>,
    url: Option<&str>,
    command: Option<&str>,
) -> ToolCall {
    let server = match (server_name.filter(|n| !n.trim().is_empty()), url, command) {
        (Some(name), _, _) => name.to_string(),
        (None, _, Some(c)) if is_memd_command(c) => "memd".to_string(),
        (None, Some(u), _) => u.to_string(),
        (None, None, Some(c)) => c.to_string(),
        (None, None, None) => String::new(),
    };
    ToolCall {
        kind: ToolKind::Mcp,
        name: clip(tool, proto::limits::ID_MAX_CHARS),
        server: Some(clip(&server, proto::limits::ID_MAX_CHARS)),
        ..ToolCall::default()
    }
}

/// Whether `url` is memd's own MCP endpoint on `port` (`http://127.0.0.1:<port>/mcp`).
pub fn is_memd_url(url: &str, port: u16) -> bool {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or(url)
        .trim_end_matches('/');
    [
        format!("127.0.0.1:{port}/mcp"),
        format!("localhost:{port}/mcp"),
    ]
    .contains(&rest.to_string())
}

fn is_memd_command(command: &str) -> bool {
    let mut words = command.split_whitespace();
    let program = words.next().unwrap_or("");
    program.rsplit('/').next() == Some("memd") && words.next() == Some("mcp")
}

/// Whether a Claude Code `tool_response` says the tool failed, and its exit code if any.
pub fn claude_failure(response: Option<&Value>) -> (bool, Option<i32>) {
    let Some(r) = response else {
        return (false, None);
    };
    let code = ["exit_code", "exitCode", "returncode"]
        .iter()
        .find_map(|k| r.get(*k).and_then(Value::as_i64))
        .and_then(|c| i32::try_from(c).ok());
    let flagged = ["is_error", "isError", "interrupted"]
        .iter()
        .any(|k| r.get(*k).and_then(Value::as_bool) == Some(true));
    (flagged || code.is_some_and(|c| c != 0), code)
}

fn clip(s: &str, max_chars: usize) -> String {
    crate::log::truncate_chars(s, max_chars).to_string()
}
