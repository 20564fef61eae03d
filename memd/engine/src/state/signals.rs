//! The engine's wake-ups: what a commit or an outcome tells the background workers and a
//! waiting stop hook, and how far the queued writes have been applied.
//!
//! Owns the bells (each a `Notify` that keeps one permit, so a ring during a running pass is not
//! lost) and the queued/applied counters behind `Db::settle`. Must never carry data: whoever
//! wakes reads the state itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{Notify, watch};

pub struct Signals {
    /// An exchange was scored (the stop hook's grace window waits on it).
    pub scored: Notify,
    /// New memories need embedding.
    pub embed: Notify,
    /// Outcomes were recorded: the lifecycle pass should run.
    pub lifecycle: Notify,
    /// Memories may need token states.
    pub late: Notify,
    /// Write batches queued without waiting (`Db::commit_queued`), counted.
    queued: AtomicU64,
    /// The highest queued batch applied so far.
    applied: watch::Sender<u64>,
}

impl Default for Signals {
    fn default() -> Signals {
        Signals {
            scored: Notify::new(),
            embed: Notify::new(),
            lifecycle: Notify::new(),
            late: Notify::new(),
            queued: AtomicU64::new(0),
            applied: watch::channel(0).0,
        }
    }
}

impl Signals {
    /// Counts one more queued batch; returns its number, for `applied`.
    pub(crate) fn queue(&self) -> u64 {
        self.queued.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Batch `n` (and so every one before it) is applied.
    pub(crate) fn applied(&self, n: u64) {
        self.applied.send_modify(|done| *done = (*done).max(n));
    }

    /// Waits until every batch queued so far has been applied.
    pub async fn settle(&self) {
        let target = self.queued.load(Ordering::SeqCst);
        let mut rx = self.applied.subscribe();
        let _ = rx.wait_for(|done| *done >= target).await;
    }

    /// Wakes the lifecycle pass once what is queued now has been applied (in the background:
    /// the caller does not wait).
    pub fn wake_lifecycle_when_applied(self: &Arc<Self>) {
        let target = self.queued.load(Ordering::SeqCst);
        let mut rx = self.applied.subscribe();
        let signals = self.clone();
        tokio::spawn(async move {
            let _ = rx.wait_for(|done| *done >= target).await;
            signals.lifecycle.notify_one();
        });
    }
}
