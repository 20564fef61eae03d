//! memd's shared store (issue 14): a PostgreSQL + pgvector database that a user's machines and
//! a team share, kept in step with each daemon's local store.
//!
//! The local store stays the source of truth for the hook path: prompts read memory, and stops
//! are acknowledged once the local log has them, whether or not PostgreSQL answers. A worker
//! per daemon sends what changed here (memories, deletions, outcome events) and reads what
//! changed there into the local state as mirrored memories; row-level security decides what
//! it may read. Layout: `connect` (URL, password, TLS), `schema` (migrations, roles, the
//! visibility rules), `rows` (a memory as a row), `sync` (one exchange), this file (the worker
//! loop and its status). It reaches the engine only through `memd_engine::shared_sync::
//! SharedSync` (what is due, marking it sent, the read cursor, applying what it read): it never
//! builds the engine's ops or reads its state. Must never run on a request's path and never
//! give up data it could not send: it stays in the local log until the database commits it.

pub mod connect;
mod rows;
pub mod schema;
mod sync;

use anyhow::{Context, Result, bail};
use connect::Target;
use memd_engine::shared_sync::SharedSync;
use memd_engine::shutdown::Shutdown;
use proto::SharedStoreStatus;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// How long the last exchange at shutdown may take.
const FINAL_PASS: Duration = Duration::from_secs(2);
/// Longest wait between attempts while the store is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Starts the sync worker for the engine's configured shared store.
pub fn spawn(engine: SharedSync, shutdown: Shutdown) -> Result<tokio::task::JoinHandle<()>> {
    let target = Target::new(engine.config())?;
    tracing::info!(
        "shared store {} (changes are written locally first, then sent)",
        target.describe()
    );
    Ok(tokio::spawn(run(engine, target, shutdown)))
}

/// `memd store migrate`: brings the database at `target` to this memd's schema.
pub async fn migrate(target: &Target) -> Result<schema::Migrated> {
    let mut db = target.connect().await?;
    schema::migrate(&mut db).await
}

/// `memd store copy --from postgres://…`: every memory the target's role owns there, as the
/// JSON Lines `memd import` reads (no embeddings: the importing daemon makes its own).
pub async fn own_memories(target: &Target) -> Result<Vec<u8>> {
    let db = target.connect().await?;
    let rows = db
        .query(
            "SELECT uid, owner, visibility, project, id, collection, content, record, score,
               uses, success_count, confidence, outcome_history, last_outcome, last_used
             FROM memd_memories WHERE owner = current_user AND NOT deleted ORDER BY change_seq",
            &[],
        )
        .await?;
    let mut out = Vec::new();
    for row in &rows {
        let uid: String = row.get("uid");
        match rows::record_of(row) {
            Ok(r) => {
                serde_json::to_writer(&mut out, &r)?;
                out.push(b'\n');
            }
            Err(e) => tracing::warn!("shared memory {uid} not copied: {e:#}"),
        }
    }
    Ok(out)
}

struct Worker {
    engine: SharedSync,
    target: Target,
    store_id: String,
    db: Option<Client>,
    status: SharedStoreStatus,
}

async fn run(engine: SharedSync, target: Target, shutdown: Shutdown) {
    let status = SharedStoreStatus {
        target: target.describe().to_string(),
        ..SharedStoreStatus::default()
    };
    engine.report(status.clone());
    let mut w = Worker {
        engine,
        target,
        store_id: String::new(),
        db: None,
        status,
    };
    let every = Duration::from_millis(w.engine.config().sync_ms);
    let mut backoff = every;
    loop {
        // A long first send stops at shutdown too: its open transaction rolls back, and what it
        // had not committed is still due in the local log.
        let ok = tokio::select! {
            ok = w.pass() => ok,
            _ = shutdown.wait() => break,
        };
        backoff = match ok {
            true => every,
            false => (backoff * 2).min(MAX_BACKOFF.max(every)),
        };
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = w.engine.woken(), if ok => {}
            _ = shutdown.wait() => break,
        }
    }
    // What the last stops wrote goes out now if the store answers; otherwise it waits in the
    // local log for the next start.
    if w.engine.backlog() > 0 {
        // Bounded: a store that is down must not hold up the daemon's exit.
        let _ = tokio::time::timeout(FINAL_PASS, w.pass()).await;
    }
}

