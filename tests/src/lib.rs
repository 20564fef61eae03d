//! Helpers shared by the end-to-end tests: a real `memd serve` process on an ephemeral port
//! with a temporary data dir, and the real hook binaries.
//!
//! Owns process management for tests (start, wait until healthy, SIGKILL, SIGTERM, restart) and
//! a small authenticated JSON client. Must never synchronise with sleeps: readiness is the
//! daemon announcing itself in `daemon.json` and answering `/api/health`.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where cargo put the workspace binaries (the tests crate sits next to them).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test>-<hash> → target/<profile>
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf()
}

pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} not built: run `cargo build --workspace` first",
        p.display()
    );
    p
}

/// The model + ONNX Runtime cache of the real user (tests give memd a fresh HOME, so the
/// runtime dir is passed explicitly; `install/fetch-runtime.sh` fills it).
pub fn runtime_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("MEMD_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    cache.join("memd/runtime")
}

/// A running daemon with its own data dir.
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub child: Option<Child>,
    pub port: u16,
    pub token: String,
    pub log: PathBuf,
    /// The data dir reaches memd through config.toml's `data_dir`, not `MEMD_DATA_DIR`.
    pub data_dir_in_config: bool,
}

impl Daemon {
    /// Starts `memd serve` on an ephemeral port and waits until it answers.
    pub fn start() -> Daemon {
        Daemon::start_with(false)
    }

    /// Like [`Daemon::start`], but every process learns the data dir only from `data_dir` in
    /// config.toml (no `MEMD_DATA_DIR`).
    pub fn start_data_dir_in_config() -> Daemon {
        Daemon::start_with(true)
    }

    fn start_with(data_dir_in_config: bool) -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("memd-e2e")
            .tempdir()
            .expect("tempdir");
        let mut d = Daemon {
            log: dir.path().join("daemon.stderr"),
            dir,
            child: None,
            port: 0,
            token: String::new(),
            data_dir_in_config,
        };
        if data_dir_in_config {
            let config = d.data_dir().join("config");
            std::fs::create_dir_all(&config).expect("config dir");
            let toml = format!("data_dir = {:?}\n", d.data_dir().display().to_string());
            std::fs::write(config.join("config.toml"), toml).expect("config.toml");
        }
        d.spawn(&[]);
        d
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Env every memd-related process of this test gets.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            (
                "MEMD_RUNTIME_DIR".into(),
                runtime_dir().display().to_string(),
            ),
            (
                "MEMD_CONFIG_DIR".into(),
                self.data_dir().join("config").display().to_string(),
            ),
            (
                "HOME".into(),
                self.data_dir().join("home").display().to_string(),
            ),
        ];
        if !self.data_dir_in_config {
            env.push((
                "MEMD_DATA_DIR".into(),
                self.data_dir().display().to_string(),
            ));
        }
        env
    }

    pub fn spawn(&mut self, extra_env: &[(&str, &str)]) {
        std::fs::remove_file(self.data_dir().join("daemon.json")).ok();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log");
        let mut cmd = Command::new(bin("memd"));
        cmd.arg("serve")
            .env("MEMD_PORT", "0")
            .env_remove("MEMD_DATA_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn().expect("spawn memd"));
        self.wait_ready(Duration::from_secs(60));
    }

    fn wait_ready(&mut self, limit: Duration) {
        let start = Instant::now();
        let info = self.data_dir().join("daemon.json");
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!(
                    "memd exited early ({status}); log:\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            if let Ok(text) = std::fs::read_to_string(&info)
                && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
                && let Some(port) = v["port"].as_u64()
            {
                self.port = port as u16;
                self.token = std::fs::read_to_string(self.data_dir().join("token"))
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                if self.get_raw("/api/health", false).0 == 200 {
                    return;
                }
            }
            assert!(start.elapsed() < limit, "memd not ready after {limit:?}");
            // Polling a file the daemon writes once it listens; the wait is bounded and the
            // condition, not the delay, decides.
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into()
    }

    /// GET, returning (status, body text).
    pub fn get_raw(&self, path: &str, auth: bool) -> (u16, String) {
        let mut req = Self::agent().get(&self.url(path));
        if auth {
            req = req.header("authorization", &format!("Bearer {}", self.token));
        }
        match req.call() {
            Ok(mut r) => (
                r.status().as_u16(),
                r.body_mut().read_to_string().unwrap_or_default(),
            ),
            Err(_) => (0, String::new()),
        }
    }

    /// POST raw bytes with optional auth; (status, body).
    pub fn post_raw(&self, path: &str, body: &[u8], auth: bool) -> (u16, String) {
        let mut req = Self::agent()
            .post(&self.url(path))
            .header("content-type", "application/json");
        if auth {
            req = req.header("authorization", &format!("Bearer {}", self.token));
        }
        match req.send(body) {
            Ok(mut r) => (
                r.status().as_u16(),
                r.body_mut().read_to_string().unwrap_or_default(),
            ),
            Err(e) => (0, e.to_string()),
        }
    }

    /// POST JSON expecting 200 and a typed answer.
    pub fn post<B: Serialize, R: DeserializeOwned>(&self, path: &str, body: &B) -> R {
        let (status, text) = self.post_raw(path, &serde_json::to_vec(body).expect("json"), true);
        assert_eq!(status, 200, "POST {path} → {status}: {text}");
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("bad answer from {path}: {e}: {text}"))
    }

    pub fn get<R: DeserializeOwned>(&self, path: &str) -> R {
        let (status, text) = self.get_raw(path, true);
        assert_eq!(status, 200, "GET {path} → {status}: {text}");
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("bad answer from {path}: {e}: {text}"))
    }

    /// SIGKILL: no flush, no snapshot.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().ok();
            c.wait().ok();
        }
    }

    /// SIGTERM and wait for a clean exit; returns the exit status success.
    pub fn terminate(&mut self) -> bool {
        let Some(mut c) = self.child.take() else {
            return true;
        };
        unsafe {
            libc::kill(c.id() as i32, libc::SIGTERM);
        }
        c.wait().map(|s| s.success()).unwrap_or(false)
    }

    pub fn restart(&mut self) {
        self.terminate();
        self.spawn(&[]);
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until every stored memory is embedded (bounded), using the stats endpoint.
    pub fn wait_embedded(&self, limit: Duration) {
        let start = Instant::now();
        loop {
            let stats: proto::StatsResponse = self.get("/api/stats");
            if stats.index.pending_embeddings == 0 {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "{} memories still not embedded",
                stats.index.pending_embeddings
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Runs a hook binary with `stdin` and env; returns (exit code, stdout, stderr, wall time).
pub fn run_hook(
    name: &str,
    args: &[&str],
    stdin: &[u8],
    env: &[(String, String)],
) -> (i32, String, String, Duration) {
    use std::io::Write;
    let start = Instant::now();
    let mut cmd = Command::new(bin(name));
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.env_remove("CURSOR_VERSION").env_remove("MEMD_DATA_DIR");
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
