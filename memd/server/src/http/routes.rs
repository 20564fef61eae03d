//! The route table: method + path → handler. Handlers decode, call the core, encode.

use super::{Body, Server, error_response, json_response, read_json, respond};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use memd_engine::context;
use memd_engine::error::ApiError;
use proto::limits::{BODY_MAX_BYTES, INGEST_MAX_BYTES};

pub async fn route(server: &Server, req: Request<Incoming>) -> Response<Body> {
    let core = &server.core;
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    macro_rules! post {
        ($limit:expr, |$body:ident| $call:expr) => {
            match read_json($limit, req).await {
                Ok($body) => respond($call.await),
                Err(e) => error_response(&e),
            }
        };
    }
    match (&method, path.as_str()) {
        (&Method::GET, "/openapi.json") => super::openapi::response(),
        (&Method::GET, "/api/health") => json_response(200, &core.health()),
        (&Method::GET, "/api/stats") => json_response(200, &memd_engine::status::stats(core)),
        (&Method::POST, "/api/search") => post!(BODY_MAX_BYTES, |b| core.search(&b)),
        (&Method::POST, "/api/hooks/get-context") => {
            post!(BODY_MAX_BYTES, |b| context::get_context(core, &b))
        }
        (&Method::POST, "/api/hooks/stop") => post!(BODY_MAX_BYTES, |b| context::stop(core, &b)),
        (&Method::POST, "/api/record-outcome") => {
            post!(BODY_MAX_BYTES, |b| context::record_outcome(core, &b))
        }
        (&Method::POST, "/api/record-response") => {
            post!(BODY_MAX_BYTES, |b| core.record_response(&b))
        }
        (&Method::POST, "/api/memory-bank/add") => {
            post!(BODY_MAX_BYTES, |b| core.memory_bank_add(&b))
        }
        (&Method::POST, "/api/memory-bank/update") => {
            post!(BODY_MAX_BYTES, |b| core.memory_bank_update(&b))
        }
        (&Method::POST, "/api/memory-bank/archive") => {
            post!(BODY_MAX_BYTES, |b| core.memory_bank_archive(&b))
        }
        (&Method::POST, "/api/sidecar/report") => {
            post!(BODY_MAX_BYTES, |b| core.sidecar_report(&b))
        }
        (&Method::POST, "/api/ingest") => post!(INGEST_MAX_BYTES + 64 * 1024, |b| core.ingest(&b)),
        (&Method::GET, "/api/books") => respond(core.books()),
        (&Method::GET, "/api/export") => super::transfer::export_response(core, req.uri().query()),
        (&Method::POST, "/api/import") => super::transfer::import_response(core, req).await,
        (&Method::POST, "/api/remove-book") => post!(BODY_MAX_BYTES, |b| core.remove_book(&b)),
        (_, p) if p.starts_with("/api/") => error_response(&ApiError {
            status: if known_path(p) { 405 } else { 404 },
            message: format!("no route for {method} {p}"),
            field: None,
        }),
        _ => error_response(&ApiError::not_found(format!(
            "no route for {method} {path}"
        ))),
    }
}

fn known_path(p: &str) -> bool {
    [
        "/api/health",
        "/api/stats",
        "/api/search",
        "/api/hooks/get-context",
        "/api/hooks/stop",
        "/api/record-outcome",
        "/api/record-response",
        "/api/memory-bank/add",
        "/api/memory-bank/update",
        "/api/memory-bank/archive",
        "/api/sidecar/report",
        "/api/ingest",
        "/api/books",
        "/api/remove-book",
    ]
    .contains(&p)
}
