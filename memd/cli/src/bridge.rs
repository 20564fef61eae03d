//! `memd mcp`: an MCP stdio server that relays every message to the daemon's `/mcp`.
//!
//! Owns the relay: newline-delimited JSON-RPC on stdin/stdout on one side, streamable HTTP with
//! the bearer token, `Mcp-Session-Id` and the protocol headers on the other, SSE or JSON answers
//! turned back into lines. Recovers by itself when the daemon restarts (starts it if needed and
//! replays the client's `initialize` to get a new session). Must never write anything but MCP
//! messages to stdout (diagnostics go to stderr), and never answer a request twice or not at
//! all: a request whose answer cannot be obtained gets a JSON-RPC error.
//!
//! `memd mcp --only score_response` narrows what the client sees to the named tools, each with a
//! one-line description and no server instructions: a second, always-loaded server entry whose
//! schemas cost little on every request (the full server stays registered, deferred).

use crate::launch::{self, Endpoint};
use anyhow::Context;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Longest wait for a byte from the daemon while it works on a request (SSE keep-alives arrive
/// every 15 s, so silence this long means it is gone).
const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest JSON (non-SSE) answer accepted.
const MAX_JSON_BYTES: u64 = 16 * 1024 * 1024;
/// After stdin closes, in-flight requests get this long to finish.
const DRAIN_WAIT: Duration = Duration::from_secs(5);
/// JSON-RPC codes used for answers the bridge makes up itself.
const PARSE_ERROR: i64 = -32700;
const INVALID_PARAMS: i64 = -32602;
const BRIDGE_ERROR: i64 = -32000;
const PROTOCOL_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// First protocol version whose requests carry `Mcp-Method` / `Mcp-Name` headers.
const STANDARD_HEADERS_VERSION: &str = "2026-07-28";

/// The one-line descriptions `--only` gives; a tool without one keeps the daemon's.
const SHORT_DESCRIPTIONS: [(&str, &str); 1] = [(
    "score_response",
    "Score the previous exchange when a <memd-score-required> block asks for it: the outcome, \
and memory_scores with an outcome for every id the block lists.",
)];

/// `memd mcp`: runs the bridge until stdin closes. `only`: the tools to expose (all if empty).
pub fn run_stdio_bridge(only: Vec<String>) -> anyhow::Result<()> {
    let mut endpoint = Endpoint::locate()?;
    endpoint.ensure_running()?;
    let mut bridge = Bridge::new(endpoint);
    bridge.only = (!only.is_empty()).then_some(only);
    let bridge = Arc::new(bridge);
    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading stdin")?;
        if !line.trim().is_empty() {
            bridge.clone().handle_line(&line);
        }
    }
    bridge.wait_idle(DRAIN_WAIT);
    bridge.end_session();
    Ok(())
}

/// The session the bridge holds with the daemon on the client's behalf.
#[derive(Debug, Default, Clone)]
struct Session {
    id: Option<String>,
    protocol_version: Option<String>,
    /// The client's `initialize` and `notifications/initialized`, replayed after a restart.
    initialize: Option<Value>,
    initialized: Option<Value>,
}

enum PostError {
    Unreachable(String),
    Other(String),
}

impl PostError {
    fn message(self) -> String {
        match self {
            PostError::Unreachable(m) => format!("memd is not reachable: {m}"),
            PostError::Other(m) => format!("talking to memd failed: {m}"),
        }
    }
}

struct Bridge {
    agent: ureq::Agent,
    endpoint: Mutex<Endpoint>,
    session: Mutex<Session>,
    /// Held while the session is re-established, so concurrent failures recover once.
    recovering: Mutex<()>,
    stdout: Mutex<std::io::Stdout>,
    inflight: (Mutex<usize>, Condvar),
    /// Sent as `memd-project-dir`: the tools then work in this project.
    project_dir: Option<String>,
    /// `--only`: the tools the client may list and call.
    only: Option<Vec<String>>,
}

