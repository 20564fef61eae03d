//! The store handle the operations take instead of the engine: reads of the state, durable
//! commits, queued writes, and the wake-ups a write rings.
//!
//! Owns the one write path: after a commit that stores or changes a memory it wakes the
//! embedding and token-state workers, and, when a shared store is configured, the sync worker.
//! Must never hold the store's lock across an await or a model call (`read` runs a closure
//! under a short read lock) and never lose a queued write's failure (it is logged).

use super::MemState;
use super::ops::{Op, Output};
use super::signals::Signals;
use crate::error::ApiError;
use crate::record::Record;
use crate::shared::SharedLink;
use crate::store::Store;
use std::sync::Arc;

pub struct Db {
    store: Store<MemState>,
    signals: Arc<Signals>,
    /// The shared store's bell, when one is configured.
    shared: Option<Arc<SharedLink>>,
}

impl Db {
    pub fn new(
        store: Store<MemState>,
        signals: Arc<Signals>,
        shared: Option<Arc<SharedLink>>,
    ) -> Db {
        Db {
            store,
            signals,
            shared,
        }
    }

    /// Runs `f` under one short read of the state.
    pub fn read<R>(&self, f: impl FnOnce(&MemState) -> R) -> R {
        self.store.read(f)
    }

    /// The store itself: snapshots, sizes, closing.
    pub fn store(&self) -> &Store<MemState> {
        &self.store
    }

    pub fn into_store(self) -> Store<MemState> {
        self.store
    }

    pub fn signals(&self) -> &Arc<Signals> {
        &self.signals
    }

    /// Commits `ops` durably (group commit) and rings the bells the writes call for.
    pub async fn commit(&self, ops: Vec<Op>) -> Result<Vec<Output>, ApiError> {
        let out = self.store.commit_async(ops).await?;
        if out
            .iter()
            .any(|o| matches!(o, Output::Inserted { .. } | Output::Updated { .. }))
        {
            self.signals.embed.notify_one();
            self.signals.late.notify_one();
        }
        if let Some(shared) = &self.shared {
            // Durable here; the shared store should have it soon, not at the next tick.
            shared.wake.notify_one();
        }
        Ok(out)
    }

    pub async fn commit_one(&self, op: Op) -> Result<Output, ApiError> {
        self.commit(vec![op])
            .await?
            .pop()
            .ok_or_else(|| ApiError::internal("store returned no result"))
    }

    /// Queues ops without waiting for durability (their order is fixed now); `settle` waits
    /// until everything queued this way is applied. Failures are logged.
    pub fn commit_queued(&self, ops: Vec<Op>) -> Result<(), ApiError> {
        let rx = self.store.enqueue(ops)?;
        let n = self.signals.queue();
        let signals = self.signals.clone();
        tokio::spawn(async move {
            if let Ok(Err(e)) = rx.await {
                tracing::error!("a queued write failed: {e}");
            }
            signals.applied(n);
        });
        Ok(())
    }

    /// Waits until every op queued by `commit_queued` so far has been applied, so reads see
    /// them (normally immediate: turns are seconds apart, an fsync takes milliseconds).
    pub async fn settle(&self) {
        self.signals.settle().await
    }

    /// Stores a record, or reports the id of the identical one already stored.
    pub async fn insert(&self, rec: Record) -> Result<(String, bool), ApiError> {
        match self.commit_one(Op::Insert(Box::new(rec))).await? {
            Output::Inserted { id, .. } => Ok((id, false)),
            Output::Duplicate { id } => Ok((id, true)),
            Output::Rejected(m) => Err(ApiError::internal(m)),
            other => Err(ApiError::internal(format!(
                "unexpected store answer {other:?}"
            ))),
        }
    }
}
