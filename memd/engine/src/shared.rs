//! The daemon's side of the shared store (issue 14): what the sync worker last reported, and
//! a bell that asks it to sync now.
//!
//! Owns the status `memd status` and `memd doctor` show. The worker itself (connecting,
//! sending, receiving) lives in the `memd-pg` crate: this module must never import a database
//! client, so a local-only daemon carries none of that in its engine.

use proto::SharedStoreStatus;
use std::sync::Mutex;

#[derive(Default)]
pub struct SharedLink {
    status: Mutex<Option<SharedStoreStatus>>,
    /// Rung after a write that the shared store should see soon (a stop, a shared fact).
    pub wake: tokio::sync::Notify,
}

impl SharedLink {
    pub fn report(&self, status: SharedStoreStatus) {
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
    }

    /// The worker's last report; `None` when no shared store is configured.
    pub fn status(&self) -> Option<SharedStoreStatus> {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