/// Where the client started this bridge: Claude Code's `CLAUDE_PROJECT_DIR` when set, else
/// the working directory (clients start stdio servers in the workspace).
fn project_dir() -> Option<String> {
    std::env::var("CLAUDE_PROJECT_DIR")
        .ok()
        .filter(|d| !d.trim().is_empty())
        .or_else(|| {
            std::env::current_dir()
                .ok()
                .and_then(|d| d.to_str().map(str::to_string))
        })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn method_of(msg: &Value) -> Option<&str> {
    msg.get("method").and_then(Value::as_str)
}

/// The id of a request (a message with both `method` and `id`).
fn request_id(msg: &Value) -> Option<&Value> {
    method_of(msg).and(msg.get("id"))
}

fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

impl Bridge {
    fn new(endpoint: Endpoint) -> Bridge {
        Bridge {
            agent: launch::loopback_agent(Some(READ_TIMEOUT), endpoint.proof_key()),
            endpoint: Mutex::new(endpoint),
            session: Mutex::new(Session::default()),
            recovering: Mutex::new(()),
            stdout: Mutex::new(std::io::stdout()),
            inflight: (Mutex::new(0), Condvar::new()),
            project_dir: project_dir(),
            only: None,
        }
    }

    /// A `tools/call` of a tool `--only` hides: answered here, never sent to memd.
    fn refused_call(&self, msg: &Value) -> Option<Value> {
        let only = self.only.as_ref()?;
        let name = msg.pointer("/params/name").and_then(Value::as_str)?;
        let id = request_id(msg)?;
        (method_of(msg) == Some("tools/call") && !only.iter().any(|t| t == name)).then(|| {
            rpc_error(
                id,
                INVALID_PARAMS,
                &format!(
                    "unknown tool {name:?}: this memd mcp serves only {}",
                    only.join(", ")
                ),
            )
        })
    }

    /// The daemon's answer as `--only` shows it: fewer tools, short descriptions, and no
    /// instructions (the full server entry carries them).
    fn narrowed(&self, mut m: Value, msg: &Value) -> Value {
        let Some(only) = &self.only else {
            return m;
        };
        match method_of(msg) {
            Some("initialize") => {
                if let Some(result) = m.get_mut("result").and_then(Value::as_object_mut) {
                    result.remove("instructions");
                }
            }
            Some("tools/list") => {
                if let Some(tools) = m.pointer_mut("/result/tools").and_then(Value::as_array_mut) {
                    tools.retain(|t| only.iter().any(|o| t["name"] == o.as_str()));
                    for t in tools.iter_mut() {
                        let short = SHORT_DESCRIPTIONS.iter().find(|(n, _)| t["name"] == *n);
                        if let Some((_, text)) = short {
                            t["description"] = json!(text);
                        }
                    }
                }
            }
            _ => {}
        }
        m
    }

    /// Requests run on their own thread so a slow call does not hold up the next message;
    /// `initialize` and notifications keep their order (the session depends on it).
    fn handle_line(self: Arc<Self>, line: &str) {
        let msg: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                self.write(&rpc_error(
                    &Value::Null,
                    PARSE_ERROR,
                    &format!("not a JSON message: {e}"),
                ));
                return;
            }
        };
        if let Some(refusal) = self.refused_call(&msg) {
            self.write(&refusal);
            return;
        }
        if request_id(&msg).is_none() || method_of(&msg) == Some("initialize") {
            self.forward(&msg);
            return;
        }
        *lock(&self.inflight.0) += 1;
        std::thread::spawn(move || {
            self.forward(&msg);
            *lock(&self.inflight.0) -= 1;
            self.inflight.1.notify_all();
        });
    }

    fn wait_idle(&self, limit: Duration) {
        let guard = lock(&self.inflight.0);
        let _ = self.inflight.1.wait_timeout_while(guard, limit, |n| *n > 0);
    }

    /// Tells the daemon the session is over (best effort: it expires on its own anyway).
    fn end_session(&self) {
        let Some(id) = lock(&self.session).id.clone() else {
            return;
        };
        let (base, token) = self.target();
        let mut req = self
            .agent
            .delete(format!("{base}/mcp"))
            .header("mcp-session-id", &id);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let _ = req.call();
    }

    fn write(&self, msg: &Value) {
        let mut out = lock(&self.stdout);
        let written = serde_json::to_writer(&mut *out, msg)
            .map_err(std::io::Error::other)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if let Err(e) = written {
            eprintln!("memd mcp: cannot write to stdout: {e}");
        }
    }

    fn target(&self) -> (String, Option<String>) {
        let e = lock(&self.endpoint);
        (e.base_url().to_string(), e.token())
    }

    /// Sends one client message and relays what comes back; requests always get an answer.
    fn forward(&self, msg: &Value) {
        match self.exchange(msg) {
            Ok(true) => {}
            Ok(false) => {
                if let Some(id) = request_id(msg) {
                    self.write(&rpc_error(
                        id,
                        BRIDGE_ERROR,
                        "memd closed the stream before answering (it may be restarting); try again",
                    ));
                }
            }
            Err(e) => {
                eprintln!("memd mcp: {e}");
                if let Some(id) = request_id(msg) {
                    self.write(&rpc_error(id, BRIDGE_ERROR, &e));
                }
            }
        }
    }

    /// Posts `msg`, recovering once from a restarted daemon (unreachable, unknown session) or a
    /// replaced token. Ok(true) when the message was answered (or needs no answer).
    fn exchange(&self, msg: &Value) -> Result<bool, String> {
        let mut recovered = false;
        loop {
            let session = lock(&self.session).id.clone();
            match self.post(msg, session.as_deref()) {
                Err(PostError::Unreachable(_)) if !recovered => {
                    recovered = true;
                    self.recover(session.as_deref(), true)?;
                }
                Err(e) => return Err(e.message()),
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    if status == 404 && session.is_some() && !recovered {
                        recovered = true;
                        self.recover(session.as_deref(), false)?;
                    } else if status == 401 && !recovered {
                        recovered = true;
                        lock(&self.endpoint).refresh();
                    } else {
                        return self.relay(resp, msg);
                    }
                }
            }
        }
    }

    fn post(
        &self,
        msg: &Value,
        session: Option<&str>,
    ) -> Result<ureq::http::Response<ureq::Body>, PostError> {
        let (base, token) = self.target();
        let body = serde_json::to_vec(msg).map_err(|e| PostError::Other(e.to_string()))?;
        let mut req = self
            .agent
            .post(format!("{base}/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        if let Some(dir) = &self.project_dir {
            req = req.header(
                proto::paths::PROJECT_DIR_HEADER,
                proto::paths::encode_header_dir(dir),
            );
        }
        let negotiated = lock(&self.session).protocol_version.clone();
        for (name, value) in protocol_headers(msg, negotiated.as_deref()) {
            req = req.header(name, value);
        }
        req.send(&body[..]).map_err(|e| match e {
            ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
                PostError::Unreachable(e.to_string())
            }
            ureq::Error::Io(io)
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                PostError::Unreachable(io.to_string())
            }
            other => PostError::Other(other.to_string()),
        })
    }

    /// Re-establishes the session after the daemon lost it (restart). Replays the client's
    /// handshake silently: the client already has its `initialize` answer.
    fn recover(&self, stale: Option<&str>, restart: bool) -> Result<(), String> {
        let _one_at_a_time = lock(&self.recovering);
        if restart {
            let mut e = lock(&self.endpoint);
            e.ensure_running().map_err(|e| format!("{e:#}"))?;
            e.refresh();
        }
        let s = lock(&self.session).clone();
        if stale.is_none() || s.id.as_deref() != stale {
            return Ok(()); // stateless, or another thread already recovered
        }
        let Some(mut init) = s.initialize else {
            lock(&self.session).id = None;
            return Ok(());
        };
        init["id"] = json!("memd-bridge-reinitialize");
        let resp = self.post(&init, None).map_err(PostError::message)?;
        let new_id = header(&resp, "mcp-session-id");
        if resp.status().as_u16() != 200 || new_id.is_none() {
            return Err(format!(
                "memd refused to start a new session (HTTP {})",
                resp.status().as_u16()
            ));
        }
        // Drain the replayed answer without showing it to the client.
        let _ = resp.into_body().into_reader().read_to_end(&mut Vec::new());
        lock(&self.session).id = new_id.clone();
        if let Some(note) = s.initialized {
            let _ = self.post(&note, new_id.as_deref());
        }
        eprintln!("memd mcp: the daemon lost the session (restart?); a new one was opened");
        Ok(())
    }

    /// Writes the daemon's answer to stdout; Ok(true) when `msg` got its response.
    fn relay(&self, resp: ureq::http::Response<ureq::Body>, msg: &Value) -> Result<bool, String> {
        let status = resp.status().as_u16();
        let is_request = request_id(msg).is_some();
        if method_of(msg) == Some("initialize") && status == 200 {
            let mut s = lock(&self.session);
            s.id = header(&resp, "mcp-session-id");
            s.initialize = Some(msg.clone());
        }
        if method_of(msg) == Some("notifications/initialized") && (200..300).contains(&status) {
            lock(&self.session).initialized = Some(msg.clone());
        }
        let content_type = header(&resp, "content-type")
            .unwrap_or_default()
            .to_ascii_lowercase();
        if content_type.starts_with("text/event-stream") {
            return self.relay_sse(resp.into_body().into_reader(), msg);
        }
        if content_type.starts_with("application/json") {
            let bytes = resp
                .into_body()
                .with_config()
                .limit(MAX_JSON_BYTES)
                .read_to_vec()
                .map_err(|e| format!("reading memd's answer: {e}"))?;
            let value: Value = serde_json::from_slice(&bytes)
                .map_err(|e| format!("memd's answer is not JSON: {e}"))?;
            let messages = match value {
                Value::Array(items) => items,
                one => vec![one],
            };
            let mut answered = !is_request;
            for m in &messages {
                answered |= self.deliver(m, msg);
            }
            return Ok(answered);
        }
        if (200..300).contains(&status) {
            return Ok(!is_request);
        }
        let text = resp.into_body().read_to_string().unwrap_or_default();
        let text: String = text.chars().take(300).collect();
        Err(format!("memd answered HTTP {status}: {}", text.trim()))
    }

    /// Relays the events of an SSE answer as they arrive.
    fn relay_sse(&self, reader: impl Read, msg: &Value) -> Result<bool, String> {
        let mut answered = request_id(msg).is_none();
        let mut data = String::new();
        for line in BufReader::new(reader).lines() {
            let line = match line {
                Ok(l) => l,
                Err(e) if answered => {
                    eprintln!("memd mcp: event stream ended: {e}");
                    break;
                }
                Err(e) => return Err(format!("the event stream from memd broke: {e}")),
            };
            if line.is_empty() {
                answered |= self.deliver_event(&mut data, msg);
            } else if let Some(rest) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            }
            // `id:`, `event:`, `retry:` and `:` keep-alive lines carry nothing to relay.
        }
        answered |= self.deliver_event(&mut data, msg);
        Ok(answered)
    }

    fn deliver_event(&self, data: &mut String, msg: &Value) -> bool {
        let event = std::mem::take(data);
        if event.trim().is_empty() {
            return false; // priming events have no data
        }
        match serde_json::from_str::<Value>(&event) {
            Ok(m) => self.deliver(&m, msg),
            Err(e) => {
                eprintln!("memd mcp: skipping an event that is not JSON: {e}");
                false
            }
        }
    }

    /// Writes one message from the daemon; true when it is the response to `msg`.
    fn deliver(&self, m: &Value, msg: &Value) -> bool {
        let answers =
            request_id(msg).is_some_and(|id| m.get("id") == Some(id) && m.get("method").is_none());
        if answers && method_of(msg) == Some("initialize") {
            let version = m
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
            lock(&self.session).protocol_version = version;
        }
        if answers {
            self.write(&self.narrowed(m.clone(), msg));
        } else {
            self.write(m);
        }
        answers
    }
}

