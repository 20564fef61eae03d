//! Eight clients against one real daemon for a bounded time, mixing every kind of read and
//! write the hooks and tools make. Every request must succeed, every client must read its own
//! writes at once, and afterwards (and after a restart) the counts must equal exactly what the
//! clients were told was stored. `MEMD_CONCURRENCY_SECS` changes the duration (default 20).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tests::Daemon;

const CLIENTS: usize = 8;
const WORDS: [&str; 16] = [
    "billing",
    "staging",
    "postgres",
    "migration",
    "cache",
    "redis",
    "deploy",
    "kubernetes",
    "timeout",
    "retry",
    "queue",
    "worker",
    "schema",
    "index",
    "latency",
    "token",
];

/// What one client did and was told.
#[derive(Default)]
struct ClientLog {
    ops: BTreeMap<&'static str, usize>,
    errors: Vec<String>,
    /// memory_bank ids this client created (not duplicates), with their latest content.
    bank: BTreeMap<String, String>,
    /// working-memory writes acknowledged: takeaways, exchanges, summaries.
    working: BTreeSet<String>,
    summaries: usize,
    latencies: Vec<Duration>,
}

struct Client<'a> {
    d: &'a Daemon,
    n: usize,
    rng: StdRng,
    log: ClientLog,
    turn: usize,
}

impl Client<'_> {
    fn call(&mut self, kind: &'static str, path: &str, body: Value) -> Option<Value> {
        let started = Instant::now();
        let (status, text) = self.d.post_raw(path, body.to_string().as_bytes(), true);
        self.log.latencies.push(started.elapsed());
        *self.log.ops.entry(kind).or_default() += 1;
        if status != 200 {
            self.log
                .errors
                .push(format!("client {} {kind} → {status}: {text:.200}", self.n));
            return None;
        }
        serde_json::from_str(&text).ok()
    }

    fn sentence(&mut self) -> String {
        let words: Vec<&str> = (0..6)
            .map(|_| WORDS[self.rng.random_range(0..WORDS.len())])
            .collect();
        words.join(" ")
    }

    fn step(&mut self) {
        match self.rng.random_range(0..10) {
            0 => self.add_fact(),
            1 => self.update_fact(),
            2 => self.takeaway(),
            3 | 4 => self.turn(),
            5 => self.read_own_write(),
            6 | 7 => {
                let q = self.sentence();
                self.call("search", "/api/search", json!({"query": q, "limit": 10}));
            }
            8 => {
                self.call(
                    "browse",
                    "/api/search",
                    json!({"days_back": 1, "limit": 50, "sort_by": "recency"}),
                );
            }
            _ => {
                let started = Instant::now();
                let (status, _) = self.d.get_raw("/api/stats", true);
                self.log.latencies.push(started.elapsed());
                *self.log.ops.entry("stats").or_default() += 1;
                if status != 200 {
                    self.log
                        .errors
                        .push(format!("client {} stats → {status}", self.n));
                }
            }
        }
    }

    fn add_fact(&mut self) {
        let (words, salt) = (self.sentence(), self.rng.random::<u32>());
        let content = format!("client {} fact {}: {words} ({salt})", self.n, self.turn);
        self.turn += 1;
        if let Some(v) = self.call(
            "bank-add",
            "/api/memory-bank/add",
            json!({"content": content}),
        ) {
            let id = v["doc_id"].as_str().unwrap_or_default().to_string();
            if v["duplicate"] == false {
                self.log.bank.insert(id, content);
            }
        }
    }

    fn update_fact(&mut self) {
        let Some(id) = self
            .log
            .bank
            .keys()
            .nth(self.rng.random_range(0..self.log.bank.len().max(1)))
            .cloned()
        else {
            return self.add_fact();
        };
        let words = self.sentence();
        let content = format!("client {} fact updated {}: {words}", self.n, self.turn);
        self.turn += 1;
        if self
            .call(
                "bank-update",
                "/api/memory-bank/update",
                json!({"id": id, "content": content}),
            )
            .is_some()
        {
            self.log.bank.insert(id, content);
        }
    }

    fn takeaway(&mut self) {
        let words = self.sentence();
        let text = format!("client {} takeaway {}: {words}", self.n, self.turn);
        self.turn += 1;
        if let Some(v) = self.call(
            "takeaway",
            "/api/record-response",
            json!({"key_takeaway": text}),
        ) {
            self.log
                .working
                .insert(v["doc_id"].as_str().unwrap_or_default().to_string());
        }
    }

    /// A hook turn: get-context, stop, then an outcome with a summary for the stored exchange.
    fn turn(&mut self) {
        let conv = format!("conc-{}", self.n);
        let words = self.sentence();
        let q = format!("turn {} of client {}: {words}", self.turn, self.n);
        self.turn += 1;
        self.call(
            "get-context",
            "/api/hooks/get-context",
            json!({"query": q, "conversation_id": conv}),
        );
        let answer = format!("answer to turn {}", self.turn);
        if let Some(v) = self.call(
            "stop",
            "/api/hooks/stop",
            json!({"conversation_id": conv, "user_message": q, "assistant_response": answer}),
        ) {
            self.log
                .working
                .insert(v["doc_id"].as_str().unwrap_or_default().to_string());
        }
        let summary = format!("client {} summary {}", self.n, self.turn);
        let body =
            json!({"conversation_id": conv, "outcome": "worked", "exchange_summary": summary});
        if let Some(v) = self.call("outcome", "/api/record-outcome", body)
            && v["summary_stored"] == true
        {
            self.log.summaries += 1;
        }
    }

    fn read_own_write(&mut self) {
        let Some((id, content)) = self
            .log
            .bank
            .iter()
            .next_back()
            .map(|(a, b)| (a.clone(), b.clone()))
        else {
            return self.add_fact();
        };
        if let Some(v) = self.call("read-own", "/api/search", json!({"id": id}))
            && v["results"][0]["content"] != content.as_str()
        {
            let got = &v["results"][0]["content"];
            self.log.errors.push(format!(
                "client {}: {id} read back {got:?}, wrote {content:?}",
                self.n
            ));
        }
    }
}

