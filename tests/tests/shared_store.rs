//! Team and multi-machine memory on a shared PostgreSQL store (issue 14), end to end: a real
//! PostgreSQL 16 with pgvector (install/fetch-postgres.sh), the schema and roles made by the
//! real `memd store` commands, two real daemons as two users, the real hooks and MCP bridge.
//!
//! `MEMD_SOAK_SECS` sets how long the concurrent-outcome test runs (default 5 s; the issue's
//! figure is 60).

use memd_testkit::postgres::Postgres;
use proto::{SearchResponse, StatsResponse};
use serde_json::json;
use std::time::{Duration, Instant};
use tests::project::{Bridge, make_repo, memd_in, prompt_in, stop_in};
use tests::{Daemon, Spec};

const DB: &str = "memd";

/// A database migrated by `memd store migrate`, with a role per user from `memd store add-user`.
fn team_database(users: &[&str]) -> Postgres {
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
fn memd(args: &[&str]) -> String {
    let out = std::process::Command::new(tests::bin("memd"))
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
fn daemon_as(pg: &Postgres, role: &str) -> Daemon {
    let url = format!(
        "postgres://{role}@127.0.0.1:{}/{DB}?sslmode=disable",
        pg.port
    );
    let d = daemon_at(&url, "");
    connected(&d);
    d
}

/// A daemon for the shared store at `url`, with more `[store]` settings.
fn daemon_at(url: &str, store_toml: &str) -> Daemon {
    let spec = Spec {
        env: vec![("MEMD_STORE_URL".into(), url.to_string())],
        config_toml: Some(format!(
            "[store]\nsync_ms = 100\ntimeout_ms = 2000\n{store_toml}"
        )),
        ..Spec::new()
    };
    Daemon::start(spec).unwrap_or_else(|e| panic!("{e}"))
}

fn connected(d: &Daemon) {
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

fn shared(d: &Daemon) -> Option<proto::SharedStoreStatus> {
    d.get::<StatsResponse>("/api/stats").shared_store
}

/// Waits until everything `d` wrote is in the shared store.
fn drained(d: &Daemon) {
    tests::eventually("the local backlog is sent", || {
        shared(d).is_some_and(|s| s.connected && s.backlog == 0)
    });
}

fn search(d: &Daemon, query: &str) -> Vec<proto::MemoryView> {
    d.post::<_, SearchResponse>(
        "/api/search",
        &json!({"query": query, "limit": 50, "project": "all"}),
    )
    .results
}

/// `sql` run as `role` (SET ROLE: row-level security applies as to that user's daemon).
fn psql_as(pg: &Postgres, role: &str, sql: &str) -> String {
    pg.psql(DB, &format!("SET ROLE {role}; {sql}"))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn repo_for(d: &Daemon) -> std::path::PathBuf {
    make_repo(d.root(), "app", Some("git@example.com:team/app.git"))
}

#[test]
fn a_shared_fact_reaches_a_teammate_and_private_memory_stays_private() {
    let pg = team_database(&["alice", "bob"]);
    let a = daemon_as(&pg, "alice");
    let b = daemon_as(&pg, "bob");
    a.wait_embedded(Duration::from_secs(120));
    let (repo_a, repo_b) = (repo_for(&a), repo_for(&b));

    // Alice's agent stores one fact for the team and one for herself, through MCP.
    let mut mcp = Bridge::start_in(&a, &repo_a);
    let shared_text = mcp.tool(
        "add_to_memory_bank",
        json!({"content": "Deploys of the app go through `make ship`; never push to the prod branch by hand.",
               "share": true}),
    );
    assert!(shared_text.contains("id:"), "{shared_text}");
    mcp.tool(
        "add_to_memory_bank",
        json!({"content": "Alice keeps her scratch notes for the billing rewrite in ~/notes/quokka.md"}),
    );
    drop(mcp);
    drained(&a);

    tests::eventually("bob's daemon has alice's shared fact", || {
        search(&b, "how do we deploy the app")
            .iter()
            .any(|m| m.content.contains("make ship"))
    });
    let got = search(&b, "how do we deploy the app");
    let fact = got
        .iter()
        .find(|m| m.content.contains("make ship"))
        .unwrap();
    assert!(fact.shared, "{fact:?}");
    assert_eq!(fact.owner.as_deref(), Some("alice"));
    b.wait_embedded(Duration::from_secs(60));

    // Bob's prompt hook injects it.
    let ctx = prompt_in(
        &b,
        &repo_b,
        "bob-1",
        "How do I deploy the app to production?",
    );
    assert!(ctx.contains("make ship"), "bob's context: {ctx}");
    assert!(
        !ctx.contains("quokka"),
        "alice's private fact reached bob: {ctx}"
    );
    assert!(
        search(&b, "where are the billing rewrite notes")
            .iter()
            .all(|m| !m.content.contains("quokka")),
        "alice's private fact is searchable by bob"
    );

    // Bob's exchange is private; then a shared marker, so once alice has the marker she has
    // read past everything bob wrote before it.
    stop_in(
        &b,
        &repo_b,
        "bob-1",
        "The zebra-7 canary host is the one to deploy to first.",
    );
    let marker: proto::MemoryBankResponse = b.post(
        "/api/memory-bank/add",
        &json!({"content": "The on-call rota for the app lives in the ops wiki", "share": true}),
    );
    drained(&b);
    tests::eventually("alice has bob's shared marker", || {
        tests::lookup(&a, &marker.doc_id).is_some()
    });
    assert!(
        search(&a, "which canary host to deploy to first")
            .iter()
            .all(|m| !m.content.contains("zebra-7")),
        "bob's private exchange reached alice"
    );
    let ctx = prompt_in(
        &a,
        &repo_a,
        "alice-1",
        "Which canary host do we deploy to first?",
    );
    assert!(!ctx.contains("zebra-7"), "alice's context: {ctx}");

    // The database itself refuses: as alice's role, bob's private rows do not exist.
    let bobs = "SELECT count(*) FROM memd_memories WHERE owner = 'bob' AND visibility = 'private'";
    assert_eq!(psql_as(&pg, "alice", bobs), "0");
    let as_admin: i64 = pg.psql(DB, bobs).unwrap().parse().unwrap();
    assert!(as_admin >= 1, "bob's exchange is in the store");
    assert_eq!(
        psql_as(
            &pg,
            "alice",
            "SELECT count(*) FROM memd_memories WHERE content LIKE '%zebra-7%'"
        ),
        "0"
    );
    // ... and alice's role cannot change bob's shared fact.
    let edited = psql_as(
        &pg,
        "alice",
        &format!(
            "WITH e AS (UPDATE memd_memories SET content = 'edited' WHERE id = '{}' RETURNING 1) \
             SELECT count(*) FROM e",
            marker.doc_id
        ),
    );
    assert_eq!(edited.lines().last(), Some("0"));

    // Bob cannot edit alice's fact through memd either; making it private takes it away.
    let (status, body) = b.post_raw(
        "/api/memory-bank/update",
        json!({"id": fact.id, "content": "Deploy however you like"})
            .to_string()
            .as_bytes(),
        true,
    );
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("alice"), "{body}");
    let out = memd_in(&a, &repo_a)
        .args(["share", &fact.id, "--private"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    tests::eventually("bob drops a fact alice made private", || {
        tests::lookup(&b, &fact.id).is_none()
    });
}

#[test]
fn postgres_down_mid_session_hooks_answer_and_every_exchange_lands_once() {
    let mut pg = team_database(&["bob"]);
    let mut b = daemon_as(&pg, "bob");
    let repo = repo_for(&b);
    // Returns how long the prompt hook took.
    let turn = |b: &Daemon, i: usize| {
        let started = Instant::now();
        prompt_in(
            b,
            &repo,
            "outage",
            &format!("Question {i} about the deploy pipeline"),
        );
        let prompt = started.elapsed();
        stop_in(
            b,
            &repo,
            "outage",
            &format!("Answer number {i}: spooled-exchange-{i}"),
        );
        prompt
    };
    for i in 0..3 {
        turn(&b, i);
    }
    drained(&b);

    pg.kill9();
    let mut slowest = Duration::ZERO;
    for i in 3..6 {
        slowest = slowest.max(turn(&b, i));
    }
    tests::eventually("memd notices the store is down", || {
        shared(&b).is_some_and(|s| !s.connected && s.last_error.is_some())
    });
    // A crash of memd while the store is down loses nothing that was acknowledged.
    b.kill9();
    b.spawn(&[]);
    for i in 6..8 {
        slowest = slowest.max(turn(&b, i));
    }
    let backlog = shared(&b).map(|s| s.backlog).unwrap_or(0);
    assert!(
        backlog >= 5,
        "5 exchanges wait in the local log ({backlog})"
    );
    eprintln!("slowest prompt hook while the store was down: {slowest:?}");

    pg.restart().unwrap_or_else(|e| panic!("{e}"));
    drained(&b);
    // Which exchanges are there, and how often (psql prints one line per row: the markers).
    let rows = pg
        .psql(
            DB,
            "SELECT substring(content from 'spooled-exchange-[0-9]+') FROM memd_memories \
             WHERE owner = 'bob' AND NOT deleted AND content LIKE '%spooled-exchange-%' ORDER BY 1",
        )
        .unwrap();
    let expected: Vec<String> = (0..8).map(|i| format!("spooled-exchange-{i}")).collect();
    assert_eq!(
        rows.lines().collect::<Vec<_>>(),
        expected,
        "every exchange once"
    );

    // `memd store copy` brings bob's memories into a new machine's local store, once.
    let fresh = tests::start_daemon();
    let url = format!("postgres://bob@127.0.0.1:{}/{DB}?sslmode=disable", pg.port);
    for round in 0..2 {
        let out = memd_in(&fresh, fresh.root())
            .args(["store", "copy", "--from", &url, "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let tally: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let imported = tally["imported"].as_u64().unwrap();
        match round {
            0 => assert!(imported >= 8, "{tally}"),
            _ => assert_eq!(imported, 0, "a second copy adds nothing: {tally}"),
        }
    }
    let copied = search(&fresh, "spooled-exchange-7");
    assert!(
        copied
            .iter()
            .any(|m| m.content.contains("spooled-exchange-7") && m.owner.is_none()),
        "{copied:?}"
    );
}

#[test]
fn concurrent_outcomes_from_two_daemons_are_all_counted() {
    let secs: u64 = std::env::var("MEMD_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let pg = team_database(&["alice", "bob"]);
    let a = daemon_as(&pg, "alice");
    let b = daemon_as(&pg, "bob");
    let fact: proto::MemoryBankResponse = a.post(
        "/api/memory-bank/add",
        &json!({"content": "Integration tests need the fake payment gateway on port 9090",
                "share": true, "scope": "global"}),
    );
    drained(&a);
    tests::eventually("bob has the shared fact", || {
        tests::lookup(&b, &fact.doc_id).is_some()
    });

    let until = Instant::now() + Duration::from_secs(secs);
    let scored: usize = std::thread::scope(|s| {
        let sessions: Vec<_> = (0..8)
            .map(|i| {
                let d = if i % 2 == 0 { &a } else { &b };
                let id = fact.doc_id.clone();
                s.spawn(move || session(d, &format!("soak-{i}"), &id, until))
            })
            .collect();
        sessions.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert!(scored >= 8, "every session scored ({scored})");
    drained(&a);
    drained(&b);

    let in_db = |sql: &str| pg.psql(DB, sql).unwrap();
    let uid = in_db(&format!(
        "SELECT uid FROM memd_memories WHERE id = '{}'",
        fact.doc_id
    ));
    assert_eq!(
        in_db(&format!(
            "SELECT uses FROM memd_memories WHERE uid = '{uid}'"
        )),
        scored.to_string(),
        "uses in the shared store"
    );
    assert_eq!(
        in_db(&format!(
            "SELECT count(*) FROM memd_outcomes WHERE uid = '{uid}' AND applied"
        )),
        scored.to_string(),
        "outcome rows"
    );
    // Both machines come to the same count.
    for d in [&a, &b] {
        tests::eventually("the local copy has every outcome", || {
            tests::lookup(d, &fact.doc_id).is_some_and(|m| m.uses as usize == scored)
        });
    }
    eprintln!("{scored} outcomes from 8 sessions on 2 daemons in {secs} s, none lost");
}

/// One conversation scoring `fact` every turn until `until`; how many times it was scored.
fn session(d: &Daemon, conv: &str, fact: &str, until: Instant) -> usize {
    let mut scored = 0;
    let mut turn = 0;
    while Instant::now() < until {
        d.post::<_, proto::GetContextResponse>(
            "/api/hooks/get-context",
            &json!({"conversation_id": conv, "query": format!("turn {turn}: run the integration tests")}),
        );
        d.post::<_, proto::StopResponse>(
            "/api/hooks/stop",
            &json!({"conversation_id": conv, "user_message": format!("turn {turn}"),
                    "assistant_response": format!("ran them, turn {turn}")}),
        );
        let r: proto::RecordOutcomeResponse = d.post(
            "/api/record-outcome",
            &json!({"conversation_id": conv, "outcome": "worked", "related": [fact]}),
        );
        if !r.already_scored && !r.unknown_ids.iter().any(|u| u == fact) {
            scored += 1;
        }
        turn += 1;
    }
    scored
}

#[test]
fn tls_when_the_url_asks_for_it_verified_against_the_configured_ca() {
    let pg = team_database(&["carol"]);
    let (ca_pem, cert_pem, key_pem) = certificates();
    let front = TlsFront::start(pg.port, &cert_pem, &key_pem);
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("team-ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let url = format!(
        "postgres://carol@127.0.0.1:{}/{DB}?sslmode=require",
        front.port
    );

    // A certificate no trusted root vouches for is refused, and memd says why.
    let untrusted = daemon_at(&url, "");
    tests::eventually("the untrusted certificate is reported", || {
        shared(&untrusted)
            .and_then(|s| s.last_error)
            .is_some_and(|e| e.contains("certificate"))
    });
    drop(untrusted);
    assert_eq!(front.sessions(), 0, "no session over a refused certificate");

    let d = daemon_at(&url, &format!("ca_file = {:?}\n", ca.display().to_string()));
    connected(&d);
    let fact: proto::MemoryBankResponse = d.post(
        "/api/memory-bank/add",
        &json!({"content": "Staging certificates are renewed by the cert-bot job every Monday"}),
    );
    drained(&d);
    assert_eq!(
        pg.psql(
            DB,
            &format!(
                "SELECT owner FROM memd_memories WHERE id = '{}'",
                fact.doc_id
            )
        )
        .unwrap(),
        "carol"
    );
    assert!(front.sessions() >= 1, "memd spoke to the store over TLS");
}

/// A CA, and a server certificate it signed for 127.0.0.1 and localhost (PEM: CA, cert, key).
fn certificates() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

/// PostgreSQL's TLS negotiation in front of the throwaway server, whose build has no OpenSSL:
/// it answers a client's SSLRequest with `S`, completes the TLS handshake with the given
/// certificate (rustls), then relays the protocol in plain to the server. It refuses clients
/// that do not ask for TLS, and counts sessions that got through the handshake.
struct TlsFront {
    port: u16,
    sessions: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    _runtime: tokio::runtime::Runtime,
}

/// The SSLRequest message: length 8, code 80877103.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 4, 210, 22, 47];

impl TlsFront {
    fn start(pg_port: u16, cert_pem: &str, key_pem: &str) -> TlsFront {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let certs: Vec<_> = rustls_pemfile::certs(&mut cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
            .unwrap()
            .unwrap();
        let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let sessions = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = sessions.clone();
        runtime.spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let (acceptor, counted) = (acceptor.clone(), counted.clone());
                tokio::spawn(async move {
                    let mut first = [0u8; 8];
                    if client.read_exact(&mut first).await.is_err() || first != SSL_REQUEST {
                        return;
                    }
                    if client.write_all(b"S").await.is_err() {
                        return;
                    }
                    let Ok(mut tls) = acceptor.accept(client).await else {
                        return;
                    };
                    let Ok(mut server) =
                        tokio::net::TcpStream::connect(("127.0.0.1", pg_port)).await
                    else {
                        return;
                    };
                    counted.fetch_add(1, Ordering::SeqCst);
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut server).await;
                });
            }
        });
        TlsFront {
            port,
            sessions,
            _runtime: runtime,
        }
    }

    fn sessions(&self) -> usize {
        self.sessions.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[test]
fn the_schema_is_migrated_at_start_when_the_role_may_and_explained_when_not() {
    let pg = Postgres::start().unwrap_or_else(|e| panic!("{e}"));
    for sql in [
        "CREATE ROLE erin LOGIN CREATEROLE",
        "CREATE ROLE dave LOGIN",
        "CREATE DATABASE erins OWNER erin",
        "CREATE DATABASE plain",
    ] {
        pg.psql("postgres", sql).unwrap();
    }
    // Creating the extension takes a superuser; everything else the database's owner may do.
    pg.psql("erins", "CREATE EXTENSION vector").unwrap();
    pg.psql("plain", "CREATE EXTENSION vector").unwrap();
    let url = |role: &str, db: &str| {
        format!(
            "postgres://{role}@127.0.0.1:{}/{db}?sslmode=disable",
            pg.port
        )
    };

    // A role that may not create the schema gets told what to run.
    let d = daemon_at(&url("dave", "plain"), "");
    tests::eventually("the missing schema is explained", || {
        shared(&d)
            .and_then(|s| s.last_error)
            .is_some_and(|e| e.contains("version 0") && e.contains("memd store migrate"))
    });
    drop(d);

    // The database's owner migrates at start, and is warned that it reads everyone's rows.
    let d = daemon_at(&url("erin", "erins"), "");
    connected(&d);
    assert_eq!(
        pg.psql("erins", "SELECT max(version) FROM memd_schema")
            .unwrap(),
        "1"
    );
    tests::eventually("the owner is warned", || {
        d.log_text().contains("bypasses row-level security")
            || d.log_text().contains("owns the tables")
    });
    // A second migration changes nothing.
    let out = memd(&["store", "migrate", "--url", &url("erin", "erins")]);
    assert!(out.contains("already at version 1"), "{out}");
}
