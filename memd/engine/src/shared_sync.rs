//! The shared store's one way into the engine (issue 14): the handle `memd-pg`'s worker syncs
//! through.
//!
//! Owns the handful of operations a sync needs: who this store is there (`identity`, `enable`,
//! `set_role`), what is due to send and marking it sent (`outbox`, `sent`), how far the store's
//! changes were read and applying the next page of them (`cursor`, `received`), the worker's
//! status and wake-up bell. Each change is logged like any other (`Core::commit`), so a crash
//! at any point replays to the same state. Must never let its caller build ops or reach into
//! the state: the bookkeeping rules stay in `state::sync`, the SQL in `memd-pg`.

use crate::config::StoreConfig;
use crate::core::Core;
use crate::error::ApiError;
use crate::state::{Outbox, SharedRow, SyncOp, ops::Op};
use proto::SharedStoreStatus;
use std::sync::Arc;

/// What the engine remembers of the shared store it last synced with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Identity {
    /// This store's name there (the first half of every uid it made); `None` before the first
    /// sync.
    pub store_id: Option<String>,
    /// The database's own id (`memd_meta.database_id`) that `store_id` belongs to.
    pub database: Option<String>,
    /// The database role this store writes as.
    pub role: Option<String>,
}

/// How far the shared store's changes have been read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cursor {
    /// The change number read up to.
    pub read: i64,
    /// This store's own memories changed by others after this number are still news (below
    /// `read` while a catch-up of several pages is unfinished).
    pub news_after: i64,
}

/// The engine as the sync worker sees it. Cheap to clone.
#[derive(Clone)]
pub struct SharedSync {
    core: Arc<Core>,
}

impl SharedSync {
    pub fn new(core: Arc<Core>) -> SharedSync {
        SharedSync { core }
    }

    /// `[store]` of config.toml: where the shared store is, how often and how long to try.
    pub fn config(&self) -> &StoreConfig {
        &self.core.cfg.store
    }

    /// Publishes the worker's status (`memd status`, `memd doctor`).
    pub fn report(&self, status: SharedStoreStatus) {
        self.core.shared.report(status);
    }

    /// Returns once something was written that the shared store should see soon.
    pub async fn woken(&self) {
        self.core.shared.wake.notified().await
    }

    pub fn identity(&self) -> Identity {
        self.core.store.read(|s| {
            let sync = s.sync();
            Identity {
                store_id: sync.store_id.clone(),
                database: sync.database.clone(),
                role: sync.role.clone(),
            }
        })
    }

    /// Changes, deletions and outcome events not yet in the shared store.
    pub fn backlog(&self) -> usize {
        self.core.store.read(|s| s.backlog())
    }

    /// Starts tracking changes for the shared store as `store_id` of `database`: every local
    /// memory becomes due, memories mirrored from another database are dropped.
    pub async fn enable(&self, store_id: &str, database: &str) -> Result<(), ApiError> {
        self.log(SyncOp::Enable {
            store_id: store_id.to_string(),
            database: Some(database.to_string()),
        })
        .await
    }

    /// Records the database role this store writes as.
    pub async fn set_role(&self, role: &str) -> Result<(), ApiError> {
        self.log(SyncOp::Role {
            role: role.to_string(),
        })
        .await
    }

    /// Up to `max_rows` changed memories, the deletions and up to `max_events` outcome events
    /// that are due, read at one instant so they agree.
    pub fn outbox(&self, max_rows: usize, max_events: usize) -> Outbox {
        self.core.store.read(|s| s.outbox(max_rows, max_events))
    }

    /// The shared store committed `outbox`: each item is forgotten unless it changed since.
    pub async fn sent(&self, outbox: &Outbox) -> Result<(), ApiError> {
        self.log(SyncOp::Sent {
            memories: outbox
                .memories
                .iter()
                .map(|m| (m.key, m.revision))
                .collect(),
            deleted: outbox.deleted.clone(),
            events: outbox.events.iter().map(|e| e.0.clone()).collect(),
        })
        .await
    }

    pub fn cursor(&self) -> Cursor {
        self.core.store.read(|s| Cursor {
            read: s.sync().cursor,
            news_after: s.sync().news_after(),
        })
    }

    /// Applies `rows` read from the shared store (in change order) up to change number
    /// `cursor`; `complete` when that was the last page there was.
    pub async fn received(
        &self,
        rows: Vec<SharedRow>,
        cursor: i64,
        complete: bool,
    ) -> Result<(), ApiError> {
        self.log(SyncOp::Received {
            rows,
            cursor,
            complete,
        })
        .await
    }

    async fn log(&self, op: SyncOp) -> Result<(), ApiError> {
        self.core.commit(vec![Op::Sync(op)]).await.map(|_| ())
    }
}
