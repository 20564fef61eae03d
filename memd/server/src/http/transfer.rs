//! `GET /api/export` and `POST /api/import`: JSON Lines in and out of the engine.
//!
//! Owns only the HTTP side (content type, the import body limit); what a line means is the
//! engine's `export` module. Must never hold more than the limit of an import body in memory.

use super::{Body, error_response, json_response};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use memd_engine::core::Core;
use memd_engine::error::ApiError;
use memd_engine::export::{IMPORT_MAX_BYTES, collection_param};

/// `GET /api/export?collection=C`: JSON Lines, `application/x-ndjson`.
pub fn export_response(core: &Core, query: Option<&str>) -> Response<Body> {
    let body = match collection_param(query).and_then(|c| core.export(c)) {
        Ok(b) => b,
        Err(e) => return error_response(&e),
    };
    Response::builder()
        .status(200)
        .header(hyper::header::CONTENT_TYPE, "application/x-ndjson")
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_else(|_| {
            json_response(
                500,
                &serde_json::json!({"error": "cannot build the export response"}),
            )
        })
}

/// `POST /api/import` with a JSON Lines body of at most [`IMPORT_MAX_BYTES`].
pub async fn import_response(core: &Core, req: Request<Incoming>) -> Response<Body> {
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > IMPORT_MAX_BYTES) {
        return error_response(&ApiError::too_large(IMPORT_MAX_BYTES));
    }
    let body = match Limited::new(req.into_body(), IMPORT_MAX_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => return error_response(&ApiError::too_large(IMPORT_MAX_BYTES)),
    };
    match core.import(&body).await {
        Ok(r) => json_response(200, &r),
        Err(e) => error_response(&e),
    }
}
