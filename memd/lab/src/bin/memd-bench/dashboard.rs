//! The `dashboard` phase: how long the dashboard's pages (`/ui`) take to render on a large store
//! with a full trace ledger, per size, loaded the way a browser loads them.
//!
//! Owns filling the ledger (real hook turns through the API first; then, up to the ledger's cap,
//! synthetic lines in its own format naming real ids of the store, written while the daemon is
//! stopped), logging in through the one-time link of `memd ui --print-url`, and timing each
//! page with the session cookie. Must never time a page any other way than an HTTP GET with the
//! browser's cookie, never write the ledger while a daemon runs, and must say in the notes how
//! many ledger lines were real and how many synthetic.

use super::Bench;
use crate::corpus::Corpus;
use crate::daemon::{Daemon, Instance};
use crate::report::{Figure, Samples, size_label};
use anyhow::{Context, Result, anyhow, bail};
use memd_engine::trace::{DEFAULT_CAP_BYTES, TRACE_FILE, TraceEntry};
use proto::{RecordOutcomeRequest, RecordOutcomeResponse, StopRequest, StopResponse};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Real conversations driven through the hooks' API, of `TURNS` turns each...
const CONVERSATIONS: usize = 200;
const TURNS: usize = 5;
/// ...unless this budget runs out first (the rest of the ledger is then synthetic).
const FILL_BUDGET: Duration = Duration::from_secs(120);
/// Concurrent sessions of the real fill (their lines interleave as real sessions' do).
const FILL_WORKERS: usize = 2;
/// Most timed requests per page.
const PAGE_REQUESTS: usize = 100;
/// The longest embedding (and token states) may take after a start or the fill.
const SETTLE_LIMIT: Duration = Duration::from_secs(1800);
/// Synthetic history, walking back from the first real line: one conversation every...
const SYN_CONVERSATION_GAP_MS: i64 = 20 * 60 * 1000;
/// ...with its turns this far apart, and the lines of a turn this far apart.
const SYN_TURN_GAP_MS: i64 = 2 * 60 * 1000;
const SYN_LINE_GAP_MS: i64 = 10 * 1000;
/// Body read limit: a page is far smaller; a larger one is a failure worth seeing.
const PAGE_LIMIT: u64 = 64 * 1024 * 1024;

/// What the real fill drove through the API.
struct Fill {
    conversations: Vec<String>,
    turns: usize,
    elapsed: Duration,
    /// Ids get-context injected, once per injection (popular memories repeat).
    injected: Vec<String>,
    /// Working-memory ids of the exchanges the stops stored.
    stored: Vec<String>,
}

/// What the ledger holds once filled.
struct Ledger {
    real_lines: usize,
    real_bytes: u64,
    synthetic_lines: usize,
    synthetic_bytes: u64,
    synthetic_conversations: usize,
}

impl Bench {
    pub fn dashboard(&mut self) -> Result<()> {
        let mut sizes = self.opts.sizes.clone();
        sizes.sort_unstable();
        sizes.dedup();
        for size in sizes {
            self.dashboard_size(size)?;
            self.save()?;
        }
        Ok(())
    }

