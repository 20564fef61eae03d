//! The guard's answer before a tool runs, in each client's shape.
//!
//! Owns asking memd (`POST /api/hooks/pre-tool`: the user's policy and the learned guardrails)
//! and, when memd cannot answer in time, applying the static rules with their default levels on
//! its own (`memd-guard`), so a catastrophic command is refused even while memd is down. Must
//! never approve a tool on memd's behalf: "allow" prints nothing for Claude Code (its own
//! permission rules then apply) and the neutral `permission: allow` for Cursor, which expects
//! an answer.

use hookrt::daemon::Daemon;
use hookrt::event::BeforeEvent;
use hookrt::watchdog::Deadline;
use hookrt::{log, output};
use memd_guard::{Action, Level, Policy};
use proto::{Client, PreToolRequest, PreToolResponse, ToolCall, ToolKind};

const PRE_TOOL_PATH: &str = "/api/hooks/pre-tool";
/// Cursor's answer when memd does not object.
pub const CURSOR_ALLOW: &str = r#"{"permission":"allow"}"#;

pub fn answer(
    event: BeforeEvent,
    client: Client,
    conversation_id: String,
    tool: ToolCall,
    project_dir: Option<String>,
    deadline: &Deadline,
) {
    if client == Client::Cursor {
        output::set_fallback(Some(CURSOR_ALLOW));
    }
    let daemon = Daemon::locate();
    let mut tool = tool;
    if let (Ok(d), Some(server)) = (&daemon, tool.server.as_deref())
        && hookrt::event::tools::is_memd_url(server, d.port())
    {
        tool.server = Some("memd".into());
    }
    let request = PreToolRequest {
        conversation_id,
        client,
        tool,
        project_dir,
    };
    let verdict = ask_memd(daemon, &request, deadline).unwrap_or_else(|| offline(&request.tool));
    if let Some(text) = render(event, &verdict) {
        output::emit(&text);
    }
}

/// memd's answer, or `None` when it could not give one (logged). The call gets a quarter of
/// the hook's budget (500 ms by default): a hung memd must not hold every tool call for the
/// whole deadline, and the hook's own verdict needs the rest.
fn ask_memd(
    daemon: Result<Daemon, hookrt::daemon::CallError>,
    request: &PreToolRequest,
    deadline: &Deadline,
) -> Option<PreToolResponse> {
    let daemon = match daemon {
        Ok(daemon) => daemon,
        Err(e) => {
            log::failure(e.kind(), &e.summary());
            return None;
        }
    };
    match daemon.post::<_, PreToolResponse>(PRE_TOOL_PATH, request, deadline.call_budget() / 4) {
        Ok(answer) => Some(answer),
        Err(e) => {
            daemon.note_failure(&e);
            None
        }
    }
}

/// The static rules at their default levels: what the hook decides alone.
fn offline(tool: &ToolCall) -> PreToolResponse {
    let action = match (tool.kind, &tool.command, &tool.path, &tool.server) {
        (ToolKind::Shell, Some(command), _, _) => Action::Shell { command },
        (ToolKind::Read, _, Some(path), _) => Action::ReadFile { path },
        (ToolKind::Mcp, _, _, Some(server)) => Action::Mcp {
            server,
            tool: &tool.name,
        },
        _ => return allow(),
    };
    let verdict = memd_guard::assess(&action, &Policy::default());
    if verdict.level == Level::Allow {
        return allow();
    }
    PreToolResponse {
        decision: verdict.level.as_str().to_string(),
        rule: verdict.rule.map(str::to_string),
        reason: Some(format!(
            "{} (decided by the hook: memd did not answer)",
            verdict.reason
        )),
        memory_id: None,
    }
}

fn allow() -> PreToolResponse {
    PreToolResponse {
        decision: "allow".into(),
        ..PreToolResponse::default()
    }
}

