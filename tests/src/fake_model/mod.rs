//! A local stand-in for a remote model API, for end-to-end tests that run a real agent client.
//!
//! Owns the shared core: a real HTTP/1.1 server on loopback (one thread per connection), the
//! log of every request it received, and the scripted agent every wire API plays ([`agent`]).
//! Each wire API is a module that turns a request into the agent's view of the conversation
//! and the agent's [`agent::Action`] into that API's answer, errors included, in its own
//! format: [`anthropic`] (Messages, SSE streaming: Claude Code), [`responses`] (OpenAI
//! Responses API, SSE: Codex CLI), [`chat_completions`] (OpenAI Chat Completions, SSE:
//! OpenCode) and [`gemini`] (Gemini `generateContent`, SSE: Gemini CLI). Must never listen beyond 127.0.0.1 or call out anywhere.

pub mod agent;
pub mod anthropic;
pub mod chat_completions;
pub mod gemini;
pub mod http;
pub mod responses;

use serde_json::Value;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// One request as the client sent it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent (`/v1/messages?beta=true`).
    pub target: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Value::Null` when empty or not JSON).
    pub body: Value,
    /// The body's size in bytes.
    pub body_bytes: usize,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// The whole body as text, for "did the model see X" assertions.
    pub fn text(&self) -> String {
        self.body.to_string()
    }
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    Json {
        status: u16,
        body: Value,
    },
    /// `text/event-stream`: each `(event name, data)` as one SSE event.
    Sse {
        events: Vec<(String, Value)>,
    },
}

/// A model API: how its requests map onto the agent and how its answers look.
pub trait WireApi: Send + Sync + 'static {
    fn reply(&self, req: &Request) -> Reply;
}

/// A running fake model server; stops when dropped.
pub struct FakeModel {
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    log: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl FakeModel {
    /// Serves `api` on a free loopback port.
    pub fn start(api: impl WireApi) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let base_url = format!("http://{}", listener.local_addr().expect("local addr"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let api: Arc<dyn WireApi> = Arc::new(api);
        let accept = {
            let (log, stop) = (log.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (api, log) = (api.clone(), log.clone());
                    std::thread::spawn(move || http::serve_connection(stream, &*api, &log));
                }
            })
        };
        FakeModel {
            base_url,
            log,
            stop,
            accept: Some(accept),
        }
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The requests whose path is `path`.
    pub fn requests_to(&self, path: &str) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.path() == path)
            .collect()
    }

    /// Appends every logged request to `MEMD_FAKE_MODEL_LOG` (JSON lines), when it is set: what
    /// a client really sent, for a person reading a failure or measuring a request.
    pub fn dump_if_asked(&self, label: &str) {
        let Some(path) = std::env::var_os("MEMD_FAKE_MODEL_LOG") else {
            return;
        };
        let mut text = String::new();
        for r in self.requests() {
            let line = serde_json::json!({"label": label, "target": r.target, "bytes": r.body_bytes,
                "headers": r.headers, "body": r.body});
            text.push_str(&line.to_string());
            text.push('\n');
        }
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(text.as_bytes());
        }
    }

    /// Forgets the log (between turns of one scenario).
    pub fn clear(&self) {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let addr = self.base_url.trim_start_matches("http://").to_string();
        let _ = std::net::TcpStream::connect(addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}
