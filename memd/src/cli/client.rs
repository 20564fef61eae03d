//! The CLI's connection to a running daemon: where it listens, the token, typed calls.
//!
//! Owns finding the daemon (`<data dir>/daemon.json`, else the configured port), authenticated
//! JSON calls over loopback with ureq, starting `memd serve` detached when a command needs the
//! daemon, and stopping it (service install, purge). Must never print the token and never send
//! anything anywhere but 127.0.0.1.

use crate::config::Config;
use anyhow::{Context, Result, bail};
use proto::paths::DaemonInfo;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a command waits for a daemon it started.
pub const START_WAIT: Duration = Duration::from_secs(10);
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);
/// Ordinary calls; ingest and import use longer ones.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A failed call, in terms a user can act on.
#[derive(Debug)]
pub enum ClientError {
    /// Nothing answers on the port.
    NotRunning { port: u16, detail: String },
    /// The daemon answered 401: our token file is not the one it uses.
    Unauthorized { token_path: PathBuf },
    /// The daemon refused the request (4xx/5xx) with this message.
    Api { status: u16, message: String },
    /// The answer was not what this version of memd expects.
    BadAnswer(String),
    /// Writing the answer out failed (e.g. a closed pipe).
    Output(std::io::Error),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::NotRunning { port, detail } => write!(
                f,
                "memd is not running (nothing answers on 127.0.0.1:{port}: {detail}). Start it with `memd serve` or `memd service install`; the hooks also start it on demand"
            ),
            ClientError::Unauthorized { token_path } => write!(
                f,
                "the daemon rejected our token: {} is not the token it uses (was the data dir moved or MEMD_DATA_DIR changed?)",
                token_path.display()
            ),
            ClientError::Api { status, message } => write!(f, "memd answered {status}: {message}"),
            ClientError::BadAnswer(m) => write!(f, "unexpected answer from memd: {m}"),
            ClientError::Output(e) => write!(f, "cannot write the output: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// A connection to the daemon of one data dir.
pub struct Client {
    pub port: u16,
    token_path: PathBuf,
    token: Option<String>,
}

/// Reads `<data dir>/daemon.json` if a daemon wrote one.
pub fn daemon_info(data_dir: &Path) -> Option<DaemonInfo> {
    let bytes = std::fs::read(data_dir.join(proto::paths::DAEMON_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

impl Client {
    /// Where the daemon of `cfg` should be: the port it announced, else the configured one.
    pub fn new(cfg: &Config) -> Client {
        let port = daemon_info(&cfg.data_dir).map_or(cfg.port, |i| i.port);
        let token_path = cfg.token_path();
        let token = std::fs::read_to_string(&token_path)
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        Client {
            port,
            token_path,
            token,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn agent(timeout: Duration) -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(timeout))
            .user_agent(format!("memd-cli/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .into()
    }

    fn not_running(&self, e: ureq::Error) -> ClientError {
        ClientError::NotRunning {
            port: self.port,
            detail: e.to_string(),
        }
    }

    /// `GET /api/health` (no token needed).
    pub fn health(&self) -> Result<proto::HealthResponse, ClientError> {
        let mut resp = Self::agent(HEALTH_TIMEOUT)
            .get(&self.url("/api/health"))
            .call()
            .map_err(|e| self.not_running(e))?;
        if resp.status().as_u16() != 200 {
            return Err(ClientError::Api {
                status: resp.status().as_u16(),
                message: "health check failed".into(),
            });
        }
        resp.body_mut()
            .read_json()
            .map_err(|e| ClientError::BadAnswer(e.to_string()))
    }

    fn auth(&self) -> String {
        format!("Bearer {}", self.token.as_deref().unwrap_or(""))
    }

    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let resp = Self::agent(CALL_TIMEOUT)
            .get(&self.url(path))
            .header("authorization", &self.auth())
            .call()
            .map_err(|e| self.not_running(e))?;
        self.decode(resp)
    }

    pub fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        self.post_with_timeout(path, body, CALL_TIMEOUT)
    }

    pub fn post_with_timeout<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        let bytes = serde_json::to_vec(body).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        self.post_bytes(path, "application/json", &bytes, timeout)
    }

    pub fn post_bytes<T: DeserializeOwned>(
        &self,
        path: &str,
        content_type: &str,
        bytes: &[u8],
        timeout: Duration,
    ) -> Result<T, ClientError> {
        let resp = Self::agent(timeout)
            .post(&self.url(path))
            .header("authorization", &self.auth())
            .header("content-type", content_type)
            .send(bytes)
            .map_err(|e| self.not_running(e))?;
        self.decode(resp)
    }

    /// A GET whose body is streamed to `out` (export).
    pub fn get_to(&self, path: &str, out: &mut dyn std::io::Write) -> Result<u64, ClientError> {
        let mut resp = Self::agent(Duration::from_secs(3600))
            .get(&self.url(path))
            .header("authorization", &self.auth())
            .call()
            .map_err(|e| self.not_running(e))?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(
                self.error_from(status, resp.body_mut().read_to_string().unwrap_or_default())
            );
        }
        let mut reader = resp.body_mut().as_reader();
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            let n = match std::io::Read::read(&mut reader, &mut buf) {
                Ok(0) => return Ok(total),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ClientError::BadAnswer(e.to_string())),
            };
            out.write_all(&buf[..n]).map_err(ClientError::Output)?;
            total += n as u64;
        }
    }

    fn decode<T: DeserializeOwned>(
        &self,
        mut resp: ureq::http::Response<ureq::Body>,
    ) -> Result<T, ClientError> {
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(256 * 1024 * 1024)
            .read_to_string()
            .map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        if status != 200 {
            return Err(self.error_from(status, text));
        }
        serde_json::from_str(&text).map_err(|e| ClientError::BadAnswer(format!("{e}")))
    }

    fn error_from(&self, status: u16, text: String) -> ClientError {
        if status == 401 {
            return ClientError::Unauthorized {
                token_path: self.token_path.clone(),
            };
        }
        let message = serde_json::from_str::<proto::ErrorBody>(&text).map_or(text, |b| b.error);
        ClientError::Api { status, message }
    }
}

/// A client for a daemon that answers, starting `memd serve` (detached) when none does and
/// `autostart` is set.
pub fn connect(cfg: &Config, autostart: bool) -> Result<Client> {
    let client = Client::new(cfg);
    match client.health() {
        Ok(_) => return Ok(client),
        Err(e) if !autostart => return Err(e.into()),
        Err(_) => {}
    }
    eprintln!("memd: the daemon is not running; starting it (`memd serve`)");
    let pid = spawn_detached(cfg)?;
    wait_until_up(cfg, pid, START_WAIT)
}

fn spawn_detached(cfg: &Config) -> Result<u32> {
    crate::daemon::prepare_data_dir(&cfg.data_dir)?;
    let exe = std::env::current_exe().context("cannot find the memd executable")?;
    let log_path = cfg.data_dir.join("logs").join("daemon.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .ok();
    let mut cmd = Command::new(exe);
    cmd.arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.map_or_else(Stdio::null, Stdio::from))
        .current_dir("/");
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: Ctrl-C on this command must not stop the daemon.
        cmd.process_group(0);
    }
    let child = cmd.spawn().context("cannot start `memd serve`")?;
    Ok(child.id())
}

