//! Random and malformed stdin to both hook binaries, with no daemon listening: whatever a
//! client (or a broken client) sends, a hook exits 0, prints nothing or its neutral JSON, never
//! prints a panic message, and ends within its deadline.
//!
//! `MEMD_FUZZ_SEED` replays a run; `MEMD_FUZZ_ROUNDS` scales it (default 120 per binary and mode).

mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::hook::{Input, Sandbox, event_fixture};

/// The per-run deadline the hooks get here, and the slack allowed on top for process start-up
/// on a loaded machine.
const DEADLINE_MS: u64 = 700;
const SLACK: Duration = Duration::from_millis(2500);

/// xorshift64*: the hook crate has no `rand` dependency and needs none for this.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn text(&mut self, max: usize) -> String {
        let n = self.below(max + 1);
        (0..n)
            .map(|_| match self.below(8) {
                0 => char::from_u32(0x80 + self.below(0x2_0000) as u32).unwrap_or('?'),
                1 => char::from(self.below(0x20) as u8),
                2 => ['"', '\\', '{', '}', '[', ']', ':'][self.below(7)],
                _ => char::from(b'a' + self.below(26) as u8),
            })
            .collect()
    }
    fn value(&mut self, depth: usize) -> Value {
        match self.below(if depth == 0 { 5 } else { 7 }) {
            0 => Value::Null,
            1 => json!(self.below(2) == 0),
            2 => [json!(-1), json!(u64::MAX), json!(1e308), json!(0.5)][self.below(4)].clone(),
            3 | 4 => json!(self.text(60)),
            5 => Value::Array((0..self.below(4)).map(|_| self.value(depth - 1)).collect()),
            _ => Value::Object(
                (0..self.below(4))
                    .map(|_| (self.text(8), self.value(depth - 1)))
                    .collect(),
            ),
        }
    }
}

fn seed() -> u64 {
    std::env::var("MEMD_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            (t.as_nanos() as u64) | 1
        })
}

fn rounds() -> usize {
    std::env::var("MEMD_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120)
}

const FIXTURES: [&str; 10] = [
    "claude_pre_tool_use.json",
    "claude_session_start.json",
    "claude_stop.json",
    "claude_stop_active.json",
    "claude_user_prompt_submit.json",
    "cursor_after_agent_response.json",
    "cursor_before_submit_prompt.json",
    "cursor_session_start.json",
    "cursor_stop.json",
    "cursor_via_claude_settings.json",
];

/// Paths a hostile or broken client could name as the transcript.
fn odd_paths(dir: &Path) -> Vec<String> {
    let fifo = dir.join("fifo");
    if let Ok(c) = std::ffi::CString::new(fifo.display().to_string()) {
        // SAFETY: a valid NUL-terminated path; failure only means no fifo case.
        unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    }
    let garbage = dir.join("garbage.jsonl");
    let _ = std::fs::write(&garbage, Rng(7).bytes(200_000));
    let long_line = dir.join("long.jsonl");
    let _ = std::fs::write(
        &long_line,
        format!(
            "{{\"type\":\"user\",\"message\":{{\"content\":\"{}\"}}}}",
            "a".repeat(3 << 20)
        ),
    );
    vec![
        "/dev/zero".into(),
        "/dev/urandom".into(),
        "/dev/stdin".into(),
        "/proc/self/mem".into(),
        "/".into(),
        String::new(),
        "\0".into(),
        "relative/nope.jsonl".into(),
        "a".repeat(5000),
        fifo.display().to_string(),
        garbage.display().to_string(),
        long_line.display().to_string(),
    ]
}

/// One fixture with a random field set to a random value (or removed, or a hostile path).
fn mutated_fixture(rng: &mut Rng, paths: &[String]) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&event_fixture(FIXTURES[rng.below(FIXTURES.len())]))
        .unwrap_or(Value::Null);
    if let Value::Object(map) = &mut v {
        let keys: Vec<String> = map.keys().cloned().collect();
        for _ in 0..1 + rng.below(3) {
            let key = keys[rng.below(keys.len())].clone();
            match rng.below(5) {
                0 => {
                    map.remove(&key);
                }
                1 => {
                    map.insert(
                        "transcript_path".into(),
                        json!(paths[rng.below(paths.len())]),
                    );
                }
                2 => {
                    map.insert(key, json!("x".repeat(rng.below(300_000))));
                }
                _ => {
                    map.insert(key, rng.value(3));
                }
            }
        }
    }
    serde_json::to_vec(&v).unwrap_or_default()
}

/// Inputs that are not JSON objects at all, or not quite JSON.
fn malformed(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut out = vec![
        Vec::new(),
        b"\n".to_vec(),
        b"null".to_vec(),
        b"\"UserPromptSubmit\"".to_vec(),
        b"{\"hook_event_name\": \"UserPromptSubmit\", \"session_id\": \"s\", \"prompt\": \"\xff\xfe\"}".to_vec(),
        b"{\"hook_event_name\": \"Stop\", \"session_id\": \"\\ud800\"}".to_vec(),
        [vec![b'['; 200_000], vec![b']'; 200_000]].concat(),
        [b"{\"a\":".repeat(100_000), b"1".to_vec(), vec![b'}'; 100_000]].concat(),
        vec![b' '; (1 << 20) + 1],
        [b"{\"hook_event_name\":\"UserPromptSubmit\",\"session_id\":\"s\",\"prompt\":\"".to_vec(), vec![b'a'; (1 << 20) - 80], b"\"}".to_vec()].concat(),
        b"{\"hook_event_name\": \"UserPromptSubmit\"} trailing".to_vec(),
        b"\xef\xbb\xbf{\"hook_event_name\": \"Stop\", \"session_id\": \"s\"}".to_vec(),
    ];
    for _ in 0..8 {
        let n = rng.below(5000);
        out.push(rng.bytes(n));
    }
    out
}

