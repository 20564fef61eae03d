//! The frame every dashboard page shares, and the headers that keep it to itself.
//!
//! Owns the page skeleton (skip link, navigation, main landmark, the logout form), error and
//! refusal pages, the security headers (no caching, no referrer to other sites, a Content-Security-Policy
//! that allows only this origin's own files, no framing) and small formatting helpers. Must
//! never build HTML by string concatenation: maud escapes every interpolated value.

use super::Viewer;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use memd_engine::error::ApiError;

/// The navigation's entries: path, label.
const NAV: [(&str, &str); 4] = [
    ("/ui/memories", "Memories"),
    ("/ui/conversations", "Conversations"),
    ("/ui/health", "Health"),
    ("/ui/books", "Books"),
];

/// A whole page. `active` is the navigation entry it belongs to.
pub fn page(title: &str, active: &str, viewer: &Viewer, body: Markup) -> Response {
    let doc = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="csrf" content=(viewer.csrf);
                title { (title) " · memd" }
                link rel="stylesheet" href="/ui/assets/ui.css";
                script src="/ui/assets/ui.js" defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    span.brand { "memd" }
                    nav aria-label="Sections" {
                        ul {
                            @for (path, label) in NAV {
                                li {
                                    @if path == active {
                                        a href=(path) aria-current="page" { (label) }
                                    } @else {
                                        a href=(path) { (label) }
                                    }
                                }
                            }
                        }
                    }
                    form.logout method="post" action="/ui/logout" {
                        (csrf_field(viewer))
                        button type="submit" { "Log out" }
                    }
                }
                main #main tabindex="-1" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    respond(StatusCode::OK, doc)
}

/// The hidden field every form carries.
pub fn csrf_field(viewer: &Viewer) -> Markup {
    html! { input type="hidden" name="csrf" value=(viewer.csrf); }
}

/// A page with only a message (not logged in, refused, logged out).
pub fn refusal(status: StatusCode, message: &str) -> Response {
    let doc = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "memd" }
                link rel="stylesheet" href="/ui/assets/ui.css";
            }
            body {
                main #main.message {
                    h1 { "memd" }
                    p role="alert" { (message) }
                }
            }
        }
    };
    respond(status, doc)
}

/// A page that sends the browser on to `to` (a fixed path of ours) at once.
pub fn moving_on(to: &'static str) -> Response {
    let doc = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content=(format!("0; url={to}"));
                title { "memd" }
                link rel="stylesheet" href="/ui/assets/ui.css";
            }
            body { main #main.message { p { "Logged in. " a href=(to) { "Continue" } } } }
        }
    };
    respond(StatusCode::OK, doc)
}

/// An engine error as a page with the API's status and message (the field named, as there).
pub fn error_page(e: &ApiError) -> Response {
    let status =
        StatusCode::from_u16(crate::body::status_of(e.kind)).unwrap_or(StatusCode::BAD_REQUEST);
    let message = match &e.field {
        Some(f) => format!("{} (field: {f})", e.message),
        None => e.message.clone(),
    };
    refusal(status, &message)
}

fn respond(status: StatusCode, doc: Markup) -> Response {
    let mut resp = (status, doc.into_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    harden(resp)
}

/// The headers every `/ui` answer carries.
pub fn harden(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Not `no-referrer`: with it, browsers send `Origin: null` on the page's own form posts,
    // and the origin check needs the real one. Other sites get no referrer either way.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    resp
}

/// `2026-11-26 14:03` (UTC) of Unix milliseconds.
pub fn when(ms: i64) -> String {
    let s = memd_engine::clock::rfc3339(ms);
    format!(
        "{} {}",
        s.get(..10).unwrap_or(""),
        s.get(11..16).unwrap_or("")
    )
}

/// The first `max` characters of `text` on one line, with an ellipsis when cut.
pub fn snippet(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

/// A percent-encoded path segment (ids are `[a-z_0-9]`, conversation ids are anything).
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_cut_on_characters_and_flatten_lines() {
        assert_eq!(snippet("a\n b\tc", 10), "a b c");
        assert_eq!(snippet("ééééé", 3), "ééé…");
    }

    #[test]
    fn segments_escape_everything_but_unreserved() {
        assert_eq!(segment("conv/1 ?x"), "conv%2F1%20%3Fx");
        assert_eq!(segment("memory_bank_0a"), "memory_bank_0a");
    }

    #[test]
    fn interpolated_text_is_escaped() {
        let m = html! { p { ("<script>alert(1)</script>") } };
        assert_eq!(
            m.into_string(),
            "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"
        );
    }
}
