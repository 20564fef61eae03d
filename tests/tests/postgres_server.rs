//! The throwaway PostgreSQL the PostgreSQL store's tests will run against (issue 14): the
//! server install/fetch-postgres.sh provisions starts, has pgvector, answers on loopback, and
//! comes back after SIGKILL with what was committed.

use memd_testkit::postgres::Postgres;

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
    // A crash keeps what was committed.
    pg.kill9();
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
