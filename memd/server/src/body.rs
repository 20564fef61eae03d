//! Request bodies in, JSON answers out.
//!
//! Owns the body extractors (a byte limit per route, a 413 that the client can read, JSON
//! decoding whose errors name the field) and the JSON answer helpers. Must never buffer more
//! than a route's limit and never answer an error without an `ErrorBody`.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use memd_engine::error::{ApiError, ErrorKind};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// An error on its way to the client.
pub struct Rejection(pub ApiError);

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        error_response(&self.0)
    }
}

impl From<ApiError> for Rejection {
    fn from(e: ApiError) -> Rejection {
        Rejection(e)
    }
}

/// A body of at most `LIMIT` bytes.
pub struct Limited<const LIMIT: usize>(pub Bytes);

impl<S: Send + Sync, const LIMIT: usize> FromRequest<S> for Limited<LIMIT> {
    type Rejection = Rejection;

    async fn from_request(req: Request, _: &S) -> Result<Self, Rejection> {
        read_limited(req, LIMIT)
            .await
            .map(Limited)
            .map_err(Rejection)
    }
}

/// A JSON body of at most `LIMIT` bytes decoded into `T`; errors name the offending field.
pub struct ApiJson<T, const LIMIT: usize>(pub T);

impl<T: DeserializeOwned, S: Send + Sync, const LIMIT: usize> FromRequest<S> for ApiJson<T, LIMIT> {
    type Rejection = Rejection;

    async fn from_request(req: Request, _: &S) -> Result<Self, Rejection> {
        let bytes = read_limited(req, LIMIT).await.map_err(Rejection)?;
        decode_json(&bytes).map(ApiJson).map_err(Rejection)
    }
}

pub(crate) async fn read_limited(req: Request, limit: usize) -> Result<Bytes, ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let mut body = req.into_body();
    if declared.is_some_and(|n| n > limit) {
        drain(body).await;
        return Err(ApiError::too_large(limit));
    }
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
    Ok(buf.freeze())
}

/// Reads and discards what the client is still sending (up to a bound), so it can read our 413
/// instead of failing on a reset connection. Nothing is kept in memory.
async fn drain(mut body: Body) {
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

/// `value` as a JSON answer with `status`.
pub fn json_response<T: Serialize>(status: u16, value: &T) -> Response {
    let bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    typed_response(status, "application/json", bytes)
}

/// `bytes` with `status` and `content_type`.
pub fn typed_response(status: u16, content_type: &'static str, bytes: Vec<u8>) -> Response {
    let mut resp = Response::new(Body::from(bytes));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// The HTTP status of an engine error: the one place where error kinds become codes.
pub fn status_of(kind: ErrorKind) -> u16 {
    match kind {
        ErrorKind::BadInput => 400,
        ErrorKind::NotFound => 404,
        ErrorKind::Conflict => 409,
        ErrorKind::TooLarge => 413,
        ErrorKind::Refused => 422,
        ErrorKind::Internal => 500,
        ErrorKind::Unavailable => 503,
        ErrorKind::StorageFull => 507,
    }
}

pub fn error_response(e: &ApiError) -> Response {
    json_response(status_of(e.kind), &e.body())
}

/// A refusal by the HTTP edge itself (401, 403, 405: not the engine's to decide), in the same
/// `ErrorBody` shape.
pub fn edge_refusal(status: u16, message: &str, field: Option<&str>) -> Response {
    let body = proto::ErrorBody {
        error: message.to_string(),
        field: field.map(str::to_string),
    };
    json_response(status, &body)
}

/// 200 with the value, or the error's status and `ErrorBody`.
pub fn respond<T: Serialize>(r: Result<T, ApiError>) -> Response {
    match r {
        Ok(v) => json_response(200, &v),
        Err(e) => error_response(&e),
    }
}
