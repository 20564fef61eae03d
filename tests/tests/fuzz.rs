//! Hostile input against a real daemon: thousands of random, malformed and schema-typed bodies
//! to every POST route of `/openapi.json`, raw bytes on the socket, wrong methods and headers.
//!
//! The daemon must never answer 5xx (507/503 are storage states, not bugs), every error must be
//! an `ErrorBody`, every 2xx answer must match the documented response schema (which keeps the
//! OpenAPI document truthful), and the daemon must still be healthy at the end.
//! `MEMD_FUZZ_SEED` replays a run; `MEMD_FUZZ_ROUNDS` scales it (default 300 per route).

mod fuzz {
    pub mod inputs;
    pub mod schema;
}

use fuzz::inputs::{malformed_bodies, mutate, random_json};
use fuzz::schema::{Schemas, conforms};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tests::Daemon;

/// Tally of what was sent and how the daemon answered.
#[derive(Default)]
struct Tally {
    sent: usize,
    by_status: BTreeMap<u16, usize>,
    by_route: BTreeMap<String, usize>,
    failures: Vec<String>,
}

impl Tally {
    fn note(&mut self, route: &str, status: u16, problem: Option<String>) {
        self.sent += 1;
        *self.by_status.entry(status).or_default() += 1;
        *self.by_route.entry(route.to_string()).or_default() += 1;
        if let Some(p) = problem
            && self.failures.len() < 40
        {
            self.failures.push(p);
        }
    }
}

fn server_fault(status: u16) -> bool {
    status == 0 || (status >= 500 && status != 503 && status != 507)
}

/// Checks an answer: 5xx is a fault; errors are `ErrorBody`; 2xx matches the documented schema.
fn judge(schemas: &Schemas, op: &Value, status: u16, body: &str) -> Option<String> {
    if server_fault(status) {
        return Some(format!("status {status}: {}", &body[..body.len().min(300)]));
    }
    let parsed: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => {
            return Some(format!(
                "status {status} with a non-JSON body ({e}): {body:.200}"
            ));
        }
    };
    if status >= 400 {
        let ok = parsed["error"].as_str().is_some_and(|e| !e.is_empty());
        return (!ok)
            .then(|| format!("status {status} error body is not an ErrorBody: {body:.200}"));
    }
    let schema = &op["responses"][status.to_string()]["content"]["application/json"]["schema"];
    if schema.is_null() {
        return Some(format!("status {status} is not documented"));
    }
    conforms(schemas, schema, &parsed, "$").err()
}

fn seed() -> u64 {
    std::env::var("MEMD_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random)
}

fn rounds() -> usize {
    std::env::var("MEMD_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
}

/// No task of the daemon panicked (a panic in a handler or a background worker is caught by
/// the runtime, so health alone would not show it).
fn assert_no_panic(d: &Daemon) {
    let log = d.log_text();
    assert!(
        !log.contains("panicked"),
        "the daemon panicked:\n{log:.3000}"
    );
}

/// Waits (bounded) until the embedding model is loaded, so the semantic paths run too; a
/// machine without the runtime fuzzes the lexical paths only.
fn wait_for_model(d: &Daemon) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(90) {
        let health: proto::HealthResponse = d.get("/api/health");
        if health.model_loaded {
            return;
        }
        if health
            .model_error
            .as_deref()
            .is_some_and(|e| !e.contains("loading"))
        {
            return eprintln!("fuzzing without embeddings: {:?}", health.model_error);
        }
        // Polling the daemon's own readiness flag; the condition decides, the delay only paces.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The POST operations of the served document. JSON Lines routes (import) carry the schema of
/// one line in `x-line-schema`.
fn post_routes(doc: &Value) -> Vec<Route> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        if let Some(op) = item.get("post") {
            let content = &op["requestBody"]["content"];
            let lines = &content["application/x-ndjson"]["x-line-schema"];
            out.push(Route {
                path: path.clone(),
                op: op.clone(),
                schema: if lines.is_null() {
                    content["application/json"]["schema"].clone()
                } else {
                    lines.clone()
                },
                json_lines: !lines.is_null(),
            });
        }
    }
    out
}

struct Route {
    path: String,
    op: Value,
    /// The body's schema, or one line's for a JSON Lines route.
    schema: Value,
    json_lines: bool,
}

/// One body for `route`: a JSON value, or 1-4 lines of them for a JSON Lines route.
fn body_for(route: &Route, rng: &mut StdRng, mut one: impl FnMut(&mut StdRng) -> Value) -> Vec<u8> {
    if !route.json_lines {
        return one(rng).to_string().into_bytes();
    }
    let lines: Vec<String> = (0..rng.random_range(1..5))
        .map(|_| one(rng).to_string())
        .collect();
    lines.join("\n").into_bytes()
}

/// Every line `GET /api/export` writes (after the fuzzing stored whatever it stored) matches
/// the documented `Record`, the export holds every stored memory, and every stored memory can
/// be read back through the routes that render it (search by id, text search, get-context):
/// a record the writes accepted must never break a later read.
fn check_stored(d: &Daemon, schemas: &Schemas, tally: &mut Tally) {
    let (status, text) = d.get_raw("/api/export", true);
    assert_eq!(status, 200, "export: {text:.200}");
    let record = json!({"$ref": "#/components/schemas/Record"});
    let mut records = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("export line {n}: {e}"));
        if let Err(e) = conforms(schemas, &record, &v, "$") {
            panic!("export line {n} does not match Record: {e}\n{line:.300}");
        }
        records.push(v);
    }
    let health: proto::HealthResponse = d.get("/api/health");
    let stored: usize = health.counts.values().sum();
    assert!(
        records.len() >= stored,
        "export lines {} vs stored memories {stored}",
        records.len()
    );
    let search = schemas.0["paths"]["/api/search"]["post"].clone();
    let context = schemas.0["paths"]["/api/hooks/get-context"]["post"].clone();
    for (n, r) in records.iter().enumerate().take(400) {
        let text: String = r["content"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        let mut reads = vec![("/api/search", &search, json!({"id": r["id"]}))];
        if n < 100 {
            reads.push((
                "/api/search",
                &search,
                json!({"query": text, "include_archived": true}),
            ));
            reads.push((
                "/api/hooks/get-context",
                &context,
                json!({"query": text, "conversation_id": "reader"}),
            ));
        }
        for (path, op, body) in reads {
            let (status, answer) = d.post_raw(path, body.to_string().as_bytes(), true);
            let problem = judge(schemas, op, status, &answer)
                .map(|p| format!("reading back {} via {path}: {p}", r["id"]));
            tally.note(path, status, problem);
        }
    }
    eprintln!(
        "read back: {} stored records match the Record schema",
        records.len()
    );
}

