//! A real `memd serve` process for the benchmark, and an HTTP client for it.
//!
//! Owns spawning the daemon from the same target directory (ephemeral port, its own data dir,
//! the real embedding runtime), timing spawn → `/api/health` 200 → `model_loaded`, reading its
//! RSS from /proc, stopping it with SIGTERM (clean shutdown, final snapshot) and measuring the
//! data directory. Must never talk to a daemon it did not start and never leave one running:
//! dropping a `Daemon` kills it.

use anyhow::{Context, Result, anyhow, bail};
use proto::{HealthResponse, StatsResponse};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How often start-up and queue state are polled (the condition decides, not the delay).
const POLL: Duration = Duration::from_millis(1);
const START_LIMIT: Duration = Duration::from_secs(300);

/// Where one daemon instance keeps its files. The data dir holds only what memd writes, so its
/// size is memd's disk use; config, home and logs sit next to it.
#[derive(Debug, Clone)]
pub struct Instance {
    pub root: PathBuf,
    pub memd: PathBuf,
    pub runtime_dir: PathBuf,
}

impl Instance {
    pub fn new(root: PathBuf, memd: PathBuf, runtime_dir: PathBuf) -> Result<Instance> {
        for sub in ["config", "home"] {
            std::fs::create_dir_all(root.join(sub))
                .with_context(|| format!("creating {}", root.join(sub).display()))?;
        }
        Ok(Instance {
            root,
            memd,
            runtime_dir,
        })
    }

    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    pub fn store_dir(&self) -> PathBuf {
        self.data_dir().join("store")
    }

    /// Environment every memd-related process of this instance gets (daemon and hooks).
    pub fn env(&self) -> Vec<(String, String)> {
        let s = |p: PathBuf| p.display().to_string();
        vec![
            ("MEMD_DATA_DIR".into(), s(self.data_dir())),
            ("MEMD_CONFIG_DIR".into(), s(self.root.join("config"))),
            ("MEMD_RUNTIME_DIR".into(), s(self.runtime_dir.clone())),
            ("HOME".into(), s(self.root.join("home"))),
        ]
    }

    /// Spawns `memd serve` and waits for health (and the model, if `wait_model`).
    pub fn start(&self, wait_model: bool) -> Result<Daemon> {
        let data = self.data_dir();
        std::fs::remove_file(data.join(proto::paths::DAEMON_FILE)).ok();
        let log_path = self.root.join("daemon.stderr");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        let mut cmd = Command::new(&self.memd);
        cmd.arg("serve")
            .env("MEMD_PORT", "0")
            .env_remove("MEMD_URL")
            .env_remove("MEMD_DEV")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        let spawned = Instant::now();
        let child = cmd
            .spawn()
            .with_context(|| format!("spawning {}", self.memd.display()))?;
        let mut d = Daemon {
            child: Some(child),
            data_dir: data,
            log_path,
            client: Client::new(0, String::new()),
            healthy_after: Duration::ZERO,
            model_after: None,
        };
        d.wait_healthy(spawned)?;
        if wait_model {
            d.wait_model(spawned)?;
        }
        Ok(d)
    }
}

/// A running daemon.
pub struct Daemon {
    child: Option<Child>,
    pub data_dir: PathBuf,
    log_path: PathBuf,
    pub client: Client,
    /// Spawn → first `/api/health` 200.
    pub healthy_after: Duration,
    /// Spawn → `/api/health` says `model_loaded` (when waited for).
    pub model_after: Option<Duration>,
}

