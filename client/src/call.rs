//! Calls to the daemon: authenticated JSON over loopback, with errors a caller can act on.
//!
//! Owns the HTTP agent (no proxy, statuses returned as answers), the bearer header, response
//! size limits and the mapping of transport failures to [`CallError`]. Must never retry (hooks
//! run under a short deadline), never follow a proxy, never put the token in a message, and
//! never send the token or a body before the process on the port proved it is this user's memd
//! (`handshake`: on every connection the agent opens).

use crate::location::Location;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// Largest answer read into memory unless the caller raises it.
pub const DEFAULT_RESPONSE_LIMIT: u64 = 4 * 1024 * 1024;

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// Nothing listens (connection refused or no route): memd is not running there.
    Unreachable {
        url: String,
        detail: String,
    },
    Timeout,
    /// memd answered with a non-2xx status; `message` is its `error` field when it sent one.
    Status {
        code: u16,
        message: String,
    },
    /// memd answered 2xx but the body is not the expected JSON.
    BadResponse(String),
    /// Any other transport failure (reset, protocol error, ...).
    Transport(String),
    /// The endpoint could not be determined (e.g. `MEMD_PORT` is not a port).
    Config(String),
    /// Writing a streamed answer to the caller's sink failed.
    Output(std::io::Error),
    /// Something answers on memd's port but cannot prove it is this user's memd (another
    /// program bound the port, or memd's token file is missing). Nothing was sent to it.
    Impostor(String),
}

impl CallError {
    /// Stable one-word kind (the hooks log it; tests match on it).
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Unreachable { .. } => "unreachable",
            CallError::Timeout => "timeout",
            CallError::Status { .. } => "http_status",
            CallError::BadResponse(_) => "bad_response",
            CallError::Transport(_) => "transport",
            CallError::Config(_) => "config",
            CallError::Output(_) => "output",
            CallError::Impostor(_) => "impostor",
        }
    }

    /// A description without anything the other side sent (for logs that must never hold
    /// text from elsewhere: a process squatting on the port could answer anything).
    pub fn summary(&self) -> String {
        match self {
            CallError::Status { code, .. } => format!("memd answered HTTP {code}"),
            CallError::BadResponse(_) => "memd answer not understood".into(),
            other => other.to_string(),
        }
    }

    pub fn is_unreachable(&self) -> bool {
        matches!(self, CallError::Unreachable { .. })
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable { url, detail } => {
                write!(f, "memd not reachable at {url}: {detail}")
            }
            CallError::Timeout => write!(f, "memd did not answer in time"),
            CallError::Status { code, message } if message.is_empty() => {
                write!(f, "memd answered HTTP {code}")
            }
            CallError::Status { code, message } => write!(f, "memd answered {code}: {message}"),
            CallError::BadResponse(e) => write!(f, "memd answer not understood: {e}"),
            CallError::Transport(e) => write!(f, "transport error: {e}"),
            CallError::Config(e) => write!(f, "cannot locate memd: {e}"),
            CallError::Output(e) => write!(f, "cannot write the output: {e}"),
            CallError::Impostor(why) => write!(
                f,
                "the process on memd's port is not this user's memd ({why}); nothing was sent to it"
            ),
        }
    }
}

impl std::error::Error for CallError {}

/// A connection to one located daemon.
#[derive(Debug, Clone)]
pub struct Client {
    pub location: Location,
    base_url: String,
    token: Option<String>,
    agent: ureq::Agent,
    response_limit: u64,
    /// The token every new connection's proof is checked with (shared with the agent).
    key: crate::handshake::ProofKey,
}

impl Client {
    /// Finds this user's daemon (see [`Location::resolve`]). `user_agent` names the caller.
    pub fn locate(user_agent: &str) -> Result<Client, CallError> {
        let location = Location::resolve().map_err(CallError::Config)?;
        Ok(Client::at(location, user_agent))
    }

