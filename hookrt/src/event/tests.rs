//! Event detection against realistic stdin fixtures of both clients.

use super::*;

/// A stdin fixture of `tests/fixtures/events/` (also read by the other clients' tests).
pub(super) fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/events/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

#[test]
fn claude_prompt_submit() {
    let event = parse_event(&fixture("claude_user_prompt_submit.json"), Mode::Claude).unwrap();
    let Event::ClaudePrompt {
        session_id,
        prompt,
        cwd,
        project_dir,
        ..
    } = event
    else {
        panic!("wrong event {event:?}");
    };
    assert_eq!(session_id, "3f2c9a7e-8b1d-4c55-9e0a-6d7b2f41c0aa");
    assert!(prompt.starts_with("The login form still rejects"));
    assert_eq!(cwd.as_deref(), Some("/home/dev/shop"));
    assert_eq!(
        project_dir, cwd,
        "without CLAUDE_PROJECT_DIR the project is cwd's"
    );
}

/// `CLAUDE_PROJECT_DIR` names the project even after the agent `cd`s into a subdirectory, and
/// the stop event (which memd may need to place an unseen conversation) carries it too.
#[test]
fn claude_project_dir_wins_over_cwd() {
    let raw = fixture("claude_user_prompt_submit.json");
    let event = parse_event_in(&raw, Mode::Claude, Some("/home/dev/shop-root".into())).unwrap();
    let Event::ClaudePrompt {
        cwd, project_dir, ..
    } = event
    else {
        panic!("wrong event {event:?}");
    };
    assert_eq!(cwd.as_deref(), Some("/home/dev/shop"));
    assert_eq!(project_dir.as_deref(), Some("/home/dev/shop-root"));
    let stop = parse_event_in(&fixture("claude_stop.json"), Mode::Claude, None).unwrap();
    assert!(
        matches!(stop, Event::ClaudeStop { project_dir: Some(ref d), .. } if d.starts_with('/')),
        "{stop:?}"
    );
    let blank = parse_event_in(&raw, Mode::Claude, Some("  ".into())).unwrap();
    assert!(
        matches!(blank, Event::ClaudePrompt { project_dir: Some(ref d), .. } if d == "/home/dev/shop")
    );
}

#[test]
fn claude_session_start() {
    let event = parse_event(&fixture("claude_session_start.json"), Mode::Claude).unwrap();
    assert!(
        matches!(event, Event::ClaudeSessionStart { ref session_id, .. } if session_id.starts_with("3f2c"))
    );
}

#[test]
fn claude_pre_compact_carries_trigger_and_instructions() {
    let event = parse_event(&fixture("claude_pre_compact.json"), Mode::Claude).unwrap();
    assert_eq!(
        event,
        Event::ClaudePreCompact {
            client: proto::Client::ClaudeCode,
            session_id: "3f2c9a7e-8b1d-4c55-9e0a-6d7b2f41c0aa".into(),
            trigger: "manual".into(),
            custom_instructions: Some("keep the deploy steps".into()),
            project_dir: Some("/home/dev/shop".into()),
        }
    );
    // An automatic compaction has no instructions (Claude Code sends null), and the session
    // id is required.
    let auto = br#"{"session_id": "s", "hook_event_name": "PreCompact", "trigger": "auto", "custom_instructions": null}"#;
    assert!(matches!(
        parse_event(auto, Mode::Claude).unwrap(),
        Event::ClaudePreCompact { ref trigger, custom_instructions: None, .. } if trigger == "auto"
    ));
    let no_session = br#"{"hook_event_name": "PreCompact", "trigger": "auto"}"#;
    assert_eq!(
        parse_event(no_session, Mode::Claude),
        Err(EventError::Missing("session_id"))
    );
}

#[test]
fn claude_stop_carries_the_last_assistant_message() {
    let event = parse_event(&fixture("claude_stop.json"), Mode::Claude).unwrap();
    let Event::ClaudeStop {
        stop_hook_active,
        last_assistant_message,
        transcript_path,
        ..
    } = event
    else {
        panic!("wrong event {event:?}");
    };
    assert!(!stop_hook_active);
    assert!(last_assistant_message.unwrap().contains("cost factor"));
    assert!(transcript_path.unwrap().ends_with(".jsonl"));
}

