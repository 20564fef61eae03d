//! The throwaway PostgreSQL the PostgreSQL store's tests will run against (issue 14): the
//! server install/fetch-postgres.sh provisions starts, has pgvector, answers on loopback, and
//! comes back after SIGKILL with what was committed.

use memd_testkit::postgres::Postgres;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_throwaway_postgres_with_pgvector_starts_and_survives_a_kill() {
    let mut pg = Postgres::start().unwrap_or_else(|e| panic!("{e}"));
    let version = pg.psql("postgres", "SHOW server_version").unwrap();
    assert!(version.starts_with("16."), "{version}");
    pg.psql("postgres", "CREATE EXTENSION vector").unwrap();
    let distance = pg
        .psql(
            "postgres",
            "SELECT round(('[1,0,0]'::vector <=> '[0,1,0]'::vector)::numeric, 3)",
        )
        .unwrap();
    assert_eq!(distance, "1.000");
    pg.psql(
        "postgres",
        "CREATE TABLE t (id int primary key, v vector(3)); \
         CREATE INDEX ON t USING hnsw (v vector_cosine_ops); \
         INSERT INTO t VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0.9,0.1,0]')",
    )
    .unwrap();
    let nearest = pg
        .psql(
            "postgres",
            "SELECT id FROM t ORDER BY v <=> '[1,0.05,0]' LIMIT 2",
        )
        .unwrap();
    assert_eq!(nearest, "1\n3");
    // A crash keeps what was committed, and the server comes back even when a backend of the
    // killed one would have lingered (a busy machine schedules it late; here it is frozen, so
    // the lingering is certain): the kill takes every process of the server.
    let (mut session, backend) = frozen_backend(&pg);
    pg.kill9();
    session.kill().ok();
    session.wait().ok();
    assert!(
        !alive(backend),
        "the frozen backend was killed with its server"
    );
    assert!(
        pg.psql("postgres", "SELECT 1").is_err(),
        "down after SIGKILL"
    );
    pg.restart().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pg.psql("postgres", "SELECT count(*) FROM t").unwrap(), "3");
    assert!(
        pg.url("postgres")
            .starts_with("postgres://postgres@127.0.0.1:")
    );
    // Only loopback: the server was told to listen on 127.0.0.1 alone.
    assert_eq!(
        pg.psql("postgres", "SHOW listen_addresses").unwrap(),
        "127.0.0.1"
    );
}

/// A session kept open by a `psql` running `pg_sleep`, and its backend's pid, frozen with
/// SIGSTOP: a backend that will not notice its postmaster's death.
fn frozen_backend(pg: &Postgres) -> (Child, i32) {
    let session = pg
        .psql_command("postgres", "SELECT pg_sleep(600)")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("psql");
    let started = Instant::now();
    let pid = loop {
        let found = pg
            .psql(
                "postgres",
                "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'",
            )
            .unwrap();
        if let Ok(pid) = found.trim().parse::<i32>() {
            break pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no sleeping backend"
        );
        // Waiting for another process's query to start: nothing to block on but the catalog.
        std::thread::sleep(Duration::from_millis(10));
    };
    // SAFETY: a pid the server just reported as its own backend.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    (session, pid)
}

/// The process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s.rsplit(')').next().unwrap_or("").trim_start();
        !state.starts_with('Z') && !state.starts_with('X')
    })
}
