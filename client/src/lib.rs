//! `memd-client`: the one implementation of "find memd, start it if needed, call it".
//!
//! The hooks, the `memd` CLI and the `memd mcp` stdio bridge all reach the daemon through this
//! crate, so they agree on where it lives. It is blocking (ureq) and small enough to link into
//! the static hook binaries: it must never pull in an async runtime or a heavy dependency.
//!
//! # Layout
//!
//! - [`location`]: where this user's daemon lives: data dir (`MEMD_DATA_DIR`, then `data_dir`
//!   in config.toml, then XDG: the order is `proto::paths`, shared with the daemon), port
//!   (`daemon.json`, `MEMD_PORT`, config.toml, default), token. Reads files only; never
//!   starts anything.
//! - [`call`]: authenticated JSON calls over loopback with typed errors. Never retries, never
//!   uses a proxy, never sends anything anywhere but the located endpoint.
//! - [`proof`]: the challenge that proves the process on the port is this user's memd before
//!   the token or a prompt is sent to it; [`handshake`] runs it on every new connection.
//! - [`start`]: starting `memd serve` detached and waiting until it answers. Never lets the
//!   daemon inherit the caller's stdio.

pub mod call;
pub mod handshake;
pub mod location;
pub mod proof;
pub mod start;

pub use call::{CallError, Client};
pub use location::Location;
