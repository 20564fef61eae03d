//! The hook's one answer on stdout.
//!
//! A hook prints at most one answer. The main thread either emits its real answer or, on a
//! failure path, the fallback answer (e.g. Cursor's `{"continue":true}`); the watchdog emits the
//! fallback when the deadline hits. A lock makes the answer all-or-nothing: the process never
//! exits half-way through writing it. This module must never print anything but complete answers.

use std::io::Write;
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

struct State {
    emitted: bool,
    fallback: Option<String>,
}

static STATE: Mutex<State> = Mutex::new(State {
    emitted: false,
    fallback: None,
});

fn lock() -> MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Sets what to print if the run ends without a real answer (`None`: print nothing).
pub fn set_fallback(text: Option<&str>) {
    lock().fallback = text.map(str::to_owned);
}

/// Prints `text` as the answer unless an answer was already printed.
pub fn emit(text: &str) {
    let mut state = lock();
    write_once(&mut state, text);
}

/// Prints the fallback answer, if any, unless an answer was already printed.
pub fn emit_fallback() {
    let mut state = lock();
    if let Some(text) = state.fallback.clone() {
        write_once(&mut state, &text);
    }
}

/// Like [`emit_fallback`], but gives up after `patience` if the main thread holds the lock
/// (it is writing its own answer, or stdout is blocked): the deadline must stay hard.
pub fn emit_fallback_within(patience: Duration) {
    let start = Instant::now();
    loop {
        match STATE.try_lock() {
            Ok(mut state) => {
                if let Some(text) = state.fallback.clone() {
                    write_once(&mut state, &text);
                }
                return;
            }
            Err(TryLockError::Poisoned(_)) => return,
            Err(TryLockError::WouldBlock) if start.elapsed() >= patience => return,
            // A bounded wait for a writer that is mid-answer, not synchronisation by sleeping.
            Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// True once an answer has been printed.
pub fn emitted() -> bool {
    lock().emitted
}

fn write_once(state: &mut State, text: &str) {
    if state.emitted {
        return;
    }
    state.emitted = true;
    let mut out = std::io::stdout().lock();
    // A closed stdout (the client went away) is not our failure to report.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}