    /// A client for an already resolved location.
    pub fn at(location: Location, user_agent: &str) -> Client {
        let token = location.token();
        let key = std::sync::Arc::new(std::sync::Mutex::new(token.clone()));
        Client {
            base_url: location.base_url(),
            token,
            location,
            agent: loopback_agent(user_agent, None, key.clone()),
            response_limit: DEFAULT_RESPONSE_LIMIT,
            key,
        }
    }

    /// The token the agent checks proofs with; an agent made with it (see [`loopback_agent`])
    /// follows this client's refreshes.
    pub fn proof_key(&self) -> crate::handshake::ProofKey {
        self.key.clone()
    }

    /// Raises (or lowers) the largest answer read into memory.
    pub fn with_response_limit(mut self, bytes: u64) -> Client {
        self.response_limit = bytes;
        self
    }

    /// Re-reads the port (a restarted daemon may listen elsewhere) and the token.
    pub fn refresh(&mut self) {
        self.base_url = self.location.base_url();
        self.token = self.location.token();
        *self.key.lock().unwrap_or_else(|p| p.into_inner()) = self.token.clone();
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// The bearer token, when the daemon has written one.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The `authorization` header value, when a token is known.
    pub fn bearer(&self) -> Option<String> {
        self.token.as_ref().map(|t| format!("Bearer {t}"))
    }

    /// `GET /api/health` (no token needed), from a process that proved it is memd: callers
    /// take a healthy answer as "memd runs here".
    pub fn health(&self, timeout: Duration) -> Result<proto::HealthResponse, CallError> {
        let response = self
            .agent
            .get(self.url("/api/health"))
            .config()
            .timeout_global(Some(timeout))
            .build()
            .call()
            .map_err(|e| self.classify(e))?;
        self.decode(response)
    }

    /// POSTs `body` as JSON and decodes the JSON answer, within `timeout`.
    pub fn post<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        path: &str,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        let bytes = serde_json::to_vec(body).map_err(|e| CallError::Config(e.to_string()))?;
        self.post_bytes(path, "application/json", &bytes, timeout)
    }

    /// POSTs raw bytes of `content_type` and decodes the JSON answer.
    pub fn post_bytes<Resp: DeserializeOwned>(
        &self,
        path: &str,
        content_type: &str,
        bytes: &[u8],
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        let mut request = self
            .agent
            .post(self.url(path))
            .config()
            .timeout_global(Some(timeout.max(Duration::from_millis(1))))
            .build()
            .header("content-type", content_type);
        if let Some(bearer) = self.bearer() {
            request = request.header("authorization", bearer);
        }
        let response = request.send(bytes).map_err(|e| self.classify(e))?;
        self.decode(response)
    }

    /// GET with the token, decoding the JSON answer.
    pub fn get<Resp: DeserializeOwned>(
        &self,
        path: &str,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        let response = self.authed_get(path, timeout)?;
        self.decode(response)
    }

