//! The dashboard: server-rendered HTML under `/ui` on the daemon's loopback port.
//!
//! Owns the `/ui` routes, who may see them (a session cookie from a one-time login link, see
//! `session`, valid only under the dashboard's own host name `memd-<mac>.localhost`, so no other
//! local program's pages are sent it or can replace it) and the checks every state-changing request passes: the session, an `Origin`
//! that is exactly this daemon's, and the session's CSRF token. Pages: `memories` (list, one
//! memory, its actions), `activity` (conversations, health), `books`; `layout` is the frame and
//! `chart` the SVG charts; `assets` are embedded (no CDN: the page works offline).
//!
//! Must never take a second path to change memory: every action calls the same `Core` method
//! as the HTTP API. Must never put a secret in a URL that lingers (the login code works once,
//! for a minute, and the browser is sent on to a clean URL), nor render text unescaped.

mod activity;
mod assets;
mod books;
mod chart;
mod layout;
mod memories;
pub mod session;

use crate::body::read_limited;
use axum::Router;
use axum::extract::{FromRequest, FromRequestParts, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use memd_engine::error::ApiError;
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// What the dashboard's pages share: the engine, the token its host name derives from, and the
/// logins. Its own state, so the dashboard needs nothing from the HTTP front door that mounts it.
pub struct Dashboard {
    pub core: Arc<memd_engine::core::Core>,
    token: String,
    pub sessions: session::Sessions,
}

impl Dashboard {
    pub fn new(core: Arc<memd_engine::core::Core>, token: String) -> Dashboard {
        let ttl = std::time::Duration::from_secs(core.cfg.ui.link_ttl_secs);
        Dashboard {
            core,
            token,
            sessions: session::Sessions::new(ttl),
        }
    }

    /// The dashboard's own host name (`memd_client::proof::dashboard_host`).
    pub fn dashboard_host(&self) -> String {
        memd_client::proof::dashboard_host(&self.token)
    }
}

type App = State<Arc<Dashboard>>;
/// Form posts are short (an edited memory is at most the content limit plus its fields).
const FORM_MAX_BYTES: usize = 256 * 1024;

/// Every `/ui` route. The HTTP guard has checked Host and Origin already; pages check the
/// session themselves (through [`Viewer`]) and posts their CSRF token (through [`Checked`]).
pub fn router() -> Router<Arc<Dashboard>> {
    Router::new()
        .route("/ui", get(|| async { Redirect::to("/ui/memories") }))
        .route("/ui/", get(|| async { Redirect::to("/ui/memories") }))
        .route("/ui/login", get(login))
        .route("/ui/logout", post(logout))
        .route("/ui/assets/{name}", get(assets::serve))
        .route("/ui/memories", get(memories::list))
        .route("/ui/memory/{id}", get(memories::one))
        .route("/ui/memory/{id}/edit", post(memories::edit))
        .route("/ui/memory/{id}/archive", post(memories::archive))
        .route("/ui/memory/{id}/delete", post(memories::delete))
        .route("/ui/memory/{id}/share", post(memories::share))
        .route("/ui/conversations", get(activity::conversations))
        .route("/ui/conversations/{id}", get(activity::conversation))
        .route("/ui/health", get(activity::health))
        .route("/ui/books", get(books::list))
        .route("/ui/books/upload", post(books::upload))
        .route("/ui/books/remove", post(books::remove))
}

/// The answer for a link, an expired one included: no secret stays in the address bar.
#[derive(serde::Deserialize)]
struct LoginQuery {
    #[serde(default)]
    code: String,
}

async fn login(State(s): App, headers: HeaderMap, Query(q): Query<LoginQuery>) -> Response {
    // A cookie set for `127.0.0.1` would reach every program serving pages there: sessions
    // start only under the dashboard's own host name, before the code is spent.
    if !at_dashboard_host(&headers, &s) {
        return elsewhere();
    }
    let Some(session) = s.sessions.redeem(&q.code) else {
        return layout::refusal(
            StatusCode::FORBIDDEN,
            "This login link was already used or has expired. Run `memd ui` for a new one.",
        );
    };
    let cookie = session::cookie(s.core.cfg.port, &session, session::ABSOLUTE_TTL);
    // A page that moves on by itself rather than a redirect: when the link was opened from a
    // local file (`memd ui`), a redirect would still count as that file's navigation, a
    // cross-site one, and the browser would not send the SameSite=Strict cookie with it.
    let mut resp = layout::moving_on("/ui/memories");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

async fn logout(State(s): App, Checked(viewer, _): Checked<NoFields>) -> Response {
    s.sessions.end(&viewer.session);
    let gone = session::cookie(s.core.cfg.port, "", std::time::Duration::ZERO);
    let mut resp = layout::refusal(StatusCode::OK, "Logged out. Run `memd ui` to log in again.");
    if let Ok(v) = HeaderValue::from_str(&gone) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// A logged-in browser, with its session's CSRF token for the forms on the page.
#[derive(Clone)]
pub struct Viewer {
    session: String,
    pub csrf: String,
}

impl FromRequestParts<Arc<Dashboard>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, s: &Arc<Dashboard>) -> Result<Viewer, Response> {
        if !at_dashboard_host(&parts.headers, s) {
            return Err(elsewhere());
        }
        // Every cookie of the session's name counts, not only the first: a cookie another page
        // managed to set beside ours must not log the user out (cookie tossing).
        let found = session_cookies(&parts.headers, s.core.cfg.port).find_map(|session| {
            s.sessions
                .touch(&session)
                .map(|csrf| Viewer { session, csrf })
        });
        found.ok_or_else(|| {
            layout::refusal(
                StatusCode::UNAUTHORIZED,
                "Not logged in. Run `memd ui` (or `memd ui --print-url`) to open the dashboard.",
            )
        })
    }
}

/// Whether the request reached the dashboard under its own host name (any port: a forwarded
/// port keeps the name).
fn at_dashboard_host(headers: &HeaderMap, s: &Dashboard) -> bool {
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|h| crate::guard::host_name(h).eq_ignore_ascii_case(&s.dashboard_host()))
}

