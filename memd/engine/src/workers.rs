//! Background work (System 2): embedding, the late-interaction token states, lifecycle,
//! snapshots, session expiry.
//!
//! Owns every task that runs after a hook has answered: embedding stored memories (retrying
//! until it works, so a memory is never lost because the model failed), promotion / demotion /
//! deletion / age cleanup, periodic snapshots and forgetting idle conversations. Must never run
//! on a request's path and never hold the store's lock while embedding.

use crate::clock::{self, HOUR_MS};
use crate::config::Config;
use crate::learn;
use crate::models::Models;
use crate::models::embed::LateInteraction;
use crate::models::late;
use crate::models::late_plan;
use crate::shutdown::Shutdown;
use crate::state::Db;
use crate::state::new_id;
use crate::state::ops::Op;
use crate::state::session::SessionOp;
use crate::trace::Trace;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Memories embedded per store commit.
const EMBED_BATCH: usize = 16;
/// After an embedding failure, wait this long before retrying.
const EMBED_RETRY: Duration = Duration::from_secs(5);
const LIFECYCLE_EVERY: Duration = Duration::from_secs(30);
/// A lifecycle pass that changes nothing stores its clock (`Op::CleanupClock`) this often.
const CLOCK_MARK_EVERY_MS: i64 = 5 * clock::MINUTE_MS;
const SNAPSHOT_CHECK_EVERY: Duration = Duration::from_secs(30);
/// Snapshot once this many ops piled up in the write-ahead log.
const SNAPSHOT_AFTER_OPS: u64 = 20_000;
const LATE_RETRY_AFTER: Duration = Duration::from_secs(5);
/// While running, the token states are saved at most this often (and at shutdown, by
/// `Core::close`): a crash loses at most this much encoding, which is redone in the background.
const SAVE_EVERY: Duration = Duration::from_secs(300);
/// With nothing to encode, the pass looks at the store's change journal this often anyway.
const IDLE_TICK: Duration = Duration::from_secs(60);
/// While prompts or searches are arriving (`models::Load::queries_arriving`), the background
/// encoding takes at most this share of the time: after each memory it rests (1 / share − 1) ×
/// what the memory took, and each batch waits `BUSY_SETTLE`, so a burst of new memories is taken
/// in together. Token states are derived data: a memory
/// without them keeps its fused place until the machine is quiet again, when the loop runs at
/// full speed.
const BUSY_SHARE: f64 = 0.1;
const BUSY_SETTLE: Duration = Duration::from_secs(1);

/// The background loops.
#[derive(Debug, Clone, Copy)]
pub enum Loop {
    Embed,
    TokenStates,
    Lifecycle,
    Snapshot,
}

impl Loop {
    pub const ALL: [Loop; 4] = [
        Loop::Embed,
        Loop::TokenStates,
        Loop::Lifecycle,
        Loop::Snapshot,
    ];
}

/// What the workers read and write: the settings, the store handle (shared with a blocking
/// snapshot), the models, the token states (shared with blocking encoding), the ledger.
pub struct Workers<'a> {
    pub cfg: &'a Config,
    pub db: &'a Arc<Db>,
    pub models: &'a Models,
    pub late: &'a Arc<late::States>,
    pub trace: &'a Trace,
}

/// Where the late-interaction token states are saved between runs.
pub fn token_states_path(cfg: &Config) -> std::path::PathBuf {
    crate::models::token_states_path_in(&cfg.data_dir.join("store"))
}

