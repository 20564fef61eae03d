//! Hostile input against a real daemon: thousands of random, malformed and schema-typed bodies
//! to every POST route of `/openapi.json`, raw bytes on the socket, wrong methods and headers.
//!
//! The daemon must never answer 5xx (507/503 are storage states, not bugs), every error must be
//! an `ErrorBody`, every 2xx answer must match the documented response schema (which keeps the
//! OpenAPI document truthful), and the daemon must still be healthy at the end.
//! `MEMD_FUZZ_SEED` replays a run; `MEMD_FUZZ_ROUNDS` scales it (default 300 per route).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};
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

// ---------- schema-driven values ----------

struct Schemas(Value);

impl Schemas {
    fn resolve<'a>(&'a self, s: &'a Value) -> &'a Value {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => self.resolve(&self.0["components"]["schemas"][r.trim_start_matches("#/components/schemas/")]),
            None => s,
        }
    }

    /// A value of the schema's shape with random content (sometimes at or past its limits).
    fn typed(&self, rng: &mut StdRng, schema: &Value, depth: usize) -> Value {
        let s = self.resolve(schema);
        if let Some(any) = s.get("anyOf").and_then(Value::as_array)
            && s.get("type").is_none()
        {
            let pick = &any[rng.random_range(0..any.len())];
            return self.typed(rng, pick, depth);
        }
        if let Some(e) = s.get("enum").and_then(Value::as_array)
            && rng.random_bool(0.9)
        {
            return e[rng.random_range(0..e.len())].clone();
        }
        let ty = match s.get("type") {
            Some(Value::Array(ts)) => ts[rng.random_range(0..ts.len())].as_str().unwrap_or("null"),
            Some(Value::String(t)) => t.as_str(),
            _ => return random_json(rng, depth.min(3)),
        };
        match ty {
            "null" => Value::Null,
            "boolean" => json!(rng.random_bool(0.5)),
            "integer" => json!(edge_integer(rng, s)),
            "number" => edge_number(rng, s),
            "string" => json!(edge_string(rng, s)),
            "array" => {
                let max = s.get("maxItems").and_then(Value::as_u64).unwrap_or(4) as usize;
                let n = rng.random_range(0..=(max + 1).min(6));
                let items = s.get("items").cloned().unwrap_or(json!({}));
                Value::Array((0..n).map(|_| self.typed(rng, &items, depth + 1)).collect())
            }
            "object" => self.typed_object(rng, s, depth),
            _ => Value::Null,
        }
    }

    fn typed_object(&self, rng: &mut StdRng, s: &Value, depth: usize) -> Value {
        let mut out = Map::new();
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = s.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                if required.contains(&k.as_str()) || rng.random_bool(0.6) {
                    out.insert(k.clone(), self.typed(rng, v, depth + 1));
                }
            }
        }
        if s.get("additionalProperties").is_some() && depth < 4 {
            for _ in 0..rng.random_range(0..4) {
                out.insert(random_string(rng, 12), random_json(rng, 2));
            }
        }
        Value::Object(out)
    }
}

fn edge_integer(rng: &mut StdRng, s: &Value) -> i128 {
    let lo = s.get("minimum").and_then(Value::as_i64).unwrap_or(-1_000) as i128;
    let hi = s.get("maximum").and_then(Value::as_i64).unwrap_or(1_000_000) as i128;
    match rng.random_range(0..10) {
        0 => lo,
        1 => hi,
        2 => lo - 1,
        3 => hi + 1,
        4 => i64::MAX as i128,
        5 => i64::MIN as i128,
        6 => u64::MAX as i128,
        _ => rng.random_range(lo..=hi),
    }
}

fn edge_number(rng: &mut StdRng, s: &Value) -> Value {
    let lo = s.get("minimum").and_then(Value::as_f64).unwrap_or(-1e6);
    let hi = s.get("maximum").and_then(Value::as_f64).unwrap_or(1e6);
    match rng.random_range(0..10) {
        0 => json!(lo),
        1 => json!(hi),
        2 => json!(1e308),
        3 => json!(-1e308),
        4 => json!(5e-324),
        5 => json!(-0.0),
        6 => json!(hi + 1e-9),
        _ => json!(rng.random_range(lo..=hi)),
    }
}