#[test]
fn claude_stop_active_flag() {
    let event = parse_event(&fixture("claude_stop_active.json"), Mode::Claude).unwrap();
    assert!(matches!(
        event,
        Event::ClaudeStop {
            stop_hook_active: true,
            ..
        }
    ));
}

#[test]
fn claude_pre_tool_use_fixture_is_a_tool_event() {
    let event = parse_event(&fixture("claude_pre_tool_use.json"), Mode::Claude).unwrap();
    assert!(matches!(
        event,
        Event::ToolBefore {
            event: BeforeEvent::ClaudePreToolUse,
            ..
        }
    ));
}

#[test]
fn claude_other_events_are_ignored() {
    let raw = br#"{"session_id": "s", "hook_event_name": "Notification", "message": "hi"}"#;
    let event = parse_event(raw, Mode::Claude).unwrap();
    assert!(matches!(event, Event::Ignored { ref reason } if reason.contains("Notification")));
}

#[test]
fn cursor_input_in_the_claude_copy_is_ignored() {
    let event = parse_event(&fixture("cursor_via_claude_settings.json"), Mode::Claude).unwrap();
    assert!(matches!(event, Event::Ignored { .. }));
}

#[test]
fn cursor_session_start_uses_the_workspace_root_as_cwd() {
    let event = parse_event(&fixture("cursor_session_start.json"), Mode::Cursor).unwrap();
    assert_eq!(
        event,
        Event::CursorSessionStart {
            conversation_id: "c0ffee00-1111-4222-8333-944445555666".into(),
            cwd: Some("/home/dev/shop".into()),
            project_dir: Some("/home/dev/shop".into()),
        }
    );
}

#[test]
fn cursor_before_submit_prompt() {
    let event = parse_event(&fixture("cursor_before_submit_prompt.json"), Mode::Cursor).unwrap();
    assert_eq!(
        event,
        Event::CursorPrompt {
            conversation_id: "c0ffee00-1111-4222-8333-944445555666".into(),
            prompt: "Why does the checkout total round down?".into(),
            cwd: Some("/home/dev/shop".into()),
            project_dir: Some("/home/dev/shop".into()),
        }
    );
}

#[test]
fn cursor_after_agent_response_and_stop() {
    let event = parse_event(&fixture("cursor_after_agent_response.json"), Mode::Cursor).unwrap();
    assert!(
        matches!(event, Event::CursorResponse { ref text, .. } if text.contains("integer cents"))
    );
    assert!(
        matches!(event, Event::CursorResponse { project_dir: Some(ref d), .. } if d == "/home/dev/shop"),
        "the workspace root names the project: {event:?}"
    );
    let event = parse_event(&fixture("cursor_stop.json"), Mode::Cursor).unwrap();
    assert_eq!(event, Event::CursorStop);
}

#[test]
fn malformed_and_incomplete_input_are_errors() {
    assert!(matches!(
        parse_event(b"{\"session_id\": ", Mode::Claude),
        Err(EventError::Malformed(_))
    ));
    assert!(matches!(
        parse_event(b"", Mode::Claude),
        Err(EventError::Malformed(_))
    ));
    assert!(matches!(
        parse_event(b"[1,2]", Mode::Cursor),
        Err(EventError::Malformed(_))
    ));
    assert_eq!(
        parse_event(
            br#"{"hook_event_name":"UserPromptSubmit","prompt":"x"}"#,
            Mode::Claude
        ),
        Err(EventError::Missing("session_id"))
    );
    // A wrong type in a field memd uses is malformed, not silently dropped.
    assert!(matches!(
        parse_event(
            br#"{"hook_event_name":"Stop","session_id":"s","stop_hook_active":"yes"}"#,
            Mode::Claude
        ),
        Err(EventError::Malformed(_))
    ));
}

#[test]
fn event_name_is_read_before_full_parsing() {
    assert_eq!(
        event_name(&fixture("cursor_stop.json")).as_deref(),
        Some("stop")
    );
    assert_eq!(event_name(b"not json"), None);
}

fn tool_event(raw: serde_json::Value, mode: Mode) -> Event {
    parse_event(raw.to_string().as_bytes(), mode).unwrap()
}

