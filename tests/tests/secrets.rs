//! Secrets end to end: the seeded corpus of coding-agent exchanges goes through the real hook
//! binaries and every text-storing API route of a real daemon; no secret (and no `<private>`
//! span) may then appear in any byte under the data dir (WAL, snapshots, vector index, logs,
//! daemon stderr) or in any API answer, before and after a snapshot.

use serde::Deserialize;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tests::files_under;
use tests::{Daemon, run_hook};

#[derive(Deserialize)]
struct Exchange {
    user: String,
    assistant: String,
    secrets: Vec<String>,
}

fn corpus() -> Vec<Exchange> {
    let raw = include_str!("../../memd/engine/tests/fixtures/secrets_corpus.json");
    serde_json::from_str(raw).expect("secrets corpus parses")
}

/// Text wrapped in `<private>` in prompt `i`; it must never be stored.
fn private_marker(i: usize) -> String {
    format!("PRIVATE-SPAN-{i}-qz7Xw")
}

/// Everything that must never be stored or answered: every secret, every private marker.
struct Needles(Vec<String>);

impl Needles {
    fn of(corpus: &[Exchange]) -> Needles {
        let mut all: Vec<String> = corpus.iter().flat_map(|e| e.secrets.clone()).collect();
        all.extend((0..corpus.len()).map(private_marker));
        all.sort();
        all.dedup();
        Needles(all)
    }

    /// The needles found in `bytes`, raw or as they look inside a JSON string.
    fn found_in(&self, bytes: &[u8]) -> Vec<&str> {
        self.0
            .iter()
            .filter(|n| {
                let escaped = serde_json::to_string(n.as_str()).unwrap_or_default();
                let escaped = escaped.trim_matches('"');
                contains(bytes, n.as_bytes()) || contains(bytes, escaped.as_bytes())
            })
            .map(String::as_str)
            .collect()
    }

