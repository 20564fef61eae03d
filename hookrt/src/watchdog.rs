//! The hard deadline of a hook run.
//!
//! A watchdog thread ends the process with exit code 0 when the deadline passes, after logging a
//! `deadline` failure and printing the fallback answer. The deadline can only be extended (hook-stop
//! extends it to cover a sidecar run). This module must never let a hook outlive its deadline by
//! more than a few milliseconds, and never exit with a non-zero code.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Default deadline when `MEMD_HOOK_DEADLINE_MS` is not set.
pub const DEFAULT_DEADLINE_MS: u64 = 2000;
/// Environment variable that overrides the default deadline.
pub const DEADLINE_ENV: &str = "MEMD_HOOK_DEADLINE_MS";
/// Time kept back from HTTP timeouts so a timed-out call can still be logged before the watchdog.
const LOG_MARGIN: Duration = Duration::from_millis(30);

/// A running deadline. Cheap to clone; all clones see extensions.
#[derive(Clone, Debug)]
pub struct Deadline {
    start: Instant,
    /// Milliseconds after `start` at which the process ends.
    limit_ms: Arc<AtomicU64>,
}

impl Deadline {
    /// Starts the watchdog with the deadline from the environment (or the default).
    pub fn start_from_env() -> Deadline {
        Deadline::start(deadline_from_env())
    }

    /// Starts the watchdog thread; the process exits `limit` from now unless extended.
    pub fn start(limit: Duration) -> Deadline {
        let deadline = Deadline {
            start: Instant::now(),
            limit_ms: Arc::new(AtomicU64::new(limit.as_millis() as u64)),
        };
        let watched = deadline.clone();
        let spawned = std::thread::Builder::new()
            .name("hook-watchdog".into())
            .spawn(move || watched.watch());
        if spawned.is_err() {
            // Without a watchdog the HTTP timeouts still bound the run; say so and carry on.
            crate::log::failure("watchdog", "could not start the watchdog thread");
        }
        deadline
    }

    /// Time left before the watchdog fires.
    pub fn remaining(&self) -> Duration {
        self.limit().saturating_sub(self.start.elapsed())
    }

    /// Time left for an HTTP call, keeping a small margin to log its failure.
    pub fn call_budget(&self) -> Duration {
        self.remaining().saturating_sub(LOG_MARGIN)
    }

    /// Moves the deadline so that at least `from_now` is left; never shortens it.
    pub fn extend_to(&self, from_now: Duration) {
        let wanted = (self.start.elapsed() + from_now).as_millis() as u64;
        self.limit_ms.fetch_max(wanted, Ordering::SeqCst);
    }

    fn limit(&self) -> Duration {
        Duration::from_millis(self.limit_ms.load(Ordering::SeqCst))
    }

    fn watch(&self) {
        loop {
            let left = self.remaining();
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left);
        }
        crate::log::failure(
            "deadline",
            &format!(
                "hook ran past its deadline of {} ms",
                self.limit().as_millis()
            ),
        );
        crate::output::emit_fallback_within(Duration::from_millis(100));
        std::process::exit(0);
    }
}

/// Turns any panic into a logged failure and exit code 0 (with the fallback answer printed), so
/// even a bug cannot make the client show a hook error. Runs before `panic = "abort"` aborts.
pub fn exit_zero_on_panic() {
    std::panic::set_hook(Box::new(|info| {
        // The location only: a payload could quote input text.
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_else(|| "unknown location".into());
        crate::log::failure("panic", &format!("hook panicked at {location}"));
        crate::output::emit_fallback_within(Duration::from_millis(100));
        std::process::exit(0);
    }));
}

/// `MEMD_HOOK_DEADLINE_MS` if it is a positive integer, else the default.
pub fn deadline_from_env() -> Duration {
    let ms = std::env::var(DEADLINE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .unwrap_or(DEFAULT_DEADLINE_MS);
    Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_never_shortens() {
        let deadline = Deadline {
            start: Instant::now(),
            limit_ms: Arc::new(AtomicU64::new(60_000)),
        };
        deadline.extend_to(Duration::from_millis(10));
        assert!(deadline.remaining() > Duration::from_secs(59));
        deadline.extend_to(Duration::from_secs(120));
        assert!(deadline.remaining() > Duration::from_secs(119));
        assert!(deadline.call_budget() < deadline.remaining());
    }
}