/// This store's id in the database `database`: the one it has, or a new one (logged) the
/// first time, and whenever `store.url` leads to another database or another role than
/// before (rows written as the old role are not the new role's to change).
async fn store_id(engine: &SharedSync, database: &str, role: &str, taken: bool) -> Result<String> {
    let known = engine.identity();
    let same = !taken
        && known.database.as_deref() == Some(database)
        && known.role.as_deref().is_none_or(|r| r == role);
    if let Some(id) = known.store_id.filter(|_| same) {
        return Ok(id);
    }
    let id = format!("{:016x}", rand::random::<u64>());
    engine
        .enable(&id, database)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(id)
}

/// Claims `id` for the connected role; false when another role holds it.
async fn claim(db: &Client, id: &str) -> Result<bool> {
    let row = db
        .query_one("SELECT memd_claim_store($1)", &[&id])
        .await
        .context("claiming this daemon's store id")?;
    Ok(row.get(0))
}

impl Worker {
    /// One exchange (each round trip within the timeout); true if it worked.
    async fn pass(&mut self) -> bool {
        match self.exchange().await {
            Ok(()) => {
                self.status.connected = true;
                self.status.last_error = None;
                self.status.last_ok =
                    Some(memd_engine::clock::rfc3339(memd_engine::clock::now_ms()));
            }
            Err(e) => {
                if self.status.connected || self.status.last_error.is_none() {
                    tracing::warn!(
                        "shared store {}: {e:#}; changes wait in the local log",
                        self.target.describe()
                    );
                }
                self.status.connected = false;
                self.status.last_error = Some(format!("{e:#}"));
                // A connection that failed once is not trusted again.
                self.db = None;
            }
        }
        self.engine.report(self.status.clone());
        self.status.connected
    }

    async fn exchange(&mut self) -> Result<()> {
        if self.db.is_none() {
            let db = self.open().await?;
            self.db = Some(db);
        }
        let Some(db) = self.db.as_mut() else {
            bail!("not connected");
        };
        let limit = self.target.timeout();
        let started = Instant::now();
        sync::within(limit, db.simple_query("")).await?;
        self.status.latency_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
        // Reachable: say so now, not after a first send that may take minutes.
        self.status.connected = true;
        self.engine.report(self.status.clone());
        sync::send(&self.engine, db, &self.store_id, limit).await?;
        sync::receive(&self.engine, db, &self.store_id, limit).await?;
        Ok(())
    }

    /// Connects, brings the schema up to date if this role may, and checks who it is.
    async fn open(&mut self) -> Result<Client> {
        let mut db = self.target.connect().await?;
        let version = schema::current_version(&db).await?;
        if version < schema::VERSION {
            tracing::info!(
                "shared store schema is at version {version}; migrating to {}",
                schema::VERSION
            );
            if let Err(e) = schema::migrate(&mut db).await {
                bail!(
                    "the shared store's schema is at version {version} and this memd needs \
                     {}; migrating as this role failed ({e:#}): run `memd store migrate` as \
                     the database owner",
                    schema::VERSION
                );
            }
        } else if version > schema::VERSION {
            bail!(
                "the shared store's schema is version {version}, newer than this memd's {}: \
                 upgrade memd",
                schema::VERSION
            );
        }
        let row = db
            .query_one(
                "SELECT current_user::text, r.rolsuper OR r.rolbypassrls
                   OR t.tableowner = current_user
                 FROM pg_roles r, pg_tables t
                 WHERE r.rolname = current_user AND t.tablename = 'memd_memories'",
                &[],
            )
            .await?;
        let role: String = row.get(0);
        let sees_all: bool = row.get(1);
        if sees_all {
            tracing::warn!(
                "shared store role {role} owns the tables or bypasses row-level security: it \
                 reads every user's private memories. Connect as a role made by `memd store \
                 add-user`"
            );
        }
        let database: String = db
            .query_one("SELECT value FROM memd_meta WHERE key = 'database_id'", &[])
            .await?
            .get(0);
        // Enabling (first, or for another database) starts the bookkeeping over: the role is
        // logged after it.
        self.store_id = store_id(&self.engine, &database, &role, false).await?;
        // The id is this role's once claimed: rows under it are refused to anyone else. One
        // claimed by another role already (never by chance: 64 random bits) is given up for a
        // fresh one, which starts the bookkeeping over.
        if !claim(&db, &self.store_id).await? {
            tracing::warn!(
                "shared store id {} belongs to another role; starting over with a new one",
                self.store_id
            );
            self.store_id = store_id(&self.engine, &database, &role, true).await?;
            if !claim(&db, &self.store_id).await? {
                bail!("the shared store refused this daemon's new store id");
            }
        }
        if self.engine.identity().role.as_deref() != Some(role.as_str()) {
            self.engine
                .set_role(&role)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        self.status.role = Some(role);
        Ok(db)
    }
}
