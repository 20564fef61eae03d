//! Test support shared by the hook crates' integration tests (and reusable by end-to-end tests:
//! include it with `#[path = ".../hook-prompt/tests/support/mod.rs"] mod support;`).
//!
//! - [`server`]: a small HTTP/1.1 server on 127.0.0.1:0 that records requests and answers with
//!   JSON, hangs, or resets the connection;
//! - [`hook`]: runs a real hook binary with a clean environment and a sandboxed data dir.
//!
//! It must never touch the real user's data dir or home: every run gets its own temp dirs.

#![allow(dead_code)]

pub mod hook;
pub mod server;
