//! Spawn-to-exit time of hook-prompt against a fake memd (a measurement, not an assertion).
//!
//! `cargo test -p hook-prompt --test timing -- --ignored --nocapture`; set `HOOK_BIN_DIR` to time
//! the shipped static binaries (e.g. the `hook` profile output) instead of the test build.

mod support;

use serde_json::json;
use std::path::PathBuf;
use support::hook::{Sandbox, event_fixture, percentile};
use support::server::{FakeServer, Reply};

const RUNS: usize = 300;

fn binary() -> PathBuf {
    match std::env::var_os("HOOK_BIN_DIR") {
        Some(dir) => PathBuf::from(dir).join("hook-prompt"),
        None => PathBuf::from(env!("CARGO_BIN_EXE_hook-prompt")),
    }
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn spawn_to_exit_time() {
    let answer = json!({"formatted_injection": "KNOWN CONTEXT\n- [id:patterns_1] bcrypt cost is 12",
        "relevant_memories": [], "scoring_required": false, "scoring_prompt": "", "scoring_memories": []});
    let memd = FakeServer::start(move |_| Reply::json(200, &answer));
    let sandbox = Sandbox::new(Some(&memd.url()));
    let stdin = event_fixture("claude_user_prompt_submit.json");
    let bin = binary();
    let mut times: Vec<_> = (0..RUNS)
        .map(|_| {
            let run = sandbox.run(&bin, &[], &stdin);
            assert!(run.stdout.contains("additionalContext"), "{run:?}");
            run.elapsed
        })
        .collect();
    times.sort();
    assert_eq!(memd.requests().len(), RUNS);
    println!(
        "hook-prompt {} runs ({}): p50 {:?} p90 {:?} p99 {:?} max {:?}",
        RUNS,
        bin.display(),
        percentile(&times, 50),
        percentile(&times, 90),
        percentile(&times, 99),
        times[RUNS - 1]
    );
}