/// The answer for `/ui` under any other name: no session lives there.
fn elsewhere() -> Response {
    layout::refusal(
        StatusCode::UNAUTHORIZED,
        "Not logged in: the dashboard lives at the address `memd ui` opens. Run `memd ui` (or \
         `memd ui --print-url`).",
    )
}

fn session_cookies(headers: &HeaderMap, port: u16) -> impl Iterator<Item = String> + '_ {
    let name = session::cookie_name(port);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(move |(n, _)| *n == name)
        .map(|(_, value)| value.to_string())
        .take(16)
}

/// A state-changing request that passed every check, with its form fields decoded into `T`:
/// a live session, an `Origin` naming this very daemon (not merely some loopback page: another
/// local server is same-site, so the cookie alone proves nothing), and the session's CSRF token
/// in the form's `csrf` field or the `x-memd-csrf` header.
pub struct Checked<T>(pub Viewer, pub T);

/// A post with no fields but the token.
#[derive(serde::Deserialize)]
pub struct NoFields {}

impl<T: DeserializeOwned> FromRequest<Arc<Dashboard>> for Checked<T> {
    type Rejection = Response;

    async fn from_request(req: Request, s: &Arc<Dashboard>) -> Result<Checked<T>, Response> {
        let (mut parts, body) = req.into_parts();
        let viewer = Viewer::from_request_parts(&mut parts, s).await?;
        same_origin(&parts.headers)?;
        let header_token = parts
            .headers
            .get("x-memd-csrf")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = read_limited(Request::from_parts(parts, body), FORM_MAX_BYTES)
            .await
            .map_err(|e| layout::error_page(&e))?;
        let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&bytes)
            .map_err(|e| layout::error_page(&ApiError::bad_request(format!("form: {e}"))))?;
        let form_token = pairs
            .iter()
            .find(|(k, _)| k == "csrf")
            .map(|(_, v)| v.clone());
        let presented = form_token.or(header_token).unwrap_or_default();
        if !session::same(&presented, &viewer.csrf) {
            return Err(layout::refusal(
                StatusCode::FORBIDDEN,
                "Refused: this request did not come from a dashboard page (missing or wrong CSRF token).",
            ));
        }
        let fields = serde_urlencoded::from_bytes(&bytes)
            .map_err(|e| layout::error_page(&ApiError::bad_request(format!("form field: {e}"))))?;
        Ok(Checked(viewer, fields))
    }
}