impl Daemon {
    fn check_alive(&mut self) -> Result<()> {
        if let Some(child) = self.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            bail!("memd exited early ({status}); log:\n{}", self.log_tail());
        }
        Ok(())
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn wait_healthy(&mut self, spawned: Instant) -> Result<()> {
        let info = self.data_dir.join(proto::paths::DAEMON_FILE);
        let probe = Client::agent(Duration::from_millis(500));
        loop {
            self.check_alive()?;
            if self.client.port == 0
                && let Ok(text) = std::fs::read_to_string(&info)
                && let Ok(v) = serde_json::from_str::<proto::paths::DaemonInfo>(&text)
            {
                let token = std::fs::read_to_string(self.data_dir.join(proto::paths::TOKEN_FILE))
                    .context("daemon.json present but no token file")?;
                self.client = Client::new(v.port, token.trim().to_string());
            }
            if self.client.port != 0 {
                let url = self.client.url("/api/health");
                if let Ok(r) = probe.get(&url).call()
                    && r.status() == 200
                {
                    self.healthy_after = spawned.elapsed();
                    return Ok(());
                }
            }
            if spawned.elapsed() > START_LIMIT {
                bail!(
                    "memd not healthy after {START_LIMIT:?}; log:\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    fn wait_model(&mut self, spawned: Instant) -> Result<()> {
        loop {
            self.check_alive()?;
            let h = self.health()?;
            if h.model_loaded {
                self.model_after = Some(spawned.elapsed());
                return Ok(());
            }
            if let Some(e) = h.model_error.filter(|e| !e.contains("loading")) {
                bail!("memd could not load the embedding model: {e}");
            }
            if spawned.elapsed() > START_LIMIT {
                bail!("model not loaded after {START_LIMIT:?}");
            }
            std::thread::sleep(POLL);
        }
    }

    /// The daemon's own account of its last store recovery (`store open in N ms ...`).
    pub fn store_open_line(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.log_path).ok()?;
        text.lines()
            .rev()
            .find(|l| l.contains("store open in"))
            .map(|l| l.trim_start_matches("memd: ").to_string())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn health(&self) -> Result<HealthResponse> {
        self.client.get("/api/health")
    }

    pub fn stats(&self) -> Result<StatsResponse> {
        self.client.get("/api/stats")
    }

    /// Every memory in every collection, from `/api/health` counts.
    pub fn memory_count(&self) -> Result<usize> {
        Ok(self.health()?.counts.values().sum())
    }

    /// Polls `/api/stats` until nothing waits for an embedding; returns how long that took.
    pub fn wait_embedded(&self, limit: Duration) -> Result<Duration> {
        let start = Instant::now();
        loop {
            let s = self.stats()?;
            if s.index.pending_embeddings == 0 {
                return Ok(start.elapsed());
            }
            if start.elapsed() > limit {
                bail!(
                    "{} memories still not embedded after {limit:?}",
                    s.index.pending_embeddings
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `(VmRSS, VmHWM)` in KiB from /proc.
    pub fn rss_kib(&self) -> Result<(u64, u64)> {
        let pid = self.pid().ok_or_else(|| anyhow!("daemon not running"))?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let field = |name: &str| -> Result<u64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| anyhow!("{name} missing from /proc/{pid}/status"))
        };
        Ok((field("VmRSS:")?, field("VmHWM:")?))
    }

    /// SIGTERM, wait for a clean exit; returns how long the shutdown (with final snapshot) took.
    pub fn stop(mut self) -> Result<Duration> {
        let Some(mut child) = self.child.take() else {
            return Ok(Duration::ZERO);
        };
        let start = Instant::now();
        // SAFETY: kill(2) on the pid of a child this process spawned and has not reaped.
        let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        if rc != 0 {
            bail!("cannot signal memd: {}", std::io::Error::last_os_error());
        }
        let status = child.wait()?;
        let took = start.elapsed();
        if !status.success() {
            bail!(
                "memd exited with {status} on SIGTERM; log:\n{}",
                self.log_tail()
            );
        }
        Ok(took)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().ok();
            c.wait().ok();
        }
    }
}

/// Authenticated JSON client with keep-alive. No global timeout: with one, ureq resolves every
/// request's address on a fresh thread, which would add that thread to every latency measured.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    pub port: u16,
    token: String,
}

impl Client {
    pub fn new(port: u16, token: String) -> Client {
        Client {
            agent: Client::agent(Duration::from_secs(300)),
            port,
            token,
        }
    }

    fn agent(limit: Duration) -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_send_request(Some(limit))
            .timeout_send_body(Some(limit))
            .timeout_recv_response(Some(limit))
            .timeout_recv_body(Some(limit))
            .build()
            .into()
    }

    /// A client with its own connection (for concurrent workers).
    pub fn fork(&self) -> Client {
        Client::new(self.port, self.token.clone())
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn get<R: DeserializeOwned>(&self, path: &str) -> Result<R> {
        let mut r = self
            .agent
            .get(&self.url(path))
            .header("authorization", &format!("Bearer {}", self.token))
            .call()
            .with_context(|| format!("GET {path}"))?;
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string()?;
        if status != 200 {
            bail!("GET {path} → {status}: {text}");
        }
        serde_json::from_str(&text).with_context(|| format!("GET {path}: {text}"))
    }

    /// POST JSON; `Ok((status, body))` for any HTTP answer, `Err` only for transport failures.
    pub fn post_raw<B: Serialize>(&self, path: &str, body: &B) -> Result<(u16, String)> {
        let bytes = serde_json::to_vec(body)?;
        let mut r = self
            .agent
            .post(&self.url(path))
            .header("authorization", &format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .send(&bytes[..])
            .with_context(|| format!("POST {path}"))?;
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string()?;
        Ok((status, text))
    }

    /// POST JSON expecting 200 and a typed answer.
    pub fn post<B: Serialize, R: DeserializeOwned>(&self, path: &str, body: &B) -> Result<R> {
        let (status, text) = self.post_raw(path, body)?;
        if status != 200 {
            bail!("POST {path} → {status}: {text}");
        }
        serde_json::from_str(&text).with_context(|| format!("POST {path}: bad answer {text}"))
    }
}

/// Bytes of every file under `dir` (apparent size).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}
