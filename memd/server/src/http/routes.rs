//! The route table: method + path → handler, and the guard in front of all of them.
//!
//! [`operations`] lists every route once; the router and the OpenAPI document are both made
//! from it. Handlers decode (with the route's body limit), call the core, encode. The guard answers 403
//! for non-loopback Host/Origin and 401 without the token (everything but `/api/health`),
//! and records hook latencies. Must never let a request reach a handler unguarded.

use super::Server;
use super::openapi::{Operation, Payload, READ_ERRORS, WRITE_ERRORS, schema_of};
use crate::body::{ApiJson, Limited, error_response, json_response, respond, typed_response};
use axum::Router;
use axum::extract::{RawQuery, Request, State};
use axum::http::{Method, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, any, get, post};
use memd_engine::context;
use memd_engine::error::ApiError;
use memd_engine::export::{IMPORT_MAX_BYTES, ImportResponse};
use memd_engine::record::Record;
use proto::limits::{BODY_MAX_BYTES, INGEST_MAX_BYTES};
use proto::*;
use std::sync::Arc;
use tower_http::trace::TraceLayer;
use tracing::level_filters::LevelFilter;

type App = State<Arc<Server>>;
/// Ingest carries a document of up to INGEST_MAX_BYTES plus its JSON framing.
const INGEST_BODY_MAX: usize = INGEST_MAX_BYTES + 64 * 1024;

