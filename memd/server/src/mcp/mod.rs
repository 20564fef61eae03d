//! The agent's tools over MCP: streamable HTTP at `/mcp` inside the daemon (clients that only
//! launch stdio servers use `memd mcp`, a bridge in the CLI crate that relays to this endpoint).
//!
//! Owns the MCP server (rmcp's `StreamableHttpService` mounted in memd's HTTP server), the tool
//! catalog and its descriptions, the live sessions (`sessions`: idle expiry and a cap), and
//! per-session recall (what was shown, when to remind the agent to audit its memory). Speaks both protocol eras: the `initialize` handshake with
//! `Mcp-Session-Id` (what Claude Code and Cursor use today) and the stateless 2026-07-28 style.
//! Must never answer a bad argument with a protocol error (tool errors are `isError` results the
//! model can read), never outlive the daemon's shutdown, and never keep the core alive: it holds
//! only a weak reference so the daemon can take the store back and write its final snapshot.
//!
//! Authentication, Host and Origin are checked by `http` before a request reaches [`call`];
//! rmcp checks Host and Origin again (defence in depth, same loopback-only lists).

mod args;
mod format;
mod recall;
mod sessions;
mod text;
mod tools;

pub use recall::AUDIT_EVERY;

use http_body_util::combinators::BoxBody;
use hyper::{Method, Request, Response, StatusCode};
use memd_engine::core::Core;
use memd_engine::shutdown::Shutdown;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::sync::{Arc, Weak};
use tools::{Caller, ToolName};

/// The `/mcp` endpoint: cheap to clone, one per daemon.
pub type HttpService = StreamableHttpService<MemdTools, sessions::BoundedSessions>;

/// Origins a browser page may call `/mcp` from: loopback pages only, any port.
const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
const SESSION_HEADER: &str = "mcp-session-id";

/// State shared by every session's handler.
struct Shared {
    core: Weak<Core>,
    recall: recall::Recall,
}

/// One MCP session's handler (rmcp makes one per session, or per stateless request).
#[derive(Clone)]
pub struct MemdTools {
    shared: Arc<Shared>,
}

/// Builds the `/mcp` service. Sessions end when `shutdown` fires.
pub fn http_service(core: Arc<Core>, shutdown: Shutdown) -> HttpService {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(true)
        .with_allowed_hosts(LOOPBACK_HOSTS)
        .with_allowed_origins(LOOPBACK_ORIGINS)
        .with_max_request_body_bytes(proto::limits::BODY_MAX_BYTES);
    let cancel = config.cancellation_token.clone();
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            shutdown.wait().await;
            cancel.cancel();
        });
    }
    let shared = Arc::new(Shared {
        core: Arc::downgrade(&core),
        recall: recall::Recall::default(),
    });
    StreamableHttpService::new(
        move || {
            Ok(MemdTools {
                shared: shared.clone(),
            })
        },
        Arc::new(sessions::BoundedSessions::default()),
        config,
    )
}

/// Serves one `/mcp` request (already authenticated by `http`).
pub async fn call<B>(
    svc: HttpService,
    req: Request<B>,
) -> Response<BoxBody<bytes::Bytes, std::convert::Infallible>>
where
    B: hyper::body::Body + Send + 'static,
    B::Error: std::fmt::Display,
{
    let is_delete = req.method() == Method::DELETE;
    let mut resp = svc.handle(req).await;
    // Ending a session has no body to wait for; clients expect 200 or 204 rather than 202.
    if is_delete && resp.status() == StatusCode::ACCEPTED {
        *resp.status_mut() = StatusCode::NO_CONTENT;
    }
    resp
}

/// The MCP session a request belongs to (none for stateless 2026-07-28 requests).
fn session_of(ctx: &RequestContext<RoleServer>) -> Option<String> {
    let parts = ctx.extensions.get::<http::request::Parts>()?;
    let id = parts.headers.get(SESSION_HEADER)?.to_str().ok()?.trim();
    (!id.is_empty() && id.len() <= 128).then(|| id.to_string())
}

/// The directory `memd mcp` relays with each request (see `proto::paths::PROJECT_DIR_HEADER`).
fn project_dir_of(ctx: &RequestContext<RoleServer>) -> Option<String> {
    let parts = ctx.extensions.get::<http::request::Parts>()?;
    let raw = parts
        .headers
        .get(proto::paths::PROJECT_DIR_HEADER)?
        .to_str()
        .ok()?;
    proto::paths::decode_header_dir(raw.trim()).filter(|d| !d.is_empty())
}

fn tool_result(text: String, is_error: bool) -> CallToolResponse {
    let content = vec![ContentBlock::text(text)];
    if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
    .into()
}

impl ServerHandler for MemdTools {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("memd", env!("CARGO_PKG_VERSION")).with_title("memd"),
            )
            .with_instructions(text::INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::catalog().to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::catalog().iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = ToolName::parse(&request.name) else {
            let known: Vec<&str> = ToolName::ALL.iter().map(|t| t.as_str()).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}; memd offers {}",
                    request.name,
                    known.join(", ")
                ),
                None,
            ));
        };
        let Some(core) = self.shared.core.upgrade() else {
            return Ok(tool_result(
                "memd is shutting down; try again in a moment.".into(),
                true,
            ));
        };
        let session = session_of(&ctx);
        let project_dir = project_dir_of(&ctx);
        let project = match core.current_project("project_dir", project_dir.as_deref(), None) {
            Ok(Some(p)) => Some(p),
            Ok(None) => core.latest_project(),
            Err(e) => return Ok(tool_result(e.message, true)),
        };
        let caller = Caller {
            core: &core,
            recall: &self.shared.recall,
            session: session.as_deref(),
            project_dir,
            project,
        };
        Ok(
            match tools::run(tool, &caller, request.arguments.unwrap_or_default()).await {
                Ok(text) => tool_result(text, false),
                Err(text) => tool_result(text, true),
            },
        )
    }
}
