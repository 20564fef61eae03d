//! `memd-guard`: the static half of memd's tool guard, shared by the hook (which applies it on
//! its own when the daemon cannot be reached) and the daemon (which adds the learned
//! guardrails and the user's configuration).
//!
//! Owns the vocabulary (an [`Action`] the agent is about to take, a [`Level`] of answer, the
//! named [`RULES`]) and [`assess`]: which rule, if any, an action falls under and at what level
//! the [`Policy`] puts it. Must never do I/O, allocate unboundedly on hostile input, or panic:
//! it runs inside a hook process on every tool call.

mod policy;
mod rules;
mod shell;

pub use policy::{Level, Policy, RULES, RuleInfo, rule};
pub use rules::{Verdict, assess};
pub use shell::{
    Command, MAX_DEPTH, MAX_INPUT, commands, expand_braces, is_assignment, program_name, words,
};

/// What the agent is about to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action<'a> {
    /// A shell command line, as the agent wrote it.
    Shell { command: &'a str },
    /// A file the agent is about to read (Claude Code `Read`, Cursor `beforeReadFile`).
    ReadFile { path: &'a str },
    /// A tool of an MCP server (`server` as the client names it; empty when unknown).
    Mcp { server: &'a str, tool: &'a str },
}