    /// GET with the token, streaming the body to `out`; returns the bytes written.
    pub fn get_to(
        &self,
        path: &str,
        out: &mut dyn std::io::Write,
        timeout: Duration,
    ) -> Result<u64, CallError> {
        let mut response = self.authed_get(path, timeout)?;
        let status = response.status().as_u16();
        if status != 200 {
            let text = response.body_mut().read_to_string().unwrap_or_default();
            return Err(status_error(status, &text));
        }
        let mut reader = response.body_mut().as_reader();
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            let n = match std::io::Read::read(&mut reader, &mut buf) {
                Ok(0) => return Ok(total),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // The daemon answered and then the stream broke: a bad answer, not "not running".
                Err(e) => return Err(CallError::BadResponse(e.to_string())),
            };
            out.write_all(&buf[..n]).map_err(CallError::Output)?;
            total += n as u64;
        }
    }

    fn authed_get(
        &self,
        path: &str,
        timeout: Duration,
    ) -> Result<ureq::http::Response<ureq::Body>, CallError> {
        let mut request = self
            .agent
            .get(self.url(path))
            .config()
            .timeout_global(Some(timeout))
            .build();
        if let Some(bearer) = self.bearer() {
            request = request.header("authorization", bearer);
        }
        request.call().map_err(|e| self.classify(e))
    }

    fn decode<Resp: DeserializeOwned>(
        &self,
        mut response: ureq::http::Response<ureq::Body>,
    ) -> Result<Resp, CallError> {
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(self.response_limit)
            .read_to_vec();
        let bytes = match body {
            Ok(bytes) => bytes,
            Err(e) => {
                return Err(match self.classify(e) {
                    CallError::Transport(m) => CallError::BadResponse(m),
                    other => other,
                });
            }
        };
        if !(200..300).contains(&status) {
            return Err(status_error(status, &String::from_utf8_lossy(&bytes)));
        }
        serde_json::from_slice(&bytes).map_err(|e| CallError::BadResponse(e.to_string()))
    }

    /// Maps a ureq error to a [`CallError`].
    pub fn classify(&self, error: ureq::Error) -> CallError {
        use std::io::ErrorKind;
        let unreachable = |detail: String| CallError::Unreachable {
            url: self.base_url.clone(),
            detail,
        };
        if let Some(why) = crate::handshake::not_memd(&error) {
            return CallError::Impostor(why.to_string());
        }
        match error {
            ureq::Error::Timeout(_) => CallError::Timeout,
            ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
                unreachable(error.to_string())
            }
            ureq::Error::Io(e) => match e.kind() {
                ErrorKind::ConnectionRefused
                | ErrorKind::AddrNotAvailable
                | ErrorKind::NotFound => unreachable(e.to_string()),
                ErrorKind::TimedOut | ErrorKind::WouldBlock => CallError::Timeout,
                _ => CallError::Transport(e.to_string()),
            },
            ureq::Error::Json(e) => CallError::BadResponse(e.to_string()),
            other => CallError::Transport(other.to_string()),
        }
    }
}

/// A non-2xx answer, with memd's `{"error": ...}` message when the body has one.
fn status_error(code: u16, body: &str) -> CallError {
    let message = serde_json::from_str::<proto::ErrorBody>(body)
        .map(|b| b.error)
        .unwrap_or_else(|_| body.trim().chars().take(500).collect());
    CallError::Status { code, message }
}

/// The agent for daemon calls: no proxy (loopback), statuses are answers, honest User-Agent,
/// and every connection it opens proven with `key` before anything is sent on it.
/// `read_timeout` bounds each read (long-lived streams); per-call deadlines are set per request.
pub fn loopback_agent(
    user_agent: &str,
    read_timeout: Option<Duration>,
    key: crate::handshake::ProofKey,
) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_recv_response(read_timeout)
        .timeout_per_read(read_timeout)
        .user_agent(user_agent)
        .build();
    ureq::Agent::with_parts(
        config,
        crate::handshake::connector(key, user_agent),
        ureq::unversioned::resolver::DefaultResolver::default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_connection_is_unreachable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let dir = tempfile::tempdir().unwrap();
        let mut location = Location::new(dir.path().to_path_buf(), port);
        location.url_override = None;
        let client = Client::at(location, "test");
        let result: Result<serde_json::Value, _> = client.post(
            "/api/health",
            &serde_json::json!({}),
            Duration::from_secs(2),
        );
        assert!(
            matches!(result, Err(CallError::Unreachable { .. })),
            "{result:?}"
        );
    }

    #[test]
    fn status_errors_carry_the_daemons_message() {
        match status_error(422, r#"{"error":"limit must be 1-100"}"#) {
            CallError::Status { code, message } => {
                assert_eq!(code, 422);
                assert_eq!(message, "limit must be 1-100");
            }
            other => panic!("{other:?}"),
        }
    }
}