/// The client's answer for `verdict`; `None` prints nothing.
pub fn render(event: BeforeEvent, verdict: &PreToolResponse) -> Option<String> {
    let decision = match verdict.decision.as_str() {
        "deny" => "deny",
        "ask" => "ask",
        _ => "allow",
    };
    let reason = format!(
        "memd guard: {}",
        verdict.reason.as_deref().unwrap_or("no reason given")
    );
    match event {
        BeforeEvent::ClaudePreToolUse | BeforeEvent::GeminiBeforeTool | BeforeEvent::Opencode
            if decision == "allow" =>
        {
            None
        }
        // Gemini CLI shows `systemMessage` with its confirmation prompt on `ask`.
        BeforeEvent::GeminiBeforeTool => Some(
            serde_json::json!({ "decision": decision, "reason": reason, "systemMessage": reason })
                .to_string(),
        ),
        // An OpenCode plugin cannot make OpenCode ask: the plugin refuses the call, and the
        // reason says that the user may run it (or turn the rule off).
        BeforeEvent::Opencode => {
            let reason = match decision {
                "ask" => format!(
                    "{reason} (memd asks for your confirmation, which an OpenCode plugin cannot request: run the command yourself if you want it)"
                ),
                _ => reason,
            };
            Some(serde_json::json!({ "decision": "deny", "reason": reason }).to_string())
        }
        BeforeEvent::ClaudePreToolUse => Some(
            serde_json::json!({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": decision,
                    "permissionDecisionReason": reason,
                }
            })
            .to_string(),
        ),
        _ if decision == "allow" => Some(CURSOR_ALLOW.to_string()),
        BeforeEvent::CursorPermission | BeforeEvent::CursorReadFile => {
            // beforeReadFile has no "ask": a read the user's policy questions is refused, with
            // the reason saying how to allow it.
            let decision = match (event, decision) {
                (BeforeEvent::CursorReadFile, "ask") => "deny",
                (_, d) => d,
            };
            // Cursor's documentation and its type definitions spell the messages differently
            // (snake_case and camelCase); both are sent so every build shows them.
            Some(
                serde_json::json!({
                    "permission": decision,
                    "user_message": reason,
                    "agent_message": reason,
                    "userMessage": reason,
                    "agentMessage": reason,
                })
                .to_string(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(decision: &str) -> PreToolResponse {
        PreToolResponse {
            decision: decision.into(),
            rule: Some("rm_root".into()),
            reason: Some("recursive delete of /".into()),
            memory_id: None,
        }
    }

    #[test]
    fn claude_gets_a_permission_decision_and_nothing_on_allow() {
        assert_eq!(
            render(BeforeEvent::ClaudePreToolUse, &verdict("allow")),
            None
        );
        let text = render(BeforeEvent::ClaudePreToolUse, &verdict("deny")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PreToolUse");
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
        assert!(
            v["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .unwrap()
                .contains("recursive delete")
        );
    }

    #[test]
    fn gemini_and_opencode_answers() {
        assert_eq!(
            render(BeforeEvent::GeminiBeforeTool, &verdict("allow")),
            None
        );
        assert_eq!(render(BeforeEvent::Opencode, &verdict("allow")), None);
        let v: serde_json::Value =
            serde_json::from_str(&render(BeforeEvent::GeminiBeforeTool, &verdict("ask")).unwrap())
                .unwrap();
        assert_eq!(v["decision"], "ask");
        assert!(v["reason"].as_str().unwrap().contains("recursive delete"));
        let v: serde_json::Value =
            serde_json::from_str(&render(BeforeEvent::Opencode, &verdict("ask")).unwrap()).unwrap();
        assert_eq!(v["decision"], "deny");
        assert!(v["reason"].as_str().unwrap().contains("cannot request"));
    }

    #[test]
    fn cursor_reads_cannot_ask_so_they_are_refused() {
        let text = render(BeforeEvent::CursorReadFile, &verdict("ask")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["permission"], "deny");
        let text = render(BeforeEvent::CursorPermission, &verdict("ask")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["permission"], "ask");
        assert_eq!(
            render(BeforeEvent::CursorPermission, &verdict("allow")).as_deref(),
            Some(CURSOR_ALLOW)
        );
    }
}
