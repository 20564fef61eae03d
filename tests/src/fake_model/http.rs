//! Just enough HTTP/1.1 for the fake model servers: one request after another on a connection
//! (keep-alive), bodies by `content-length` or chunked, JSON answers with a length and SSE
//! answers that end by closing the connection. Must never panic on what a client sends: a
//! malformed request is answered 400 and the connection closed.

use super::{Reply, Request, WireApi};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Mutex;

/// Largest request body accepted (a long conversation with every tool schema is ~1 MB).
const MAX_BODY: usize = 64 * 1024 * 1024;

pub fn serve_connection(stream: TcpStream, api: &dyn WireApi, log: &Mutex<Vec<Request>>) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut out = stream;
    loop {
        let req = match read_request(&mut reader) {
            Ok(Some(req)) => req,
            Ok(None) => return,
            Err(why) => {
                let body =
                    serde_json::json!({"error": {"type": "invalid_request_error", "message": why}});
                let _ = write_json(&mut out, 400, &body, true);
                return;
            }
        };
        let reply = api.reply(&req);
        log.lock().unwrap_or_else(|p| p.into_inner()).push(req);
        let done = match reply {
            Reply::Json { status, body } => write_json(&mut out, status, &body, false).is_err(),
            Reply::Sse { events } => {
                let _ = write_sse(&mut out, &events);
                true
            }
        };
        if done {
            return;
        }
    }
}

/// The next request, `None` when the client closed the connection between requests.
fn read_request(r: &mut impl BufRead) -> Result<Option<Request>, String> {
    let mut line = String::new();
    if r.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().ok_or("empty request line")?.to_string();
    let target = parts
        .next()
        .ok_or("request line without a target")?
        .to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).map_err(|e| e.to_string())?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').ok_or("header without a colon")?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let header = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked(r)?
    } else {
        let len: usize = header("content-length")
            .map(|v| v.parse().map_err(|_| "content-length is not a number"))
            .transpose()?
            .unwrap_or(0);
        if len > MAX_BODY {
            return Err(format!("body of {len} bytes is over {MAX_BODY}"));
        }
        let mut buf = vec![0; len];
        r.read_exact(&mut buf).map_err(|e| e.to_string())?;
        buf
    };
    Ok(Some(Request {
        method,
        target,
        body_bytes: body.len(),
        body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
        headers,
    }))
}

fn read_chunked(r: &mut impl BufRead) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        r.read_line(&mut size).map_err(|e| e.to_string())?;
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
            .map_err(|_| "bad chunk size")?;
        if size == 0 {
            let mut trailer = String::new();
            r.read_line(&mut trailer).map_err(|e| e.to_string())?;
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(format!("chunked body over {MAX_BODY} bytes"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])
            .map_err(|e| e.to_string())?;
        let mut crlf = [0; 2];
        r.read_exact(&mut crlf).map_err(|e| e.to_string())?;
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Error",
    }
}

fn write_json(
    out: &mut TcpStream,
    status: u16,
    body: &serde_json::Value,
    close: bool,
) -> std::io::Result<()> {
    let body = body.to_string();
    let conn = if close { "close" } else { "keep-alive" };
    write!(
        out,
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: {conn}\r\n\r\n{body}",
        reason(status),
        body.len()
    )?;
    out.flush()
}

fn write_sse(out: &mut TcpStream, events: &[(String, serde_json::Value)]) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
    )?;
    for (event, data) in events {
        // APIs without event names (OpenAI Chat Completions, Gemini) send `data:` lines only.
        if !event.is_empty() {
            writeln!(out, "event: {event}")?;
        }
        write!(out, "data: {data}\n\n")?;
    }
    out.flush()?;
    out.shutdown(std::net::Shutdown::Both)
}