/// Every operation with its handler: the one list the router and the OpenAPI document are
/// both built from.
fn routes() -> Vec<(Operation, MethodRouter<Arc<Server>>)> {
    vec![
        (
            get_op(
                "/api/health",
                "health",
                "Liveness, version, counts (no authentication, no content).",
                json::<HealthResponse>(),
                true,
            ),
            get(health),
        ),
        (
            get_op(
                memd_client::proof::HELLO_PATH,
                "hello",
                "Proof that this is the user's memd: HMAC-SHA256 of `memd-hello:<nonce>:<address>` \
                 keyed with the token, for a client's fresh 32-hex-digit `nonce` and the address \
                 the connection reached (`127.0.0.1:<port>`; no authentication; clients send \
                 nothing else on a connection until it checks out).",
                json::<HelloResponse>(),
                true,
            ),
            get(hello),
        ),
        (
            get_op(
                "/api/stats",
                "stats",
                "Per-collection counts and scores, index, graphs, recent hook calls, sidecar state.",
                json::<StatsResponse>(),
                false,
            ),
            get(stats),
        ),
        (
            post_op::<SearchRequest, SearchResponse>(
                "/api/search",
                "search",
                "Search memories by text, recency (`days_back`) or id.",
            ),
            post(search),
        ),
        (
            post_op::<GetContextRequest, GetContextResponse>(
                "/api/hooks/get-context",
                "getContext",
                "The prompt hook: KNOWN CONTEXT for this prompt and the scoring request for the last turn.",
            ),
            post(get_context),
        ),
        (
            post_op::<StopRequest, StopResponse>(
                "/api/hooks/stop",
                "stop",
                "The stop hook: store the exchange, close the turn, say whether the sidecar must score it.",
            ),
            post(stop),
        ),
        (
            post_op::<PreCompactRequest, PreCompactResponse>(
                "/api/hooks/pre-compact",
                "preCompact",
                "Before the client compacts a conversation: store a digest of its exchanges since the last compaction.",
            ),
            post(pre_compact),
        ),
        (
            post_op::<PreToolRequest, PreToolResponse>(
                "/api/hooks/pre-tool",
                "preTool",
                "The guard before a tool runs: allow, ask or deny, with the rule and reason (learned guardrails cite a memory).",
            ),
            post(pre_tool),
        ),
        (
            post_op::<PostToolRequest, PostToolResponse>(
                "/api/hooks/post-tool",
                "postTool",
                "What a tool did (kind, ok / failed / exit code), recorded as a digest in the trace ledger.",
            ),
            post(post_tool),
        ),
        (
            post_op::<RecordOutcomeRequest, RecordOutcomeResponse>(
                "/api/record-outcome",
                "recordOutcome",
                "Score the last exchange and the memories it used (once per exchange).",
            ),
            post(record_outcome),
        ),
        (
            post_op::<RecordResponseRequest, RecordResponseResponse>(
                "/api/record-response",
                "recordResponse",
                "Store a key takeaway as a working memory.",
            ),
            post(record_response),
        ),
        (
            post_op::<MemoryBankAdd, MemoryBankResponse>(
                "/api/memory-bank/add",
                "memoryBankAdd",
                "Add a fact to the memory bank (a near-duplicate is reported, not stored twice).",
            ),
            post(memory_bank_add),
        ),
        (
            post_op::<MemoryBankUpdate, MemoryBankResponse>(
                "/api/memory-bank/update",
                "memoryBankUpdate",
                "Change a memory-bank fact; unset fields keep their value.",
            ),
            post(memory_bank_update),
        ),
        (
            post_op::<MemoryBankArchive, MemoryBankResponse>(
                "/api/memory-bank/archive",
                "memoryBankArchive",
                "Archive (soft-delete) a memory-bank fact by id or content.",
            ),
            post(memory_bank_archive),
        ),
        (
            post_op::<ShareRequest, ShareResponse>(
                "/api/share",
                "share",
                "Share a memory-bank fact or pattern with the team through the shared store, or make it private again.",
            ),
            post(share),
        ),
        (
            post_op::<DeleteMemoryRequest, DeleteMemoryResponse>(
                "/api/memory/delete",
                "deleteMemory",
                "Delete one memory of any collection for good (a teammate's shared memory only its owner can).",
            ),
            post(delete_memory),
        ),
        (
            post_op::<UiLoginLinkRequest, UiLoginLinkResponse>(
                "/api/ui/login-link",
                "uiLoginLink",
                "A one-time link (valid `ui.link_ttl_secs`, 60 s by default) that logs a browser into the dashboard at /ui.",
            ),
            post(ui_login_link),
        ),
        (
            post_op::<SidecarReport, SuccessResponse>(
                "/api/sidecar/report",
                "sidecarReport",
                "What a sidecar run tried (targets, statuses; no content).",
            ),
            post(sidecar_report),
        ),
        (
            get_op(
                "/api/projects",
                "projects",
                "Every project with memories or prompts: counts per collection and last use.",
                json::<ProjectsResponse>(),
                false,
            ),
            get(projects),
        ),
        (
            post_op::<ForgetProjectRequest, ForgetProjectResponse>(
                "/api/projects/forget",
                "forgetProject",
                "Delete every memory of one project, and its conversations' hook state (global memories stay).",
            ),
            post(forget_project),
        ),
        (
            post_op::<IngestRequest, IngestResponse>(
                "/api/ingest",
                "ingest",
                "Store a document as a book, in chunks (body limit 10 MiB + framing).",
            ),
            post(ingest),
        ),
        (
            get_op(
                "/api/books",
                "books",
                "Every book with its chunk count.",
                json::<BooksResponse>(),
                false,
            ),
            get(books),
        ),
        (
            post_op::<RemoveBookRequest, RemoveBookResponse>(
                "/api/remove-book",
                "removeBook",
                "Delete a book and its chunks.",
            ),
            post(remove_book),
        ),
        (
            get_op(
                "/api/export",
                "export",
                "Every memory (of one collection, `?collection=`) as JSON Lines, losslessly.",
                Payload::JsonLines(schema_of::<Record>),
                false,
            ),
            get(export),
        ),
        (
            Operation {
                method: "post",
                path: "/api/import",
                id: "import",
                summary: "Import JSON Lines of `Record`s (idempotent: known ids and identical contents are skipped; `?dry_run=true` counts without writing).",
                request: Payload::JsonLines(schema_of::<Record>),
                response: json::<ImportResponse>(),
                errors: WRITE_ERRORS,
                public: false,
            },
            post(import),
        ),
        (
            get_op(
                "/openapi.json",
                "openapi",
                "This document (OpenAPI 3.1).",
                Payload::AnyObject,
                false,
            ),
            get(openapi),
        ),
    ]
}

