//! Spawn-to-exit time of hook-stop (no sidecar) against a fake memd (a measurement, not an
//! assertion). `cargo test -p hook-stop --test timing -- --ignored --nocapture`; set
//! `HOOK_BIN_DIR` to time the shipped static binaries instead of the test build.

#[path = "../../hook-prompt/tests/support/mod.rs"]
mod support;

use serde_json::json;
use std::path::{Path, PathBuf};
use support::hook::{Sandbox, event_fixture_with, percentile};
use support::server::{FakeServer, Reply};

const RUNS: usize = 300;

fn binary() -> PathBuf {
    match std::env::var_os("HOOK_BIN_DIR") {
        Some(dir) => PathBuf::from(dir).join("hook-stop"),
        None => PathBuf::from(env!("CARGO_BIN_EXE_hook-stop")),
    }
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn spawn_to_exit_time() {
    let answer = json!({"stored": true, "doc_id": "working_1", "scoring_complete": true,
        "should_block": false, "needs_sidecar": false});
    let memd = FakeServer::start(move |_| Reply::json(200, &answer));
    let sandbox = Sandbox::new(Some(&memd.url()));
    let transcript = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcript.jsonl");
    let stdin = event_fixture_with("claude_stop.json", |v| {
        v["transcript_path"] = json!(transcript.display().to_string());
    });
    let bin = binary();
    let mut times: Vec<_> = (0..RUNS)
        .map(|_| {
            let run = sandbox.run(&bin, &[], &stdin);
            run.assert_silent();
            run.elapsed
        })
        .collect();
    times.sort();
    assert_eq!(memd.requests().len(), RUNS);
    println!(
        "hook-stop {} runs ({}): p50 {:?} p90 {:?} p99 {:?} max {:?}",
        RUNS,
        bin.display(),
        percentile(&times, 50),
        percentile(&times, 90),
        percentile(&times, 99),
        times[RUNS - 1]
    );
}
