//! Events of the clients that speak neither Claude Code's nor Cursor's dialect: Gemini CLI
//! (`--gemini`), memd's OpenCode plugin (`--opencode`), and VS Code's agent hooks, which run
//! the Claude Code copy of the hooks with camelCase common fields.
//!
//! Owns the mapping of their event names and fields onto [`Event`]. Must never act on an event.

use super::tools::{self, BeforeEvent};
use super::{Event, EventError, RawInput, non_empty, required};
use proto::Client;

/// Gemini CLI (`~/.gemini/settings.json`). Its project is the session's `cwd` (Gemini CLI
/// sets `GEMINI_PROJECT_DIR` to the same directory).
pub(super) fn gemini_event(name: &str, input: RawInput) -> Result<Event, EventError> {
    let session_id = || required(input.session_id.clone(), "session_id");
    let cwd = non_empty(input.cwd.clone());
    match name {
        "BeforeAgent" => Ok(Event::Prompt {
            client: Client::Gemini,
            session_id: session_id()?,
            prompt: input.prompt.clone().unwrap_or_default(),
            cwd: cwd.clone(),
            project_dir: cwd,
        }),
        "AfterAgent" => Ok(Event::TurnEnd {
            client: Client::Gemini,
            session_id: session_id()?,
            user_message: input.prompt.clone().unwrap_or_default(),
            assistant_response: input.prompt_response.clone().unwrap_or_default(),
            project_dir: cwd,
            retry: input.stop_hook_active.unwrap_or(false),
            score_call_seen: None,
        }),
        "BeforeTool" => Ok(Event::ToolBefore {
            event: BeforeEvent::GeminiBeforeTool,
            client: Client::Gemini,
            conversation_id: session_id()?,
            tool: gemini_tool(&input),
            project_dir: cwd,
        }),
        "AfterTool" => {
            let (failed, exit_code) = tools::gemini_failure(input.tool_response.as_ref());
            Ok(Event::ToolAfter {
                client: Client::Gemini,
                conversation_id: session_id()?,
                tool: gemini_tool(&input),
                failed,
                exit_code,
                project_dir: cwd,
            })
        }
        other => Ok(Event::Ignored {
            reason: format!("Gemini CLI event `{other}` is not handled"),
        }),
    }
}

fn gemini_tool(input: &RawInput) -> proto::ToolCall {
    tools::gemini_tool(
        input.tool_name.as_deref().unwrap_or(""),
        input.tool_input.as_ref(),
        input.mcp_context.as_ref(),
    )
}

/// memd's OpenCode plugin: the names are OpenCode's plugin hooks, the fields the plugin's.
pub(super) fn opencode_event(name: &str, input: RawInput) -> Result<Event, EventError> {
    let session_id = || required(input.session_id.clone(), "session_id");
    let cwd = non_empty(input.cwd.clone());
    let project_dir = non_empty(input.project_dir.clone()).or_else(|| cwd.clone());
    let tool = || {
        tools::opencode_tool(
            input.tool_name.as_deref().unwrap_or(""),
            input.tool_input.as_ref(),
        )
    };
    match name {
        "chat.message" => Ok(Event::Prompt {
            client: Client::Opencode,
            session_id: session_id()?,
            prompt: input.prompt.clone().unwrap_or_default(),
            cwd,
            project_dir,
        }),
        "session.idle" => Ok(Event::TurnEnd {
            client: Client::Opencode,
            session_id: session_id()?,
            user_message: input.prompt.clone().unwrap_or_default(),
            assistant_response: input.last_assistant_message.clone().unwrap_or_default(),
            project_dir,
            retry: false,
            score_call_seen: input.score_call_seen,
        }),
        "tool.execute.before" => Ok(Event::ToolBefore {
            event: BeforeEvent::Opencode,
            client: Client::Opencode,
            conversation_id: session_id()?,
            tool: tool(),
            project_dir,
        }),
        "tool.execute.after" => {
            let exit_code = input.exit_code.and_then(|c| i32::try_from(c).ok());
            Ok(Event::ToolAfter {
                client: Client::Opencode,
                conversation_id: session_id()?,
                tool: tool(),
                failed: exit_code.is_some_and(|c| c != 0),
                exit_code,
                project_dir,
            })
        }
        other => Ok(Event::Ignored {
            reason: format!("OpenCode plugin event `{other}` is not handled"),
        }),
    }
}