/// Every operation, as the OpenAPI document describes them.
pub fn operations() -> Vec<Operation> {
    routes().into_iter().map(|(op, _)| op).collect()
}

/// Every route, guarded.
pub fn router(server: Arc<Server>) -> Router {
    let mut router = Router::new();
    for (op, handler) in routes() {
        router = router.route(op.path, handler);
    }
    let router = router
        .merge(crate::ui::router().with_state(server.ui.clone()))
        .route("/mcp", any(mcp))
        .route("/mcp/{*rest}", any(mcp))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(server.clone(), guard));
    // With MEMD_LOG=debug, one line per request with status and latency (headers, hence the
    // token, and bodies are never recorded). Only then: with the layer always on, durable
    // ingest with 8 clients measured 11 % below the previous build (memd-bench --only ingest,
    // 5 alternating runs each), without it 5 % (3 runs; within the run-to-run spread).
    let router = if LevelFilter::current() >= LevelFilter::DEBUG {
        // The path only: a query string can hold a dashboard login code.
        router.layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
            tracing::debug_span!("request", method = %req.method(), path = %req.uri().path())
        }))
    } else {
        router
    };
    router.with_state(server)
}

/// The generated document, made at the first request for it (not at start: start-up time is
/// on the user's path, the document is not).
static OPENAPI: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

fn json<T: schemars::JsonSchema>() -> Payload {
    Payload::Json(schema_of::<T>)
}

fn get_op(
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    response: Payload,
    public: bool,
) -> Operation {
    Operation {
        method: "get",
        path,
        id,
        summary,
        request: Payload::None,
        response,
        errors: if public { &[] } else { READ_ERRORS },
        public,
    }
}

fn post_op<Req: schemars::JsonSchema, Resp: schemars::JsonSchema>(
    path: &'static str,
    id: &'static str,
    summary: &'static str,
) -> Operation {
    Operation {
        method: "post",
        path,
        id,
        summary,
        request: json::<Req>(),
        response: json::<Resp>(),
        errors: WRITE_ERRORS,
        public: false,
    }
}