/// An upload: the same checks as [`Checked`] (the token in the `x-memd-csrf` header, as a
/// script sends it), and the raw body of at most `LIMIT` bytes.
pub struct CheckedBytes<const LIMIT: usize>(pub Viewer, pub bytes::Bytes);

impl<const LIMIT: usize> FromRequest<Arc<Dashboard>> for CheckedBytes<LIMIT> {
    type Rejection = Response;

    async fn from_request(req: Request, s: &Arc<Dashboard>) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let viewer = Viewer::from_request_parts(&mut parts, s).await?;
        same_origin(&parts.headers)?;
        let presented = parts
            .headers
            .get("x-memd-csrf")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !session::same(presented, &viewer.csrf) {
            return Err(crate::body::edge_refusal(
                403,
                "missing or wrong CSRF token",
                Some("x-memd-csrf"),
            ));
        }
        let bytes = read_limited(Request::from_parts(parts, body), LIMIT)
            .await
            .map_err(|e| crate::body::error_response(&e))?;
        Ok(CheckedBytes(viewer, bytes))
    }
}

/// `Origin` must be present and name this daemon exactly (`http://` + the Host it was reached
/// at); browsers send it on every POST.
#[allow(clippy::result_large_err)] // a refusal page, built once per refused request
fn same_origin(headers: &HeaderMap) -> Result<(), Response> {
    let get = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    match (get(header::ORIGIN), get(header::HOST)) {
        (Some(origin), Some(host)) if origin == format!("http://{host}") => Ok(()),
        _ => Err(layout::refusal(
            StatusCode::FORBIDDEN,
            "Refused: a dashboard change must come from the dashboard's own page (Origin).",
        )),
    }
}

/// Mints a login link for `POST /api/ui/login-link` (bearer-authenticated like the rest of
/// the API), under the dashboard's own host name.
pub fn login_link(s: &Dashboard) -> proto::UiLoginLinkResponse {
    let port = s.core.cfg.port;
    let host = s.dashboard_host();
    proto::UiLoginLinkResponse {
        url: format!(
            "http://{host}:{port}/ui/login?code={}",
            s.sessions.mint_code()
        ),
        expires_in_secs: s.sessions.code_ttl().as_secs(),
    }
}

/// Runs `read` on a blocking thread: the pages that read the trace ledger parse up to 8 MiB
/// (30-40 ms at the cap, `memd-bench --only dashboard`), which must not hold up hook calls on
/// the async threads.
pub async fn off_thread<T: Send + 'static>(
    s: &Arc<Dashboard>,
    read: impl FnOnce(&memd_engine::core::Core) -> T + Send + 'static,
) -> Result<T, Response> {
    let core = s.core.clone();
    tokio::task::spawn_blocking(move || read(&core))
        .await
        .map_err(|_| layout::error_page(&ApiError::internal("the page's read failed")))
}

/// A failed engine call as a page (the same status and message the API would give).
pub fn answer<T>(result: Result<T, ApiError>, ok: impl FnOnce(T) -> Response) -> Response {
    match result {
        Ok(v) => ok(v),
        Err(e) => layout::error_page(&e),
    }
}

/// `303 See Other` to `to`: after a post, the browser shows a page it can reload safely.
pub fn see_other(to: &str) -> Response {
    let mut resp = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}
