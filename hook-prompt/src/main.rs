//! `hook-prompt`: the hook that runs before something happens, for Claude Code
//! (`UserPromptSubmit`, `SessionStart`, `PreToolUse`), Codex CLI (`--codex`: the same events
//! and answers), Cursor (`--cursor`: `sessionStart`, `beforeSubmitPrompt`,
//! `beforeShellExecution`, `beforeMCPExecution`, `beforeReadFile`), Gemini CLI (`--gemini`:
//! `BeforeAgent`, `BeforeTool`) and memd's OpenCode plugin (`--opencode`: `chat.message`,
//! `tool.execute.before`).
//!
//! Before a prompt it asks memd for context (`POST /api/hooks/get-context`) and prints it in the
//! client's format; before a tool it asks the guard (`guard`).
//! It must never block or fail the user's turn: every failure path exits 0, prints nothing (Claude)
//! or the neutral answer (Cursor), and leaves one line in the hook log.

mod guard;

use hookrt::daemon::Daemon;
use hookrt::event::Event;
use hookrt::watchdog::Deadline;
use hookrt::{log, output};
use proto::{Client, GetContextRequest, GetContextResponse};

/// Claude Code's cap on hook-injected context, in characters.
const MAX_CONTEXT_CHARS: usize = 10_000;
/// Cursor `beforeSubmitPrompt`: let the prompt through, whatever happened.
const CURSOR_CONTINUE: &str = r#"{"continue":true}"#;
/// What Cursor gets when the input could not be read: neutral for every event this hook runs
/// on (`continue` for prompts, `permission` for the before-tool events).
const CURSOR_NEUTRAL: &str = r#"{"continue":true,"permission":"allow"}"#;
/// Cursor `sessionStart` with nothing to add.
const CURSOR_EMPTY: &str = "{}";
const GET_CONTEXT_PATH: &str = "/api/hooks/get-context";

fn main() {
    let Some(run) = hookrt::session::start("hook-prompt", CURSOR_NEUTRAL) else {
        return;
    };
    if let Some(event) = run.read_event() {
        answer(event, &run.deadline);
    }
    output::emit_fallback();
}

fn answer(event: Event, deadline: &Deadline) {
    match event {
        Event::ClaudePrompt {
            client,
            session_id,
            prompt,
            cwd,
            project_dir,
        } => {
            let mut request = context_request(prompt, session_id, cwd, client, false);
            request.project_dir = project_dir;
            if let Some(context) = fetch_context(&request, deadline) {
                output::emit(&claude_answer("UserPromptSubmit", &context));
            }
        }
        Event::ClaudeSessionStart {
            client,
            session_id,
            source,
            cwd,
            project_dir,
        } => {
            let mut request = context_request(String::new(), session_id, cwd, client, true);
            request.project_dir = project_dir;
            request.session_source = source;
            if let Some(context) = fetch_context(&request, deadline) {
                output::emit(&claude_answer("SessionStart", &context));
            }
        }
        Event::CursorSessionStart {
            conversation_id,
            cwd,
            project_dir,
        } => {
            output::set_fallback(Some(CURSOR_EMPTY));
            let mut request =
                context_request(String::new(), conversation_id, cwd, Client::Cursor, true);
            request.project_dir = project_dir;
            if let Some(context) = fetch_context(&request, deadline) {
                output::emit(&cursor_session_answer(&context));
            }
        }
        Event::CursorPrompt {
            conversation_id,
            prompt,
            cwd,
            project_dir,
        } => {
            // Cursor cannot take context here; the call lets memd record the prompt and refresh
            // its rules file. The answer is always "continue", also when the watchdog gives it.
            output::set_fallback(Some(CURSOR_CONTINUE));
            let mut request = context_request(prompt, conversation_id, cwd, Client::Cursor, false);
            request.project_dir = project_dir;
            let _ = fetch_context(&request, deadline);
            output::emit(CURSOR_CONTINUE);
        }
        Event::Prompt {
            client,
            session_id,
            prompt,
            cwd,
            project_dir,
        } => {
            let mut request = context_request(prompt, session_id, cwd, client, false);
            request.project_dir = project_dir;
            if let Some(answer) = fetch(&request, deadline) {
                output::emit(&match client {
                    Client::Opencode => opencode_answer(&answer),
                    _ => claude_answer("BeforeAgent", &answer.formatted_injection),
                });
            }
        }
        Event::ToolBefore {
            event,
            client,
            conversation_id,
            tool,
            project_dir,
        } => guard::answer(event, client, conversation_id, tool, project_dir, deadline),
        Event::ClaudeStop { .. }
        | Event::ClaudePreCompact { .. }
        | Event::TurnEnd { .. }
        | Event::CursorResponse { .. }
        | Event::CursorStop
        | Event::ToolAfter { .. }
        | Event::Ignored { .. } => {}
    }
}