    fn dashboard_size(&mut self, size: usize) -> Result<()> {
        let started = Instant::now();
        let mut corpus = Corpus::new(self.seed + 9000 + size as u64);
        println!("--- dashboard, {} ---", size_label(size));
        let (inst, d, label, b) = self.offline_store(
            "dashboard",
            size,
            &mut corpus,
            self.seed + 9001,
            SETTLE_LIMIT,
        )?;
        let fill = real_turns(&d, &mut corpus, &label)?;
        println!(
            "  {} real turns in {} conversations through the API in {:.1} s",
            fill.turns,
            fill.conversations.len(),
            fill.elapsed.as_secs_f64()
        );
        d.wait_embedded(SETTLE_LIMIT)?;
        d.stop()?;
        let ledger = fill_ledger(&inst.data_dir(), &fill, self.seed + 9002)?;
        let d = inst.start(true)?;
        d.wait_embedded(SETTLE_LIMIT)?;
        let n = d.memory_count()?;
        let cookie = self.ui_login(&inst, &d)?;
        let browser = Browser::new(d.client.port, self.ui_host(&d)?, cookie);

        let ledger_short = format!(
            "ledger {} lines, {:.1} MiB: {} real (from {} hook turns through the API), {} \
             synthetic",
            ledger.real_lines + ledger.synthetic_lines,
            (ledger.real_bytes + ledger.synthetic_bytes) as f64 / (1024.0 * 1024.0),
            ledger.real_lines,
            fill.turns,
            ledger.synthetic_lines,
        );
        let ledger_note = format!(
            "trace ledger {} lines / {} bytes in trace.jsonl + trace.jsonl.1: {} real lines \
             ({} bytes) from {} hook turns (get-context → stop → record-outcome) in {} \
             conversations through the API in {:.0} s, {} synthetic lines ({} bytes, {} \
             conversations of {TURNS} turns, real ids of the store, written while the daemon was \
             stopped)",
            ledger.real_lines + ledger.synthetic_lines,
            ledger.real_bytes + ledger.synthetic_bytes,
            ledger.real_lines,
            ledger.real_bytes,
            fill.turns,
            fill.conversations.len(),
            fill.elapsed.as_secs_f64(),
            ledger.synthetic_lines,
            ledger.synthetic_bytes,
            ledger.synthetic_conversations,
        );
        let at = format!(
            "{n} memories ({size} built offline: {} real vectors, {} synthetic; the rest stored \
             by the fill's stops)",
            b.real, b.synthetic
        );
        let reqs = self.opts.queries.min(PAGE_REQUESTS);
        let mut memory_ids: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for id in &fill.injected {
            if seen.insert(id) {
                memory_ids.push(id.clone());
            }
        }
        let prompts: Vec<String> = (0..reqs + 1).map(|_| corpus.prompt()).collect();
        // Each page's requests, repeated in order as needed: one untimed, then `reqs` timed.
        let pages: Vec<(&str, Vec<Get>, &str)> = vec![
            (
                "memories",
                vec![Get::path("/ui/memories")],
                "GET /ui/memories: every active memory, newest first (200 shown)",
            ),
            (
                "search",
                prompts
                    .iter()
                    .map(|p| Get::search("/ui/memories", p))
                    .collect(),
                "GET /ui/memories?q=<a new prompt each request>: the agent's search ranking \
                 (query embedded on the request path)",
            ),
            (
                "memory",
                memory_ids
                    .iter()
                    .map(|id| Get::path(&format!("/ui/memory/{id}")))
                    .collect(),
                "GET /ui/memory/<id> of memories the real turns injected (history + every turn \
                 of the ledger that injected it)",
            ),
            (
                "conversations",
                vec![Get::path("/ui/conversations")],
                "GET /ui/conversations: the whole ledger grouped into conversations",
            ),
            (
                "conversation",
                fill.conversations
                    .iter()
                    .map(|c| Get::path(&format!("/ui/conversations/{c}")))
                    .collect(),
                "GET /ui/conversations/<id> of the real conversations (their turns, the \
                 injected memories' current content)",
            ),
            (
                "health",
                vec![Get::path("/ui/health")],
                "GET /ui/health: status figures and the daily series off the ledger",
            ),
        ];
        for (page, gets, what) in pages {
            if gets.is_empty() {
                bail!("no {page} page to request (nothing was injected or no conversation)");
            }
            let gets = cycle(&gets, reqs + 1);
            // Untimed: the daemon's first render of a page is not what a user sees on the next.
            let (warm, timed) = gets.split_at(1);
            browser.load(&warm[0])?;
            let (s, bytes) = browser.time_each(timed)?;
            self.report.add(
                Figure::latency(&format!("dashboard.{page}.{label}"), &s).with_note(format!(
                    "{at}; {what}; session cookie from a `memd ui --print-url` login, wall time \
                     to the last body byte, one untimed request first; pages {:.0} KiB on \
                     average; {ledger_short} (see the notes)",
                    bytes as f64 / s.len().max(1) as f64 / 1024.0
                )),
            );
            self.save()?;
        }
        self.report.note(format!(
            "dashboard {label}: store built offline ({} real embeddings, {} synthetic vectors); \
             {ledger_note}; whole size took {:.0} s",
            b.real,
            b.synthetic,
            started.elapsed().as_secs_f64()
        ));
        d.stop()?;
        Ok(())
    }

    /// Logs in as `memd ui --print-url` tells a user to: the one-time link, answered with a
    /// redirect that sets the session cookie; returns the cookie's value.
    /// `memd-<mac>.localhost:<port>`: where the daemon serves its dashboard.
    fn ui_host(&self, d: &Daemon) -> Result<String> {
        Ok(format!(
            "{}:{}",
            memd_client::proof::dashboard_host(d.client.token()),
            d.client.port
        ))
    }

