//! Which client event a hook run is handling, parsed from the client's stdin JSON.
//!
//! Claude Code sends `session_id` and PascalCase `hook_event_name`s; Cursor sends
//! `conversation_id`, `cursor_version` and camelCase names. This module owns that mapping and
//! must never act on an event: it only names it and extracts the fields the hooks use.

mod agents;
pub mod tools;

use crate::input::Mode;
use proto::{Client, ToolCall, ToolKind};
use serde::Deserialize;
pub use tools::BeforeEvent;

/// The fields of both clients' hook input that memd uses; everything else is ignored.
#[derive(Debug, Default, Deserialize)]
struct RawInput {
    #[serde(default)]
    hook_event_name: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    conversation_id: Option<String>,
    #[serde(default)]
    transcript_path: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    workspace_roots: Option<Vec<String>>,
    #[serde(default)]
    cursor_version: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    /// SessionStart: `startup`, `resume`, `clear` or `compact`.
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    stop_hook_active: Option<bool>,
    /// PreCompact: `manual` (`/compact`) or `auto`.
    #[serde(default)]
    trigger: Option<String>,
    /// PreCompact: what the user asked the compaction to keep (`/compact <instructions>`).
    #[serde(default)]
    custom_instructions: Option<String>,
    #[serde(default)]
    last_assistant_message: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_input: Option<serde_json::Value>,
    #[serde(default)]
    tool_response: Option<serde_json::Value>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    file_path: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    mcp_server_name: Option<String>,
    /// Gemini CLI `AfterAgent`: the agent's final text.
    #[serde(default)]
    prompt_response: Option<String>,
    /// Gemini CLI tool events: the MCP server behind a tool (`server_name`).
    #[serde(default)]
    mcp_context: Option<serde_json::Value>,
    /// memd's OpenCode plugin: the session's worktree, and what a tool or turn did.
    #[serde(default)]
    project_dir: Option<String>,
    #[serde(default)]
    exit_code: Option<i64>,
    #[serde(default)]
    score_call_seen: Option<bool>,
    /// VS Code's agent hooks spell the common fields in camelCase.
    #[serde(default, rename = "hookEventName")]
    vscode_event_name: Option<String>,
    #[serde(default, rename = "sessionId")]
    vscode_session_id: Option<String>,
}

/// One parsed hook invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Claude Code (or Codex CLI) `UserPromptSubmit`.
    ClaudePrompt {
        client: Client,
        session_id: String,
        prompt: String,
        cwd: Option<String>,
        project_dir: Option<String>,
    },
    /// Claude Code (or Codex CLI) `SessionStart` (context before the first prompt).
    ClaudeSessionStart {
        client: Client,
        session_id: String,
        /// `startup`, `resume`, `clear` or `compact`.
        source: Option<String>,
        cwd: Option<String>,
        project_dir: Option<String>,
    },
    /// Claude Code (or Codex CLI) `Stop`. Codex's transcript is not Claude Code's format, so
    /// its `transcript_path` is left out.
    ClaudeStop {
        client: Client,
        session_id: String,
        transcript_path: Option<String>,
        stop_hook_active: bool,
        last_assistant_message: Option<String>,
        project_dir: Option<String>,
    },
    /// Claude Code `PreCompact`: the conversation's context is about to be compacted.
    ClaudePreCompact {
        client: Client,
        session_id: String,
        /// `manual` or `auto`.
        trigger: String,
        custom_instructions: Option<String>,
        project_dir: Option<String>,
    },
    /// Cursor `sessionStart`.
    CursorSessionStart {
        conversation_id: String,
        cwd: Option<String>,
        project_dir: Option<String>,
    },
    /// Cursor `beforeSubmitPrompt`.
    CursorPrompt {
        conversation_id: String,
        prompt: String,
        cwd: Option<String>,
        project_dir: Option<String>,
    },
    /// Cursor `afterAgentResponse`: the assistant's final text.
    CursorResponse {
        conversation_id: String,
        text: String,
        project_dir: Option<String>,
    },
    /// Cursor `stop`: only the end of the turn, nothing to send.
    CursorStop,
    /// A tool about to run (Claude Code `PreToolUse`; Cursor `beforeShellExecution`,
    /// `beforeMCPExecution`, `beforeReadFile`): the guard's moment.
    ToolBefore {
        event: BeforeEvent,
        client: Client,
        conversation_id: String,
        tool: ToolCall,
        project_dir: Option<String>,
    },
    /// A tool that ran (Claude Code `PostToolUse`; Cursor `afterShellExecution`,
    /// `afterFileEdit`): evidence.
    ToolAfter {
        client: Client,
        conversation_id: String,
        tool: ToolCall,
        failed: bool,
        exit_code: Option<i32>,
        project_dir: Option<String>,
    },
    /// A prompt, from a client that takes context as text (Gemini CLI `BeforeAgent`, memd's
    /// OpenCode plugin at `chat.message`).
    Prompt {
        client: Client,
        session_id: String,
        prompt: String,
        cwd: Option<String>,
        project_dir: Option<String>,
    },
    /// A finished turn with both texts (Gemini CLI `AfterAgent`, OpenCode's idle session).
    TurnEnd {
        client: Client,
        session_id: String,
        user_message: String,
        assistant_response: String,
        project_dir: Option<String>,
        /// Gemini CLI retrying after a stop hook's refusal: not a new exchange.
        retry: bool,
        score_call_seen: Option<bool>,
    },
    /// An event this hook does not handle, or input from the other client than the mode says.
    Ignored { reason: String },
}

