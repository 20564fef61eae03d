//! The wire types of tool events: what the hooks send before a tool runs (to be guarded) and
//! after it ran (evidence), and the guard's answer.

use crate::hooks::Client;
#[cfg(feature = "schema")]
use crate::limits;
use serde::{Deserialize, Serialize};

/// What kind of tool the agent is using, as far as memd tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// A shell command (Claude Code `Bash`, Cursor shell execution).
    Shell,
    /// Reading a file into the agent's context (Claude Code `Read`, Cursor `beforeReadFile`).
    Read,
    /// Writing or editing a file (Claude Code `Edit`/`Write`/`MultiEdit`, Cursor `afterFileEdit`).
    Edit,
    /// A tool of an MCP server.
    Mcp,
    /// Anything else (searches, web fetches, ...): recorded, never guarded.
    #[default]
    Other,
}

/// One tool call, reduced to what the guard and the evidence use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ToolCall {
    pub kind: ToolKind,
    /// The client's own name for the tool (`Bash`, `Read`, `mcp__github__create_issue`, ...).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::ID_MAX_CHARS)))]
    pub name: String,
    /// The command line (shell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::COMMAND_MAX_CHARS)))]
    pub command: Option<String>,
    /// The file read or edited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::DIR_MAX_CHARS)))]
    pub path: Option<String>,
    /// The MCP server (as the client names it) and tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::ID_MAX_CHARS)))]
    pub server: Option<String>,
}

/// `POST /api/hooks/pre-tool`: may this tool call run?
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PreToolRequest {
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = limits::ID_MAX_CHARS)))]
    pub conversation_id: String,
    #[serde(default)]
    pub client: Client,
    pub tool: ToolCall,
    /// The project directory (absolute), for the learned guardrails of this project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::DIR_MAX_CHARS)))]
    pub project_dir: Option<String>,
}

/// The guard's answer. `allow` means memd does not object: the client's own permission rules
/// still apply (the hooks never approve on memd's behalf).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PreToolResponse {
    /// `allow` | `ask` | `deny`.
    pub decision: String,
    /// The rule that decided (`rm_root`, `learned`, ...); absent for `allow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// One sentence for the user and the agent; absent for `allow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The memory a learned guardrail cites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<String>,
}

/// `POST /api/hooks/post-tool`: what a tool did (evidence; never its output text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PostToolRequest {
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = limits::ID_MAX_CHARS)))]
    pub conversation_id: String,
    #[serde(default)]
    pub client: Client,
    pub tool: ToolCall,
    /// The command's exit code, when the client reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The client reported the tool as failed (an error, a non-zero exit, a timeout).
    #[serde(default)]
    pub failed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::DIR_MAX_CHARS)))]
    pub project_dir: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PostToolResponse {
    pub recorded: bool,
}
