//! The HTTP front door: a hyper 1 server on 127.0.0.1 that routes JSON requests to the core.
//!
//! Owns sockets, request limits, authentication, JSON decoding with field-naming errors and the
//! route table. Must never bind anything but loopback, never send CORS headers, and never turn
//! a bad request into a 500: handlers return typed `ApiError`s that become 4xx answers.

pub mod guard;
mod openapi;
mod routes;
mod transfer;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use memd_engine::core::Core;
use memd_engine::error::ApiError;
use memd_engine::shutdown::Shutdown;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::net::TcpListener;

pub type Body = BoxBody<Bytes, Infallible>;

/// Shared by every connection.
pub struct Server {
    pub core: Arc<Core>,
    pub token: String,
    pub mcp: Option<crate::mcp::HttpService>,
}

/// Accepts connections until `shutdown` fires, then waits for in-flight requests.
pub async fn serve(
    listener: TcpListener,
    server: Arc<Server>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.wait() => break,
        };
        let (stream, _) = match accepted {
            Ok(a) => a,
            Err(e) => {
                eprintln!("memd: accept failed: {e}");
                continue;
            }
        };
        let server = server.clone();
        let conn_shutdown = shutdown.clone();
        tasks.spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(handle(&server, req).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = conn_shutdown.wait() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    Ok(())
}

async fn handle(server: &Server, req: Request<Incoming>) -> Response<Body> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    if !guard::host_ok(header("host")) || !guard::origin_ok(header("origin")) {
        return error_response(&ApiError {
            status: 403,
            message: "forbidden: memd only answers loopback clients".into(),
            field: None,
        });
    }
    let path = req.uri().path().to_string();
    if path != "/api/health" && !guard::token_ok(header("authorization"), &server.token) {
        return error_response(&ApiError {
            status: 401,
            message: "unauthorized".into(),
            field: None,
        });
    }
    if path == "/mcp" || path.starts_with("/mcp/") {
        return match &server.mcp {
            Some(svc) => crate::mcp::call(svc.clone(), req).await,
            None => error_response(&ApiError::not_found("MCP is not enabled")),
        };
    }
    let started = std::time::Instant::now();
    let resp = routes::route(server, req).await;
    if path.starts_with("/api/hooks/") {
        server.core.note_hook_call(
            &path,
            started.elapsed().as_micros() as u64,
            resp.status().as_u16(),
        );
    }
    resp
}

/// Reads a JSON body of at most `limit` bytes; errors name the offending field.
pub async fn read_json<T: DeserializeOwned>(
    limit: usize,
    req: Request<Incoming>,
) -> Result<T, ApiError> {
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        drain(req.into_body()).await;
        return Err(ApiError::too_large(limit));
    }
    let mut body = req.into_body();
    let mut buf = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(ApiError::bad_request("request body could not be read"));
        };
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                drain(body).await;
                return Err(ApiError::too_large(limit));
            }
            buf.extend_from_slice(&data);
        }
    }
    decode_json(&buf)
}

/// Reads and discards what the client is still sending (up to a bound), so it can read our 413
/// instead of failing on a reset connection. Nothing is kept in memory.
async fn drain(mut body: Incoming) {
    const DRAIN_MAX: usize = 64 * 1024 * 1024;
    let mut seen = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            seen += data.len();
            if seen > DRAIN_MAX {
                return;
            }
        }
    }
}

pub fn decode_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "request body is empty; send a JSON object",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            ApiError::bad_request(format!("invalid JSON body: {inner}"))
        } else {
            ApiError::bad(&path, format!("invalid value for {path}: {inner}"))
        }
    })
}

pub fn json_response<T: Serialize>(status: u16, value: &T) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(bytes)).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

pub fn error_response(e: &ApiError) -> Response<Body> {
    json_response(e.status, &e.body())
}

pub fn respond<T: Serialize>(r: Result<T, ApiError>) -> Response<Body> {
    match r {
        Ok(v) => json_response(200, &v),
        Err(e) => error_response(&e),
    }
}