fn edge_string(rng: &mut StdRng, s: &Value) -> String {
    let max = s.get("maxLength").and_then(Value::as_u64).map(|m| m as usize);
    match (rng.random_range(0..12), max) {
        (0, Some(m)) => "é".repeat(m),
        (1, Some(m)) => "x".repeat(m + 1),
        (2, _) => String::new(),
        (3, _) => "   \n\t ".into(),
        (4, _) => "worked".into(),
        (5, _) => "<private>hidden</private>".into(),
        (6, _) => "\u{0}\u{1}\u{7f}\u{feff}\u{202e}\u{fffd}".into(),
        (7, _) => format!("{}_{}", ["working", "memory_bank", "books", "patterns"][rng.random_range(0..4)], random_string(rng, 12)),
        _ => random_string(rng, max.unwrap_or(200).min(300)),
    }
}

fn random_string(rng: &mut StdRng, max: usize) -> String {
    let n = rng.random_range(0..=max.max(1));
    (0..n)
        .map(|_| match rng.random_range(0..10) {
            0 => char::from_u32(rng.random_range(0x80..0x2_FFFF)).unwrap_or('?'),
            1 => char::from(rng.random_range(0u8..0x20)),
            2 => ['"', '\\', '/', '<', '>', '{', '$', '\''][rng.random_range(0..8)],
            _ => char::from(rng.random_range(b'a'..=b'z')),
        })
        .collect()
}

/// Any JSON value at all.
fn random_json(rng: &mut StdRng, depth: usize) -> Value {
    let pick = if depth == 0 { rng.random_range(0..5) } else { rng.random_range(0..7) };
    match pick {
        0 => Value::Null,
        1 => json!(rng.random_bool(0.5)),
        2 => [json!(0), json!(-1), json!(u64::MAX), json!(i64::MIN), json!(1e308), json!(0.5)][rng.random_range(0..6)].clone(),
        3 | 4 => json!(random_string(rng, 40)),
        5 => Value::Array((0..rng.random_range(0..5)).map(|_| random_json(rng, depth - 1)).collect()),
        _ => Value::Object(
            (0..rng.random_range(0..5))
                .map(|_| (random_string(rng, 10), random_json(rng, depth - 1)))
                .collect(),
        ),
    }
}

/// `valid` with one field replaced by a value of another type, dropped, or renamed.
fn mutate(rng: &mut StdRng, valid: &Value) -> Value {
    let Value::Object(map) = valid else {
        return random_json(rng, 3);
    };
    let mut map = map.clone();
    let keys: Vec<String> = map.keys().cloned().collect();
    if keys.is_empty() {
        map.insert(random_string(rng, 8), random_json(rng, 2));
        return Value::Object(map);
    }
    let key = keys[rng.random_range(0..keys.len())].clone();
    match rng.random_range(0..4) {
        0 => {
            map.remove(&key);
        }
        1 => {
            let v = map.remove(&key).unwrap_or(Value::Null);
            map.insert(key.to_uppercase() + "_", v);
        }
        _ => {
            map.insert(key, random_json(rng, 3));
        }
    }
    Value::Object(map)
}

// ---------- raw bodies ----------

