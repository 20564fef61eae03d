//! `hook-stop`: the end-of-turn hook for Claude Code (`Stop`) and Cursor (`--cursor`:
//! `afterAgentResponse`, `stop`).
//!
//! It sends the finished exchange to memd (`POST /api/hooks/stop`) and, when memd asks for it
//! (`needs_sidecar`), scores the previous exchange with the sidecar chain. It must never block or
//! steer the agent: no `decision`, no `followup_message`; Claude gets no output, Cursor gets `{}`;
//! every failure path exits 0 and leaves one line in the hook log.

mod sidecar;
mod transcript;

use hookrt::daemon::Daemon;
use hookrt::event::{Event, event_name, parse_event};
use hookrt::input::{self, Mode};
use hookrt::watchdog::Deadline;
use hookrt::{log, output};
use proto::{Client, StopRequest, StopResponse};
use std::path::Path;

/// Cursor's neutral answer (never a `followup_message`).
const CURSOR_EMPTY: &str = "{}";
const STOP_PATH: &str = "/api/hooks/stop";

fn main() {
    log::init("hook-stop");
    hookrt::watchdog::exit_zero_on_panic();
    let mode = input::mode_from_args(std::env::args().skip(1));
    let cursor_version = std::env::var("CURSOR_VERSION").ok();
    if input::is_cursor_double_fire(mode, cursor_version.as_deref()) {
        return;
    }
    if mode == Mode::Cursor {
        output::set_fallback(Some(CURSOR_EMPTY));
    }
    let deadline = Deadline::start_from_env();
    run(mode, &deadline);
    output::emit_fallback();
}

fn run(mode: Mode, deadline: &Deadline) {
    let raw = match input::read_stdin() {
        Ok(raw) => raw,
        Err(e) => return log::failure(e.kind(), &e.message()),
    };
    log::set_event(&event_name(&raw).unwrap_or_else(|| "unknown".into()));
    let event = match parse_event(&raw, mode) {
        Ok(event) => event,
        Err(e) => return log::failure("bad_input", &e.message()),
    };
    let request = match event {
        Event::ClaudeStop {
            stop_hook_active: true,
            ..
        } => return,
        Event::ClaudeStop {
            session_id,
            transcript_path,
            last_assistant_message,
            ..
        } => claude_stop_request(session_id, transcript_path, last_assistant_message),
        Event::CursorResponse {
            conversation_id,
            text,
        } => {
            // The answer is fixed; print it now so nothing later can change it.
            output::emit(CURSOR_EMPTY);
            StopRequest {
                conversation_id,
                user_message: String::new(),
                assistant_response: text,
                client: Some(Client::Cursor),
            }
        }
        _ => return,
    };
    send_stop(&request, deadline);
}

/// The stop request for Claude Code: the assistant text from the hook input, the user text (and
/// the assistant text, if the input lacks it) from the transcript.
fn claude_stop_request(
    session_id: String,
    transcript_path: Option<String>,
    last_assistant_message: Option<String>,
) -> StopRequest {
    let exchange = transcript_path
        .as_deref()
        .map(
            |path| match transcript::read_last_exchange(Path::new(path), transcript::TAIL_BYTES) {
                Ok(found) => found,
                Err(e) => {
                    log::failure(
                        "transcript",
                        &format!("cannot read the transcript: {}", e.kind()),
                    );
                    transcript::LastExchange::default()
                }
            },
        )
        .unwrap_or_default();
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
    }
}

fn send_stop(request: &StopRequest, deadline: &Deadline) {
    let daemon = match Daemon::locate() {
        Ok(daemon) => daemon,
        Err(e) => return log::failure(e.kind(), &e.message()),
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
