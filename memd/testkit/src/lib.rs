//! `memd-testkit`: a real `memd serve` process in a directory of its own, and a client for it.
//!
//! The one place that knows how to start a daemon for a test, an evaluation or a benchmark:
//! an ephemeral port, fresh data/config/home directories (never the user's), the embedding
//! runtime passed explicitly, readiness taken from the daemon itself (`daemon.json`, then
//! `/api/health`, optionally `model_loaded`), SIGTERM or SIGKILL, restart on the same data.
//! Must never synchronise with a bare sleep (every wait polls a condition under a deadline)
//! and never leave a daemon running: dropping a [`Daemon`] kills it.
//!
//! # Layout
//!
//! - [`Spec`]: what to start (binary, runtime, config.toml, extra environment, waits).
//! - [`Daemon`]: the running process: `try_*` calls return errors (memd-eval, memd-bench),
//!   the short forms panic with the status and body (tests).
//! - [`target_bin`], [`runtime_dir`], [`run_hook`]: locating workspace binaries and the model,
//!   and running a hook binary with stdin.
//! - [`postgres`]: a throwaway PostgreSQL 16 with pgvector (from install/fetch-postgres.sh).
//! - [`proc`]: SIGKILL of a server and everything it forked, returning once none is left.

pub mod postgres;
pub mod proc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Settings of the caller's environment that must never leak into a daemon started here.
pub const SCRUBBED_ENV: [&str; 16] = [
    "MEMD_PORT",
    "MEMD_DEV",
    "MEMD_URL",
    "MEMD_DATA_DIR",
    "MEMD_CONFIG_DIR",
    "MEMD_ORT_LIB",
    "MEMD_MODEL_DIR",
    "MEMD_COLBERT_DIR",
    "MEMD_RERANKER_DIR",
    "ORT_DYLIB_PATH",
    "MEMD_SIDECAR_URL",
    "MEMD_SIDECAR_MODELS",
    "MEMD_SIDECAR_KEY_FILE",
    "MEMD_SIDECAR_REMOTE",
    "XDG_DATA_HOME",
    // Claude Code sets it for hooks; a test run from inside Claude Code must not inherit it.
    "CLAUDE_PROJECT_DIR",
];
/// Between polls of a condition; the condition, not the pause, decides.
/// 1 ms: memd-bench reports start → healthy from this wait, and an empty store answers in ~7 ms.
const POLL: Duration = Duration::from_millis(1);

/// A failure of the kit, with what the daemon logged when that helps.
#[derive(Debug)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn err(message: impl Into<String>) -> Error {
    Error(message.into())
}

/// What to start.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The `memd` binary.
    pub memd: PathBuf,
    /// Where the directories go; `None`: a fresh temp dir, removed when the daemon is dropped.
    pub root: Option<PathBuf>,
    /// The embedding runtime (`MEMD_RUNTIME_DIR`); `None`: [`runtime_dir`].
    pub runtime_dir: Option<PathBuf>,
    /// Written to `<root>/config/config.toml` before the first start.
    pub config_toml: Option<String>,
    /// Hand the data dir over in config.toml's `data_dir` instead of `MEMD_DATA_DIR`.
    pub data_dir_in_config: bool,
    /// Extra environment for the daemon and for [`Daemon::env`].
    pub env: Vec<(String, String)>,
    /// Also wait until `/api/health` reports the embedding model loaded.
    pub wait_model: bool,
    pub start_limit: Duration,
}

impl Spec {
    /// The workspace's own `memd` (see [`target_bin`]), defaults for everything else.
    pub fn new() -> Spec {
        Spec::with_memd(target_bin("memd"))
    }

    pub fn with_memd(memd: PathBuf) -> Spec {
        Spec {
            memd,
            root: None,
            runtime_dir: None,
            config_toml: None,
            data_dir_in_config: false,
            env: Vec::new(),
            wait_model: false,
            start_limit: Duration::from_secs(120),
        }
    }
}

impl Default for Spec {
    fn default() -> Spec {
        Spec::new()
    }
}

enum Root {
    Temp(tempfile::TempDir),
    Kept(PathBuf),
}