#[test]
fn claude_pre_tool_use_names_the_tool() {
    let base = |name: &str, input: serde_json::Value| {
        serde_json::json!({
            "session_id": "s1", "transcript_path": "/t.jsonl", "cwd": "/repo",
            "hook_event_name": "PreToolUse", "tool_name": name, "tool_input": input,
            "tool_use_id": "toolu_1"
        })
    };
    let Event::ToolBefore {
        event,
        tool,
        conversation_id,
        ..
    } = tool_event(
        base("Bash", serde_json::json!({"command": "ls -la"})),
        Mode::Claude,
    )
    else {
        panic!("not a tool event");
    };
    assert_eq!(event, BeforeEvent::ClaudePreToolUse);
    assert_eq!(conversation_id, "s1");
    assert_eq!(
        (tool.kind, tool.command.as_deref()),
        (ToolKind::Shell, Some("ls -la"))
    );
    let Event::ToolBefore { tool, .. } = tool_event(
        base("mcp__my_server__do_thing", serde_json::json!({})),
        Mode::Claude,
    ) else {
        panic!("not a tool event");
    };
    assert_eq!(
        (tool.kind, tool.server.as_deref()),
        (ToolKind::Mcp, Some("my_server"))
    );
    let Event::ToolBefore { tool, .. } = tool_event(
        base("Read", serde_json::json!({"file_path": "/repo/.env"})),
        Mode::Claude,
    ) else {
        panic!("not a tool event");
    };
    assert_eq!(
        (tool.kind, tool.path.as_deref()),
        (ToolKind::Read, Some("/repo/.env"))
    );
}

#[test]
fn claude_post_tool_use_reports_failure_not_output() {
    let raw = serde_json::json!({
        "session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": "cargo test"},
        "tool_response": {"stdout": "secret output", "stderr": "", "exit_code": 101}
    });
    let Event::ToolAfter {
        failed,
        exit_code,
        tool,
        ..
    } = tool_event(raw, Mode::Claude)
    else {
        panic!("not a tool event");
    };
    assert_eq!((failed, exit_code), (true, Some(101)));
    assert_eq!(tool.command.as_deref(), Some("cargo test"));
}

#[test]
fn cursor_before_events_and_their_required_fields() {
    let base = |event: &str, extra: serde_json::Value| {
        let mut v = serde_json::json!({
            "conversation_id": "c1", "generation_id": "g", "hook_event_name": event,
            "cursor_version": "1.7.2", "workspace_roots": ["/repo"]
        });
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        v
    };
    let Event::ToolBefore {
        event,
        tool,
        project_dir,
        ..
    } = tool_event(
        base(
            "beforeShellExecution",
            serde_json::json!({"command": "make", "cwd": "/repo"}),
        ),
        Mode::Cursor,
    )
    else {
        panic!("not a tool event");
    };
    assert_eq!(event, BeforeEvent::CursorPermission);
    assert_eq!(tool.command.as_deref(), Some("make"));
    assert_eq!(project_dir.as_deref(), Some("/repo"));
    let Event::ToolBefore { event, .. } = tool_event(
        base(
            "beforeReadFile",
            serde_json::json!({"file_path": "/repo/a.rs", "content": ""}),
        ),
        Mode::Cursor,
    ) else {
        panic!("not a tool event");
    };
    assert_eq!(event, BeforeEvent::CursorReadFile);
    let Event::ToolBefore { tool, .. } = tool_event(
        base(
            "beforeMCPExecution",
            serde_json::json!({"tool_name": "search_memory", "tool_input": "{}", "url": "http://127.0.0.1:47111/mcp"}),
        ),
        Mode::Cursor,
    ) else {
        panic!("not a tool event");
    };
    assert_eq!(
        tool.server.as_deref(),
        Some("http://127.0.0.1:47111/mcp"),
        "the URL, for the hook to match against memd's port"
    );
    assert!(tools::is_memd_url("http://127.0.0.1:47111/mcp", 47111));
    assert!(!tools::is_memd_url("http://localhost:8931/mcp", 47111));
    let Event::ToolBefore { tool, .. } = tool_event(
        base(
            "beforeMCPExecution",
            serde_json::json!({"tool_name": "create_issue", "tool_input": "{}", "mcp_server_name": "github", "url": "https://x/mcp"}),
        ),
        Mode::Cursor,
    ) else {
        panic!("not a tool event");
    };
    assert_eq!(
        tool.server.as_deref(),
        Some("github"),
        "the name from mcp.json first"
    );
    let missing = parse_event(
        base("beforeShellExecution", serde_json::json!({}))
            .to_string()
            .as_bytes(),
        Mode::Cursor,
    );
    assert_eq!(missing, Err(EventError::Missing("command")));
}
