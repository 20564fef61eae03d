//! `hook-stop`: the hook that runs after something happened, for Claude Code (`Stop`,
//! `PostToolUse`), Codex CLI (`--codex`: the same events), Cursor (`--cursor`:
//! `afterAgentResponse`, `stop`, `afterShellExecution`, `afterFileEdit`), Gemini CLI
//! (`--gemini`: `AfterAgent`, `AfterTool`) and memd's OpenCode plugin (`--opencode`:
//! `session.idle`, `tool.execute.after`).
//!
//! It sends the finished exchange to memd (`POST /api/hooks/stop`) and, when memd asks for it
//! (`needs_sidecar`), scores the previous exchange with the sidecar chain. After a tool it sends
//! the evidence (`POST /api/hooks/post-tool`: which tool, command or file, failed or not; never
//! the tool's output). Before Claude Code compacts a conversation (`PreCompact`) it asks memd to
//! store a digest of it (`POST /api/hooks/pre-compact`). It must never block or
//! steer the agent: no `decision`, no `followup_message`; Claude Code, Gemini CLI and OpenCode
//! get no output, Cursor gets `{}`;
//! every failure path exits 0 and leaves one line in the hook log.
//!
//! # Layout
//!
//! - `main` (this file): the turn: read the event, post the exchange, act on the answer.
//! - `transcript`: the user's text from Claude Code's transcript when the event lacks it.
//! - `sidecar`: the scoring chain (prompt, OpenAI-style calls, verdict parsing, reporting).
//!
//! Everything shared with `hook-prompt` (deadline, stdin, log, the daemon call) is `hookrt`.

mod sidecar;
mod transcript;

use hookrt::daemon::Daemon;
use hookrt::event::Event;
use hookrt::watchdog::Deadline;
use hookrt::{log, output};
use proto::{
    Client, PostToolRequest, PostToolResponse, PreCompactRequest, PreCompactResponse, StopRequest,
    StopResponse,
};
use std::path::Path;

/// Cursor's neutral answer (never a `followup_message`).
const CURSOR_EMPTY: &str = "{}";
const STOP_PATH: &str = "/api/hooks/stop";
const POST_TOOL_PATH: &str = "/api/hooks/post-tool";
const PRE_COMPACT_PATH: &str = "/api/hooks/pre-compact";

fn main() {
    let Some(run) = hookrt::session::start("hook-stop", CURSOR_EMPTY) else {
        return;
    };
    if let Some(event) = run.read_event() {
        answer(event, &run.deadline);
    }
    output::emit_fallback();
}

fn answer(event: Event, deadline: &Deadline) {
    match event {
        Event::ToolAfter {
            client,
            conversation_id,
            tool,
            failed,
            exit_code,
            project_dir,
        } => {
            if client == Client::Cursor {
                output::emit(CURSOR_EMPTY);
            }
            let request = PostToolRequest {
                conversation_id,
                client,
                tool,
                exit_code,
                failed,
                project_dir,
            };
            post_quietly::<_, PostToolResponse>(POST_TOOL_PATH, &request, deadline);
        }
        // Never blocks the compaction and never changes its instructions.
        Event::ClaudePreCompact {
            client,
            session_id,
            trigger,
            custom_instructions,
            project_dir,
        } => {
            let request = PreCompactRequest {
                conversation_id: session_id,
                trigger,
                custom_instructions,
                client: Some(client),
                project_dir,
            };
            post_quietly::<_, PreCompactResponse>(PRE_COMPACT_PATH, &request, deadline);
        }
        other => {
            if let Some(request) = stop_request(other) {
                send_stop(&request, deadline);
            }
        }
    }
}

/// The finished exchange an event reports, if it reports one.
fn stop_request(event: Event) -> Option<StopRequest> {
    let request = match event {
        Event::ClaudeStop {
            stop_hook_active: true,
            ..
        } => return None,
        Event::ClaudeStop {
            client,
            session_id,
            transcript_path,
            last_assistant_message,
            project_dir,
            ..
        } => {
            let mut request =
                claude_stop_request(session_id, transcript_path, last_assistant_message);
            request.client = Some(client);
            request.project_dir = project_dir;
            request
        }
        Event::CursorResponse {
            conversation_id,
            text,
            project_dir,
        } => {
            // The answer is fixed; print it now so nothing later can change it.
            output::emit(CURSOR_EMPTY);
            StopRequest {
                conversation_id,
                user_message: String::new(),
                assistant_response: text,
                client: Some(Client::Cursor),
                project_dir,
                score_call_seen: None,
            }
        }
        // A retry Gemini CLI runs after a stop hook refused the answer is not a new exchange
        // (memd never refuses one; another hook may).
        Event::TurnEnd { retry: true, .. } => return None,
        Event::TurnEnd {
            client,
            session_id,
            user_message,
            assistant_response,
            project_dir,
            score_call_seen,
            ..
        } => StopRequest {
            conversation_id: session_id,
            user_message,
            assistant_response,
            client: Some(client),
            project_dir,
            score_call_seen,
        },
        _ => return None,
    };
    Some(request)
}

/// Posts what a tool did, or that a compaction is coming; failures are logged, never shown.
fn post_quietly<Req: serde::Serialize, Resp: serde::de::DeserializeOwned>(
    path: &str,
    request: &Req,
    deadline: &Deadline,
) {
    let daemon = match Daemon::locate() {
        Ok(daemon) => daemon,
        Err(e) => return log::failure(e.kind(), &e.summary()),
    };
    if let Err(e) = daemon.post::<_, Resp>(path, request, deadline.call_budget()) {
        daemon.note_failure(&e);
    }
}

/// The stop request for Claude Code: the assistant text from the hook input, the user text (and
/// the assistant text, if the input lacks it) from the transcript.
fn claude_stop_request(
    session_id: String,
    transcript_path: Option<String>,
    last_assistant_message: Option<String>,
) -> StopRequest {
    let exchange =
        transcript_path.as_deref().and_then(|path| {
            match transcript::read_last_exchange(Path::new(path), transcript::TAIL_BYTES) {
                Ok(found) => Some(found),
                Err(e) => {
                    log::failure(
                        "transcript",
                        &format!("cannot read the transcript: {}", e.kind()),
                    );
                    None
                }
            }
        });
    // Without a readable transcript nobody knows whether a score is in flight: memd waits.
    let score_call_seen = exchange.as_ref().map(|e| e.score_call);
    let exchange = exchange.unwrap_or_default();
    let assistant_response = match last_assistant_message {
        Some(text) if !text.trim().is_empty() => text,
        _ => exchange.assistant,
    };
    // An empty user text is fine: memd falls back to the prompt it saw in get-context.
    StopRequest {
        conversation_id: session_id,
        user_message: exchange.user,
        assistant_response,
        client: Some(Client::ClaudeCode),
        project_dir: None,
        score_call_seen,
    }
}

fn send_stop(request: &StopRequest, deadline: &Deadline) {
    let daemon = match Daemon::locate() {
        Ok(daemon) => daemon,
        Err(e) => return log::failure(e.kind(), &e.summary()),
    };
    let answer = match daemon.post::<_, StopResponse>(STOP_PATH, request, deadline.call_budget()) {
        Ok(answer) => answer,
        Err(e) => return daemon.note_failure(&e),
    };
    if answer.needs_sidecar {
        match &answer.sidecar_data {
            Some(data) => sidecar::score_and_report(data, &daemon, deadline),
            None => log::failure("bad_response", "needs_sidecar without sidecar_data"),
        }
    }
}
