//! A `memd serve` process of the evaluation's own, and an authenticated JSON client for it.
//!
//! Owns the child process (fresh data, config and home directories; the caller's config
//! text; the embedding runtime passed by path) and bounded waits on conditions the daemon
//! reports. Must never reuse the user's data directory, config or running daemon, and never
//! synchronise with a bare sleep: every wait polls a condition with a deadline.

use super::tempdir::TempDir;
use anyhow::{Context, Result, anyhow, bail};
use memd_engine::embed::RuntimePaths;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long start-up (store open, listener, model load) may take.
const START_LIMIT: Duration = Duration::from_secs(120);
/// Pause between polls of a condition; the condition, not the pause, decides.
const POLL_EVERY: Duration = Duration::from_millis(10);
/// Sidecar settings of the caller's environment that must not leak into the evaluation.
const CLEARED_ENV: [&str; 6] = [
    "MEMD_SIDECAR_URL",
    "MEMD_SIDECAR_MODELS",
    "MEMD_SIDECAR_KEY_FILE",
    "MEMD_SIDECAR_REMOTE",
    "MEMD_RUNTIME_DIR",
    "ORT_DYLIB_PATH",
];

pub(crate) struct SpawnedDaemon {
    child: Option<Child>,
    port: u16,
    token: String,
    agent: ureq::Agent,
    log: PathBuf,
    // Declared last: removed after the child is gone.
    dir: TempDir,
}

impl SpawnedDaemon {
    /// Starts `memd serve` with `config_toml` as its config file and waits until it answers
    /// with the embedding model loaded.
    pub(crate) fn start(memd: &Path, runtime: &RuntimePaths, config_toml: &str) -> Result<Self> {
        runtime.check().map_err(|msg| anyhow!(msg))?;
        let dir = TempDir::new("memd-eval-daemon")?;
        let config_dir = dir.path().join("config");
        std::fs::create_dir_all(&config_dir)?;
        std::fs::write(config_dir.join("config.toml"), config_toml)?;
        let log = dir.path().join("daemon.stderr");
        let stderr = std::fs::File::create(&log)?;
        let model_dir = runtime
            .model
            .parent()
            .context("the model path has no directory")?;
        let mut cmd = Command::new(memd);
        cmd.arg("serve")
            .env("MEMD_PORT", "0")
            .env("MEMD_DATA_DIR", dir.path().join("data"))
            .env("MEMD_CONFIG_DIR", &config_dir)
            .env("HOME", dir.path().join("home"))
            .env("MEMD_ORT_LIB", &runtime.ort_lib)
            .env("MEMD_MODEL_DIR", model_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        for k in CLEARED_ENV {
            cmd.env_remove(k);
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", memd.display()))?;
        let mut d = SpawnedDaemon {
            child: Some(child),
            port: 0,
            token: String::new(),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(60)))
                .build()
                .into(),
            log,
            dir,
        };
        d.wait_ready()?;
        Ok(d)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn wait_ready(&mut self) -> Result<()> {
        let started = Instant::now();
        let info = self.data_dir().join(proto::paths::DAEMON_FILE);
        let mut model_state = String::from("not answering");
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                bail!(
                    "memd exited during start-up ({status}):\n{}",
                    self.log_tail()
                );
            }
            if self.port == 0
                && let Ok(text) = std::fs::read_to_string(&info)
                && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
                && let Some(port) = v["port"].as_u64()
            {
                self.port = u16::try_from(port).context("daemon.json port out of range")?;
                self.token =
                    std::fs::read_to_string(self.data_dir().join(proto::paths::TOKEN_FILE))
                        .unwrap_or_default()
                        .trim()
                        .to_string();
            }
            if self.port != 0
                && let Ok(h) = self.get::<proto::HealthResponse>("/api/health")
            {
                if h.model_loaded {
                    return Ok(());
                }
                // "loading" while the model loads; a real failure stays until the deadline.
                model_state = h.model_error.unwrap_or_default();
            }
            if started.elapsed() > START_LIMIT {
                bail!(
                    "memd not ready with its model after {START_LIMIT:?} ({model_state}):\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(POLL_EVERY);
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = text.len().saturating_sub(2_000);
        text.get(start..).unwrap_or_default().to_string()
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn answer<R: DeserializeOwned>(
        path: &str,
        reply: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<R> {
        let mut reply = reply.map_err(|e| anyhow!("{path}: {e}"))?;
        let status = reply.status().as_u16();
        let text = reply
            .body_mut()
            .read_to_string()
            .map_err(|e| anyhow!("{path}: {e}"))?;
        if status != 200 {
            bail!("{path} answered {status}: {text}");
        }
        serde_json::from_str(&text).with_context(|| format!("{path} answered {text}"))
    }

    pub(crate) fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<R> {
        let bytes = serde_json::to_vec(body)?;
        let reply = self
            .agent
            .post(&self.url(path))
            .header("authorization", &format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .send(&bytes[..]);
        Self::answer(path, reply)
    }

    pub(crate) fn get<R: DeserializeOwned>(&self, path: &str) -> Result<R> {
        let reply = self
            .agent
            .get(&self.url(path))
            .header("authorization", &format!("Bearer {}", self.token))
            .call();
        Self::answer(path, reply)
    }

    /// Polls `check` until it yields a value; fails after `limit`, naming `what`.
    pub(crate) fn wait_for<T>(
        &self,
        what: &str,
        limit: Duration,
        mut check: impl FnMut() -> Result<Option<T>>,
    ) -> Result<T> {
        let started = Instant::now();
        loop {
            if let Some(v) = check()? {
                return Ok(v);
            }
            if started.elapsed() > limit {
                bail!("timed out after {limit:?} waiting for {what}");
            }
            std::thread::sleep(POLL_EVERY);
        }
    }

    /// Waits until every stored memory has its embedding.
    pub(crate) fn wait_embedded(&self, limit: Duration) -> Result<()> {
        self.wait_for("embeddings", limit, || {
            let stats: proto::StatsResponse = self.get("/api/stats")?;
            Ok((stats.index.pending_embeddings == 0).then_some(()))
        })
    }

    /// SIGTERM, then waits for the process (the daemon flushes and snapshots on the way out).
    pub(crate) fn stop(mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pid = i32::try_from(child.id()).context("pid out of range")?;
        // SAFETY: kill(2) on our own child's pid; no memory is shared.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let status = child.wait()?;
        if !status.success() {
            bail!("memd exited with {status}:\n{}", self.log_tail());
        }
        Ok(())
    }
}

impl Drop for SpawnedDaemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