impl Root {
    fn path(&self) -> &Path {
        match self {
            Root::Temp(t) => t.path(),
            Root::Kept(p) => p,
        }
    }
}

/// A running daemon with directories of its own: `<root>/data` (only what memd writes, so its
/// size is memd's disk use), `<root>/config`, `<root>/home`, `<root>/daemon.stderr`.
pub struct Daemon {
    pub child: Option<Child>,
    pub port: u16,
    pub token: String,
    pub log: PathBuf,
    /// Spawn → first `/api/health` 200, for the last start.
    pub healthy_after: Duration,
    /// Spawn → `model_loaded`, when the spec asked to wait for it.
    pub model_after: Option<Duration>,
    spec: Spec,
    agent: ureq::Agent,
    // Declared last: removed after the child is gone.
    root: Root,
}

impl Daemon {
    /// Starts `memd serve` as `spec` says and waits until it is ready.
    pub fn start(spec: Spec) -> Result<Daemon> {
        let root = match &spec.root {
            Some(dir) => Root::Kept(dir.clone()),
            None => Root::Temp(
                tempfile::Builder::new()
                    .prefix("memd-kit")
                    .tempdir()
                    .map_err(|e| err(format!("temp dir: {e}")))?,
            ),
        };
        let mut d = Daemon {
            child: None,
            port: 0,
            token: String::new(),
            log: root.path().join("daemon.stderr"),
            healthy_after: Duration::ZERO,
            model_after: None,
            agent: agent(Duration::from_secs(60)),
            spec,
            root,
        };
        d.prepare()?;
        d.try_spawn(&[])?;
        Ok(d)
    }

    fn prepare(&self) -> Result<()> {
        let config = self.config_dir();
        for dir in [config.clone(), self.root().join("home")] {
            std::fs::create_dir_all(&dir)
                .map_err(|e| err(format!("creating {}: {e}", dir.display())))?;
        }
        let mut toml = String::new();
        if self.spec.data_dir_in_config {
            toml.push_str(&format!(
                "data_dir = {:?}\n",
                self.data_dir().display().to_string()
            ));
        }
        if let Some(text) = &self.spec.config_toml {
            toml.push_str(text);
        }
        if !toml.is_empty() {
            std::fs::write(config.join("config.toml"), toml)
                .map_err(|e| err(format!("writing config.toml: {e}")))?;
        }
        Ok(())
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.root().join("data")
    }

    pub fn config_dir(&self) -> PathBuf {
        self.root().join("config")
    }

    pub fn store_dir(&self) -> PathBuf {
        self.data_dir().join("store")
    }

    /// Environment every memd-related process of this daemon gets (hooks, CLI, the daemon).
    pub fn env(&self) -> Vec<(String, String)> {
        let s = |p: PathBuf| p.display().to_string();
        let runtime = self.spec.runtime_dir.clone().unwrap_or_else(runtime_dir);
        let mut env = vec![
            ("MEMD_RUNTIME_DIR".to_string(), s(runtime)),
            ("MEMD_CONFIG_DIR".to_string(), s(self.config_dir())),
            ("HOME".to_string(), s(self.root().join("home"))),
        ];
        if !self.spec.data_dir_in_config {
            env.push(("MEMD_DATA_DIR".to_string(), s(self.data_dir())));
        }
        env.extend(self.spec.env.iter().cloned());
        env
    }

    /// [`Daemon::try_spawn`], panicking with the daemon's log (tests).
    pub fn spawn(&mut self, extra_env: &[(&str, &str)]) {
        self.try_spawn(extra_env).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Starts the process (again) on the same directories and waits until it is ready.
    pub fn try_spawn(&mut self, extra_env: &[(&str, &str)]) -> Result<()> {
        std::fs::remove_file(self.data_dir().join(proto::paths::DAEMON_FILE)).ok();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| err(format!("daemon log: {e}")))?;
        let mut cmd = Command::new(&self.spec.memd);
        cmd.arg("serve")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for k in SCRUBBED_ENV {
            cmd.env_remove(k);
        }
        cmd.env("MEMD_PORT", "0");
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let spawned = Instant::now();
        let child = cmd
            .spawn()
            .map_err(|e| err(format!("cannot start {}: {e}", self.spec.memd.display())))?;
        self.child = Some(child);
        self.port = 0;
        self.healthy_after = Duration::ZERO;
        self.model_after = None;
        self.wait_ready(spawned)
    }