#[test]
fn every_post_route_survives_random_malformed_and_typed_bodies() {
    let d = tests::start_daemon();
    wait_for_model(&d);
    let (status, text) = d.get_raw("/openapi.json", true);
    assert_eq!(status, 200, "GET /openapi.json");
    let doc: Value = serde_json::from_str(&text).expect("document is JSON");
    let schemas = Schemas(doc.clone());
    let routes = post_routes(&doc);
    assert_eq!(routes.len(), 19, "every POST route is documented");
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tally = Tally::default();
    let started = Instant::now();
    let send = |tally: &mut Tally, path: &str, op: &Value, label: &str, body: &[u8]| {
        let (status, answer) = d.post_raw(path, body, true);
        let problem = judge(&schemas, op, status, &answer).map(|p| {
            format!(
                "seed {seed} {path} [{label}] body {:.160}: {p}",
                String::from_utf8_lossy(body)
            )
        });
        tally.note(path, status, problem);
    };
    for route in &routes {
        let (path, op, req) = (&route.path, &route.op, &route.schema);
        for (label, body) in malformed_bodies(&mut rng) {
            send(&mut tally, path, op, &label, &body);
        }
        for round in 0..rounds() {
            let (label, body) = match round % 4 {
                0 => (
                    "typed",
                    body_for(route, &mut rng, |r| schemas.typed(r, req, 0, false)),
                ),
                1 => (
                    "typed at the edges",
                    body_for(route, &mut rng, |r| schemas.typed(r, req, 0, true)),
                ),
                2 => (
                    "mutated",
                    body_for(route, &mut rng, |r| {
                        let valid = schemas.typed(r, req, 0, false);
                        mutate(r, &valid)
                    }),
                ),
                _ => ("random", body_for(route, &mut rng, |r| random_json(r, 4))),
            };
            send(&mut tally, path, op, label, &body);
        }
    }
    check_stored(&d, &schemas, &mut tally);
    let (status, _) = d.get_raw("/api/health", false);
    assert_eq!(status, 200, "daemon healthy after the run");
    assert_no_panic(&d);
    eprintln!(
        "fuzz seed {seed}: {} requests in {:.1?}; by status {:?}; by route {:?}",
        tally.sent,
        started.elapsed(),
        tally.by_status,
        tally.by_route
    );
    assert!(
        tally.failures.is_empty(),
        "{} problem(s):\n{}",
        tally.failures.len(),
        tally.failures.join("\n")
    );
    assert!(
        tally.by_status.get(&200).copied().unwrap_or(0) > 100,
        "typed inputs reach the handlers"
    );
}