/// Why stdin is not a usable hook event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventError {
    /// Not JSON, or a known field has the wrong type.
    Malformed(String),
    /// A field the event needs is missing or empty.
    Missing(&'static str),
}

impl EventError {
    pub fn message(&self) -> String {
        match self {
            EventError::Malformed(e) => format!("stdin is not hook JSON: {e}"),
            EventError::Missing(field) => format!("hook input lacks `{field}`"),
        }
    }
}

/// The event name as sent by the client, for the log (before full parsing succeeds).
pub fn event_name(raw: &[u8]) -> Option<String> {
    serde_json::from_slice::<RawInput>(raw)
        .ok()
        .and_then(|r| r.hook_event_name)
}

/// Parses the stdin of a hook invoked in `mode`, outside any Claude Code project setting.
pub fn parse_event(raw: &[u8], mode: Mode) -> Result<Event, EventError> {
    parse_event_in(raw, mode, None)
}

/// Parses the stdin of a hook invoked in `mode`. `claude_project_dir` is `CLAUDE_PROJECT_DIR`
/// (where the session was started): it names a Claude Code conversation's project better than
/// `cwd`, which follows the agent's `cd`s. Cursor's project is its first workspace root.
pub fn parse_event_in(
    raw: &[u8],
    mode: Mode,
    claude_project_dir: Option<String>,
) -> Result<Event, EventError> {
    let input: RawInput =
        serde_json::from_slice(raw).map_err(|e| EventError::Malformed(describe_json_error(&e)))?;
    let name = input.hook_event_name.clone().unwrap_or_default();
    match mode {
        Mode::Claude if input.cursor_version.is_some() => Ok(Event::Ignored {
            reason: "Cursor input reached the Claude Code copy of the hook".into(),
        }),
        Mode::Claude if input.hook_event_name.is_none() && input.vscode_event_name.is_some() => {
            Ok(agents::vscode_event(input))
        }
        Mode::Claude => claude_event(
            &name,
            input,
            non_empty(claude_project_dir),
            Client::ClaudeCode,
        ),
        // Codex sets no CLAUDE_PROJECT_DIR of its own; an inherited one names another session.
        Mode::Codex => {
            let mut input = input;
            input.transcript_path = None;
            claude_event(&name, input, None, Client::Codex)
        }
        Mode::Cursor => cursor_event(&name, input),
        Mode::Gemini => agents::gemini_event(&name, input),
        Mode::Opencode => agents::opencode_event(&name, input),
    }
}

/// What went wrong and where, without serde_json's `Display`: it quotes the offending value
/// (`invalid type: string "sk-..."`), and the hook log must never hold input text.
fn describe_json_error(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Io => "read error",
        serde_json::error::Category::Syntax => "invalid JSON",
        serde_json::error::Category::Data => "a field has the wrong type",
        serde_json::error::Category::Eof => "truncated JSON",
    };
    format!("{what} at line {} column {}", e.line(), e.column())
}

