//! The CLI's connection to a running daemon: where it listens, the token, typed calls.
//!
//! Finding, starting and calling the daemon are `memd-client`'s (shared with the hooks and the
//! MCP bridge); this module adds what a person at a terminal needs: errors that say what to do,
//! the long timeouts of ingest and export, and starting the daemon for a command (stopping it
//! is `lifecycle`'s). Must never print the token.

use anyhow::{Context, Result, anyhow};
use memd_client::{CallError, Location};
use memd_engine::config::Config;
use proto::paths::DaemonInfo;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::time::Duration;

const USER_AGENT: &str = concat!("memd-cli/", env!("CARGO_PKG_VERSION"));

/// How long a command waits for a daemon it started.
pub const START_WAIT: Duration = Duration::from_secs(10);
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);
/// Ordinary calls; ingest and import use longer ones.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Exports stream for as long as they take, within reason.
const STREAM_TIMEOUT: Duration = Duration::from_secs(3600);
/// Largest JSON answer the CLI reads (a full search or import report).
const RESPONSE_LIMIT: u64 = 256 * 1024 * 1024;

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

/// The CLI's connection to the daemon of one data dir: `memd-client` plus user-facing errors.
pub struct Client {
    pub port: u16,
    inner: memd_client::Client,
}

/// The location of the daemon `cfg` describes. Unlike the hooks and the MCP bridge, the CLI
/// ignores `MEMD_URL`: it stops and purges daemons and sends the token, so it talks only to the
/// loopback daemon of this data dir, never to an endpoint left in the environment.
pub fn location(cfg: &Config) -> Location {
    Location {
        data_dir: cfg.data_dir.clone(),
        configured_port: cfg.port,
        url_override: None,
    }
}

/// Reads `<data dir>/daemon.json` if a daemon wrote one.
pub fn daemon_info(data_dir: &Path) -> Option<DaemonInfo> {
    memd_client::location::read_daemon_info(data_dir)
}

impl Client {
    /// Where the daemon of `cfg` should be: the port it announced, else the configured one.
    pub fn new(cfg: &Config) -> Client {
        Client::from_inner(memd_client::Client::at(location(cfg), USER_AGENT))
    }

    fn from_inner(inner: memd_client::Client) -> Client {
        Client {
            port: inner.location.port(),
            inner: inner.with_response_limit(RESPONSE_LIMIT),
        }
    }

    /// `GET /api/health` (no token needed).
    pub fn health(&self) -> Result<proto::HealthResponse, ClientError> {
        self.inner
            .health(HEALTH_TIMEOUT)
            .map_err(|e| self.explain(e))
    }

    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.inner
            .get(path, CALL_TIMEOUT)
            .map_err(|e| self.explain(e))
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
        self.inner
            .post(path, body, timeout)
            .map_err(|e| self.explain(e))
    }

    pub fn post_bytes<T: DeserializeOwned>(
        &self,
        path: &str,
        content_type: &str,
        bytes: &[u8],
        timeout: Duration,
    ) -> Result<T, ClientError> {
        self.inner
            .post_bytes(path, content_type, bytes, timeout)
            .map_err(|e| self.explain(e))
    }

    /// A GET whose body is streamed to `out` (export).
    pub fn get_to(&self, path: &str, out: &mut dyn std::io::Write) -> Result<u64, ClientError> {
        self.inner
            .get_to(path, out, STREAM_TIMEOUT)
            .map_err(|e| self.explain(e))
    }

    fn explain(&self, error: CallError) -> ClientError {
        match error {
            CallError::Unreachable { detail, .. } | CallError::Transport(detail) => {
                ClientError::NotRunning {
                    port: self.port,
                    detail,
                }
            }
            CallError::Timeout => ClientError::NotRunning {
                port: self.port,
                detail: "no answer in time".into(),
            },
            CallError::Status { code: 401, .. } => ClientError::Unauthorized {
                token_path: self.inner.location.token_path(),
            },
            CallError::Status { code, message } => ClientError::Api {
                status: code,
                message,
            },
            CallError::BadResponse(m) | CallError::Config(m) => ClientError::BadAnswer(m),
            CallError::Output(e) => ClientError::Output(e),
            impostor @ CallError::Impostor(_) => ClientError::BadAnswer(impostor.to_string()),
        }
    }
}

/// A client for a daemon that answers, starting `memd serve` (detached) when none does and
/// `autostart` is set.
pub fn connect(cfg: &Config, autostart: bool) -> Result<Client> {
    let client = Client::new(cfg);
    match client.health() {
        Ok(_) => return Ok(client),
        // Start memd only when nothing answers: a process that answers without proving it is
        // memd holds the port, and a second memd could not bind it anyway.
        Err(e)
            if !autostart
                || !client.inner.location.managed()
                || !matches!(e, ClientError::NotRunning { .. }) =>
        {
            return Err(e.into());
        }
        Err(_) => {}
    }
    eprintln!("memd: the daemon is not running; starting it (`memd serve`)");
    start(cfg)
}

/// Starts `memd serve` detached for `cfg` and waits (up to [`START_WAIT`]) until it answers.
pub fn start(cfg: &Config) -> Result<Client> {
    // This also creates `logs/` (0700), where the detached daemon's stderr goes.
    for note in memd_server::daemon::prepare_data_dir(&cfg.data_dir)? {
        eprintln!("memd: {note}");
    }
    let exe = std::env::current_exe().context("cannot find the memd executable")?;
    let mut inner = memd_client::Client::at(location(cfg), USER_AGENT);
    let mut child = memd_client::start::spawn_detached(&exe, &inner.location)
        .context("cannot start `memd serve`")?;
    memd_client::start::wait_ready(&mut inner, &mut child, START_WAIT).map_err(|e| anyhow!(e))?;
    Ok(Client::from_inner(inner))
}