    fn ui_login(&self, inst: &Instance, d: &Daemon) -> Result<String> {
        let mut cmd = std::process::Command::new(&self.memd);
        cmd.args(["ui", "--print-url"]);
        for k in memd_testkit::SCRUBBED_ENV {
            cmd.env_remove(k);
        }
        cmd.envs(inst.env());
        let out = cmd.output().context("running memd ui --print-url")?;
        if !out.status.success() {
            bail!(
                "memd ui --print-url: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let url = stdout
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("http://"))
            .ok_or_else(|| anyhow!("memd ui --print-url printed no link: {stdout}"))?;
        let host = self.ui_host(d)?;
        let expected = format!("http://{host}/ui/login?code=");
        let Some(path) = url.strip_prefix(&format!("http://{host}")) else {
            bail!("login link {url:?} is not for this daemon ({expected}...)");
        };
        // To 127.0.0.1, naming the dashboard's host (the system resolver may not know
        // `.localhost`; browsers do).
        let r = browser_agent()
            .get(format!("http://127.0.0.1:{}{path}", d.client.port))
            .header("host", &host)
            .call()
            .context("GET the login link")?;
        let status = r.status().as_u16();
        if status != 200 {
            bail!("the login link answered {status}");
        }
        r.headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| {
                // `memd_ui_<port>=<session>`, sent back as it is.
                v.split(';')
                    .next()
                    .map(str::trim)
                    .filter(|pair| pair.starts_with("memd_ui_") && !pair.ends_with('='))
                    .map(str::to_string)
            })
            .ok_or_else(|| anyhow!("the login answer set no memd_ui cookie"))
    }
}