impl Workers<'_> {
    /// Runs one loop until `shutdown`.
    pub async fn run(&self, which: Loop, shutdown: &Shutdown) {
        match which {
            Loop::Embed => self.embed_loop(shutdown).await,
            Loop::TokenStates => self.late_states_loop(shutdown).await,
            Loop::Lifecycle => self.lifecycle_loop(shutdown).await,
            Loop::Snapshot => self.snapshot_loop(shutdown).await,
        }
    }

    async fn embed_loop(&self, shutdown: &Shutdown) {
        loop {
            if shutdown.is_set() {
                return;
            }
            match self.embed_some().await {
                Ok(0) => {
                    // No new memory waits: the re-embedding after an upgrade takes a batch.
                    match self.reembed_some().await {
                        Ok(true) => continue,
                        Ok(false) => {}
                        Err(e) => tracing::warn!("re-embedding failed, will retry: {e}"),
                    }
                    // Idle: hand back what the embeddings since the last tick freed.
                    tokio::task::spawn_blocking(crate::heap::release_if_dirty);
                    tokio::select! {
                        _ = self.db.signals().embed.notified() => {}
                        _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                        _ = shutdown.wait() => return,
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!("embedding failed, will retry: {e}");
                    tokio::select! {
                        _ = tokio::time::sleep(EMBED_RETRY) => {}
                        _ = shutdown.wait() => return,
                    }
                }
            }
        }
    }

    /// Embeds one batch of pending memories; returns how many were embedded.
    pub async fn embed_some(&self) -> anyhow::Result<usize> {
        let Some(embedder) = self.models.embedder() else {
            return Ok(0);
        };
        let batch: Vec<(u64, String)> = self.db.read(|s| {
            s.pending_keys(EMBED_BATCH)
                .into_iter()
                .filter_map(|k| Some((k, crate::indexed_text::of(s.by_key(k)?).into_owned())))
                .collect()
        });
        if batch.is_empty() {
            return Ok(0);
        }
        let vectors =
            tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<(u64, Vec<f32>)>> {
                // One text per call: on 2 cores padding makes batches slower, and a query embedding
                // waiting for the model never waits behind more than one memory.
                batch
                    .into_iter()
                    .map(|(k, text)| {
                        Ok((
                            k,
                            embedder.embed(&[text.as_str()])?.pop().unwrap_or_default(),
                        ))
                    })
                    .collect()
            })
            .await??;
        let n = vectors.len();
        let ops = vectors
            .into_iter()
            .map(|(key, vector)| Op::vector(key, &vector))
            .collect();
        self.db
            .commit(ops)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(n)
    }

    /// One batch of the re-embedding after the indexed text changed (`state::reindex`): the
    /// exchanges below the cursor, newest first, committed with the lowered cursor, so a restart
    /// resumes after the last commit. While prompts or searches arrive it rests after each
    /// memory as the token-state pass does. Whether there was anything left to do.
    pub async fn reembed_some(&self) -> anyhow::Result<bool> {
        let Some(embedder) = self.models.embedder() else {
            return Ok(false);
        };
        let Some(batch) = self.db.read(|s| s.reindex_batch(EMBED_BATCH)) else {
            return Ok(false);
        };
        let load = self.models.load.clone();
        let todo = batch.todo;
        let vectors =
            tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<(u64, Vec<f32>)>> {
                todo.into_iter()
                    .map(|(key, text)| {
                        let started = Instant::now();
                        let v = embedder.embed(&[text.as_str()])?.pop().unwrap_or_default();
                        if load.queries_arriving() {
                            std::thread::sleep(started.elapsed().mul_f64(1.0 / BUSY_SHARE - 1.0));
                        }
                        Ok((key, v))
                    })
                    .collect()
            })
            .await??;
        let mut ops: Vec<Op> = vectors
            .into_iter()
            .map(|(key, vector)| Op::vector(key, &vector))
            .collect();
        ops.push(Op::Reindexed { below: batch.below });
        self.db
            .commit(ops)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(true)
    }

    async fn lifecycle_loop(&self, shutdown: &Shutdown) {
        self.sample_counts();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(LIFECYCLE_EVERY) => {}
                _ = self.db.signals().lifecycle.notified() => {}
                _ = shutdown.wait() => return,
            }
            if let Err(e) = self.run_lifecycle().await {
                tracing::warn!("lifecycle pass failed: {e}");
            }
            self.sample_counts();
        }
    }

    /// One lifecycle pass: promotions, demotions, deletions, age cleanup, idle sessions.
    pub async fn run_lifecycle(&self) -> anyhow::Result<usize> {
        self.run_lifecycle_at(clock::cleanup_now(self.db.read(|s| s.cleanup_clock)))
            .await
    }

    /// A lifecycle pass that goes by `clock` (`clock::cleanup_now`: a clock that cannot jump
    /// ahead, across restarts too), which it stores for the next pass.
    pub async fn run_lifecycle_at(&self, clock: clock::Trusted) -> anyhow::Result<usize> {
        let now = clock.wall;
        let mut ops: Vec<Op> = self.db.read(|s| {
            s.records()
                // A memory from the shared store follows the lifecycle its own daemon runs.
                .filter(|r| r.origin.is_none())
                .filter_map(|r| {
                    if let Some(step) = learn::lifecycle::expiry_step(r, now) {
                        return Some(expiry_op(r, step, now));
                    }
                    if learn::lifecycle::expired_at(r).is_some() {
                        return None;
                    }
                    let t = learn::lifecycle::next_transition(r, now)?;
                    match t {
                        learn::lifecycle::Transition::Promote { to }
                        | learn::lifecycle::Transition::Demote { to } => Some(Op::Move {
                            id: r.id.clone(),
                            to,
                            new_id: new_id(to),
                            at: now,
                        }),
                        learn::lifecycle::Transition::Delete { .. } => Some(Op::Delete {
                            id: r.id.clone(),
                            reason: "low_score".into(),
                        }),
                    }
                })
                .collect()
        });
        let ttl = self.cfg.context.session_ttl_hours as i64 * HOUR_MS;
        let stale = self.db.read(|s| {
            s.sessions
                .conversations
                .values()
                .any(|c| c.last_seen < now - ttl)
        });
        if stale {
            // What the forgotten conversations leave unscored gets its tool evidence first.
            ops.extend(self.db.read(|s| {
                crate::ops::context::unscored::on_expire(self.cfg, self.trace, s, now - ttl)
            }));
            ops.push(Op::Session(SessionOp::Expire { before: now - ttl }));
        }
        let n = ops.len();
        // Stored with the decisions it made, and every few minutes without any: a restart
        // goes on from it.
        let last = self.db.read(|s| s.cleanup_clock);
        if n > 0 || last.is_none_or(|l| clock.wall - l.wall >= CLOCK_MARK_EVERY_MS) {
            ops.insert(0, Op::CleanupClock(clock));
        }
        if !ops.is_empty() {
            self.db
                .commit(ops)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        Ok(n)
    }

    async fn snapshot_loop(&self, shutdown: &Shutdown) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(SNAPSHOT_CHECK_EVERY) => {}
                _ = shutdown.wait() => return,
            }
            if self.db.store().ops_since_snapshot() >= SNAPSHOT_AFTER_OPS {
                let db = self.db.clone();
                match tokio::task::spawn_blocking(move || db.store().snapshot()).await {
                    Ok(Ok(_)) => crate::heap::release_freed_memory(),
                    Ok(Err(e)) => {
                        tracing::error!("snapshot failed (the WAL keeps everything): {e}")
                    }
                    Err(e) => tracing::error!("snapshot task failed: {e}"),
                }
            }
        }
    }

    /// Keeps every memory's token states current: encodes memories that have none (new or edited),
    /// drops those of deleted memories, sleeps until woken when there is nothing to do.
    async fn late_states_loop(&self, shutdown: &Shutdown) {
        if !self.cfg.search.rerank {
            return; // no model will load: keep nothing in memory
        }
        let path = token_states_path(self.cfg);
        // The states on disk are of one model: opened once it is known (before, no prompt
        // can be reranked anyway).
        let digest = loop {
            if let Some(model) = self.models.late() {
                break model.digest();
            }
            tokio::select! {
                _ = self.db.signals().late.notified() => {}
                _ = shutdown.wait() => return,
            }
        };
        let (late, dir, p) = (
            self.late.clone(),
            self.cfg.data_dir.join("store"),
            path.clone(),
        );
        tokio::task::spawn_blocking(move || {
            // The log had to be scanned (or was started afresh): its index is saved at once,
            // so the next open need not scan.
            if late.open(&dir, &digest)
                && let Err(e) = late.save(&p)
            {
                tracing::warn!("saving token states failed: {e:#}");
            }
        })
        .await
        .ok();
        let mut saved = self.late.changes();
        let mut saved_at = Instant::now();
        let mut planner = late_plan::Planner::default();
        loop {
            if shutdown.is_set() {
                return;
            }
            let pass = match self.models.late() {
                Some(model) => {
                    self.encode_token_states(model, &mut planner, shutdown)
                        .await
                }
                None => Ok(0),
            };
            // Checked after busy passes too, so a long backfill is saved along the way.
            if self.late.changes() != saved && saved_at.elapsed() >= SAVE_EVERY {
                let (late, p) = (self.late.clone(), path.clone());
                match tokio::task::spawn_blocking(move || late.save(&p)).await {
                    Ok(Ok(n)) => saved = n,
                    Ok(Err(e)) => tracing::warn!("saving token states failed: {e:#}"),
                    Err(e) => tracing::warn!("saving token states failed: {e}"),
                }
                saved_at = Instant::now();
            }
            match pass {
                Ok(0) => {
                    // New and edited memories wake the loop; the timer tidies up after deletions.
                    tokio::select! {
                        _ = self.db.signals().late.notified() => {}
                        _ = tokio::time::sleep(IDLE_TICK) => {}
                        _ = shutdown.wait() => return,
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!("late-interaction encoding failed, will retry: {e:#}");
                    // The batch left the plan's queue unstored: plan it again.
                    planner.invalidate();
                    tokio::select! {
                        _ = tokio::time::sleep(LATE_RETRY_AFTER) => {}
                        _ = shutdown.wait() => return,
                    }
                }
            }
            // Under load, let the new memories gather first.
            if self.models.load.queries_arriving() {
                tokio::select! {
                    _ = tokio::time::sleep(BUSY_SETTLE) => {}
                    _ = shutdown.wait() => return,
                }
            }
        }
    }

    /// Encodes up to `late::ENCODE_BATCH` of the memories that should have states and lack them; returns
    /// how many.
    async fn encode_token_states(
        &self,
        model: Arc<LateInteraction>,
        planner: &mut late_plan::Planner,
        shutdown: &Shutdown,
    ) -> anyhow::Result<usize> {
        let cap = self.cfg.search.token_states_mb * 1024 * 1024;
        // Planned off the async threads: a walk of the store (rare) takes a while at 1M.
        let (db, states) = (self.db.clone(), self.late.clone());
        let mut p = std::mem::take(planner);
        let (p, late_plan::Next { todo, over_cap }) = tokio::task::spawn_blocking(move || {
            let next = p.next(&*db, &states, cap);
            (p, next)
        })
        .await?;
        *planner = p;
        if self.late.due_for_codebook(over_cap && todo.is_empty()) {
            // Enough states on disk (or the cap full of i8 ones): train the codebook on the
            // store's first states and code every memory (~450 bytes each instead of ~14 KB).
            let states = self.late.clone();
            let trained = tokio::task::spawn_blocking(move || states.train_codebook()).await?;
            if trained {
                // Every memory's size changed: the next batch walks the store again.
                planner.invalidate();
                let (n, bytes) = self.late.size();
                tracing::info!("token states coded: {n} memories in {bytes} bytes");
                return Ok(1);
            }
        }
        if todo.is_empty() {
            let states = self.late.clone();
            match tokio::task::spawn_blocking(move || states.compact()).await? {
                Ok(true) => tracing::info!("token-state log compacted"),
                Ok(false) => {}
                Err(e) => tracing::warn!("compacting the token-state log failed: {e:#}"),
            }
            return Ok(0);
        }
        let (states, load) = (self.late.clone(), self.models.load.clone());
        let stop = shutdown.clone();
        tokio::task::spawn_blocking(move || -> anyhow::Result<usize> {
            let mut done = 0;
            let mut encoded = Vec::with_capacity(todo.len());
            // One memory per call: a prompt's query waits for the model behind one memory at
            // most.
            for (key, text) in &todo {
                if stop.is_set() {
                    break;
                }
                let (key, started) = (*key, Instant::now());
                match late::encode_memory(&model, text) {
                    Ok(full) => encoded.push((key, text.as_str(), full)),
                    Err(e) => {
                        // This text is skipped for good (a new text of the memory is tried
                        // anew); the memory keeps its fused place.
                        tracing::warn!("token states of memory {key} failed, skipped: {e:#}");
                        states.remember(key, late::text_hash(text), late::Known::Failed);
                    }
                }
                done += 1;
                if load.queries_arriving() {
                    std::thread::sleep(started.elapsed().mul_f64(1.0 / BUSY_SHARE - 1.0));
                }
            }
            // One write and one fsync for the pass; the memories count as covered after it.
            // A disk that refuses the write fails the pass: retried after a pause.
            states.insert_batch(encoded)?;
            Ok(done)
        })
        .await?
    }

    /// Appends today's collection counts to the daily counts file (first call of a day wins).
    fn sample_counts(&self) {
        crate::ops::inspect::Inspect {
            db: self.db,
            trace: self.trace,
            data_dir: &self.cfg.data_dir,
        }
        .sample_counts()
    }
}

fn expiry_op(r: &crate::record::Record, step: learn::lifecycle::ExpiryStep, now: i64) -> Op {
    let id = r.id.clone();
    match step {
        learn::lifecycle::ExpiryStep::Archive => Op::SetExpired { id, at: Some(now) },
        learn::lifecycle::ExpiryStep::Restore => Op::SetExpired { id, at: None },
        learn::lifecycle::ExpiryStep::Delete => Op::Delete {
            id,
            reason: "expired".into(),
        },
    }
}