    fn wait_ready(&mut self, spawned: Instant) -> Result<()> {
        let limit = self.spec.start_limit;
        let info = self.data_dir().join(proto::paths::DAEMON_FILE);
        let mut model_state = String::from("not answering");
        loop {
            self.check_alive()?;
            if self.port == 0
                && let Ok(text) = std::fs::read_to_string(&info)
                && let Ok(i) = serde_json::from_str::<proto::paths::DaemonInfo>(&text)
                && i.port != 0
            {
                self.port = i.port;
                self.token =
                    std::fs::read_to_string(self.data_dir().join(proto::paths::TOKEN_FILE))
                        .unwrap_or_default()
                        .trim()
                        .to_string();
            }
            if self.port != 0
                && let Ok(h) = self.try_get::<proto::HealthResponse>("/api/health")
            {
                if self.healthy_after.is_zero() {
                    self.healthy_after = spawned.elapsed();
                }
                if !self.spec.wait_model || h.model_loaded {
                    self.model_after = self.spec.wait_model.then(|| spawned.elapsed());
                    return Ok(());
                }
                model_state = h.model_error.unwrap_or_default();
                if !model_state.contains("loading") {
                    return Err(err(format!(
                        "memd could not load the embedding model: {model_state}"
                    )));
                }
            }
            if spawned.elapsed() > limit {
                return Err(err(format!(
                    "memd not ready after {limit:?} ({model_state}); log:\n{}",
                    self.log_tail()
                )));
            }
            std::thread::sleep(POLL);
        }
    }

