//! The memd wire contract.
//!
//! Every JSON body that crosses a process boundary (hook → daemon, CLI → daemon, MCP tool →
//! daemon core, daemon → hook) is a type in this crate. The hooks and the daemon both depend on
//! it, so a field renamed here is renamed everywhere at once.
//!
//! This crate owns types and the few path/port conventions both sides must agree on. It must
//! never grow behaviour that needs a dependency beyond `serde` (the hooks link it statically and
//! must stay small); the optional `schema` feature (JSON Schema for the server's OpenAPI
//! document) stays off in the hooks.
//!
//! # Layout
//!
//! - [`api`]: requests and answers of the `/api` routes, and the wire limits (`limits`).
//! - [`hooks`]: what the hooks and the sidecar exchange with the daemon.
//! - [`tools`]: tool events: what the hooks send before a tool runs (to be guarded) and after
//!   it ran (evidence), and the guard's answer.
//! - [`memory`]: collections, outcomes and the one memory shape every read returns.
//! - [`value`]: a dependency-free JSON value for metadata.
//! - [`paths`]: where memd lives (data dir, config dir, port): one resolution order for the
//!   daemon and every client.
//! - [`settings`]: the two config.toml keys a client needs, read without a TOML library.
//!
//! Field names follow the original system's wire format (`formatted_injection`,
//! `scoring_required`, `memory_scores`, ...), so a client written for it can talk to memd.

pub mod api;
pub mod hooks;
pub mod memory;
pub mod metadata;
pub mod paths;
pub mod settings;
pub mod tools;
pub mod value;

pub use api::*;
pub use hooks::*;
pub use memory::*;
pub use metadata::Metadata;
pub use tools::*;
pub use value::Value;
