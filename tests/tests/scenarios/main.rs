//! The 32-scenario end-to-end harness (seed 003, plus per-project memory): five families of
//! five and the guards (seed 003's Safety family of five plus two learned guardrails), one
//! module each, every scenario starting a real daemon in a temp dir and driving the
//! real hook binaries and HTTP API in sequence. Each test is named after what it proves.
//! Run: `cargo test -p tests --test scenarios`.

mod guards;
mod learning;
mod lifecycle;
mod projects;
mod retrieval;
mod safety;

use proto::*;
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use tests::project::{prompt_in, stop_in};
use tests::{Daemon, eventually, lookup};

/// Where the scenarios outside the projects family "work": not a repository, so its project is
/// the directory itself, and what they store through the hooks stays visible to them.
const WORKDIR: &str = "/p";

/// A prompt in the directory every non-project scenario works in.
pub fn prompt(d: &Daemon, conv: &str, text: &str) -> String {
    prompt_in(d, Path::new(WORKDIR), conv, text)
}

pub fn stop(d: &Daemon, conv: &str, answer: &str) {
    stop_in(d, Path::new(WORKDIR), conv, answer)
}

pub fn bank(d: &Daemon, content: &str) -> String {
    d.post::<_, MemoryBankResponse>("/api/memory-bank/add", &json!({"content": content}))
        .doc_id
}

pub fn takeaway(d: &Daemon, content: &str) -> String {
    d.post::<_, RecordResponseResponse>("/api/record-response", &json!({"key_takeaway": content}))
        .doc_id
}

pub fn embedded(d: &Daemon) {
    d.wait_embedded(Duration::from_secs(60));
}

/// One turn in which the agent scores the previous exchange's memories with `outcome`.
pub fn scored_turn(d: &Daemon, conv: &str, query: &str, outcome: &str) -> String {
    let ctx = prompt(d, conv, query);
    if ctx.contains("<memd-score-required>") {
        let _: RecordOutcomeResponse = d.post(
            "/api/record-outcome",
            &json!({"conversation_id": conv, "outcome": outcome}),
        );
    }
    stop(d, conv, "answer");
    ctx
}
