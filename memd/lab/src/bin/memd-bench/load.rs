//! Request-level workloads against a running daemon: ingest with N clients, sequential latency
//! loops (search, get-context) and the mixed multi-session load.
//!
//! Owns the definitions of what is timed: a request counts from just before it is sent until
//! its body is read, over a kept-alive connection. Must never count a failed request as a
//! latency sample, and never hide a failure: every non-200 answer is counted and its first
//! message kept.

use super::corpus::Corpus;
use super::daemon::{Client, Daemon};
use super::report::Samples;
use anyhow::{Result, bail};
use proto::*;
use serde_json::json;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What an ingest run measured.
pub struct Ingest {
    /// First request sent → last acknowledgement (all durable).
    pub durable: Duration,
    /// First request sent → `pending_embeddings == 0`.
    pub embedded: Duration,
    pub request: Samples,
    pub errors: usize,
    pub first_error: Option<String>,
}

/// Failures seen by concurrent workers.
#[derive(Default)]
struct Failures {
    count: AtomicUsize,
    first: Mutex<Option<String>>,
}

impl Failures {
    fn record(&self, msg: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut first) = self.first.lock()
            && first.is_none()
        {
            *first = Some(msg);
        }
    }

    fn first(&self) -> Option<String> {
        self.first.lock().ok().and_then(|f| f.clone())
    }
}

/// What posting a batch of takeaways measured.
pub struct Posted {
    /// First request sent → last acknowledgement.
    pub elapsed: Duration,
    pub request: Samples,
    pub errors: usize,
    pub first_error: Option<String>,
}

/// POSTs every text to `/api/record-response` from `clients` threads; returns once every
/// answer arrived (an acknowledged memory is durable; its embedding may still be queued).
pub fn post_takeaways(d: &Daemon, texts: &[String], clients: usize) -> Posted {
    let next = AtomicUsize::new(0);
    let failures = Failures::default();
    let samples = Mutex::new(Samples::default());
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..clients.max(1) {
            let client = d.client.fork();
            let (next, failures, samples) = (&next, &failures, &samples);
            scope.spawn(move || {
                let mut mine = Samples::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(text) = texts.get(i) else { break };
                    let body = RecordResponseRequest {
                        key_takeaway: text.clone(),
                        initial_score: None,
                        conversation_id: Some(format!("bench-ingest-{}", i % 97)),
                    };
                    let t = Instant::now();
                    match client.post_raw("/api/record-response", &body) {
                        Ok((200, _)) => mine.push(t.elapsed()),
                        Ok((status, text)) => failures.record(format!("{status}: {text}")),
                        Err(e) => failures.record(format!("{e:#}")),
                    }
                }
                if let Ok(mut all) = samples.lock() {
                    all.extend(&mine);
                }
            });
        }
    });
    Posted {
        elapsed: start.elapsed(),
        request: samples.into_inner().unwrap_or_default(),
        errors: failures.count.load(Ordering::Relaxed),
        first_error: failures.first(),
    }
}

/// Stores every text through the API, then waits until the daemon has embedded all of them.
pub fn ingest(d: &Daemon, texts: &[String], clients: usize) -> Result<Ingest> {
    let start = Instant::now();
    let posted = post_takeaways(d, texts, clients);
    // ~50/s is the slowest embedding rate seen on a loaded 2-core machine; double it for margin.
    let limit = Duration::from_secs(120 + texts.len() as u64 / 25);
    d.wait_embedded(limit)?;
    Ok(Ingest {
        durable: posted.elapsed,
        embedded: start.elapsed(),
        request: posted.request,
        errors: posted.errors,
        first_error: posted.first_error,
    })
}

/// `/api/search` with new queries while the daemon embeds a backlog of `backlog` new memories
/// (the query embedding shares the model with the background worker). Returns the samples and
/// how many memories were still waiting for their embedding when the last query finished.
pub fn search_during_backlog(
    d: &Daemon,
    queries: &[String],
    backlog: &[String],
) -> Result<(Samples, usize)> {
    let posted = post_takeaways(d, backlog, 8);
    if posted.errors > 0 {
        bail!("backlog not stored: {:?}", posted.first_error);
    }
    let s = search_fresh(d, queries)?;
    let pending = d.stats()?.index.pending_embeddings;
    d.wait_embedded(Duration::from_secs(600))?;
    Ok((s, pending))
}

/// Times `f` once per item, sequentially; any failure aborts the measurement.
fn time_each<T>(items: &[T], mut f: impl FnMut(&T) -> Result<()>) -> Result<Samples> {
    let mut s = Samples::default();
    for item in items {
        let t = Instant::now();
        f(item)?;
        s.push(t.elapsed());
    }
    Ok(s)
}

/// `GET path` `n` times (status endpoints that walk every memory under the store's read lock).
pub fn get_repeated(d: &Daemon, path: &str, n: usize) -> Result<Samples> {
    let calls: Vec<()> = vec![(); n];
    time_each(&calls, |_| {
        d.client.get::<serde_json::Value>(path).map(|_| ())
    })
}

fn search_once(c: &Client, query: &str) -> Result<()> {
    let req = SearchRequest {
        query: Some(query.to_string()),
        ..SearchRequest::default()
    };
    let r: SearchResponse = c.post("/api/search", &req)?;
    if r.results.is_empty() {
        bail!("search for {query:?} found nothing");
    }
    Ok(())
}

