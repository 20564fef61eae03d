//! One OpenAI-compatible endpoint: `GET {base}/models` and `POST {base}/chat/completions`.
//!
//! Owns the wire format and the mapping of HTTP outcomes to what the chain needs to decide
//! (answer, rate limit, refusal, other error). It identifies itself honestly
//! (`User-Agent: memd-sidecar/<version>`) and must never imitate another client's headers.
//! Loopback endpoints are reached without a proxy; remote ones honour the proxy environment.

use proto::SidecarTarget;
use serde_json::{Value, json};
use std::io::ErrorKind;
use std::time::Duration;

/// Completion budget; reasoning models need room before the JSON.
const MAX_TOKENS: u32 = 1024;
/// Largest answer body read.
const MAX_BODY_BYTES: u64 = 1024 * 1024;
/// Largest error body read (only searched for the refusal marker).
const MAX_ERROR_BODY_BYTES: u64 = 64 * 1024;

/// What one HTTP call produced.
#[derive(Debug)]
pub enum Reply {
    /// 2xx with a JSON body.
    Json(Value),
    /// 2xx whose body is not JSON.
    NotJson,
    /// 429, with `retry-after` in seconds when given.
    RateLimited {
        retry_after: Option<Duration>,
    },
    /// The endpoint refuses this client (403 `FreeTierError`, or 426 upgrade required).
    Refused,
    /// Any other non-2xx status.
    Status,
    Timeout,
    /// The connection was reset or closed mid-exchange.
    Reset,
    /// Nothing listens at the address.
    Unreachable,
    Transport,
}

/// A reply and the HTTP status it came with (0 when there was no response).
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub reply: Reply,
}

/// A client for one target.
pub struct Endpoint {
    agent: ureq::Agent,
    base_url: String,
    api_key: Option<String>,
}

impl Endpoint {
    pub fn new(target: &SidecarTarget) -> Endpoint {
        let base_url = target.base_url.trim().trim_end_matches('/').to_string();
        let proxy = if is_loopback_url(&base_url) {
            None
        } else {
            ureq::Proxy::try_from_env()
        };
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(proxy)
            .user_agent(format!("memd-sidecar/{}", hookrt::VERSION))
            .build()
            .into();
        Endpoint {
            agent,
            base_url,
            api_key: target.api_key.clone().filter(|k| !k.trim().is_empty()),
        }
    }

    /// Model ids from `GET {base}/models`; with `free_only`, just Zen's free ones (`*-free`,
    /// `big-pickle`). `None` on failure or when nothing fits.
    pub fn discover_models(&self, timeout: Duration, free_only: bool) -> Option<Vec<String>> {
        let mut request = self
            .agent
            .get(format!("{}/models", self.base_url))
            .config()
            .timeout_global(Some(timeout))
            .build()
            .header("accept", "application/json");
        if let Some(key) = &self.api_key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        let response = request.call().ok()?;
        if !response.status().is_success() {
            return None;
        }
        let body: Value = response
            .into_body()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_json()
            .ok()?;
        let ids: Vec<String> = body["data"]
            .as_array()?
            .iter()
            .filter_map(|m| m["id"].as_str())
            .filter(|id| !free_only || is_free_model(id))
            .map(str::to_owned)
            .collect();
        (!ids.is_empty()).then_some(ids)
    }

    /// `POST {base}/chat/completions` with a system and a user message.
    pub fn chat(&self, model: &str, system: &str, user: &str, timeout: Duration) -> Response {
        let body = json!({
            "model": model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
            "max_tokens": MAX_TOKENS,
            "stream": false,
        });
        let mut request = self
            .agent
            .post(format!("{}/chat/completions", self.base_url))
            .config()
            .timeout_global(Some(timeout.max(Duration::from_millis(1))))
            .build()
            .header("content-type", "application/json")
            .header("accept", "application/json");
        if let Some(key) = &self.api_key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        let bytes = body.to_string().into_bytes();
        match request.send(&bytes[..]) {
            Ok(response) => read_response(response),
            Err(e) => Response {
                status: 0,
                reply: classify(e),
            },
        }
    }
}

fn read_response(response: ureq::http::Response<ureq::Body>) -> Response {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after);
    let mut body = response.into_body();
    let reply = match status {
        200..=299 => match body
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_json::<Value>()
        {
            Ok(json) => Reply::Json(json),
            Err(ureq::Error::Json(_)) => Reply::NotJson,
            Err(e) => classify(e),
        },
        429 => Reply::RateLimited { retry_after },
        426 => Reply::Refused,
        403 => {
            let text = body
                .with_config()
                .limit(MAX_ERROR_BODY_BYTES)
                .lossy_utf8(true)
                .read_to_string()
                .unwrap_or_default();
            if text.contains("FreeTierError") {
                Reply::Refused
            } else {
                Reply::Status
            }
        }
        _ => Reply::Status,
    };
    Response { status, reply }
}

fn classify(error: ureq::Error) -> Reply {
    match error {
        ureq::Error::Timeout(_) => Reply::Timeout,
        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => Reply::Unreachable,
        ureq::Error::Io(e) => match e.kind() {
            ErrorKind::TimedOut | ErrorKind::WouldBlock => Reply::Timeout,
            ErrorKind::ConnectionRefused | ErrorKind::AddrNotAvailable => Reply::Unreachable,
            ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
            | ErrorKind::UnexpectedEof => Reply::Reset,
            _ => Reply::Transport,
        },
        // A connection closed before a full response reads as a protocol error.
        ureq::Error::Protocol(_) => Reply::Reset,
        _ => Reply::Transport,
    }
}

/// `retry-after` in seconds (the HTTP-date form is not used by the APIs we talk to).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(3600.0)))
}

/// Zen's free models: ids ending in `-free`, and `big-pickle`.
pub fn is_free_model(id: &str) -> bool {
    id.ends_with("-free") || id == "big-pickle"
}

/// True for `http(s)://localhost…`, `127.x.x.x` and `[::1]` URLs.
pub fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_detection() {
        assert!(is_loopback_url("http://127.0.0.1:11434/v1"));
        assert!(is_loopback_url("http://localhost:1234/v1"));
        assert!(is_loopback_url("http://[::1]:8080/v1"));
        assert!(!is_loopback_url("https://opencode.ai/zen/v1"));
        assert!(!is_loopback_url("https://user@example.com/v1"));
    }

    #[test]
    fn free_model_filter() {
        assert!(is_free_model("mimo-v2.5-free"));
        assert!(is_free_model("big-pickle"));
        assert!(!is_free_model("gpt-5-nano"));
        assert!(!is_free_model("free-but-not-suffix"));
    }

    #[test]
    fn retry_after_seconds() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2026 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }
}