fn header(resp: &ureq::http::Response<ureq::Body>, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// `MCP-Protocol-Version` (from the request's own `_meta`, else the negotiated version) and,
/// from 2026-07-28 on, the `Mcp-Method` / `Mcp-Name` routing headers a stdio client does not
/// know it needs.
fn protocol_headers(msg: &Value, negotiated: Option<&str>) -> Vec<(&'static str, String)> {
    let Some(method) = method_of(msg) else {
        return negotiated
            .map(|v| vec![("mcp-protocol-version", v.to_string())])
            .unwrap_or_default();
    };
    let params = msg.get("params");
    let own = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(PROTOCOL_META_KEY))
        .and_then(Value::as_str);
    let version = match (own, method) {
        (Some(v), _) => v,
        (None, "initialize") => return Vec::new(),
        (None, _) => match negotiated {
            Some(v) => v,
            None => return Vec::new(),
        },
    };
    let mut headers = vec![("mcp-protocol-version", version.to_string())];
    if own.is_some() && version >= STANDARD_HEADERS_VERSION && request_id(msg).is_some() {
        headers.push(("mcp-method", method.to_string()));
        let name_key = match method {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
            _ => None,
        };
        let name = name_key.and_then(|k| params?.get(k)?.as_str());
        // Names outside plain printable ASCII would need base64 header encoding; memd's tool
        // names never do, and an unknown name is answered as an error either way.
        if let Some(n) =
            name.filter(|n| !n.is_empty() && n.bytes().all(|b| (0x21..=0x7e).contains(&b)))
        {
            headers.push(("mcp-name", n.to_string()));
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_requests_carry_the_negotiated_version() {
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search_memory"}});
        assert_eq!(
            protocol_headers(&call, Some("2025-11-25")),
            vec![("mcp-protocol-version", "2025-11-25".to_string())]
        );
        assert!(protocol_headers(&call, None).is_empty());
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}});
        assert!(protocol_headers(&init, Some("2025-11-25")).is_empty());
    }

    #[test]
    fn modern_requests_get_routing_headers() {
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "search_memory", "_meta": {PROTOCOL_META_KEY: "2026-07-28"}}});
        let h = protocol_headers(&call, None);
        assert!(h.contains(&("mcp-protocol-version", "2026-07-28".to_string())));
        assert!(h.contains(&("mcp-method", "tools/call".to_string())));
        assert!(h.contains(&("mcp-name", "search_memory".to_string())));
    }

    #[test]
    fn made_up_errors_keep_the_request_id() {
        let e = rpc_error(&json!("abc"), BRIDGE_ERROR, "nope");
        assert_eq!(e["id"], "abc");
        assert_eq!(e["error"]["code"], BRIDGE_ERROR);
        assert_eq!(
            request_id(&json!({"method": "notifications/initialized"})),
            None
        );
        assert_eq!(
            request_id(&json!({"id": 1, "result": {}})),
            None,
            "a client's response is not a request"
        );
    }
}
