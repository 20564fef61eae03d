//! The HTTP front door: axum on 127.0.0.1, routing JSON requests to the engine's core.
//!
//! Owns the router, the guard every request passes (Host, Origin, token), body limits, JSON
//! decoding with field-naming errors, and serving until shutdown. Must never bind anything but
//! loopback, never send CORS headers, and never turn a bad request into a 500: handlers return
//! typed `ApiError`s that become 4xx answers with an `ErrorBody`.
//!
//! `routes` is the table (also the source of the OpenAPI document), `transfer` export/import,
//! `openapi` the document, `listener` the accept loop (connection cap, read timeouts). The
//! extractors and answers (`crate::body`) and who may call (`crate::guard`) sit below, shared
//! with the dashboard.

pub mod listener;
mod openapi;
mod routes;
mod transfer;

use memd_engine::core::Core;
use memd_engine::shutdown::Shutdown;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Shared by every request.
pub struct Server {
    pub core: Arc<Core>,
    pub token: String,
    pub mcp: Option<crate::mcp::HttpService>,
    /// The dashboard (its own state: it is mounted here and imports nothing from here).
    pub ui: Arc<crate::ui::Dashboard>,
}

impl Server {
    /// The dashboard's own host name (`memd_client::proof::dashboard_host`).
    pub fn dashboard_host(&self) -> String {
        memd_client::proof::dashboard_host(&self.token)
    }
}

/// Serves until `shutdown` fires, then lets in-flight requests finish (idle connections close,
/// busy ones complete their request first). See [`listener`] for the connection cap and the
/// read timeouts.
pub async fn serve(
    listener: TcpListener,
    server: Arc<Server>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let app = routes::router(server);
    listener::run(listener, app, shutdown, listener::Limits::current()).await;
    Ok(())
}
