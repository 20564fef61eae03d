//! The shared PostgreSQL store's end-to-end tests (issue 14): a throwaway database with the
//! schema and roles made by the real `memd store` commands, daemons connected to it, and ways
//! to wait for what the sync worker does in the background.

use crate::{Daemon, Spec};
use memd_testkit::postgres::Postgres;
use proto::{SearchResponse, StatsResponse};
use serde_json::json;
use std::time::{Duration, Instant};

pub const DB: &str = "memd";

/// A database migrated by `memd store migrate`, with a role per user from `memd store add-user`.
pub fn team_database(users: &[&str]) -> Postgres {
    let pg = Postgres::start().unwrap_or_else(|e| panic!("{e}"));
    pg.psql("postgres", &format!("CREATE DATABASE {DB}"))
        .unwrap();
    let admin = format!("{}?sslmode=disable", pg.url(DB));
    memd(&["store", "migrate", "--url", &admin]);
    for u in users {
        memd(&["store", "add-user", u, "--url", &admin]);
    }
    pg
}

/// Runs the memd CLI outside any daemon; its stdout.
pub fn memd(args: &[&str]) -> String {
    let out = std::process::Command::new(crate::bin("memd"))
        .args(args)
        .env_remove("MEMD_STORE_URL")
        .output()
        .expect("run memd");
    assert!(
        out.status.success(),
        "memd {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A daemon that connects to the shared store as `role`, syncing every 100 ms.
pub fn daemon_as(pg: &Postgres, role: &str) -> Daemon {
    let url = format!(
        "postgres://{role}@127.0.0.1:{}/{DB}?sslmode=disable",
        pg.port
    );
    let d = daemon_at(&url, "");
    connected(&d);
    d
}

/// A daemon for the shared store at `url`, with more `[store]` settings.
pub fn daemon_at(url: &str, store_toml: &str) -> Daemon {
    let spec = Spec {
        env: vec![("MEMD_STORE_URL".into(), url.to_string())],
        config_toml: Some(format!(
            "[store]\nsync_ms = 100\ntimeout_ms = 2000\n{store_toml}"
        )),
        ..Spec::new()
    };
    Daemon::start(spec).unwrap_or_else(|e| panic!("{e}"))
}

pub fn connected(d: &Daemon) {
    let started = Instant::now();
    while !shared(d).is_some_and(|s| s.connected) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the daemon never reached the shared store: {:?}\n{}",
            shared(d),
            d.log_tail()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn shared(d: &Daemon) -> Option<proto::SharedStoreStatus> {
    d.get::<StatsResponse>("/api/stats").shared_store
}

/// Waits until everything `d` wrote is in the shared store.
pub fn drained(d: &Daemon) {
    crate::eventually("the local backlog is sent", || {
        shared(d).is_some_and(|s| s.connected && s.backlog == 0)
    });
}

pub fn search(d: &Daemon, query: &str) -> Vec<proto::MemoryView> {
    d.post::<_, SearchResponse>(
        "/api/search",
        &json!({"query": query, "limit": 50, "project": "all"}),
    )
    .results
}

/// `sql` run as `role` (SET ROLE: row-level security applies as to that user's daemon).
pub fn psql_as(pg: &Postgres, role: &str, sql: &str) -> String {
    pg.psql(DB, &format!("SET ROLE {role}; {sql}"))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

pub fn repo_for(d: &Daemon) -> std::path::PathBuf {
    crate::project::make_repo(d.root(), "app", Some("git@example.com:team/app.git"))
}