/// Claude Code's events, which Codex CLI sends in the same shapes (`client` says which).
fn claude_event(
    name: &str,
    input: RawInput,
    env_project_dir: Option<String>,
    client: Client,
) -> Result<Event, EventError> {
    let session_id = || required(input.session_id.clone(), "session_id");
    let cwd = non_empty(input.cwd.clone());
    let project_dir = env_project_dir.or_else(|| cwd.clone());
    match name {
        "UserPromptSubmit" => Ok(Event::ClaudePrompt {
            client,
            session_id: session_id()?,
            prompt: input.prompt.unwrap_or_default(),
            cwd,
            project_dir,
        }),
        "SessionStart" => Ok(Event::ClaudeSessionStart {
            client,
            session_id: session_id()?,
            source: non_empty(input.source.clone()),
            cwd,
            project_dir,
        }),
        "Stop" => Ok(Event::ClaudeStop {
            client,
            session_id: session_id()?,
            transcript_path: non_empty(input.transcript_path),
            stop_hook_active: input.stop_hook_active.unwrap_or(false),
            last_assistant_message: input.last_assistant_message,
            project_dir,
        }),
        "PreCompact" => Ok(Event::ClaudePreCompact {
            client,
            session_id: session_id()?,
            trigger: input.trigger.clone().unwrap_or_default(),
            custom_instructions: non_empty(input.custom_instructions.clone()),
            project_dir,
        }),
        "PreToolUse" => Ok(Event::ToolBefore {
            event: BeforeEvent::ClaudePreToolUse,
            client,
            conversation_id: session_id()?,
            tool: tools::claude_tool(
                input.tool_name.as_deref().unwrap_or(""),
                input.tool_input.as_ref(),
            ),
            project_dir,
        }),
        // Claude Code sends `PostToolUse` after a tool succeeded and `PostToolUseFailure` after
        // it failed (its `error` text is not kept).
        "PostToolUse" | "PostToolUseFailure" => {
            let (failed, exit_code) = match name {
                "PostToolUseFailure" => (true, None),
                _ => tools::claude_failure(input.tool_response.as_ref()),
            };
            Ok(Event::ToolAfter {
                client,
                conversation_id: session_id()?,
                tool: tools::claude_tool(
                    input.tool_name.as_deref().unwrap_or(""),
                    input.tool_input.as_ref(),
                ),
                failed,
                exit_code,
                project_dir,
            })
        }
        other => Ok(Event::Ignored {
            reason: format!("{client:?} event `{other}` is not handled"),
        }),
    }
}

fn cursor_event(name: &str, input: RawInput) -> Result<Event, EventError> {
    // sessionStart also carries `session_id` (equal to conversation_id); accept either.
    let conversation_id = || {
        required(
            input.conversation_id.clone().or(input.session_id.clone()),
            "conversation_id",
        )
    };
    let cwd = || non_empty(input.cwd.clone()).or_else(|| first_root(&input.workspace_roots));
    let project_dir =
        || first_root(&input.workspace_roots).or_else(|| non_empty(input.cwd.clone()));
    match name {
        "sessionStart" => Ok(Event::CursorSessionStart {
            conversation_id: conversation_id()?,
            cwd: cwd(),
            project_dir: project_dir(),
        }),
        "beforeSubmitPrompt" => Ok(Event::CursorPrompt {
            conversation_id: conversation_id()?,
            prompt: input.prompt.clone().unwrap_or_default(),
            cwd: cwd(),
            project_dir: project_dir(),
        }),
        "afterAgentResponse" => Ok(Event::CursorResponse {
            conversation_id: conversation_id()?,
            text: input.text.clone().unwrap_or_default(),
            project_dir: project_dir(),
        }),
        "stop" => Ok(Event::CursorStop),
        "beforeShellExecution" | "beforeMCPExecution" | "beforeReadFile" => {
            let (event, tool) = match name {
                "beforeShellExecution" => (
                    BeforeEvent::CursorPermission,
                    tools::cursor_shell(&required(input.command.clone(), "command")?),
                ),
                "beforeMCPExecution" => (
                    BeforeEvent::CursorPermission,
                    tools::cursor_mcp(
                        input.tool_name.as_deref().unwrap_or(""),
                        input.mcp_server_name.as_deref(),
                        input.url.as_deref(),
                        input.command.as_deref(),
                    ),
                ),
                _ => (
                    BeforeEvent::CursorReadFile,
                    tools::cursor_file(
                        ToolKind::Read,
                        &required(input.file_path.clone(), "file_path")?,
                    ),
                ),
            };
            Ok(Event::ToolBefore {
                event,
                client: Client::Cursor,
                conversation_id: conversation_id()?,
                tool,
                project_dir: project_dir(),
            })
        }
        "afterShellExecution" | "afterFileEdit" => Ok(Event::ToolAfter {
            client: Client::Cursor,
            conversation_id: conversation_id()?,
            tool: if name == "afterFileEdit" {
                tools::cursor_file(
                    ToolKind::Edit,
                    &required(input.file_path.clone(), "file_path")?,
                )
            } else {
                tools::cursor_shell(&required(input.command.clone(), "command")?)
            },
            // Cursor reports neither an exit code nor a failure for these events.
            failed: false,
            exit_code: None,
            project_dir: project_dir(),
        }),
        other => Ok(Event::Ignored {
            reason: format!("Cursor event `{other}` is not handled"),
        }),
    }
}

fn required(value: Option<String>, field: &'static str) -> Result<String, EventError> {
    non_empty(value).ok_or(EventError::Missing(field))
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

fn first_root(roots: &Option<Vec<String>>) -> Option<String> {
    roots
        .as_ref()
        .and_then(|r| r.iter().find(|p| !p.trim().is_empty()).cloned())
}

#[cfg(test)]
mod tests;