fn duration() -> Duration {
    let secs = std::env::var("MEMD_CONCURRENCY_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    Duration::from_secs(secs)
}

fn counts(d: &Daemon) -> BTreeMap<String, usize> {
    d.get::<proto::HealthResponse>("/api/health").counts
}

#[test]
fn eight_clients_mixed_reads_and_writes_stay_consistent() {
    let mut d = tests::start_daemon();
    let until = Instant::now() + duration();
    let seed: u64 = rand::random();
    let logs: Vec<ClientLog> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|n| {
                let d = &d;
                scope.spawn(move || {
                    let mut c = Client {
                        d,
                        n,
                        rng: StdRng::seed_from_u64(seed + n as u64),
                        log: ClientLog::default(),
                        turn: 0,
                    };
                    while Instant::now() < until {
                        c.step();
                    }
                    c.log
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    let errors: Vec<&String> = logs.iter().flat_map(|l| &l.errors).collect();
    let total: usize = logs.iter().map(|l| l.ops.values().sum::<usize>()).sum();
    let mut latencies: Vec<Duration> = logs.iter().flat_map(|l| l.latencies.clone()).collect();
    latencies.sort();
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &logs {
        for (k, v) in &l.ops {
            *by_kind.entry(k).or_default() += v;
        }
    }
    eprintln!(
        "concurrency seed {seed}: {total} requests by {CLIENTS} clients, {} errors; p50 {:?} p99 {:?} max {:?}; {by_kind:?}",
        errors.len(),
        latencies
            .get(latencies.len() / 2)
            .copied()
            .unwrap_or_default(),
        latencies
            .get(latencies.len() * 99 / 100)
            .copied()
            .unwrap_or_default(),
        latencies.last().copied().unwrap_or_default(),
    );
    assert!(
        errors.is_empty(),
        "{} errors, first: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    assert!(total >= CLIENTS * 20, "the clients made progress: {total}");

    let bank: BTreeMap<&String, &String> = logs.iter().flat_map(|l| l.bank.iter()).collect();
    let working: usize = logs.iter().map(|l| l.working.len()).sum();
    let summaries: usize = logs.iter().map(|l| l.summaries).sum();
    let expected_learned = working + summaries;
    let check = |d: &Daemon, when: &str| {
        let c = counts(d);
        assert_eq!(
            c.get("memory_bank").copied().unwrap_or(0),
            bank.len(),
            "{when}: memory_bank {c:?}"
        );
        let learned: usize = ["working", "history", "patterns"]
            .iter()
            .map(|k| c.get(*k).copied().unwrap_or(0))
            .sum();
        assert_eq!(
            learned, expected_learned,
            "{when}: working+history+patterns {c:?}"
        );
        for (id, content) in &bank {
            let r: proto::SearchResponse = d.post("/api/search", &json!({"id": id}));
            assert_eq!(
                r.results.first().map(|m| &m.content),
                Some(*content),
                "{when}: {id}"
            );
        }
    };
    check(&d, "after the run");
    assert!(d.terminate(), "clean shutdown");
    d.spawn(&[]);
    check(&d, "after a restart");
    assert!(!d.log_text().contains("panicked"), "{}", d.log_text());
    eprintln!(
        "consistent: {} memory_bank entries, {expected_learned} working-side memories",
        bank.len()
    );
}