/// Bodies no JSON encoder would produce.
fn malformed_bodies(rng: &mut StdRng) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = vec![
        ("empty".into(), Vec::new()),
        ("whitespace".into(), b" \n\t ".to_vec()),
        ("null".into(), b"null".to_vec()),
        ("number".into(), b"42".to_vec()),
        ("truncated".into(), br#"{"query": "abc"#.to_vec()),
        ("bom".into(), b"\xef\xbb\xbf{}".to_vec()),
        ("nan".into(), br#"{"importance": NaN, "limit": Infinity}"#.to_vec()),
        ("invalid utf-8 in string".into(), b"{\"content\": \"ok \xff\xfe\xc3\x28 \", \"query\": \"\xed\xa0\x80\"}".to_vec()),
        ("lone surrogate escape".into(), br#"{"content": "\ud800", "query": "\udfff x", "conversation_id": "\ud83d"}"#.to_vec()),
        ("duplicate keys".into(), br#"{"content": "a", "content": 5, "limit": 1, "limit": "x"}"#.to_vec()),
        ("deep arrays".into(), [vec![b'['; 100_000], vec![b']'; 100_000]].concat()),
        ("deep objects".into(), [b"{\"a\":".repeat(50_000), b"1".to_vec(), vec![b'}'; 50_000]].concat()),
        ("deep metadata".into(), [b"{\"content\":\"x\",\"metadata\":{\"m\":".to_vec(), b"[".repeat(126), b"]".repeat(126), b"}}".to_vec()].concat()),
        ("huge integer literal".into(), format!("{{\"limit\": {}, \"days_back\": 1}}", "9".repeat(5000)).into_bytes()),
        ("huge exponent".into(), br#"{"importance": 1e999999, "days_back": -1e400}"#.to_vec()),
        ("trailing garbage".into(), br#"{"query": "x"} {"query": "y"}"#.to_vec()),
        ("nul bytes".into(), b"{\"query\"\0: \"x\"}".to_vec()),
    ];
    let near = 1024 * 1024 - 64;
    out.push(("string near the body limit".into(), json!({"content": "a".repeat(near), "query": "b", "title": "t", "key_takeaway": "k"}).to_string().into_bytes()));
    out.push(("body just over 1 MiB".into(), json!({"content": "a".repeat(1024 * 1024)}).to_string().into_bytes()));
    out.push(("many keys".into(), Value::Object((0..20_000).map(|i| (format!("k{i}"), json!(i))).collect()).to_string().into_bytes()));
    for n in 0..20 {
        let len = rng.random_range(1..4096);
        out.push((format!("random bytes {n}"), (0..len).map(|_| rng.random()).collect()));
    }
    out
}

// ---------- response checks ----------

/// Checks an answer: 5xx is a fault; errors are `ErrorBody`; 2xx matches the documented schema.
fn judge(schemas: &Schemas, op: &Value, status: u16, body: &str) -> Option<String> {
    if server_fault(status) {
        return Some(format!("status {status}: {}", &body[..body.len().min(300)]));
    }
    let parsed: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => return Some(format!("status {status} with a non-JSON body ({e}): {body:.200}")),
    };
    if status >= 400 {
        let ok = parsed["error"].as_str().is_some_and(|e| !e.is_empty());
        return (!ok).then(|| format!("status {status} error body is not an ErrorBody: {body:.200}"));
    }
    let schema = &op["responses"][status.to_string()]["content"]["application/json"]["schema"];
    if schema.is_null() {
        return Some(format!("status {status} is not documented"));
    }
    conforms(schemas, schema, &parsed, "$").err()
}

/// Strict JSON Schema subset check of an answer (undeclared keys are refused).
fn conforms(schemas: &Schemas, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let s = schemas.resolve(schema);
    if let Some(any) = s.get("anyOf").and_then(Value::as_array)
        && !any.iter().any(|b| conforms(schemas, b, v, at).is_ok())
    {
        return Err(format!("{at}: matches no anyOf branch"));
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            other => vec![other.as_str().unwrap_or("")],
        };
        let actual = match v {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        if !types.contains(&actual) && !(actual == "integer" && types.contains(&"number")) {
            return Err(format!("{at}: {actual}, documented {types:?}"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        return Err(format!("{at}: {v} not in {e:?}"));
    }
    match v {
        Value::Array(items) => match s.get("items") {
            Some(is) => items.iter().enumerate().try_for_each(|(i, x)| conforms(schemas, is, x, &format!("{at}[{i}]"))),
            None => Ok(()),
        },
        Value::Object(map) => {
            let props = s.get("properties").and_then(Value::as_object);
            for r in s.get("required").and_then(Value::as_array).into_iter().flatten() {
                let r = r.as_str().unwrap_or("");
                if !map.contains_key(r) {
                    return Err(format!("{at}: required `{r}` missing"));
                }
            }
            for (k, x) in map {
                let path = format!("{at}.{k}");
                match (props.and_then(|p| p.get(k)), s.get("additionalProperties")) {
                    (Some(ps), _) => conforms(schemas, ps, x, &path)?,
                    (None, Some(Value::Bool(true))) => {}
                    (None, Some(ap)) if ap.is_object() => conforms(schemas, ap, x, &path)?,
                    (None, _) if props.is_some() => return Err(format!("{path}: undocumented field")),
                    _ => {}
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

// ---------- the runs ----------

fn seed() -> u64 {
    std::env::var("MEMD_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random)
}

fn rounds() -> usize {
    std::env::var("MEMD_FUZZ_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(300)
}

/// The POST operations of the served document: (path, operation, request schema).
fn post_routes(doc: &Value) -> Vec<(String, Value, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        if let Some(op) = item.get("post") {
            let req = op["requestBody"]["content"]["application/json"]["schema"].clone();
            out.push((path.clone(), op.clone(), req));
        }
    }
    out
}

#[test]
fn every_post_route_survives_random_malformed_and_typed_bodies() {
    let d = Daemon::start();
    let (status, text) = d.get_raw("/openapi.json", true);
    assert_eq!(status, 200, "GET /openapi.json");
    let doc: Value = serde_json::from_str(&text).expect("document is JSON");
    let schemas = Schemas(doc.clone());
    let routes = post_routes(&doc);
    assert_eq!(routes.len(), 11, "every POST route is documented");
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tally = Tally::default();
    let started = Instant::now();
    let send = |tally: &mut Tally, path: &str, op: &Value, label: &str, body: &[u8]| {
        let (status, answer) = d.post_raw(path, body, true);
        let problem = judge(&schemas, op, status, &answer)
            .map(|p| format!("seed {seed} {path} [{label}] body {:.160}: {p}", String::from_utf8_lossy(body)));
        tally.note(path, status, problem);
    };
    for (path, op, req) in &routes {
        for (label, body) in malformed_bodies(&mut rng) {
            send(&mut tally, path, op, &label, &body);
        }
        for round in 0..rounds() {
            let valid = schemas.typed(&mut rng, req, 0);
            let (label, value) = match round % 4 {
                0 | 1 => ("typed", valid),
                2 => ("mutated", mutate(&mut rng, &valid)),
                _ => ("random", random_json(&mut rng, 4)),
            };
            send(&mut tally, path, op, label, value.to_string().as_bytes());
        }
    }
    let (status, _) = d.get_raw("/api/health", false);
    assert_eq!(status, 200, "daemon healthy after the run");
    eprintln!(
        "fuzz seed {seed}: {} requests in {:.1?}; by status {:?}; by route {:?}",
        tally.sent,
        started.elapsed(),
        tally.by_status,
        tally.by_route
    );
    assert!(tally.failures.is_empty(), "{} problem(s):\n{}", tally.failures.len(), tally.failures.join("\n"));
    assert!(tally.by_status.get(&200).copied().unwrap_or(0) > 100, "typed inputs reach the handlers");
}

#[test]
fn wrong_methods_paths_and_headers_get_clean_4xx() {
    let d = Daemon::start();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let auth = format!("Bearer {}", d.token);
    let mut checked = 0;
    let mut expect = |status: u16, want: &[u16], what: &str| {
        assert!(want.contains(&status), "{what}: got {status}, want {want:?}");
        checked += 1;
    };
    for path in ["/api/search", "/api/hooks/stop", "/api/ingest", "/api/memory-bank/add"] {
        let s = agent.get(&d.url(path)).header("authorization", &auth).call().map(|r| r.status().as_u16()).unwrap_or(0);
        expect(s, &[405], &format!("GET {path}"));
        let s = agent.delete(&d.url(path)).header("authorization", &auth).call().map(|r| r.status().as_u16()).unwrap_or(0);
        expect(s, &[405], &format!("DELETE {path}"));
        let s = d.post_raw(path, b"{}", false).0;
        expect(s, &[401], &format!("POST {path} without token"));
        let s = agent.post(&d.url(path)).header("authorization", "Bearer x").send(&b"{}"[..]).map(|r| r.status().as_u16()).unwrap_or(0);
        expect(s, &[401], &format!("POST {path} wrong token"));
        let s = agent.post(&d.url(path)).header("authorization", &auth).header("host", "evil.example:80")
            .send(&b"{}"[..]).map(|r| r.status().as_u16()).unwrap_or(0);
        expect(s, &[403], &format!("POST {path} foreign Host"));
        let s = agent.post(&d.url(path)).header("authorization", &auth).header("origin", "https://evil.example")
            .send(&b"{}"[..]).map(|r| r.status().as_u16()).unwrap_or(0);
        expect(s, &[403], &format!("POST {path} foreign Origin"));
        let s = agent.post(&d.url(path)).header("authorization", &auth).header("content-type", "text/plain")
            .send(&b"not json"[..]).map(|r| r.status().as_u16()).unwrap_or(0);
        expect(s, &[400], &format!("POST {path} text/plain"));
    }
    for path in ["/api/nope", "/api/search/x", "/api/../api/search", "/mcpx", "/", "/api"] {
        let s = agent.get(&d.url(path)).header("authorization", &auth).call().map(|r| r.status().as_u16()).unwrap_or(0);
        expect(s, &[404, 405, 400], &format!("GET {path}"));
    }
    assert_eq!(d.get_raw("/openapi.json", false).0, 401, "the document needs the token");
    eprintln!("methods/paths/headers: {checked} requests checked");
}

/// Raw bytes on the socket: garbage, broken HTTP, oversized headers, smuggling attempts.
#[test]
fn raw_socket_garbage_never_kills_the_daemon() {
    let d = Daemon::start();
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
        if let Some(code) = head.strip_prefix("HTTP/1.1 ").and_then(|c| c.get(..3)).and_then(|c| c.parse::<u16>().ok())
            && server_fault(code)
        {
            faults.push(format!("input {i}: {head}"));
        }
    }
    assert_eq!(d.get_raw("/api/health", false).0, 200, "daemon healthy after raw garbage");
    assert!(faults.is_empty(), "{faults:?}");
    eprintln!("raw socket: {} inputs, daemon still healthy", inputs.len());
}
