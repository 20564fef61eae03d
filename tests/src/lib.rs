//! Shared by the end-to-end tests: the workspace's real binaries, started through
//! `memd-testkit` (the one helper that starts daemons for tests, memd-eval and memd-bench).
//!
//! Adds only the test-flavoured entry points: a daemon with defaults that panics when it cannot
//! start, the one whose data dir comes from config.toml, (in [`project`]) repositories with
//! hooks, the CLI and the MCP bridge run inside them, and (in [`clients`], [`fake_model`]) real
//! agent clients run headless against a local stand-in for their model API, (in [`wine`],
//! [`wine_clients`]) the Windows builds under Wine; [`architecture`] reads the workspace's
//! module graph for `tests/tests/architecture.rs`.

pub mod architecture;
pub mod browser;
pub mod clients;
pub mod fake_model;
pub mod project;
pub mod shared_store;
pub mod wine;
pub mod wine_clients;

pub use memd_testkit::{
    Daemon, Spec, bin_dir, files_under, run_hook, runtime_dir, target_bin as bin,
};

/// Starts the workspace's `memd serve` in a fresh temp dir; panics with its log if it fails.
pub fn start_daemon() -> Daemon {
    Daemon::start(Spec::new()).unwrap_or_else(|e| panic!("{e}"))
}

/// Like [`start_daemon`], but every process learns the data dir only from `data_dir` in
/// config.toml (no `MEMD_DATA_DIR`).
pub fn start_daemon_data_dir_in_config() -> Daemon {
    let spec = Spec {
        data_dir_in_config: true,
        ..Spec::new()
    };
    Daemon::start(spec).unwrap_or_else(|e| panic!("{e}"))
}

/// The memory with this id (current or former), as `/api/search` returns it.
pub fn lookup(d: &Daemon, id: &str) -> Option<proto::MemoryView> {
    d.post::<_, proto::SearchResponse>("/api/search", &serde_json::json!({"id": id}))
        .results
        .into_iter()
        .next()
}

/// How long [`eventually`] waits before failing: a bound for a broken daemon, not a speed
/// requirement. Loading the late-interaction model alone took over 30 s beside three CPU hogs
/// on a busy 2-core machine.
pub const EVENTUALLY_LIMIT: std::time::Duration = std::time::Duration::from_secs(180);

/// Polls `cond` for up to [`EVENTUALLY_LIMIT`]: for what the daemon does in the background
/// (embedding, promotion, deletion, loading a model), which no request waits for.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < EVENTUALLY_LIMIT,
            "never happened within {EVENTUALLY_LIMIT:?}: {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The digests memd stored before a client compacted `conversation` (`PreCompact`), as
/// `GET /api/export` writes them, oldest first.
pub fn digests(d: &Daemon, conversation: &str) -> Vec<serde_json::Value> {
    let (status, lines) = d.get_raw("/api/export?collection=working", true);
    assert_eq!(status, 200, "export: {lines}");
    let mut found: Vec<serde_json::Value> = lines
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| {
            r["metadata"]["memory_type"] == "session_digest"
                && r["metadata"]["conversation_id"] == conversation
        })
        .collect();
    found.sort_by_key(|r| r["created_at"].as_i64());
    found
}
