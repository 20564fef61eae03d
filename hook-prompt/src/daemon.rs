//! Talking to the memd daemon: where it listens, the bearer token, and one JSON POST.
//!
//! Resolution: `MEMD_URL` overrides the whole base URL (tests, unusual setups); otherwise
//! `http://127.0.0.1:<port>` with the port from `<data dir>/daemon.json`, else `MEMD_PORT` or the
//! default. The token is `<data dir>/token` when that file exists. This module must never send
//! anything but loopback/`MEMD_URL` traffic, never use a proxy, and never retry (the deadline is short).

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::PathBuf;
use std::time::Duration;

/// Environment variable that replaces the base URL (e.g. `http://127.0.0.1:39999`).
pub const URL_ENV: &str = "MEMD_URL";
/// Largest daemon answer read into memory.
const MAX_RESPONSE_BYTES: u64 = 4 * 1024 * 1024;

/// A located daemon endpoint.
#[derive(Debug, Clone)]
pub struct Daemon {
    pub base_url: String,
    pub token: Option<String>,
    /// True when the endpoint came from the conventions (not `MEMD_URL`), so a hook may start
    /// memd itself when nothing answers.
    pub managed: bool,
    pub data_dir: Option<PathBuf>,
    agent: ureq::Agent,
}

/// Why a daemon call failed.
#[derive(Debug)]
pub enum CallError {
    /// Nothing listens (connection refused or no route): memd is not running.
    Unreachable(String),
    Timeout,
    /// memd answered with a non-2xx status.
    Status(u16),
    /// memd answered 2xx but the body is not the expected JSON.
    BadResponse(String),
    /// Any other transport failure (reset, protocol error, ...).
    Transport(String),
    /// The endpoint could not be determined (e.g. `MEMD_PORT` is not a port).
    Config(String),
}

impl CallError {
    /// Stable `kind` for the hook log.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Unreachable(_) => "unreachable",
            CallError::Timeout => "timeout",
            CallError::Status(_) => "http_status",
            CallError::BadResponse(_) => "bad_response",
            CallError::Transport(_) => "transport",
            CallError::Config(_) => "config",
        }
    }

    pub fn message(&self) -> String {
        match self {
            CallError::Unreachable(e) => format!("memd not reachable: {e}"),
            CallError::Timeout => "memd did not answer in time".into(),
            CallError::Status(code) => format!("memd answered HTTP {code}"),
            CallError::BadResponse(e) => format!("memd answer not understood: {e}"),
            CallError::Transport(e) => format!("transport error: {e}"),
            CallError::Config(e) => format!("cannot locate memd: {e}"),
        }
    }
}

impl Daemon {
    /// Finds the daemon from the environment and the data dir.
    pub fn locate() -> Result<Daemon, CallError> {
        let data_dir = proto::paths::data_dir();
        let token = data_dir
            .as_ref()
            .and_then(|d| read_token(&d.join(proto::paths::TOKEN_FILE)));
        let (base_url, managed) = match std::env::var(URL_ENV).ok().filter(|u| !u.trim().is_empty())
        {
            Some(url) => (url.trim().trim_end_matches('/').to_string(), false),
            None => (
                format!("http://127.0.0.1:{}", port(data_dir.as_ref())?),
                true,
            ),
        };
        Ok(Daemon {
            base_url,
            token,
            managed,
            data_dir,
            agent: loopback_agent(),
        })
    }

    /// POSTs `body` as JSON to `path` and decodes the JSON answer, within `timeout`.
    pub fn post<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        path: &str,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        let bytes = serde_json::to_vec(body).map_err(|e| CallError::Config(e.to_string()))?;
        let mut request = self
            .agent
            .post(format!("{}{path}", self.base_url))
            .config()
            .timeout_global(Some(timeout.max(Duration::from_millis(1))))
            .build()
            .header("content-type", "application/json");
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = request.send(&bytes[..]).map_err(classify)?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(CallError::Status(status));
        }
        response
            .into_body()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_json::<Resp>()
            .map_err(|e| match classify(e) {
                CallError::Transport(msg) => CallError::BadResponse(msg),
                other => other,
            })
    }
}

impl Daemon {
    /// Logs a failed call; when nothing listens on a conventional endpoint, starts memd so it is
    /// ready by the next turn (this turn goes on without it).
    pub fn note_failure(&self, error: &CallError) {
        let mut message = error.message();
        if let (CallError::Unreachable(_), true, Some(dir)) =
            (error, self.managed, self.data_dir.as_ref())
        {
            let outcome = crate::spawn::start_memd_detached(dir);
            message = format!("{message}; {}", outcome.describe());
        }
        crate::log::failure(error.kind(), &message);
    }
}

/// The agent for daemon calls: no proxy (loopback), status codes returned, honest User-Agent.
fn loopback_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .user_agent(format!("memd-hook/{}", crate::VERSION))
        .build()
        .into()
}

fn port(data_dir: Option<&PathBuf>) -> Result<u16, CallError> {
    if let Some(info) = data_dir.and_then(|d| read_daemon_info(&d.join(proto::paths::DAEMON_FILE)))
    {
        return Ok(info.port);
    }
    proto::paths::port_from_env().ok_or_else(|| CallError::Config("MEMD_PORT is not a port".into()))
}

fn read_daemon_info(path: &std::path::Path) -> Option<proto::paths::DaemonInfo> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The token file's first line, if the file exists and is not empty.
pub fn read_token(path: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let token = text.lines().next()?.trim();
    (!token.is_empty()).then(|| token.to_string())
}

/// Maps a ureq error to the hook's categories.
pub fn classify(error: ureq::Error) -> CallError {
    use std::io::ErrorKind;
    match error {
        ureq::Error::Timeout(_) => CallError::Timeout,
        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
            CallError::Unreachable(error.to_string())
        }
        ureq::Error::Io(e) => match e.kind() {
            ErrorKind::ConnectionRefused | ErrorKind::AddrNotAvailable | ErrorKind::NotFound => {
                CallError::Unreachable(e.to_string())
            }
            ErrorKind::TimedOut | ErrorKind::WouldBlock => CallError::Timeout,
            _ => CallError::Transport(e.to_string()),
        },
        ureq::Error::Json(e) => CallError::BadResponse(e.to_string()),
        other => CallError::Transport(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_the_trimmed_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        assert_eq!(read_token(&path), None);
        std::fs::write(&path, "  s3cret \nignored\n").unwrap();
        assert_eq!(read_token(&path).as_deref(), Some("s3cret"));
        std::fs::write(&path, "\n").unwrap();
        assert_eq!(read_token(&path), None);
    }

    #[test]
    fn refused_connection_is_unreachable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let daemon = Daemon {
            base_url: format!("http://127.0.0.1:{port}"),
            token: None,
            managed: false,
            data_dir: None,
            agent: loopback_agent(),
        };
        let result: Result<serde_json::Value, _> = daemon.post(
            "/api/health",
            &serde_json::json!({}),
            Duration::from_secs(2),
        );
        assert!(
            matches!(result, Err(CallError::Unreachable(_))),
            "{result:?}"
        );
    }
}