/// Runs one input and checks the contract; returns a problem description if it broke, and
/// how long the run took.
fn check(
    sandbox: &Sandbox,
    bin: &Path,
    args: &[&str],
    input: Input,
    label: &str,
) -> (Option<String>, Duration) {
    let run = sandbox.run_with(bin, args, input);
    let cursor = !args.is_empty();
    let out = run.stdout.trim();
    let output_ok = if cursor {
        out.is_empty() || serde_json::from_str::<Value>(out).is_ok_and(|v| v.is_object())
    } else {
        out.is_empty()
    };
    let limit = Duration::from_millis(DEADLINE_MS) + SLACK;
    let problems = [
        (run.code != Some(0), format!("exit {:?}", run.code)),
        (
            run.stderr.contains("panicked") || run.stdout.contains("panicked"),
            "panic message".to_string(),
        ),
        (run.elapsed > limit, format!("took {:?}", run.elapsed)),
        (!output_ok, format!("stdout {:.120}", run.stdout)),
    ];
    let found: Vec<String> = problems
        .into_iter()
        .filter(|(bad, _)| *bad)
        .map(|(_, why)| why)
        .collect();
    let problem = (!found.is_empty())
        .then(|| format!("{} {args:?} [{label}]: {}", bin.display(), found.join(", ")));
    (problem, run.elapsed)
}

/// Runs every input through `bin` in both modes: (runs, runs cut off at the deadline, problems).
fn fuzz_binary(bin: &Path) -> (usize, usize, Vec<String>) {
    let seed = seed();
    let mut rng = Rng(seed);
    let mut sandbox = Sandbox::new(Some("http://127.0.0.1:9"));
    sandbox.set("MEMD_HOOK_DEADLINE_MS", &DEADLINE_MS.to_string());
    let paths = odd_paths(sandbox.dir());
    let mut problems = Vec::new();
    let (mut runs, mut cut_off) = (0, 0);
    for args in [&[][..], &["--cursor"][..]] {
        let mut inputs: Vec<(String, Input)> = malformed(&mut rng)
            .into_iter()
            .map(|b| ("malformed".to_string(), Input::Bytes(b)))
            .collect();
        for i in 0..rounds() {
            let bytes = match i % 3 {
                0 => serde_json::to_vec(&rng.value(4)).unwrap_or_default(),
                _ => mutated_fixture(&mut rng, &paths),
            };
            inputs.push((format!("round {i}"), Input::Bytes(bytes)));
        }
        inputs.push((
            "stdin never closed".into(),
            Input::NeverClose(b"{\"hook_event_name\":".to_vec()),
        ));
        for path in &paths {
            let stop = support::hook::event_fixture_with("claude_stop.json", |v| {
                v["transcript_path"] = json!(path);
                v["last_assistant_message"] = Value::Null;
            });
            inputs.push((format!("transcript {path:.40}"), Input::Bytes(stop)));
        }
        for (label, input) in inputs {
            runs += 1;
            let (problem, took) =
                check(&sandbox, bin, args, input, &format!("seed {seed} {label}"));
            problems.extend(problem);
            if took >= Duration::from_millis(DEADLINE_MS) {
                cut_off += 1;
            }
        }
    }
    for line in std::fs::read_to_string(sandbox.dir().join("logs/hooks.log"))
        .unwrap_or_default()
        .lines()
    {
        if serde_json::from_str::<Value>(line).is_err() {
            problems.push(format!("hook log line is not JSON: {line:.120}"));
        }
    }
    (runs, cut_off, problems)
}

fn hook_stop_binary() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_BIN_EXE_hook-prompt")).with_file_name("hook-stop");
    p.exists().then_some(p)
}

#[test]
fn hook_prompt_survives_random_stdin() {
    let (runs, cut_off, problems) = fuzz_binary(Path::new(env!("CARGO_BIN_EXE_hook-prompt")));
    eprintln!(
        "hook-prompt: {runs} runs ({cut_off} ended by the deadline), {} problems",
        problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn hook_stop_survives_random_stdin() {
    let Some(bin) = hook_stop_binary() else {
        return eprintln!(
            "SKIPPED: hook-stop is not built next to hook-prompt; run `cargo build --workspace` first"
        );
    };
    let (runs, cut_off, problems) = fuzz_binary(&bin);
    eprintln!(
        "hook-stop: {runs} runs ({cut_off} ended by the deadline), {} problems",
        problems.len()
    );
    assert!(
        cut_off >= 2,
        "the never-closed stdin and the fifo transcript hit the deadline"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
