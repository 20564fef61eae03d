//! The dashboard's static files, compiled into the binary.
//!
//! Owns serving `ui.css` and `ui.js` from `assets/` (embedded with `include_str!`: no CDN, no
//! external font, nothing fetched at run time). Must never serve a file that is not in the
//! list (no path from the request reaches the file system).

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const FILES: [(&str, &str, &str); 2] = [
    (
        "ui.css",
        "text/css; charset=utf-8",
        include_str!("assets/ui.css"),
    ),
    (
        "ui.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/ui.js"),
    ),
];

pub async fn serve(Path(name): Path<String>) -> Response {
    let Some((_, mime, body)) = FILES.iter().find(|(n, _, _)| *n == name) else {
        return super::layout::refusal(StatusCode::NOT_FOUND, "No such file.");
    };
    let mut resp = (StatusCode::OK, *body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Loopback makes refetching free, and an upgraded binary's files are never shadowed.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}
