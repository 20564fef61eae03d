//! Where the stdio bridge finds the daemon, and starting the daemon when nothing answers.
//!
//! Finding the endpoint and starting `memd serve` are `memd-client`'s (the same code the hooks
//! and the CLI use: `MEMD_URL`, else the data dir from the environment or config.toml and its
//! `daemon.json`). This module adds the bridge's policy. Must never write to stdout (it belongs
//! to the MCP client) and never wait more than [`READY_WAIT`] for a start.

use anyhow::{Result, anyhow, bail};
use memd_client::{Client, start};
use std::time::Duration;

/// How long the bridge waits for a daemon it started to answer `/api/health`.
pub const READY_WAIT: Duration = Duration::from_secs(10);
const USER_AGENT: &str = concat!("memd-mcp-bridge/", env!("CARGO_PKG_VERSION"));

/// A daemon endpoint: base URL and bearer token, re-read after restarts.
#[derive(Debug, Clone)]
pub struct Endpoint {
    client: Client,
}

impl Endpoint {
    pub fn locate() -> Result<Endpoint> {
        let client = Client::locate(USER_AGENT).map_err(|e| anyhow!("{e}"))?;
        Ok(Endpoint { client })
    }

    pub fn base_url(&self) -> &str {
        self.client.base_url()
    }

    /// The token the agent from [`loopback_agent`] checks each connection's proof with.
    pub fn proof_key(&self) -> memd_client::handshake::ProofKey {
        self.client.proof_key()
    }

    pub fn token(&self) -> Option<String> {
        self.client.token().map(str::to_string)
    }

    /// Re-reads the port (a restarted daemon may listen elsewhere) and the token.
    pub fn refresh(&mut self) {
        self.client.refresh();
    }

    /// Makes sure a daemon answers, starting one if this endpoint is ours to manage.
    pub fn ensure_running(&mut self) -> Result<()> {
        // A restarted daemon may listen on another port: look before starting a second one.
        self.refresh();
        if self.client.health(Duration::from_secs(2)).is_ok() {
            return Ok(());
        }
        if !self.client.location.managed() {
            bail!(
                "memd does not answer at {} ({} is set, so it is not started here)",
                self.client.base_url(),
                memd_client::location::URL_ENV
            );
        }
        let exe = std::env::current_exe()
            .map_err(|e| anyhow!("cannot find the memd executable to start the daemon: {e}"))?;
        let mut child = start::spawn_detached(&exe, &self.client.location)
            .map_err(|e| anyhow!("cannot start `{} serve`: {e}", exe.display()))?;
        eprintln!(
            "memd mcp: started the daemon (`{} serve`, pid {})",
            exe.display(),
            child.id()
        );
        start::wait_ready(&mut self.client, &mut child, READY_WAIT).map_err(|e| anyhow!(e))
    }
}

/// The agent for daemon calls: loopback only, so no proxy; statuses are answers, not errors.
/// Every connection it opens is proven with `key` (see `memd_client::handshake`).
pub fn loopback_agent(
    read_timeout: Option<Duration>,
    key: memd_client::handshake::ProofKey,
) -> ureq::Agent {
    memd_client::call::loopback_agent(USER_AGENT, read_timeout, key)
}
