//! Running a real hook binary the way a client does: stdin JSON in, stdout out, exit code, time.

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A sandboxed data dir (with a token file) and the environment a hook run gets.
pub struct Sandbox {
    pub data: tempfile::TempDir,
    pub token: String,
    env: Vec<(String, String)>,
}

impl Sandbox {
    /// A fresh data dir with a token file; `MEMD_URL` points at `url` when given.
    pub fn new(url: Option<&str>) -> Sandbox {
        let data = tempfile::tempdir().expect("temp data dir");
        let token = super::server::test_token();
        std::fs::write(data.path().join("token"), format!("{token}\n")).expect("token");
        let mut sandbox = Sandbox {
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("HOME".into(), data.path().display().to_string()),
                ("MEMD_DATA_DIR".into(), data.path().display().to_string()),
            ],
            data,
            token,
        };
        if let Some(url) = url {
            sandbox.set("MEMD_URL", url);
        }
        sandbox
    }

    pub fn set(&mut self, key: &str, value: &str) -> &mut Sandbox {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn remove(&mut self, key: &str) -> &mut Sandbox {
        self.env.retain(|(k, _)| k != key);
        self
    }

    pub fn dir(&self) -> &Path {
        self.data.path()
    }

    /// Parsed lines of `<data dir>/logs/hooks.log` (empty when there is no log).
    pub fn log_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir().join("logs/hooks.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("log line is JSON"))
            .collect()
    }

    /// Log kinds in order.
    pub fn log_kinds(&self) -> Vec<String> {
        self.log_lines()
            .iter()
            .map(|l| l["kind"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// Runs `bin` with `args`, feeding `stdin` and closing it.
    pub fn run(&self, bin: &Path, args: &[&str], stdin: &[u8]) -> HookRun {
        self.run_with(bin, args, Input::Bytes(stdin.to_vec()))
    }

    pub fn run_with(&self, bin: &Path, args: &[&str], input: Input) -> HookRun {
        let mut command = Command::new(bin);
        command
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let start = Instant::now();
        let mut child = command.spawn().expect("spawn hook");
        let stdin = child.stdin.take().expect("stdin pipe");
        let writer = std::thread::spawn(move || {
            let mut stdin = stdin;
            match input {
                // A hook that refuses big input closes the pipe early: the write error is expected.
                Input::Bytes(bytes) => {
                    let _ = stdin.write_all(&bytes);
                }
                // Keep the pipe open until the hook is gone (its end closes when it exits).
                Input::NeverClose(bytes) => {
                    let _ = stdin.write_all(&bytes);
                    let _ = stdin.flush();
                    return Some(stdin);
                }
            }
            None
        });
        let output = child.wait_with_output().expect("wait for hook");
        let elapsed = start.elapsed();
        drop(writer.join());
        HookRun {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            elapsed,
        }
    }
}

/// What the hook gets on stdin.
pub enum Input {
    Bytes(Vec<u8>),
    /// These bytes, then the pipe stays open (a client that never finishes writing).
    NeverClose(Vec<u8>),
}

/// The result of one hook process.
#[derive(Debug)]
pub struct HookRun {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl HookRun {
    /// Asserts exit code 0 and returns stdout parsed as JSON.
    pub fn json(&self) -> Value {
        assert_eq!(self.code, Some(0), "{self:?}");
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout not JSON ({e}): {self:?}"))
    }

    /// Asserts exit code 0 and empty stdout.
    pub fn assert_silent(&self) {
        assert_eq!(self.code, Some(0), "{self:?}");
        assert_eq!(self.stdout, "", "{self:?}");
    }
}

/// A client event fixture from `hookrt/tests/fixtures/events/`.
pub fn event_fixture(name: &str) -> Vec<u8> {
    let path = fixtures_dir().join("events").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fixture as JSON, with `edit` applied (to point paths at temp files, drop fields, ...).
pub fn event_fixture_with(name: &str, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut value: Value = serde_json::from_slice(&event_fixture(name)).expect("fixture JSON");
    edit(&mut value);
    serde_json::to_vec(&value).expect("serialize")
}

fn fixtures_dir() -> PathBuf {
    // The event fixtures belong to hookrt, which parses them; every hook crate's tests share them.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../hookrt/tests/fixtures")
}

/// Percentile (0..=100) of sorted durations.
pub fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * (sorted.len() - 1) + 50) / 100;
    sorted[rank.min(sorted.len() - 1)]
}
