//! Where the stdio bridge finds the daemon, and starting the daemon when nothing answers.
//!
//! Owns endpoint discovery for `memd mcp` (same conventions as the hooks: `MEMD_URL`, else the
//! port in `<data dir>/daemon.json`, else `MEMD_PORT` or the default) and the detached start of
//! `memd serve`. Must never write to stdout (it belongs to the MCP client), never let the
//! daemon inherit the bridge's stdio (the daemon outlives it), and never wait more than
//! [`READY_WAIT`] for a start.

use anyhow::{Context, Result, anyhow, bail};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the bridge waits for a daemon it started to answer `/api/health`.
pub const READY_WAIT: Duration = Duration::from_secs(10);
/// Replaces the whole base URL (tests, unusual setups); the bridge then never starts memd.
pub const URL_ENV: &str = "MEMD_URL";
/// How often the start-up wait looks at `daemon.json` and `/api/health`.
const READY_POLL: Duration = Duration::from_millis(50);

/// A daemon endpoint: base URL and bearer token.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub base_url: String,
    pub token: Option<String>,
    data_dir: Option<PathBuf>,
    /// False when `MEMD_URL` chose the endpoint: someone else runs that daemon.
    managed: bool,
}

impl Endpoint {
    pub fn locate() -> Result<Endpoint> {
        let data_dir = proto::paths::data_dir();
        let mut e = match std::env::var(URL_ENV).ok().filter(|u| !u.trim().is_empty()) {
            Some(url) => Endpoint {
                base_url: url.trim().trim_end_matches('/').to_string(),
                token: None,
                data_dir,
                managed: false,
            },
            None => {
                let dir = data_dir.ok_or_else(|| {
                    anyhow!("cannot find memd's data dir: set MEMD_DATA_DIR or HOME")
                })?;
                Endpoint {
                    base_url: String::new(),
                    token: None,
                    data_dir: Some(dir),
                    managed: true,
                }
            }
        };
        e.refresh();
        Ok(e)
    }

    /// Re-reads the port (a restarted daemon may listen elsewhere) and the token.
    pub fn refresh(&mut self) {
        let Some(dir) = self.data_dir.clone() else {
            return;
        };
        self.token = read_token(&dir.join(proto::paths::TOKEN_FILE));
        if self.managed {
            let port = read_port(&dir)
                .or_else(proto::paths::port_from_env)
                .unwrap_or(proto::paths::DEFAULT_PORT);
            self.base_url = format!("http://127.0.0.1:{port}");
        }
    }

    /// Makes sure a daemon answers, starting one if this endpoint is ours to manage.
    pub fn ensure_running(&mut self) -> Result<()> {
        // A restarted daemon may listen on another port: look before starting a second one.
        self.refresh();
        if health_ok(&self.base_url) {
            return Ok(());
        }
        let Some(dir) = self.data_dir.clone().filter(|_| self.managed) else {
            bail!(
                "memd does not answer at {} ({URL_ENV} is set, so it is not started here)",
                self.base_url
            );
        };
        let mut child = start_detached(&dir)?;
        let started = Instant::now();
        let mut exited = None;
        while started.elapsed() < READY_WAIT {
            self.refresh();
            if read_port(&dir).is_some() && health_ok(&self.base_url) {
                return Ok(());
            }
            // A daemon that exits at once usually lost the race for the data-dir lock to
            // another one that is still starting, so keep waiting for whichever answers.
            if exited.is_none() {
                exited = child.try_wait().ok().flatten();
            }
            std::thread::sleep(READY_POLL);
        }
        let why = exited.map_or(String::new(), |s| {
            format!(" (the started daemon exited: {s})")
        });
        bail!(
            "memd did not become ready within {} s{why}; run `memd serve` in a terminal to see why",
            READY_WAIT.as_secs()
        )
    }
}

fn read_port(dir: &Path) -> Option<u16> {
    let bytes = std::fs::read(dir.join(proto::paths::DAEMON_FILE)).ok()?;
    serde_json::from_slice::<proto::paths::DaemonInfo>(&bytes)
        .ok()
        .map(|i| i.port)
        .filter(|p| *p != 0)
}

fn read_token(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let token = text.lines().next()?.trim();
    (!token.is_empty()).then(|| token.to_string())
}

/// The agent for daemon calls: loopback only, so no proxy; statuses are answers, not errors.
pub fn loopback_agent(read_timeout: Option<Duration>) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_recv_response(read_timeout)
        .timeout_per_read(read_timeout)
        .user_agent(format!("memd-mcp-bridge/{}", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

fn health_ok(base_url: &str) -> bool {
    if base_url.is_empty() || base_url.ends_with(":0") {
        return false;
    }
    let agent = loopback_agent(Some(Duration::from_secs(2)));
    agent
        .get(format!("{base_url}/api/health"))
        .call()
        .is_ok_and(|r| r.status().as_u16() == 200)
}

/// Starts `memd serve` (this executable) in its own process group with no tie to our stdio.
fn start_detached(data_dir: &Path) -> Result<Child> {
    let exe =
        std::env::current_exe().context("cannot find the memd executable to start the daemon")?;
    let mut cmd = Command::new(&exe);
    cmd.arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .current_dir("/");
    // Log to the data dir only when it already exists: creating it here would bypass the
    // daemon's own private (0700) creation of it.
    let logs = data_dir.join("logs");
    match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join("daemon.log"))
    {
        Ok(f) => cmd.stderr(f),
        Err(_) => cmd.stderr(Stdio::null()),
    };
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: a signal aimed at the MCP client's group does not reach memd.
        cmd.process_group(0);
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start `{} serve`", exe.display()))?;
    eprintln!(
        "memd mcp: started the daemon (`{} serve`, pid {})",
        exe.display(),
        child.id()
    );
    Ok(child)
}