/// Host/Origin (403), token (401), then the route; hook calls are timed for `memd status`.
async fn guard(State(server): App, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if let Some((status, message)) = refusal(&server, &req, &path) {
        return crate::body::edge_refusal(status, message, None);
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
fn refusal(server: &Server, req: &Request, path: &str) -> Option<(u16, &'static str)> {
    let header = |name: header::HeaderName| req.headers().get(name).and_then(|v| v.to_str().ok());
    // An absolute request target (`GET http://evil.example/…`) names an authority of its own;
    // it must be loopback as well as `Host` (hyper serves HTTP/1.1 only: no `:authority`).
    let target = req.uri().authority().map(|a| a.as_str());
    let own = server.dashboard_host();
    if !crate::guard::host_ok(header(header::HOST), &own)
        || !crate::guard::host_ok(target, &own)
        || !crate::guard::origin_ok(header(header::ORIGIN), &own)
    {
        return Some((403, "forbidden: memd only answers loopback clients"));
    }
    // The dashboard's pages check their session cookie (and posts their CSRF token) themselves.
    let dashboard = path == "/ui" || path.starts_with("/ui/");
    let public = path == "/api/health" || path == memd_client::proof::HELLO_PATH;
    if !public
        && !dashboard
        && !crate::guard::token_ok(header(header::AUTHORIZATION), &server.token)
    {
        return Some((401, "unauthorized"));
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
    let message = format!("no route for {method} {}", uri.path());
    crate::body::edge_refusal(405, &message, None)
}

async fn health(State(s): App) -> Response {
    json_response(200, &s.core.health())
}

async fn hello(
    State(s): App,
    reached: Option<axum::Extension<super::listener::Reached>>,
    RawQuery(query): RawQuery,
) -> Response {
    let nonce = query
        .as_deref()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("nonce="))
        .unwrap_or_default();
    if !memd_client::proof::nonce_ok(nonce) {
        return error_response(&ApiError::bad(
            "nonce",
            format!(
                "nonce must be {} hex digits",
                memd_client::proof::NONCE_HEX_CHARS
            ),
        ));
    }
    // Without the connection's address (a request that did not come through the listener)
    // there is nothing to bind the proof to, so none is given.
    let Some(axum::Extension(super::listener::Reached(reached))) = reached else {
        return error_response(&ApiError::internal("no connection address for the proof"));
    };
    let proof = memd_client::proof::daemon_proof(&s.token, nonce, &reached);
    json_response(200, &HelloResponse { proof })
}

async fn stats(State(s): App) -> Response {
    json_response(200, &memd_engine::status::stats(&s.core))
}

async fn search(State(s): App, ApiJson(b): ApiJson<SearchRequest, BODY_MAX_BYTES>) -> Response {
    respond(s.core.search(&b, None).await)
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

async fn pre_compact(
    State(s): App,
    ApiJson(b): ApiJson<PreCompactRequest, BODY_MAX_BYTES>,
) -> Response {
    respond(context::pre_compact(&s.core, &b).await)
}

async fn pre_tool(State(s): App, ApiJson(b): ApiJson<PreToolRequest, BODY_MAX_BYTES>) -> Response {
    respond(s.core.pre_tool(&b).await)
}

async fn post_tool(
    State(s): App,
    ApiJson(b): ApiJson<PostToolRequest, BODY_MAX_BYTES>,
) -> Response {
    respond(s.core.post_tool(&b).await)
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
    respond(s.core.record_response(&b, None).await)
}

async fn memory_bank_add(
    State(s): App,
    ApiJson(b): ApiJson<MemoryBankAdd, BODY_MAX_BYTES>,
) -> Response {
    respond(s.core.memory_bank_add(&b, None).await)
}

async fn share(State(s): App, ApiJson(b): ApiJson<ShareRequest, BODY_MAX_BYTES>) -> Response {
    respond(s.core.share(&b).await)
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
    respond(s.core.memory_bank_archive(&b, None).await)
}

async fn delete_memory(
    State(s): App,
    ApiJson(b): ApiJson<DeleteMemoryRequest, BODY_MAX_BYTES>,
) -> Response {
    respond(s.core.delete_memory(&b).await)
}

async fn ui_login_link(
    State(s): App,
    ApiJson(_): ApiJson<UiLoginLinkRequest, BODY_MAX_BYTES>,
) -> Response {
    json_response(200, &crate::ui::login_link(&s.ui))
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

async fn projects(State(s): App) -> Response {
    json_response(200, &s.core.projects())
}

async fn forget_project(
    State(s): App,
    ApiJson(b): ApiJson<ForgetProjectRequest, BODY_MAX_BYTES>,
) -> Response {
    respond(s.core.forget_project(&b).await)
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

async fn import(
    State(s): App,
    RawQuery(query): RawQuery,
    Limited(body): Limited<IMPORT_MAX_BYTES>,
) -> Response {
    super::transfer::import_response(&s.core, query.as_deref(), &body).await
}

async fn openapi() -> Response {
    let document = OPENAPI.get_or_init(|| {
        serde_json::to_vec(&super::openapi::document(&operations()))
            .unwrap_or_else(|_| b"{}".to_vec())
    });
    typed_response(200, "application/json", document.clone())
}

async fn mcp(State(s): App, req: Request) -> Response {
    match &s.mcp {
        Some(svc) => crate::mcp::call(svc.clone(), req).await.into_response(),
        None => error_response(&ApiError::not_found("MCP is not enabled")),
    }
}
