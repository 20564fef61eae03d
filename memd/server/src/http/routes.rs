//! The route table: method + path → handler, and the guard in front of all of them.
//!
//! Handlers decode (with the route's body limit), call the core, encode. The guard answers 403
//! for non-loopback Host/Origin and 401 without the token (everything but `/api/health`),
//! and records hook latencies. Must never let a request reach a handler unguarded.

use super::Server;
use super::body::{ApiJson, Limited, error_response, json_response, respond};
use axum::Router;
use axum::extract::{RawQuery, Request, State};
use axum::http::{Method, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use memd_engine::context;
use memd_engine::error::ApiError;
use memd_engine::export::IMPORT_MAX_BYTES;
use proto::limits::{BODY_MAX_BYTES, INGEST_MAX_BYTES};
use proto::*;
use std::sync::Arc;
use tower_http::trace::TraceLayer;

type App = State<Arc<Server>>;
/// Ingest carries a document of up to INGEST_MAX_BYTES plus its JSON framing.
const INGEST_BODY_MAX: usize = INGEST_MAX_BYTES + 64 * 1024;

/// Every route, guarded.
pub fn router(server: Arc<Server>) -> Router {
    Router::new()
        .route("/openapi.json", get(super::openapi::response))
        .route("/api/health", get(health))
        .route("/api/stats", get(stats))
        .route("/api/search", post(search))
        .route("/api/hooks/get-context", post(get_context))
        .route("/api/hooks/stop", post(stop))
        .route("/api/record-outcome", post(record_outcome))
        .route("/api/record-response", post(record_response))
        .route("/api/memory-bank/add", post(memory_bank_add))
        .route("/api/memory-bank/update", post(memory_bank_update))
        .route("/api/memory-bank/archive", post(memory_bank_archive))
        .route("/api/sidecar/report", post(sidecar_report))
        .route("/api/ingest", post(ingest))
        .route("/api/books", get(books))
        .route("/api/remove-book", post(remove_book))
        .route("/api/export", get(export))
        .route("/api/import", post(import))
        .route("/mcp", any(mcp))
        .route("/mcp/{*rest}", any(mcp))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(server.clone(), guard))
        // One span per request; with MEMD_LOG=debug a line with status and latency. Headers
        // (the token) and bodies are never recorded.
        .layer(TraceLayer::new_for_http())
        .with_state(server)
}

/// Host/Origin (403), token (401), then the route; hook calls are timed for `memd status`.
async fn guard(State(server): App, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if let Some(refusal) = refusal(&server, &req, &path) {
        return error_response(&refusal);
    }
    let started = std::time::Instant::now();
    let resp = next.run(req).await;
    if path.starts_with("/api/hooks/") {
        server.core.note_hook_call(
            &path,
            started.elapsed().as_micros() as u64,
            resp.status().as_u16(),
        );
    }
    resp
}

/// Why the guard refuses `req`, if it does.
fn refusal(server: &Server, req: &Request, path: &str) -> Option<ApiError> {
    let header = |name: header::HeaderName| req.headers().get(name).and_then(|v| v.to_str().ok());
    if !super::guard::host_ok(header(header::HOST))
        || !super::guard::origin_ok(header(header::ORIGIN))
    {
        return Some(ApiError {
            status: 403,
            message: "forbidden: memd only answers loopback clients".into(),
            field: None,
        });
    }
    if path != "/api/health"
        && !super::guard::token_ok(header(header::AUTHORIZATION), &server.token)
    {
        return Some(ApiError {
            status: 401,
            message: "unauthorized".into(),
            field: None,
        });
    }
    None
}

async fn not_found(method: Method, uri: Uri) -> Response {
    error_response(&ApiError::not_found(format!(
        "no route for {method} {}",
        uri.path()
    )))
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    error_response(&ApiError {
        status: 405,
        message: format!("no route for {method} {}", uri.path()),
        field: None,
    })
}

async fn health(State(s): App) -> Response {
    json_response(200, &s.core.health())
}

async fn stats(State(s): App) -> Response {
    json_response(200, &memd_engine::status::stats(&s.core))
}

async fn search(State(s): App, ApiJson(b): ApiJson<SearchRequest, BODY_MAX_BYTES>) -> Response {
    respond(s.core.search(&b).await)
}

async fn get_context(
    State(s): App,
    ApiJson(b): ApiJson<GetContextRequest, BODY_MAX_BYTES>,
) -> Response {
    respond(context::get_context(&s.core, &b).await)
}

async fn stop(State(s): App, ApiJson(b): ApiJson<StopRequest, BODY_MAX_BYTES>) -> Response {
    respond(context::stop(&s.core, &b).await)
}

async fn record_outcome(
    State(s): App,
    ApiJson(b): ApiJson<RecordOutcomeRequest, BODY_MAX_BYTES>,
) -> Response {
    respond(context::record_outcome(&s.core, &b).await)
}

async fn record_response(
    State(s): App,
    ApiJson(b): ApiJson<RecordResponseRequest, BODY_MAX_BYTES>,
) -> Response {
    respond(s.core.record_response(&b).await)
}

async fn memory_bank_add(
    State(s): App,
    ApiJson(b): ApiJson<MemoryBankAdd, BODY_MAX_BYTES>,
) -> Response {
    respond(s.core.memory_bank_add(&b).await)
}

async fn memory_bank_update(
    State(s): App,
    ApiJson(b): ApiJson<MemoryBankUpdate, BODY_MAX_BYTES>,
) -> Response {
    respond(s.core.memory_bank_update(&b).await)
}

async fn memory_bank_archive(
    State(s): App,
    ApiJson(b): ApiJson<MemoryBankArchive, BODY_MAX_BYTES>,
) -> Response {
    respond(s.core.memory_bank_archive(&b).await)
}

async fn sidecar_report(
    State(s): App,
    ApiJson(b): ApiJson<SidecarReport, BODY_MAX_BYTES>,
) -> Response {
    respond(s.core.sidecar_report(&b).await)
}

async fn ingest(State(s): App, ApiJson(b): ApiJson<IngestRequest, INGEST_BODY_MAX>) -> Response {
    respond(s.core.ingest(&b).await)
}

async fn books(State(s): App) -> Response {
    respond(s.core.books())
}

async fn remove_book(
    State(s): App,
    ApiJson(b): ApiJson<RemoveBookRequest, BODY_MAX_BYTES>,
) -> Response {
    respond(s.core.remove_book(&b).await)
}

async fn export(State(s): App, RawQuery(query): RawQuery) -> Response {
    super::transfer::export_response(&s.core, query.as_deref())
}

async fn import(State(s): App, Limited(body): Limited<IMPORT_MAX_BYTES>) -> Response {
    super::transfer::import_response(&s.core, &body).await
}

async fn mcp(State(s): App, req: Request) -> Response {
    match &s.mcp {
        Some(svc) => crate::mcp::call(svc.clone(), req).await.into_response(),
        None => error_response(&ApiError::not_found("MCP is not enabled")),
    }
}