    fn check_alive(&mut self) -> Result<()> {
        if let Some(child) = self.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            self.child = None;
            return Err(err(format!(
                "memd exited early ({status}); log:\n{}",
                self.log_tail()
            )));
        }
        Ok(())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }

    /// Any request; `(status, body)`, status 0 when nothing answered.
    pub fn call(&self, method: &str, path: &str, body: Option<&[u8]>, auth: bool) -> (u16, String) {
        let mut req = ureq::http::Request::builder()
            .method(method)
            .uri(self.url(path))
            .header("content-type", "application/json");
        if auth {
            req = req.header("authorization", format!("Bearer {}", self.token));
        }
        let result = match req.body(body.unwrap_or_default().to_vec()) {
            Ok(req) => self.agent.run(req),
            Err(e) => return (0, e.to_string()),
        };
        match result {
            Ok(mut r) => (
                r.status().as_u16(),
                r.body_mut()
                    .with_config()
                    .limit(256 * 1024 * 1024)
                    .read_to_string()
                    .unwrap_or_default(),
            ),
            Err(e) => (0, e.to_string()),
        }
    }

    /// GET, returning (status, body text).
    pub fn get_raw(&self, path: &str, auth: bool) -> (u16, String) {
        self.call("GET", path, None, auth)
    }

    /// POST raw bytes; (status, body).
    pub fn post_raw(&self, path: &str, body: &[u8], auth: bool) -> (u16, String) {
        self.call("POST", path, Some(body), auth)
    }

    pub fn try_get<R: DeserializeOwned>(&self, path: &str) -> Result<R> {
        let (status, text) = self.get_raw(path, true);
        decode("GET", path, status, &text)
    }

    pub fn try_post<B: Serialize, R: DeserializeOwned>(&self, path: &str, body: &B) -> Result<R> {
        let bytes = serde_json::to_vec(body).map_err(|e| err(format!("encoding: {e}")))?;
        let (status, text) = self.post_raw(path, &bytes, true);
        decode("POST", path, status, &text)
    }

    /// GET expecting 200 and a typed answer; panics otherwise (tests).
    pub fn get<R: DeserializeOwned>(&self, path: &str) -> R {
        self.try_get(path).unwrap_or_else(|e| panic!("{e}"))
    }

    /// POST JSON expecting 200 and a typed answer; panics otherwise (tests).
    pub fn post<B: Serialize, R: DeserializeOwned>(&self, path: &str, body: &B) -> R {
        self.try_post(path, body).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits until every stored memory is embedded; how long that took.
    pub fn try_wait_embedded(&self, limit: Duration) -> Result<Duration> {
        let started = Instant::now();
        loop {
            let stats: proto::StatsResponse = self.try_get("/api/stats")?;
            if stats.index.pending_embeddings == 0 {
                return Ok(started.elapsed());
            }
            if started.elapsed() > limit {
                return Err(err(format!(
                    "{} memories still not embedded after {limit:?}",
                    stats.index.pending_embeddings
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// [`Daemon::try_wait_embedded`], panicking (tests).
    pub fn wait_embedded(&self, limit: Duration) {
        self.try_wait_embedded(limit)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// SIGKILL: no flush, no snapshot. Returns once neither memd nor a child of it (a PDF
    /// reader) is left, so a restart never meets a process of the old one.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take()
            && let Err(e) = proc::kill_tree(&mut c)
        {
            eprintln!("memd on port {}: {e}", self.port);
        }
    }

    /// SIGTERM and wait for the exit; true when it exited cleanly.
    pub fn terminate(&mut self) -> bool {
        self.stop().is_ok()
    }

    /// SIGTERM, wait for the exit, and how long the orderly shutdown took.
    pub fn stop(&mut self) -> Result<Duration> {
        let Some(mut child) = self.child.take() else {
            return Ok(Duration::ZERO);
        };
        let started = Instant::now();
        let Ok(pid) = i32::try_from(child.id()) else {
            return Err(err("pid out of range"));
        };
        // SAFETY: SIGTERM to the child this kit started and still owns.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let status = child.wait().map_err(|e| err(format!("wait: {e}")))?;
        if status.success() {
            Ok(started.elapsed())
        } else {
            Err(err(format!(
                "memd exited with {status} on SIGTERM; log:\n{}",
                self.log_tail()
            )))
        }
    }

    /// SIGTERM, then start again on the same data.
    pub fn restart(&mut self) {
        self.terminate();
        self.spawn(&[]);
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last 20 lines of the daemon's stderr.
    pub fn log_tail(&self) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn decode<R: DeserializeOwned>(method: &str, path: &str, status: u16, text: &str) -> Result<R> {
    if status != 200 {
        return Err(err(format!("{method} {path} → {status}: {text}")));
    }
    serde_json::from_str(text).map_err(|e| err(format!("bad answer from {path}: {e}: {text}")))
}

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(timeout))
        .build()
        .into()
}

/// Every file under `dir`, recursively (what a test searches for a leaked secret).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// Where cargo put the workspace binaries: the directory above the running test or program
/// (`target/<profile>/deps/<test>` → `target/<profile>`, `target/<profile>/memd-bench` →
/// `target/<profile>`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.parent().map(Path::to_path_buf).unwrap_or(dir)
    } else {
        dir
    }
}

/// A workspace binary next to the caller; panics with the build command when it is missing.
pub fn target_bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} not built: run `cargo build --workspace` first",
        p.display()
    );
    p
}

/// The model + ONNX Runtime cache (`install/fetch-runtime.sh` fills it): `MEMD_RUNTIME_DIR`,
/// else `${XDG_CACHE_HOME:-~/.cache}/memd/runtime`. Daemons started here get it explicitly,
/// because they run with a HOME of their own.
pub fn runtime_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("MEMD_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    proto::paths::cache_dir().join("runtime")
}

/// Runs a workspace hook binary with `stdin` and `env`; (exit code, stdout, stderr, wall time).
pub fn run_hook(
    name: &str,
    args: &[&str],
    stdin: &[u8],
    env: &[(String, String)],
) -> (i32, String, String, Duration) {
    use std::io::Write;
    let start = Instant::now();
    let mut cmd = Command::new(target_bin(name));
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for k in SCRUBBED_ENV {
        cmd.env_remove(k);
    }
    cmd.env_remove("CURSOR_VERSION");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn hook");
    if let Some(mut sin) = child.stdin.take() {
        let _ = sin.write_all(stdin);
    }
    let out = child.wait_with_output().expect("hook output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed(),
    )
}