/// Real turns through the hooks' API: `CONVERSATIONS` conversations of `TURNS` turns, each turn
/// get-context → stop → record-outcome (the turn's memories scored `worked`), from
/// `FILL_WORKERS` sessions at once, until done or `FILL_BUDGET` has passed.
fn real_turns(d: &Daemon, corpus: &mut Corpus, label: &str) -> Result<Fill> {
    // Texts are drawn up front: the corpus is one seeded sequence, whatever the thread timing.
    let turns: Vec<Vec<(String, String)>> = (0..CONVERSATIONS)
        .map(|_| {
            (0..TURNS)
                .map(|_| {
                    let p = corpus.prompt();
                    let a = corpus.answer(&p);
                    (p, a)
                })
                .collect()
        })
        .collect();
    let next = AtomicUsize::new(0);
    let out = Mutex::new(Fill {
        conversations: Vec::new(),
        turns: 0,
        elapsed: Duration::ZERO,
        injected: Vec::new(),
        stored: Vec::new(),
    });
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..FILL_WORKERS {
            let client = d.client.fork();
            let (next, out, first_error, turns) = (&next, &out, &first_error, &turns);
            scope.spawn(move || {
                loop {
                    if start.elapsed() > FILL_BUDGET || lock(first_error).is_some() {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(conv_turns) = turns.get(i) else {
                        break;
                    };
                    let conv = format!("bench-dash-{label}-{i}");
                    for (prompt, answer) in conv_turns {
                        match turn(&client, &conv, prompt, answer) {
                            Ok((injected, stored)) => {
                                let mut o = lock(out);
                                if !o.conversations.contains(&conv) {
                                    o.conversations.push(conv.clone());
                                }
                                o.turns += 1;
                                o.injected.extend(injected);
                                o.stored.push(stored);
                            }
                            Err(e) => {
                                lock(first_error).get_or_insert(e);
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e.context("a real dashboard turn failed"));
    }
    let mut fill = out.into_inner().unwrap_or_else(|p| p.into_inner());
    fill.elapsed = start.elapsed();
    if fill.injected.is_empty() {
        bail!("{} real turns injected no memory", fill.turns);
    }
    Ok(fill)
}

/// One turn; returns the ids injected and the id of the stored exchange.
fn turn(
    c: &crate::daemon::Client,
    conv: &str,
    prompt: &str,
    answer: &str,
) -> Result<(Vec<String>, String)> {
    let gc = crate::load::get_context_once(c, prompt, conv)?;
    let injected: Vec<String> = gc.relevant_memories.iter().map(|m| m.id.clone()).collect();
    let stop: StopResponse = c.post(
        "/api/hooks/stop",
        &StopRequest {
            conversation_id: conv.to_string(),
            user_message: prompt.to_string(),
            assistant_response: answer.to_string(),
            client: Some(proto::Client::ClaudeCode),
            project_dir: None,
            score_call_seen: None,
        },
    )?;
    if !stop.stored {
        bail!("stop did not store the exchange of {conv}");
    }
    let scores: BTreeMap<String, String> = injected
        .iter()
        .map(|id| (id.clone(), "worked".to_string()))
        .collect();
    let r: RecordOutcomeResponse = c.post(
        "/api/record-outcome",
        &RecordOutcomeRequest {
            conversation_id: conv.to_string(),
            outcome: "worked".into(),
            memory_scores: Some(scores),
            source: Some("agent".into()),
            ..RecordOutcomeRequest::default()
        },
    )?;
    if r.already_scored {
        bail!("record-outcome for {conv}: the exchange was already scored");
    }
    Ok((injected, stop.doc_id))
}

/// Fills the stopped daemon's ledger up to its cap: the rotated file (`trace.jsonl.1`) to the
/// cap, the live one to just under it, synthetic conversations older than every real line (one
/// every 20 minutes walking back from the first real line), the real lines last, unchanged.
/// Writes nothing synthetic if the real lines already rotated.
fn fill_ledger(data_dir: &Path, fill: &Fill, seed: u64) -> Result<Ledger> {
    let live_path = data_dir.join("logs").join(TRACE_FILE);
    let rotated_path = data_dir.join("logs").join(format!("{TRACE_FILE}.1"));
    let real =
        std::fs::read(&live_path).with_context(|| format!("reading {}", live_path.display()))?;
    let rotated_real = std::fs::read(&rotated_path).unwrap_or_default();
    let lines = |b: &[u8]| b.iter().filter(|&&c| c == b'\n').count();
    let mut ledger = Ledger {
        real_lines: lines(&real) + lines(&rotated_real),
        real_bytes: (real.len() + rotated_real.len()) as u64,
        synthetic_lines: 0,
        synthetic_bytes: 0,
        synthetic_conversations: 0,
    };
    if !rotated_real.is_empty() {
        return Ok(ledger);
    }
    let first_ts = std::str::from_utf8(&real)
        .ok()
        .and_then(|t| t.lines().next())
        .and_then(|l| serde_json::from_str::<TraceEntry>(l).ok())
        .and_then(|e| memd_engine::clock::parse_rfc3339(&e.ts))
        .ok_or_else(|| anyhow!("{} has no readable first line", live_path.display()))?;
    let cap = DEFAULT_CAP_BYTES as usize;
    let mut rng = StdRng::seed_from_u64(seed);
    // Newest first while generating; reversed when written.
    let mut live: Vec<Vec<u8>> = Vec::new();
    let mut rotated: Vec<Vec<u8>> = Vec::new();
    let (mut live_bytes, mut rotated_bytes) = (real.len(), 0usize);
    let mut k = 0i64;
    while rotated_bytes < cap {
        k += 1;
        let begins = first_ts - k * SYN_CONVERSATION_GAP_MS;
        let conv = synthetic_conversation(&mut rng, k, begins, fill)?;
        ledger.synthetic_lines += lines(&conv);
        ledger.synthetic_bytes += conv.len() as u64;
        ledger.synthetic_conversations += 1;
        if rotated.is_empty() && live_bytes + conv.len() < cap {
            live_bytes += conv.len();
            live.push(conv);
        } else {
            rotated_bytes += conv.len();
            rotated.push(conv);
        }
    }
    let write = |path: &Path, parts: Vec<Vec<u8>>, tail: &[u8]| -> Result<()> {
        let mut bytes: Vec<u8> = parts.into_iter().rev().flatten().collect();
        bytes.extend_from_slice(tail);
        std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
    };
    write(&rotated_path, rotated, &[])?;
    write(&live_path, live, &real)?;
    Ok(ledger)
}

/// One synthetic conversation of `TURNS` turns as the daemon would log it (the engine's own
/// `TraceEntry` constructors; only the timestamps are set here), as JSON Lines. Injected ids are
/// drawn from the real injections (so popular memories stay popular), stored ids from the real
/// stops; outcomes mostly `worked`.
fn synthetic_conversation(rng: &mut StdRng, k: i64, begins: i64, fill: &Fill) -> Result<Vec<u8>> {
    let conv = format!("bench-dash-history-{k}");
    let mut out = Vec::new();
    for t in 0..TURNS {
        let at = begins + t as i64 * SYN_TURN_GAP_MS;
        let n = rng.random_range(3..=6);
        let mut injected: Vec<String> = Vec::with_capacity(n);
        while injected.len() < n {
            let id = &fill.injected[rng.random_range(0..fill.injected.len())];
            if !injected.contains(id) {
                injected.push(id.clone());
            }
            if injected.len() >= fill.injected.len() {
                break;
            }
        }
        let stored = &fill.stored[rng.random_range(0..fill.stored.len())];
        let prompt = format!("synthetic prompt {k}.{t} {}", rng.random::<u64>());
        let context = format!("synthetic context {k}.{t} {}", rng.random::<u64>());
        let outcome = match rng.random_range(0..100) {
            0..70 => "worked",
            70..85 => "partial",
            85..95 => "failed",
            _ => "unknown",
        };
        let mut scored = vec![stored.clone()];
        scored.extend(injected.iter().cloned());
        let entries = [
            TraceEntry::get_context(&conv, &prompt, &injected, &context, false),
            TraceEntry::stop(&conv, stored, &prompt, false),
            TraceEntry::record_outcome(&conv, outcome, &scored, Some("agent"), false),
        ];
        for (j, mut e) in entries.into_iter().enumerate() {
            e.ts = memd_engine::clock::rfc3339(at + j as i64 * SYN_LINE_GAP_MS);
            serde_json::to_writer(&mut out, &e)?;
            out.push(b'\n');
        }
    }
    Ok(out)
}

/// One page request: a path and, for a search, its `q`.
#[derive(Clone)]
struct Get {
    path: String,
    q: Option<String>,
}

impl Get {
    fn path(path: &str) -> Get {
        Get {
            path: path.to_string(),
            q: None,
        }
    }

    fn search(path: &str, q: &str) -> Get {
        Get {
            path: path.to_string(),
            q: Some(q.to_string()),
        }
    }
}

/// `items` repeated in order until there are `n`.
fn cycle(items: &[Get], n: usize) -> Vec<Get> {
    items.iter().cycle().take(n).cloned().collect()
}

/// A logged-in browser: keep-alive, no redirects followed, the session cookie on every request.
struct Browser {
    agent: ureq::Agent,
    port: u16,
    /// The dashboard's host (sent as `Host`; the connection goes to 127.0.0.1).
    host: String,
    cookie: String,
}

impl Browser {
    fn new(port: u16, host: String, cookie: String) -> Browser {
        Browser {
            agent: browser_agent(),
            port,
            host,
            cookie,
        }
    }

    /// GETs the page; fails unless it is a 200 HTML page. Returns its size in bytes.
    fn load(&self, g: &Get) -> Result<usize> {
        let mut req = self
            .agent
            .get(&format!("http://127.0.0.1:{}{}", self.port, g.path))
            .header("host", &self.host)
            .header("cookie", &self.cookie)
            .header("accept", "text/html");
        if let Some(q) = &g.q {
            req = req.query("q", q);
        }
        let mut r = req.call().with_context(|| format!("GET {}", g.path))?;
        let status = r.status().as_u16();
        let kind = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = r
            .body_mut()
            .with_config()
            .limit(PAGE_LIMIT)
            .read_to_string()
            .with_context(|| format!("GET {}: reading the page", g.path))?;
        if status != 200 || !kind.starts_with("text/html") {
            let head: String = body.chars().take(300).collect();
            bail!("GET {} → {status} {kind:?}: {head}", g.path);
        }
        Ok(body.len())
    }

    /// Times each request (sent → last body byte); returns the samples and the bytes read.
    fn time_each(&self, gets: &[Get]) -> Result<(Samples, usize)> {
        let mut s = Samples::default();
        let mut bytes = 0;
        for g in gets {
            let t = Instant::now();
            bytes += self.load(g)?;
            s.push(t.elapsed());
        }
        Ok((s, bytes))
    }
}

/// Like the API client's agent (no global timeout, see `daemon::Client`), but a browser's:
/// redirects are answers, not followed.
fn browser_agent() -> ureq::Agent {
    let limit = Some(Duration::from_secs(300));
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_send_request(limit)
        .timeout_send_body(limit)
        .timeout_recv_response(limit)
        .timeout_recv_body(limit)
        .build()
        .into()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
