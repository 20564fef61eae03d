//! `GET /api/export` and `POST /api/import`: JSON Lines in and out of the engine.
//!
//! Owns only the HTTP side (content type; the import body limit is the route's); what a line
//! means is the engine's `export` module. Must never hold more than that limit in memory.

use crate::body::{error_response, json_response, typed_response};
use axum::response::Response;
use memd_engine::core::Core;
use memd_engine::export::{collection_param, dry_run_param};

/// `GET /api/export?collection=C`: JSON Lines, `application/x-ndjson`.
pub fn export_response(core: &Core, query: Option<&str>) -> Response {
    match collection_param(query).and_then(|c| core.export(c)) {
        Ok(body) => typed_response(200, "application/x-ndjson", body),
        Err(e) => error_response(&e),
    }
}

/// `POST /api/import[?dry_run=true]` with a JSON Lines body (its limit is the route's).
pub async fn import_response(core: &Core, query: Option<&str>, body: &[u8]) -> Response {
    match core.import(body, dry_run_param(query)).await {
        Ok(r) => json_response(200, &r),
        Err(e) => error_response(&e),
    }
}
