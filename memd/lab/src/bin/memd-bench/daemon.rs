//! A real `memd serve` process for the benchmark, and an HTTP client for it.
//!
//! Starting, timing (spawn → `/api/health` 200 → `model_loaded`) and stopping the daemon are
//! `memd-testkit`'s (the one helper that starts daemons). This module adds what the benchmark
//! measures: RSS from /proc, the store's own start-up line, the data directory's size, and a
//! keep-alive client for load. Must never talk to a daemon it did not start and never leave one running:
//! dropping a `Daemon` kills it.

use anyhow::{Context, Result, anyhow, bail};
use proto::{HealthResponse, StatsResponse};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const START_LIMIT: Duration = Duration::from_secs(300);

/// Where one daemon instance keeps its files (the `memd-testkit` layout): the data dir holds
/// only what memd writes, so its size is memd's disk use; config, home and logs sit next to it.
#[derive(Debug, Clone)]
pub struct Instance {
    pub root: PathBuf,
    pub memd: PathBuf,
    pub runtime_dir: PathBuf,
    /// Written to the instance's config.toml before the first start.
    pub config_toml: Option<String>,
}

impl Instance {
    pub fn new(root: PathBuf, memd: PathBuf, runtime_dir: PathBuf) -> Result<Instance> {
        std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        Ok(Instance {
            root,
            memd,
            runtime_dir,
            config_toml: None,
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

    /// Spawns `memd serve` through `memd-testkit` and waits for health (and the model, if
    /// `wait_model`); the kit times both from the spawn.
    pub fn start(&self, wait_model: bool) -> Result<Daemon> {
        let spec = memd_testkit::Spec {
            root: Some(self.root.clone()),
            runtime_dir: Some(self.runtime_dir.clone()),
            wait_model,
            start_limit: START_LIMIT,
            config_toml: self.config_toml.clone(),
            ..memd_testkit::Spec::with_memd(self.memd.clone())
        };
        let kit = memd_testkit::Daemon::start(spec).map_err(|e| anyhow!("{e}"))?;
        Ok(Daemon {
            client: Client::new(kit.port, kit.token.clone()),
            healthy_after: kit.healthy_after,
            model_after: kit.model_after,
            kit,
        })
    }
}

/// A running daemon.
pub struct Daemon {
    kit: memd_testkit::Daemon,
    pub client: Client,
    /// Spawn → first `/api/health` 200.
    pub healthy_after: Duration,
    /// Spawn → `/api/health` says `model_loaded` (when waited for).
    pub model_after: Option<Duration>,
}

impl Daemon {
    /// The daemon's own account of its last store recovery (`store open in N ms ...`).
    pub fn store_open_line(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.kit.log).ok()?;
        text.lines()
            .rev()
            .find_map(|l| l.find("store open in").map(|at| l[at..].to_string()))
    }

    pub fn pid(&self) -> Option<u32> {
        self.kit.pid()
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

    /// Polls `/api/health` until the late-interaction model is loaded (it loads after the
    /// embedder), so its token states are part of what `wait_embedded` waits for.
    pub fn wait_late_interaction(&self, limit: Duration) -> Result<()> {
        let start = Instant::now();
        while !self.health()?.late_interaction_loaded {
            if start.elapsed() > limit {
                bail!(
                    "the late-interaction model did not load within {limit:?} (is the runtime complete?)"
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Polls `/api/stats` until nothing waits for an embedding or for token states; returns
    /// how long that took.
    pub fn wait_embedded(&self, limit: Duration) -> Result<Duration> {
        let start = Instant::now();
        loop {
            let s = self.stats()?;
            if s.index.pending_embeddings == 0 && s.index.pending_token_states == 0 {
                return Ok(start.elapsed());
            }
            if start.elapsed() > limit {
                bail!(
                    "{} memories still not embedded ({} without token states) after {limit:?}",
                    s.index.pending_embeddings,
                    s.index.pending_token_states
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

    /// CPU time the daemon has used so far (user + system, every thread), from /proc. The
    /// kernel reports it in USER_HZ ticks, 100 a second on Linux whatever the kernel's own HZ.
    pub fn cpu_time(&self) -> Result<Duration> {
        let pid = self.pid().ok_or_else(|| anyhow!("daemon not running"))?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // The command name (field 2) may hold spaces: count fields after its closing paren.
        let rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .ok_or_else(|| anyhow!("unreadable /proc/{pid}/stat"))?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        let ticks = |i: usize| -> Result<u64> {
            fields
                .get(i)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| anyhow!("no CPU time in /proc/{pid}/stat"))
        };
        Ok(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
    }

    /// SIGTERM, wait for a clean exit; returns how long the shutdown (with final snapshot) took.
    pub fn stop(mut self) -> Result<Duration> {
        self.kit.stop().map_err(|e| anyhow!("{e}"))
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
    /// The daemon's API token (the dashboard's host name is derived from it).
    pub fn token(&self) -> &str {
        &self.token
    }

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
