//! One hook invocation from start to the parsed event: the part both hooks share.
//!
//! Owns the order of the first steps (log, panic guard, mode, Cursor double-fire guard, Cursor's
//! neutral answer, deadline, stdin, event) so that both binaries get every guard before any
//! input is read. Must never print anything except through `output`, and never talk to memd.

use crate::event::{Event, event_name, parse_event_in};
use crate::input::{self, Mode};
use crate::watchdog::Deadline;
use crate::{log, output, watchdog};

/// A started hook run.
pub struct Invocation {
    pub mode: Mode,
    pub deadline: Deadline,
}

/// Starts the hook named `name`. Under Cursor, `cursor_fallback` is the answer printed when
/// nothing else is. `None` when this invocation must do nothing (Cursor's duplicate firing).
pub fn start(name: &'static str, cursor_fallback: &'static str) -> Option<Invocation> {
    log::init(name);
    watchdog::exit_zero_on_panic();
    let mode = input::mode_from_args(std::env::args().skip(1));
    let cursor_version = std::env::var("CURSOR_VERSION").ok();
    if input::is_cursor_double_fire(mode, cursor_version.as_deref()) {
        return None;
    }
    if mode == Mode::Cursor {
        output::set_fallback(Some(cursor_fallback));
    }
    Some(Invocation {
        mode,
        deadline: Deadline::start_from_env(),
    })
}

impl Invocation {
    /// The client's event from stdin, or `None` after logging why it could not be read.
    pub fn read_event(&self) -> Option<Event> {
        let raw = match input::read_stdin() {
            Ok(raw) => raw,
            Err(e) => {
                log::failure(e.kind(), &e.message());
                return None;
            }
        };
        log::set_event(&event_name(&raw).unwrap_or_else(|| "unknown".into()));
        let claude_project_dir = std::env::var("CLAUDE_PROJECT_DIR").ok();
        match parse_event_in(&raw, self.mode, claude_project_dir) {
            Ok(event) => Some(event),
            Err(e) => {
                log::failure("bad_input", &e.message());
                None
            }
        }
    }
}
