//! The hooks' view of the daemon: one JSON POST under the hook's deadline, and starting memd
//! when nothing listens.
//!
//! Finding the daemon, the token and the call itself are `memd-client`'s (the same code the CLI
//! and `memd mcp` use). This module adds the hook policy: a failed call is logged (kind and
//! message, never input text) and, when nothing listens on the conventional endpoint, memd is
//! started detached for the next turn. It must never wait for that start.

use crate::log;
pub use memd_client::CallError;
use memd_client::start::start_unless_recent;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// The located daemon.
#[derive(Debug, Clone)]
pub struct Daemon {
    client: memd_client::Client,
}

impl Daemon {
    /// Finds the daemon from the environment, config.toml and the data dir.
    pub fn locate() -> Result<Daemon, CallError> {
        let client = memd_client::Client::locate(&format!("memd-hook/{}", crate::VERSION))?;
        Ok(Daemon { client })
    }

    /// The port the daemon listens on (announced, else configured).
    pub fn port(&self) -> u16 {
        self.client.location.port()
    }

    /// POSTs `body` as JSON to `path` and decodes the JSON answer, within `timeout`.
    pub fn post<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        path: &str,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        self.client.post(path, body, timeout)
    }

    /// Logs a failed call; when nothing listens on a conventional endpoint, starts memd so it is
    /// ready by the next turn (this turn goes on without it).
    pub fn note_failure(&self, error: &CallError) {
        let mut message = error.summary();
        if error.is_unreachable() && self.client.location.managed() {
            let outcome = start_unless_recent(&self.client.location);
            message = format!("{message}; {}", outcome.describe());
        }
        log::failure(error.kind(), &message);
    }
}
