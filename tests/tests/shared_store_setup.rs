//! Reaching the shared PostgreSQL store (issue 14): TLS verified against the configured CA,
//! the schema migrated at start when the role may and explained when it may not.

use memd_testkit::postgres::Postgres;
use serde_json::json;
use tests::shared_store::*;

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
        "2"
    );
    tests::eventually("the owner is warned", || {
        d.log_text().contains("bypasses row-level security")
            || d.log_text().contains("owns the tables")
    });
    // A second migration changes nothing.
    let out = memd(&["store", "migrate", "--url", &url("erin", "erins")]);
    assert!(out.contains("already at version 2"), "{out}");
}

#[test]
fn pointing_at_another_database_starts_over_there() {
    let pg = team_database(&["alice", "bob"]);
    pg.psql("postgres", "CREATE DATABASE memd_next").unwrap();
    memd(&[
        "store",
        "migrate",
        "--url",
        &format!("{}?sslmode=disable", pg.url("memd_next")),
    ]);
    let bob = daemon_as(&pg, "bob");
    let theirs: proto::MemoryBankResponse = bob.post(
        "/api/memory-bank/add",
        &json!({"content": "Bob's team fact: the release train leaves on Thursdays", "share": true}),
    );
    drained(&bob);
    let mut alice = daemon_as(&pg, "alice");
    let mine: proto::MemoryBankResponse = alice.post(
        "/api/memory-bank/add",
        &json!({"content": "Alice keeps the on-call notes in the team drive"}),
    );
    drained(&alice);
    tests::eventually("alice has bob's fact", || {
        tests::lookup(&alice, &theirs.doc_id).is_some()
    });

    // store.url now names another database: everything of hers goes there, the old
    // database's memories of others go away.
    alice.stop().unwrap();
    let next = format!(
        "postgres://alice@127.0.0.1:{}/memd_next?sslmode=disable",
        pg.port
    );
    alice.spawn(&[("MEMD_STORE_URL", next.as_str())]);
    connected(&alice);
    drained(&alice);
    assert_eq!(
        pg.psql(
            "memd_next",
            &format!(
                "SELECT owner FROM memd_memories WHERE id = '{}'",
                mine.doc_id
            )
        )
        .unwrap(),
        "alice"
    );
    assert!(tests::lookup(&alice, &theirs.doc_id).is_none());
    assert!(tests::lookup(&alice, &mine.doc_id).is_some());
}