#[test]
fn wrong_methods_paths_and_headers_get_clean_4xx() {
    let d = tests::start_daemon();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let auth = format!("Bearer {}", d.token);
    let mut checked = 0;
    let mut expect = |status: u16, want: &[u16], what: &str| {
        assert!(
            want.contains(&status),
            "{what}: got {status}, want {want:?}"
        );
        checked += 1;
    };
    for path in [
        "/api/search",
        "/api/hooks/stop",
        "/api/ingest",
        "/api/memory-bank/add",
    ] {
        let s = agent
            .get(&d.url(path))
            .header("authorization", &auth)
            .call()
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        expect(s, &[405], &format!("GET {path}"));
        let s = agent
            .delete(&d.url(path))
            .header("authorization", &auth)
            .call()
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        expect(s, &[405], &format!("DELETE {path}"));
        let s = d.post_raw(path, b"{}", false).0;
        expect(s, &[401], &format!("POST {path} without token"));
        let s = agent
            .post(&d.url(path))
            .header("authorization", "Bearer x")
            .send(&b"{}"[..])
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        expect(s, &[401], &format!("POST {path} wrong token"));
        let s = agent
            .post(&d.url(path))
            .header("authorization", &auth)
            .header("host", "evil.example:80")
            .send(&b"{}"[..])
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        expect(s, &[403], &format!("POST {path} foreign Host"));
        let s = agent
            .post(&d.url(path))
            .header("authorization", &auth)
            .header("origin", "https://evil.example")
            .send(&b"{}"[..])
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        expect(s, &[403], &format!("POST {path} foreign Origin"));
        let s = agent
            .post(&d.url(path))
            .header("authorization", &auth)
            .header("content-type", "text/plain")
            .send(&b"not json"[..])
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        expect(s, &[400], &format!("POST {path} text/plain"));
    }
    for path in [
        "/api/nope",
        "/api/search/x",
        "/api/../api/search",
        "/mcpx",
        "/",
        "/api",
    ] {
        let s = agent
            .get(&d.url(path))
            .header("authorization", &auth)
            .call()
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        expect(s, &[404, 405, 400], &format!("GET {path}"));
    }
    assert_eq!(
        d.get_raw("/openapi.json", false).0,
        401,
        "the document needs the token"
    );
    eprintln!("methods/paths/headers: {checked} requests checked");
}

/// Raw bytes on the socket: garbage, broken HTTP, oversized headers, smuggling attempts.
#[test]
fn raw_socket_garbage_never_kills_the_daemon() {
    let d = tests::start_daemon();
    let mut rng = StdRng::seed_from_u64(seed());
    let host = format!("127.0.0.1:{}", d.port);
    let auth = format!("Bearer {}", d.token);
    let mut inputs: Vec<Vec<u8>> = vec![
        b"\r\n\r\n".to_vec(),
        b"GET / HTTP/9.9\r\n\r\n".to_vec(),
        b"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n{}".to_vec(),
        b"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999999999999\r\n\r\n{}".to_vec(),
        format!("POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\n{}: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "Authorization").into_bytes(),
        format!("POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc\r\n").into_bytes(),
        format!("POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\nContent-Length: 100\r\n\r\n{{\"query\"").into_bytes(),
        format!("GET /api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\nX-Big: {}\r\n\r\n", "a".repeat(1 << 20)).into_bytes(),
        format!("GET /api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\n{}\r\n", (0..500).map(|i| format!("X-{i}: v\r\n")).collect::<String>()).into_bytes(),
        format!("GET /{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "a".repeat(100_000)).into_bytes(),
        b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec(),
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00".to_vec(),
        // Issue 17: a foreign authority in the request target, an h2c upgrade, the identity
        // check with bad and oversized nonces.
        format!("GET http://evil.example/api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\n\r\n").into_bytes(),
        format!("GET /api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n").into_bytes(),
        b"GET /api/hello?nonce=zz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec(),
        format!("GET /api/hello?nonce={}&nonce=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "f".repeat(5000)).into_bytes(),
        b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \xff\xfe\r\n\r\n".to_vec(),
    ];
    for _ in 0..60 {
        let n = rng.random_range(1..8192);
        inputs.push((0..n).map(|_| rng.random()).collect());
    }
    let mut faults = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let Ok(mut stream) = TcpStream::connect(&host) else {
            panic!("input {i}: the daemon stopped accepting connections");
        };
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let _ = stream.write_all(input);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let head = String::from_utf8_lossy(&answer[..answer.len().min(12)]).to_string();
        if let Some(code) = head
            .strip_prefix("HTTP/1.1 ")
            .and_then(|c| c.get(..3))
            .and_then(|c| c.parse::<u16>().ok())
            && server_fault(code)
        {
            faults.push(format!("input {i}: {head}"));
        }
    }
    assert_eq!(
        d.get_raw("/api/health", false).0,
        200,
        "daemon healthy after raw garbage"
    );
    assert!(faults.is_empty(), "{faults:?}");
    assert_no_panic(&d);
    eprintln!("raw socket: {} inputs, daemon still healthy", inputs.len());
}
