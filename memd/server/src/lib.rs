//! `memd-server`: the daemon process around the engine.
//!
//! `memd serve` runs [`daemon::serve`]: it takes the data-dir lock, opens the engine, listens on
//! 127.0.0.1, serves the JSON API and MCP, runs the background workers and shuts all of it down
//! in one place. Must never bind anything but loopback and never answer without checking Host,
//! Origin and the token (health aside).
//!
//! # Layout
//!
//! - [`daemon`]: start-up (data dir, lock, token, engine, model load in the background), the
//!   listener, signals, and the orderly shutdown with the final snapshot.
//! - [`http`]: the front door: the routes, the guard middleware, the OpenAPI document, the
//!   accept loop. Mounts `mcp` and `ui`.
//! - [`body`]: request bodies in (byte limits, JSON decoding naming the field), JSON answers
//!   out, and the one map from the engine's error kinds to HTTP status codes.
//! - [`guard`]: who may call: the token file, the Host and Origin checks, constant-time
//!   comparison. Shared by the API and the dashboard.
//! - [`logging`]: `tracing` to stderr and `<data dir>/logs/daemon.log`, filtered by `MEMD_LOG`.
//! - [`mcp`]: the agent's tools over streamable HTTP at `/mcp` (the stdio bridge is a client
//!   and lives in the `memd` CLI crate).
//! - [`ui`]: the dashboard under `/ui` (server-rendered HTML, a session cookie from a one-time
//!   login link, CSRF-checked forms).
//!
//! `http` mounts `mcp` and `ui`; neither imports `http` or each other, and all three use `body`
//! and `guard` below them (`tests/tests/architecture.rs` keeps it so).

pub mod body;
pub mod daemon;
pub mod guard;
pub mod http;
pub mod logging;
pub mod mcp;
pub mod ui;
