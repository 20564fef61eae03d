//! `hookrt`: the small runtime shared by the `hook-prompt` and `hook-stop` binaries.
//!
//! # Layout
//!
//! `session` (start-up order), `watchdog` (hard deadline), `input` (bounded stdin, mode),
//! `event` (the client's hook JSON), `output` (one guarded answer on stdout), `log` (the
//! structured failure log), `daemon` (the call to memd, via `memd-client`), `clock`.
//!
//! It owns what every hook run needs: the shared start-up (`session`), a hard deadline
//! (`watchdog`), a single guarded stdout answer, bounded stdin, parsing of the client's hook
//! event, the structured failure log, and the call to the memd daemon (finding, proving and
//! starting it are `memd-client`'s). It links only `proto`, `memd-client`, `serde` and
//! `serde_json` (`tests/tests/architecture.rs` checks the hooks' dependencies).
//!
//! It must never block the user's agent: no panics on input, no async runtime, no work that can
//! outlive the deadline, and no prompt or response text in logs. Hook processes always exit 0.

pub mod clock;
pub mod daemon;
pub mod event;
pub mod input;
pub mod log;
pub mod output;
pub mod session;
pub mod watchdog;

/// Version of the hook binaries, sent in `User-Agent` headers.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