/// Waits until the daemon started as `pid` announces itself and answers.
fn wait_until_up(cfg: &Config, pid: u32, limit: Duration) -> Result<Client> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(10);
    loop {
        let client = Client::new(cfg);
        // Any daemon that answers will do: a hook may have started one at the same moment.
        if client.health().is_ok() {
            return Ok(client);
        }
        if !process_alive(pid) && daemon_info(&cfg.data_dir).is_none() {
            bail!(
                "`memd serve` exited during start-up; see {} or run `memd serve` to see why",
                cfg.data_dir.join("logs").join("daemon.log").display()
            );
        }
        if started.elapsed() >= limit {
            bail!(
                "memd did not answer within {} s after starting (pid {pid})",
                limit.as_secs()
            );
        }
        // Polling a condition with a bounded, growing interval: start-up takes 0.1-1 s.
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(200));
    }
}

/// True while a process with this pid exists (and is not a zombie we could reap).
pub fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = i32::try_from(pid) else {
            return false;
        };
        // Reap it if it is our exited child, so it does not look alive as a zombie.
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG on a pid only inspects process state.
        unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        // SAFETY: signal 0 performs only the existence and permission check.
        unsafe { libc::kill(pid, 0) == 0 }
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        false
    }
}

/// Stops the daemon of `cfg` if one answers (SIGTERM, then waits up to 10 s). Returns its pid.
pub fn stop_daemon(cfg: &Config) -> Result<Option<u32>> {
    let client = Client::new(cfg);
    let Ok(health) = client.health() else {
        return Ok(None);
    };
    let pid = health.pid;
    #[cfg(unix)]
    {
        let Ok(raw) = i32::try_from(pid) else {
            bail!("implausible daemon pid {pid}")
        };
        // SAFETY: sending SIGTERM to the pid the daemon itself reported.
        if unsafe { libc::kill(raw, libc::SIGTERM) } != 0 {
            bail!(
                "cannot stop memd (pid {pid}): {}",
                std::io::Error::last_os_error()
            );
        }
        let started = Instant::now();
        while process_alive(pid) {
            if started.elapsed() > START_WAIT {
                bail!("memd (pid {pid}) did not stop within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Some(pid))
    }
    #[cfg(not(unix))]
    bail!("stopping memd (pid {pid}) is not supported on this platform; stop it by hand")
}
