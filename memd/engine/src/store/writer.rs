//! The single WAL writer thread and its group commit.
//!
//! Owns the queue of commit requests: it takes everything pending, writes all their frames,
//! makes them durable with ONE fsync, then applies the ops to the machine in WAL order under the
//! write lock and answers each requester. Concurrent committers therefore share fsyncs. Must
//! never apply an op whose frame is not durable, and never answer a request before its ops are
//! applied (a caller that reads right after its commit must see it).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender};
use std::thread::{self, JoinHandle};

use tokio::sync::oneshot;

use super::error::StoreError;
use super::{Machine, Shared, lock_mutex, write_lock};

/// Frames a group may hold before the rest waits for the next fsync (bounds memory per group).
const MAX_GROUP_BYTES: usize = 16 << 20;

pub(crate) type CommitResult<O> = Result<Vec<O>, StoreError>;

/// How the requester waits for its answer.
pub(crate) enum Reply<O> {
    Blocking(SyncSender<CommitResult<O>>),
    Async(oneshot::Sender<CommitResult<O>>),
}

impl<O> Reply<O> {
    fn send(self, result: CommitResult<O>) {
        // A requester that stopped waiting (e.g. a dropped future) still had its ops committed.
        match self {
            Reply::Blocking(tx) => {
                let _ = tx.send(result);
            }
            Reply::Async(tx) => {
                let _ = tx.send(result);
            }
        }
    }
}

/// One `commit` call: its ops, already encoded as a frame by the caller's thread.
pub(crate) struct Request<M: Machine> {
    pub frame: Vec<u8>,
    pub ops: Vec<M::Op>,
    pub reply: Reply<M::Output>,
}

pub(crate) fn spawn<M: Machine>(
    shared: Arc<Shared<M>>,
    queue: Receiver<Request<M>>,
) -> std::io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name("memd-wal".to_owned())
        .spawn(move || run(&shared, &queue))
}

/// Serves requests until every sender is gone (the store is closing), then returns.
fn run<M: Machine>(shared: &Shared<M>, queue: &Receiver<Request<M>>) {
    let mut carried = None;
    loop {
        let first = match carried.take() {
            Some(request) => request,
            None => match queue.recv() {
                Ok(request) => request,
                Err(_) => return,
            },
        };
        let (group, overflow) = drain_group(first, queue);
        carried = overflow;
        commit_group(shared, group);
    }
}

/// Everything already queued, up to the size bound; the request that did not fit is returned.
fn drain_group<M: Machine>(
    first: Request<M>,
    queue: &Receiver<Request<M>>,
) -> (Vec<Request<M>>, Option<Request<M>>) {
    let mut bytes = first.frame.len();
    let mut group = vec![first];
    while let Ok(next) = queue.try_recv() {
        if bytes + next.frame.len() > MAX_GROUP_BYTES {
            return (group, Some(next));
        }
        bytes += next.frame.len();
        group.push(next);
    }
    (group, None)
}

fn commit_group<M: Machine>(shared: &Shared<M>, group: Vec<Request<M>>) {
    let mut wal = lock_mutex(&shared.wal);
    let frames: Vec<&[u8]> = group.iter().map(|r| r.frame.as_slice()).collect();
    if let Err(err) = wal.append_durably(&frames) {
        drop(wal);
        shared
            .counters
            .failed_commits
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        for request in group {
            request.reply.send(Err(err.duplicate()));
        }
        return;
    }
    shared.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
    let (outputs, ops) = apply_in_order(shared, &group);
    // Counted before the WAL lock is released so a snapshot sees exactly the ops it covers.
    shared.ops_since_snapshot.fetch_add(ops, Ordering::SeqCst);
    drop(wal);
    shared.counters.ops.fetch_add(ops, Ordering::Relaxed);
    shared
        .counters
        .commits
        .fetch_add(group.len() as u64, Ordering::Relaxed);
    for (request, output) in group.into_iter().zip(outputs) {
        request.reply.send(Ok(output));
    }
}

fn apply_in_order<M: Machine>(
    shared: &Shared<M>,
    group: &[Request<M>],
) -> (Vec<Vec<M::Output>>, u64) {
    let mut machine = write_lock(&shared.machine);
    let mut ops = 0;
    let outputs = group
        .iter()
        .map(|request| {
            ops += request.ops.len() as u64;
            request.ops.iter().map(|op| machine.apply(op)).collect()
        })
        .collect();
    (outputs, ops)
}