    fn assert_absent(&self, what: &str, bytes: &[u8]) {
        let found = self.found_in(bytes);
        assert!(
            found.is_empty(),
            "{what} holds {} secret(s)/private span(s), e.g. {:?}",
            found.len(),
            &found[..found.len().min(3)]
        );
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

fn prompt_stdin(session: &str, prompt: &str, transcript: &Path) -> Vec<u8> {
    json!({"session_id": session, "transcript_path": transcript, "cwd": "/home/dev/app",
        "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": prompt})
    .to_string()
    .into_bytes()
}

fn stop_stdin(session: &str, answer: &str, transcript: &Path) -> Vec<u8> {
    json!({"session_id": session, "transcript_path": transcript, "cwd": "/home/dev/app",
        "permission_mode": "default", "hook_event_name": "Stop", "stop_hook_active": false,
        "last_assistant_message": answer})
    .to_string()
    .into_bytes()
}

/// Claude Code's transcript lines for one turn (hook-stop reads the user side from here).
fn write_transcript(path: &Path, user: &str, assistant: &str) {
    let lines = [
        json!({"type": "user", "message": {"role": "user", "content": user}, "uuid": "u"}),
        json!({"type": "assistant", "message": {"role": "assistant",
            "content": [{"type": "text", "text": assistant}]}, "uuid": "a"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("transcript");
}

/// At most 540 characters of `text` ending with the line that holds `secret`, so the lines
/// before it (a key block's header, a netrc `machine` line) come along: what a model would
/// plausibly pass to a 600-character memory tool.
fn snippet(text: &str, secret: &str) -> Option<String> {
    let pos = text.find(secret)?;
    let after = pos + secret.len();
    let end = text[after..].find('\n').map_or(text.len(), |p| after + p);
    let before: Vec<char> = text[..end].chars().collect();
    let clip: String = before[before.len().saturating_sub(540)..].iter().collect();
    clip.contains(secret).then_some(clip)
}

/// Scans every byte of every file of the data dir; returns how many files and bytes it read.
fn assert_data_dir_clean(d: &Daemon, needles: &Needles, stage: &str) -> (usize, u64) {
    let files = files_under(d.root());
    let mut bytes = 0u64;
    for f in &files {
        let data = std::fs::read(f).unwrap_or_default();
        bytes += data.len() as u64;
        needles.assert_absent(&format!("{stage}: {}", f.display()), &data);
    }
    (files.len(), bytes)
}

fn post_ok(d: &Daemon, path: &str, body: &Value, needles: &Needles) -> Value {
    let (status, text) = d.post_raw(path, body.to_string().as_bytes(), true);
    assert_eq!(status, 200, "POST {path} → {status}: {text}");
    needles.assert_absent(&format!("answer of {path}"), text.as_bytes());
    serde_json::from_str(&text).expect("JSON answer")
}

/// Feeds exchange `i` through both hooks and the four text-storing routes; returns doc ids.
fn feed(d: &Daemon, i: usize, ex: &Exchange, transcripts: &Path, needles: &Needles) -> Vec<String> {
    let mut env = d.env();
    env.push(("MEMD_HOOK_DEADLINE_MS".into(), "60000".into()));
    let session = format!("secrets-{i}");
    let transcript = transcripts.join(format!("{session}.jsonl"));
    let prompt = format!(
        "{}\n<private>{}</private>\nthanks",
        ex.user,
        private_marker(i)
    );
    let (code, out, err, _) = run_hook(
        "hook-prompt",
        &[],
        &prompt_stdin(&session, &prompt, &transcript),
        &env,
    );
    assert_eq!(code, 0, "hook-prompt exit: {err}");
    needles.assert_absent("hook-prompt output (get-context)", out.as_bytes());
    write_transcript(&transcript, &prompt, &ex.assistant);
    let (code, out, err, _) = run_hook(
        "hook-stop",
        &[],
        &stop_stdin(&session, &ex.assistant, &transcript),
        &env,
    );
    assert_eq!((code, out.as_str()), (0, ""), "hook-stop: {err}");

    let mut ids = Vec::new();
    let secret = &ex.secrets[i % ex.secrets.len()];
    let near = snippet(&ex.user, secret).or_else(|| snippet(&ex.assistant, secret));
    let summary = near
        .clone()
        .unwrap_or_else(|| format!("exchange {i} summary"));
    let r = post_ok(
        d,
        "/api/record-outcome",
        &json!({"conversation_id": session, "outcome": "worked", "exchange_summary": summary}),
        needles,
    );
    assert_eq!(r["summary_stored"], true, "exchange {i}: {r}");
    if let Some(text) = near {
        let bank = format!("{text}\n<private>{}</private>", private_marker(i));
        let r = post_ok(
            d,
            "/api/memory-bank/add",
            &json!({"content": bank.chars().take(600).collect::<String>(),
            "tags": ["secrets"]}),
            needles,
        );
        ids.push(r["doc_id"].as_str().unwrap_or_default().to_string());
        let r = post_ok(
            d,
            "/api/record-response",
            &json!({"key_takeaway": text, "conversation_id": session, "initial_score": "worked"}),
            needles,
        );
        ids.push(r["doc_id"].as_str().unwrap_or_default().to_string());
    }
    let book = format!(
        "{}\n\n{}\n<private>{}</private>",
        ex.user,
        ex.assistant,
        private_marker(i)
    );
    post_ok(
        d,
        "/api/ingest",
        &json!({"title": format!("secrets book {i}"), "content": book}),
        needles,
    );
    ids
}

/// Every read route that can show stored text; returns how many answers were checked.
fn assert_answers_clean(
    d: &Daemon,
    corpus: &[Exchange],
    ids: &[String],
    needles: &Needles,
) -> usize {
    let mut answers = 0;
    let mut check = |path: &str, body: Value| {
        post_ok(d, path, &body, needles);
        answers += 1;
    };
    for c in ["books", "working", "history", "patterns", "memory_bank"] {
        for sort in ["recency", "score", "relevance"] {
            check(
                "/api/search",
                json!({"days_back": 365, "collections": [c], "limit": 100,
                "sort_by": sort, "include_archived": true}),
            );
        }
    }
    for i in 0..corpus.len() {
        check(
            "/api/search",
            json!({"days_back": 1, "limit": 100,
            "metadata_filters": {"conversation_id": format!("secrets-{i}")}}),
        );
        check(
            "/api/search",
            json!({"days_back": 1, "limit": 100,
            "metadata_filters": {"title": format!("secrets book {i}")}}),
        );
    }
    for id in ids.iter().filter(|id| !id.is_empty()) {
        check("/api/search", json!({"id": id}));
    }
    for (i, ex) in corpus.iter().enumerate() {
        let query: String = ex.user.chars().take(2000).collect();
        check("/api/search", json!({"query": query, "limit": 20}));
        check(
            "/api/hooks/get-context",
            json!({"query": ex.user, "conversation_id": format!("reader-{i}")}),
        );
    }
    for path in ["/api/stats", "/api/books", "/api/health"] {
        let (status, text) = d.get_raw(path, true);
        assert_eq!(status, 200, "{path}");
        needles.assert_absent(path, text.as_bytes());
        answers += 1;
    }
    answers
}

#[test]
fn no_secret_or_private_span_is_stored_or_answered() {
    let corpus = corpus();
    assert!(corpus.len() >= 50);
    let needles = Needles::of(&corpus);
    let transcripts = tempfile::tempdir().expect("transcript dir");
    let mut d = tests::start_daemon();
    let mut ids = Vec::new();
    for (i, ex) in corpus.iter().enumerate() {
        ids.extend(feed(&d, i, ex, transcripts.path(), &needles));
    }
    d.wait_embedded(Duration::from_secs(300));
    let stats: proto::StatsResponse = d.get("/api/stats");
    let stored: usize = stats.collections.values().map(|c| c.count).sum();
    assert!(
        stored >= corpus.len() * 3,
        "the corpus was stored: {stats:?}"
    );

    // Before any snapshot: the WAL holds everything.
    let (files, bytes) = assert_data_dir_clean(&d, &needles, "before snapshot");
    let answers = assert_answers_clean(&d, &corpus, &ids, &needles);
    // SIGTERM writes the final snapshot and the vector index.
    assert!(d.terminate(), "clean exit");
    let snapshots = files_under(d.root())
        .iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("snapshot."))
        })
        .count();
    assert!(snapshots >= 1, "a snapshot was written at shutdown");
    let (files_after, bytes_after) = assert_data_dir_clean(&d, &needles, "after snapshot");
    d.spawn(&[]);
    let again = assert_answers_clean(&d, &corpus, &ids, &needles);
    let hooks_log = std::fs::read(d.data_dir().join("logs/hooks.log")).unwrap_or_default();
    needles.assert_absent("logs/hooks.log", &hooks_log);
    eprintln!(
        "secrets: {} exchanges, {} needles, {stored} memories; scanned {files} files / {bytes} B \
         before and {files_after} files / {bytes_after} B after the snapshot; {} answers checked",
        corpus.len(),
        needles.0.len(),
        answers + again
    );
}

/// A wrongly typed field in hook stdin must not carry its value into the hook log: parse
/// errors are logged, and serde's messages quote the offending string.
#[test]
fn malformed_hook_input_does_not_copy_text_into_the_hook_log() {
    let d = tests::start_daemon();
    let env = d.env();
    let secret = "sk-ant-api03-Q9vR2mXk7LpT4wZs8YbN1cFd6GhJ3KuE5aVxCo0iPq";
    let inputs = [
        json!({"session_id": "s", "hook_event_name": "Stop", "stop_hook_active": secret}),
        json!({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "x", "workspace_roots": secret}),
        json!({"session_id": secret, "hook_event_name": ["UserPromptSubmit", secret]}),
        json!({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": {"text": secret}}),
    ];
    for input in &inputs {
        for hook in ["hook-prompt", "hook-stop"] {
            let (code, out, _, _) = run_hook(hook, &[], input.to_string().as_bytes(), &env);
            assert_eq!((code, out.as_str()), (0, ""), "{hook}");
        }
    }
    let log = std::fs::read_to_string(d.data_dir().join("logs/hooks.log")).unwrap_or_default();
    assert!(
        log.lines().count() >= inputs.len(),
        "each failure is logged:\n{log}"
    );
    assert!(
        !log.contains(secret),
        "the hook log quotes input text:\n{log}"
    );
}

/// Text that reaches the store beside the main content (tags, metadata, titles, sources,
/// conversation ids, sidecar report words) is scrubbed too.
#[test]
fn secrets_in_side_fields_are_not_stored() {
    let d = tests::start_daemon();
    let gh = "ghp_R8mT2xKq9ZwV4nLs7YbP1cJd6FhG3uAe5oWi";
    let aws = "AKIAZ7QXK2MVN4PLR8TW";
    let slack = "xoxb-2741950183-8823017726401-Rk3Tq9ZmXw7LpVs2NbYc4Hd";
    let needles = Needles(vec![gh.into(), aws.into(), slack.into()]);
    let writes = [
        (
            "/api/memory-bank/add",
            json!({"content": "deploy keys live in the vault", "tags": [gh],
            "metadata": {"note": format!("key {aws}"), "nested": {"k": [slack]}, gh: 1}}),
        ),
        (
            "/api/record-response",
            json!({"key_takeaway": "rotate the CI token monthly", "conversation_id": format!("conv {gh}")}),
        ),
        (
            "/api/ingest",
            json!({"title": format!("runbook {aws}"), "content": "rotate keys monthly", "source": format!("https://x.example/?t={slack}")}),
        ),
        (
            "/api/sidecar/report",
            json!({"conversation_id": "c1", "scored": false,
            "attempts": [{"target": gh, "model": aws, "status": 401, "latency_ms": 3, "result": slack}]}),
        ),
    ];
    for (path, body) in &writes {
        let (status, text) = d.post_raw(path, body.to_string().as_bytes(), true);
        assert_eq!(status, 200, "{path}: {text}");
    }
    let id = {
        let r: proto::SearchResponse = d.post(
            "/api/search",
            &json!({"days_back": 1, "collections": ["memory_bank"]}),
        );
        r.results[0].id.clone()
    };
    let line = json!({"key": 1, "id": "patterns_5e1f0a9b3c7d", "collection": "patterns",
        "content": "imported pattern", "created_at": 1_700_000_000_000i64,
        "updated_at": 1_700_000_000_000i64, "score": 0.5, "uses": 0, "success_count": 0.0,
        "outcome_history": [], "last_outcome": null, "last_used": null, "tags": [gh],
        "importance": null, "confidence": null, "archived": false, "former_ids": [],
        "metadata": {"origin": format!("token {slack}")}});
    let (status, text) = d.post_raw("/api/import", line.to_string().as_bytes(), true);
    assert!(
        status == 200 && text.contains("\"imported\":1"),
        "import: {status} {text}"
    );
    let (status, text) = d.post_raw(
        "/api/memory-bank/update",
        json!({"id": id, "tags": [format!("x {slack}")]})
            .to_string()
            .as_bytes(),
        true,
    );
    assert_eq!(status, 200, "{text}");
    let mut leaks = Vec::new();
    for f in files_under(d.root()) {
        let found = needles
            .found_in(&std::fs::read(&f).unwrap_or_default())
            .len();
        if found > 0 {
            leaks.push(format!("{} ({found})", f.display()));
        }
    }
    for path in ["/api/stats", "/api/books"] {
        if !needles
            .found_in(d.get_raw(path, true).1.as_bytes())
            .is_empty()
        {
            leaks.push(path.to_string());
        }
    }
    let (_, all) = d.post_raw("/api/search", br#"{"days_back": 1, "limit": 100}"#, true);
    if !needles.found_in(all.as_bytes()).is_empty() {
        leaks.push("/api/search answer".into());
    }
    assert!(
        leaks.is_empty(),
        "secrets in side fields were stored: {leaks:?}"
    );
}

/// The trace ledger records each hook step of a conversation with ids and digests only: the
/// digest of the context matches what the hook printed, and no prompt text is in the file.
#[test]
fn trace_ledger_records_hook_steps_with_digests_only() {
    let d = tests::start_daemon();
    let transcripts = tempfile::tempdir().expect("transcript dir");
    let mut env = d.env();
    env.push(("MEMD_HOOK_DEADLINE_MS".into(), "60000".into()));
    let fact = "The billing staging database listens on port 5433";
    let r = post_ok(
        &d,
        "/api/memory-bank/add",
        &json!({"content": fact}),
        &Needles(Vec::new()),
    );
    let fact_id = r["doc_id"].as_str().unwrap_or_default().to_string();
    d.wait_embedded(Duration::from_secs(120));
    let session = "trace-1";
    let transcript = transcripts.path().join("t.jsonl");
    let prompt = "which port does the billing staging database use?";
    let (_, out, _, _) = run_hook(
        "hook-prompt",
        &[],
        &prompt_stdin(session, prompt, &transcript),
        &env,
    );
    let printed: Value = serde_json::from_str(&out).expect("hook printed context");
    let context = printed["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(context.contains(&fact_id), "{context}");
    write_transcript(&transcript, prompt, "It is 5433.");
    run_hook(
        "hook-stop",
        &[],
        &stop_stdin(session, "It is 5433.", &transcript),
        &env,
    );
    post_ok(
        &d,
        "/api/record-outcome",
        &json!({"conversation_id": session, "outcome": "worked", "source": "agent"}),
        &Needles(Vec::new()),
    );
    let raw = std::fs::read_to_string(d.data_dir().join("logs/trace.jsonl")).unwrap_or_default();
    for text in [prompt, "5433", "billing"] {
        assert!(!raw.contains(text), "trace holds text {text:?}:\n{raw}");
    }
    let lines: Vec<Value> = raw
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &Value| v["conversation_id"] == session)
        .collect();
    let events: Vec<&str> = lines.iter().filter_map(|v| v["event"].as_str()).collect();
    assert_eq!(events, ["get-context", "stop", "record-outcome"], "{raw}");
    assert_eq!(lines[0]["injected"], json!([fact_id]));
    assert_eq!(
        lines[0]["prompt_sha256"],
        format!("sha256:{}", sha256_hex(prompt.as_bytes()))
    );
    assert_eq!(
        lines[0]["context_sha256"],
        format!("sha256:{}", sha256_hex(context.as_bytes()))
    );
    assert!(
        lines[1]["doc_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("working_"))
    );
    assert_eq!(lines[2]["outcome"], "worked");
    assert_eq!(lines[2]["note"], "agent");
    assert!(lines[2]["scored"].as_array().is_some_and(|s| !s.is_empty()));
}

/// SHA-256 (FIPS 180-4), so the test can recompute the ledger's digests without a dependency.
fn sha256_hex(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (x, y) in h.iter_mut().zip(v) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[test]
fn sha256_matches_the_standard_vectors() {
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let long = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    assert_eq!(
        sha256_hex(long),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    );
}