/// `/api/search` with a query never seen before: the daemon embeds it on the request path.
pub fn search_fresh(d: &Daemon, queries: &[String]) -> Result<Samples> {
    time_each(queries, |q| search_once(&d.client, q))
}

/// `/api/search` with queries whose vectors the daemon already cached (each pool query is sent
/// once untimed first): retrieval, ranking and HTTP without the model.
pub fn search_cached(d: &Daemon, pool: &[String], n: usize) -> Result<Samples> {
    for q in pool {
        search_once(&d.client, q)?;
    }
    let order: Vec<&String> = pool.iter().cycle().take(n).collect();
    time_each(&order, |q| search_once(&d.client, q))
}

/// One Claude Code prompt's get-context in `conv` (not a session start).
pub fn get_context_once(c: &Client, prompt: &str, conv: &str) -> Result<GetContextResponse> {
    let req = GetContextRequest {
        query: prompt.to_string(),
        conversation_id: conv.to_string(),
        cwd: Some("/home/dev/project".into()),
        project_dir: None,
        client: Some(proto::Client::ClaudeCode),
        session_start: false,
        session_source: None,
    };
    c.post("/api/hooks/get-context", &req)
}

/// `/api/hooks/get-context` for a new prompt in a new conversation each time (embedding,
/// retrieval, formatting and the durable session record included). Returns the samples and how
/// many answers injected context.
pub fn get_context_fresh(d: &Daemon, prompts: &[String], tag: &str) -> Result<(Samples, usize)> {
    let mut injected = 0;
    let mut i = 0usize;
    let s = time_each(prompts, |p| {
        i += 1;
        let r = get_context_once(&d.client, p, &format!("bench-gc-{tag}-{i}"))?;
        if !r.formatted_injection.is_empty() {
            injected += 1;
        }
        Ok(())
    })?;
    Ok((s, injected))
}

/// What the mixed load measured.
pub struct Mixed {
    pub sessions: usize,
    pub elapsed: Duration,
    pub turns: usize,
    pub get_context: Samples,
    pub stop: Samples,
    pub record_outcome: Samples,
    pub errors: usize,
    pub first_error: Option<String>,
    /// Stops that asked for a sidecar (would mean scoring did not land first).
    pub sidecar_requests: usize,
}

struct Step {
    gc: Samples,
    stop: Samples,
    ro: Samples,
    turns: usize,
    sidecar: usize,
}

/// `sessions` conversations, each looping prompt → stop → record-outcome until `duration`.
pub fn mixed(d: &Daemon, sessions: usize, duration: Duration, seed: u64) -> Result<Mixed> {
    let failures = Failures::default();
    let steps: Mutex<Vec<Step>> = Mutex::new(Vec::new());
    let start = Instant::now();
    let deadline = start + duration;
    std::thread::scope(|scope| {
        for s in 0..sessions {
            let client = d.client.fork();
            let (failures, steps) = (&failures, &steps);
            scope.spawn(move || {
                let step = run_session(&client, s, deadline, seed + s as u64, failures);
                if let Ok(mut all) = steps.lock() {
                    all.push(step);
                }
            });
        }
    });
    let elapsed = start.elapsed();
    let mut out = Mixed {
        sessions,
        elapsed,
        turns: 0,
        get_context: Samples::default(),
        stop: Samples::default(),
        record_outcome: Samples::default(),
        errors: failures.count.load(Ordering::Relaxed),
        first_error: failures.first(),
        sidecar_requests: 0,
    };
    for st in steps.into_inner().unwrap_or_default() {
        out.turns += st.turns;
        out.sidecar_requests += st.sidecar;
        out.get_context.extend(&st.gc);
        out.stop.extend(&st.stop);
        out.record_outcome.extend(&st.ro);
    }
    Ok(out)
}

fn run_session(c: &Client, s: usize, deadline: Instant, seed: u64, failures: &Failures) -> Step {
    let mut corpus = Corpus::new(seed);
    let conv = format!("bench-mixed-{seed}-{s}");
    let mut st = Step {
        gc: Samples::default(),
        stop: Samples::default(),
        ro: Samples::default(),
        turns: 0,
        sidecar: 0,
    };
    while Instant::now() < deadline {
        let prompt = corpus.prompt();
        let answer = corpus.answer(&prompt);
        let t = Instant::now();
        match get_context_once(c, &prompt, &conv) {
            Ok(_) => st.gc.push(t.elapsed()),
            Err(e) => {
                failures.record(format!("get-context: {e:#}"));
                continue;
            }
        }
        let stop = StopRequest {
            conversation_id: conv.clone(),
            user_message: prompt.clone(),
            assistant_response: answer,
            client: Some(proto::Client::ClaudeCode),
            project_dir: None,
            score_call_seen: None,
        };
        let t = Instant::now();
        match c.post::<_, StopResponse>("/api/hooks/stop", &stop) {
            Ok(r) => {
                st.stop.push(t.elapsed());
                if r.needs_sidecar {
                    st.sidecar += 1;
                }
            }
            Err(e) => {
                failures.record(format!("stop: {e:#}"));
                continue;
            }
        }
        let outcome = json!({"conversation_id": conv, "outcome": "worked"});
        let t = Instant::now();
        match c.post::<_, RecordOutcomeResponse>("/api/record-outcome", &outcome) {
            Ok(r) if r.already_scored => {
                failures.record("record-outcome: exchange was already scored".into())
            }
            Ok(_) => {
                st.ro.push(t.elapsed());
                st.turns += 1;
            }
            Err(e) => failures.record(format!("record-outcome: {e:#}")),
        }
    }
    st
}