fn context_request(
    query: String,
    conversation_id: String,
    cwd: Option<String>,
    client: Client,
    session_start: bool,
) -> GetContextRequest {
    GetContextRequest {
        query,
        conversation_id,
        cwd,
        project_dir: None,
        client: Some(client),
        session_start,
        session_source: None,
    }
}

/// The non-empty context memd formatted for this turn, or `None` (failures are logged).
fn fetch_context(request: &GetContextRequest, deadline: &Deadline) -> Option<String> {
    fetch(request, deadline).map(|answer| answer.formatted_injection)
}

/// memd's answer when it has something to inject (capped), or `None` (failures are logged).
fn fetch(request: &GetContextRequest, deadline: &Deadline) -> Option<GetContextResponse> {
    let daemon = match Daemon::locate() {
        Ok(daemon) => daemon,
        Err(e) => {
            log::failure(e.kind(), &e.summary());
            return None;
        }
    };
    match daemon.post::<_, GetContextResponse>(GET_CONTEXT_PATH, request, deadline.call_budget()) {
        Ok(answer) if answer.formatted_injection.trim().is_empty() => None,
        Ok(mut answer) => {
            answer.formatted_injection = cap_chars(answer.formatted_injection, MAX_CONTEXT_CHARS);
            Some(answer)
        }
        Err(e) => {
            daemon.note_failure(&e);
            None
        }
    }
}

/// The OpenCode plugin's answer: the scoring request (SCORING REFERENCE included) apart from
/// KNOWN CONTEXT, so the plugin can drop the request once the agent has scored.
fn opencode_answer(answer: &GetContextResponse) -> String {
    let scoring = answer.scoring_prompt.trim();
    let context = answer
        .formatted_injection
        .strip_prefix(scoring)
        .unwrap_or(&answer.formatted_injection)
        .trim();
    serde_json::json!({ "scoring": scoring, "context": context }).to_string()
}

/// Claude Code's JSON answer carrying `context` for `event`.
fn claude_answer(event: &str, context: &str) -> String {
    serde_json::json!({
        "hookSpecificOutput": {
            "hookEventName": event,
            "additionalContext": context,
        }
    })
    .to_string()
}

/// Cursor `sessionStart` answer.
fn cursor_session_answer(context: &str) -> String {
    serde_json::json!({ "additional_context": context }).to_string()
}

/// `text` cut to at most `max` characters, on a character boundary.
fn cap_chars(mut text: String, max: usize) -> String {
    let cut = hookrt::log::truncate_chars(&text, max).len();
    text.truncate(cut);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_is_capped_on_a_char_boundary() {
        let text = "é".repeat(MAX_CONTEXT_CHARS + 5);
        let capped = cap_chars(text, MAX_CONTEXT_CHARS);
        assert_eq!(capped.chars().count(), MAX_CONTEXT_CHARS);
        assert_eq!(cap_chars("short".into(), MAX_CONTEXT_CHARS), "short");
    }

    #[test]
    fn opencode_answer_keeps_the_scoring_request_apart() {
        let answer = GetContextResponse {
            formatted_injection: "<score>ids</score>\n\nKNOWN".into(),
            scoring_prompt: "<score>ids</score>".into(),
            ..GetContextResponse::default()
        };
        let v: serde_json::Value = serde_json::from_str(&opencode_answer(&answer)).unwrap();
        assert_eq!(v["scoring"], "<score>ids</score>");
        assert_eq!(v["context"], "KNOWN");
        let plain = GetContextResponse {
            formatted_injection: "KNOWN".into(),
            ..GetContextResponse::default()
        };
        let v: serde_json::Value = serde_json::from_str(&opencode_answer(&plain)).unwrap();
        assert_eq!(
            (v["scoring"].as_str(), v["context"].as_str()),
            (Some(""), Some("KNOWN"))
        );
    }

    #[test]
    fn claude_answer_nests_the_context() {
        let v: serde_json::Value =
            serde_json::from_str(&claude_answer("UserPromptSubmit", "ctx")).unwrap();
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
        assert_eq!(v["hookSpecificOutput"]["additionalContext"], "ctx");
    }
}