/// VS Code's agent hooks load `~/.claude/settings.json` and run memd's Claude Code hooks for
/// VS Code's own agent. Only the guard applies there: VS Code ignores `UserPromptSubmit`
/// output (context would be recorded as shown but never reach the model), and its `Stop`
/// carries no answer text (a stored exchange would be empty). Its terminal tool is guarded;
/// VS Code's answer shape for `PreToolUse` is Claude Code's.
pub(super) fn vscode_event(input: RawInput) -> Event {
    let name = input.vscode_event_name.as_deref().unwrap_or("");
    let tool = input.tool_name.as_deref().unwrap_or("");
    let command = input
        .tool_input
        .as_ref()
        .and_then(|i| i.get("command"))
        .and_then(serde_json::Value::as_str);
    match (
        name,
        tool,
        command,
        non_empty(input.vscode_session_id.clone()),
    ) {
        ("PreToolUse", "run_in_terminal" | "runTerminalCommand", Some(command), Some(session)) => {
            Event::ToolBefore {
                event: BeforeEvent::ClaudePreToolUse,
                client: Client::Other,
                conversation_id: session,
                tool: tools::cursor_shell(command),
                project_dir: non_empty(input.cwd.clone()),
            }
        }
        _ => Event::Ignored {
            reason: format!(
                "VS Code agent hook `{name}`: memd only guards terminal commands there (context and memory come through its MCP server)"
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::fixture;
    use super::super::{Event, parse_event};
    use crate::input::Mode;
    use proto::{Client, ToolKind};

    #[test]
    fn gemini_prompt_and_turn_end() {
        let event = parse_event(&fixture("gemini_before_agent.json"), Mode::Gemini).unwrap();
        let Event::Prompt {
            client,
            prompt,
            project_dir,
            ..
        } = event
        else {
            panic!("wrong event {event:?}")
        };
        assert_eq!(client, Client::Gemini);
        assert!(prompt.starts_with("Why does the checkout"));
        assert_eq!(project_dir.as_deref(), Some("/home/dev/shop"));
        let event = parse_event(&fixture("gemini_after_agent.json"), Mode::Gemini).unwrap();
        let Event::TurnEnd {
            user_message,
            assistant_response,
            retry,
            ..
        } = event
        else {
            panic!("wrong event {event:?}")
        };
        assert!(user_message.starts_with("Why does"));
        assert!(assistant_response.contains("port 5433"));
        assert!(!retry);
    }

    #[test]
    fn gemini_tools() {
        let event = parse_event(&fixture("gemini_before_tool.json"), Mode::Gemini).unwrap();
        let Event::ToolBefore { tool, client, .. } = event else {
            panic!("wrong event {event:?}")
        };
        assert_eq!((tool.kind, client), (ToolKind::Shell, Client::Gemini));
        assert_eq!(tool.command.as_deref(), Some("rm -rf / --no-preserve-root"));
        let event = parse_event(&fixture("gemini_before_tool_mcp.json"), Mode::Gemini).unwrap();
        let Event::ToolBefore { tool, .. } = event else {
            panic!("wrong event {event:?}")
        };
        assert_eq!(
            (tool.kind, tool.server.as_deref()),
            (ToolKind::Mcp, Some("memd"))
        );
        let event = parse_event(&fixture("gemini_after_tool.json"), Mode::Gemini).unwrap();
        let Event::ToolAfter {
            failed, exit_code, ..
        } = event
        else {
            panic!("wrong event {event:?}")
        };
        assert_eq!((failed, exit_code), (true, Some(101)));
        let other = br#"{"session_id":"s","hook_event_name":"PreCompress","trigger":"auto"}"#;
        assert!(matches!(
            parse_event(other, Mode::Gemini).unwrap(),
            Event::Ignored { .. }
        ));
    }

    #[test]
    fn opencode_plugin_events() {
        let event = parse_event(&fixture("opencode_chat_message.json"), Mode::Opencode).unwrap();
        let Event::Prompt {
            client,
            cwd,
            project_dir,
            ..
        } = event
        else {
            panic!("wrong event {event:?}")
        };
        assert_eq!(client, Client::Opencode);
        assert_eq!(cwd.as_deref(), Some("/home/dev/shop/web"));
        assert_eq!(
            project_dir.as_deref(),
            Some("/home/dev/shop"),
            "the worktree"
        );
        let event = parse_event(&fixture("opencode_session_idle.json"), Mode::Opencode).unwrap();
        assert!(matches!(
            event,
            Event::TurnEnd { score_call_seen: Some(true), ref assistant_response, .. }
                if assistant_response.starts_with("Removed")
        ));
        let event = parse_event(&fixture("opencode_tool_after.json"), Mode::Opencode).unwrap();
        assert!(matches!(
            event,
            Event::ToolAfter { failed: true, exit_code: Some(2), ref tool, .. }
                if tool.kind == ToolKind::Shell
        ));
    }

    #[test]
    fn vscode_runs_only_the_terminal_guard() {
        let event = parse_event(&fixture("vscode_pre_tool_use.json"), Mode::Claude).unwrap();
        let Event::ToolBefore {
            tool,
            conversation_id,
            ..
        } = event
        else {
            panic!("wrong event {event:?}")
        };
        assert_eq!(conversation_id, "vscode-chat-7b1f");
        assert_eq!(
            tool.command.as_deref(),
            Some("git push --force origin main")
        );
        let event = parse_event(&fixture("vscode_user_prompt_submit.json"), Mode::Claude).unwrap();
        assert!(
            matches!(event, Event::Ignored { ref reason } if reason.contains("VS Code")),
            "{event:?}"
        );
    }
}
