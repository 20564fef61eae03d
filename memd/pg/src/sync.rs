//! One exchange with the shared store: send what changed here, read what changed there.
//!
//! Owns the SQL of the sync. Sending runs in one transaction per batch (the schema numbers each
//! written row in commit order: `memd_stamp_change`); reading runs in a repeatable-read
//! snapshot and advances the cursor to the highest change it could see. The engine is reached
//! through `SharedSync` only. Must never mark something sent before the database committed it
//! (`SharedSync::sent` runs after COMMIT) and never apply a row it did not read whole.

use crate::rows::{self, bounded};
use anyhow::{Context, Result};
use futures_util::future::try_join_all;
use memd_engine::shared_sync::SharedSync;
use memd_engine::state::Outbox;
use std::time::Duration;
use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

/// Memories and events per sending transaction: ~0.5 MB of rows with embeddings.
const ROW_BATCH: usize = 250;
const EVENT_BATCH: usize = 2_000;
/// Rows per reading query.
const READ_BATCH: i64 = 500;

const UPSERT: &str = "
INSERT INTO memd_memories (uid, visibility, project, id, collection, content, record, score,
  uses, success_count, confidence, outcome_history, last_outcome, last_used, embedding, deleted,
  last_writer, content_writer)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::real[]::vector, false,
  $16, $16)
ON CONFLICT (uid) DO UPDATE SET visibility = EXCLUDED.visibility, project = EXCLUDED.project,
  id = EXCLUDED.id, collection = EXCLUDED.collection, content = EXCLUDED.content,
  record = EXCLUDED.record, embedding = EXCLUDED.embedding,
  last_writer = EXCLUDED.last_writer, content_writer = EXCLUDED.content_writer
WHERE NOT memd_memories.deleted";

/// A team memory made private: its uid goes to `memd_revoked` so teammates drop it.
const REVOKE: &str = "
INSERT INTO memd_revoked (uid, owner)
SELECT uid, owner FROM memd_memories WHERE uid = $1 AND visibility = 'team'";

/// A deleted memory keeps its uid (so every copy learns of it) and loses its content.
const TOMBSTONE: &str = "
UPDATE memd_memories SET deleted = true, content = '', record = '{}', embedding = NULL,
  outcome_history = '[]', last_writer = $2, content_writer = $2
WHERE uid = $1 AND NOT deleted";

const OUTCOME: &str = "SELECT memd_record_outcome($1, $2, $3, $4, $5, $6, $7, $8, $9)";

/// Every change this role may see (row-level security leaves out the rest), and revocations
/// of team memories by others. This store's own memories come back only when another store
/// changed them since the cursor (`foreign_seq`: outcomes, or the same user's edits on another
/// machine), so a first send of every memory is not read back; when this store wrote them
/// last, without their text and embedding (`counts_only`): only the counts can be news.
const FEED: &str = "
SELECT uid, owner, visibility, project, id, collection,
  CASE WHEN counts_only THEN '' ELSE content END AS content,
  CASE WHEN counts_only THEN '{}'::jsonb ELSE record END AS record,
  score, uses, success_count, confidence, outcome_history, last_outcome, last_used,
  CASE WHEN starts_with(uid, $3) THEN NULL ELSE embedding::real[] END AS embedding, deleted,
  change_seq, counts_only
FROM (SELECT *, starts_with(uid, $3) AND content_writer = $5 AS counts_only FROM memd_memories
      WHERE change_seq > $1 AND change_seq <= $2
        AND (NOT starts_with(uid, $3) OR foreign_seq > $6)) changed
UNION ALL
SELECT uid, owner, 'private', NULL, '', '', '', '{}'::jsonb, 0, 0, 0, NULL, '[]'::jsonb, NULL,
  NULL, NULL, true, change_seq, false
FROM memd_revoked WHERE change_seq > $1 AND change_seq <= $2 AND owner <> current_user
ORDER BY change_seq LIMIT $4";

const HORIZON: &str = "
SELECT greatest((SELECT max(change_seq) FROM memd_memories),
                (SELECT max(change_seq) FROM memd_revoked), 0)";

/// `work`, or an error once `limit` has passed (one round trip's budget: `store.timeout_ms`).
/// A first send of many memories takes many round trips, each with the whole budget.
pub async fn within<T, E>(limit: Duration, work: impl Future<Output = Result<T, E>>) -> Result<T>
where
    E: Into<anyhow::Error>,
{
    match tokio::time::timeout(limit, work).await {
        Ok(r) => r.map_err(Into::into),
        Err(_) => Err(anyhow::anyhow!(
            "no answer within {} ms (store.timeout_ms)",
            limit.as_millis()
        )),
    }
}

/// Sends everything due, batch by batch; returns how many items went.
pub async fn send(
    engine: &SharedSync,
    db: &mut Client,
    store_id: &str,
    limit: Duration,
) -> Result<usize> {
    let mut sent = 0;
    loop {
        let outbox = engine.outbox(ROW_BATCH, EVENT_BATCH);
        if outbox.is_empty() {
            return Ok(sent);
        }
        let n = outbox.memories.len() + outbox.deleted.len() + outbox.events.len();
        within(limit, send_batch(db, store_id, &outbox)).await?;
        engine
            .sent(&outbox)
            .await
            .map_err(|e| anyhow::anyhow!("logging what was sent: {e}"))?;
        sent += n;
    }
}

async fn send_batch(db: &mut Client, store_id: &str, outbox: &Outbox) -> Result<()> {
    let tx = db.transaction().await?;
    let (upsert, revoke, tombstone, outcome) = tokio::try_join!(
        tx.prepare(UPSERT),
        tx.prepare(REVOKE),
        tx.prepare(TOMBSTONE),
        tx.prepare(OUTCOME)
    )?;
    // Every statement of the batch is queued at once (pipelined on the connection, executed
    // in order): one round trip per batch instead of one per row.
    let mut rows = Vec::with_capacity(outbox.memories.len());
    for m in &outbox.memories {
        rows.push(MemoryRow::new(m.uid.clone(), &m.record, m.vector.clone())?);
    }
    let events: Vec<EventParams> = outbox
        .events
        .iter()
        .map(|(id, e)| EventParams {
            id: id.clone(),
            uid: e.uid.clone(),
            outcome: e.outcome.as_str(),
            at: e.at,
            score: e.score_delta,
            counted: e.counted,
            success: e.success,
            confidence: e.confidence_delta,
        })
        .collect();
    // The parameters live apart from the queries that borrow them.
    let revokes: Vec<[&(dyn ToSql + Sync); 1]> = rows
        .iter()
        .map(|r| [&r.uid as &(dyn ToSql + Sync)])
        .collect();
    let upserts: Vec<_> = rows.iter().map(|r| r.params(&store_id)).collect();
    let tombstones: Vec<[&(dyn ToSql + Sync); 2]> = outbox
        .deleted
        .iter()
        .map(|u| [u as &(dyn ToSql + Sync), &store_id])
        .collect();
    let outcomes: Vec<_> = events.iter().map(|e| e.params(&store_id)).collect();
    let mut writes = Vec::new();
    for ((row, rp), up) in rows.iter().zip(&revokes).zip(&upserts) {
        if !row.team {
            writes.push(tx.execute(&revoke, rp));
        }
        writes.push(tx.execute(&upsert, up));
    }
    for tp in &tombstones {
        writes.push(tx.execute(&tombstone, tp));
    }
    for op in &outcomes {
        writes.push(tx.execute(&outcome, op));
    }
    try_join_all(writes)
        .await
        .context("sending to the shared store")?;
    tx.commit().await?;
    Ok(())
}

struct MemoryRow {
    uid: String,
    team: bool,
    visibility: &'static str,
    project: Option<String>,
    id: String,
    collection: &'static str,
    content: String,
    record: serde_json::Value,
    score: f64,
    uses: i32,
    success: f64,
    confidence: Option<f64>,
    history: serde_json::Value,
    last_outcome: Option<&'static str>,
    last_used: Option<i64>,
    vector: Option<Vec<f32>>,
}

impl MemoryRow {
    fn new(
        uid: String,
        r: &memd_engine::record::Record,
        vector: Option<Vec<f32>>,
    ) -> Result<MemoryRow> {
        Ok(MemoryRow {
            uid,
            team: r.team,
            visibility: if r.team { "team" } else { "private" },
            project: r.project.clone(),
            id: r.id.clone(),
            collection: r.collection.as_str(),
            content: r.content.clone(),
            record: rows::rest_of(r)?,
            score: r.score,
            uses: i32::try_from(r.uses).unwrap_or(i32::MAX),
            success: r.success_count,
            confidence: r.confidence,
            history: serde_json::to_value(&r.outcome_history)?,
            last_outcome: r.last_outcome.map(|o| o.as_str()),
            last_used: r.last_used,
            vector,
        })
    }

    fn params<'a>(&'a self, writer: &'a &'a str) -> [&'a (dyn ToSql + Sync); 16] {
        [
            &self.uid,
            &self.visibility,
            &self.project,
            &self.id,
            &self.collection,
            &self.content,
            &self.record,
            &self.score,
            &self.uses,
            &self.success,
            &self.confidence,
            &self.history,
            &self.last_outcome,
            &self.last_used,
            &self.vector,
            writer,
        ]
    }
}

struct EventParams {
    id: String,
    uid: String,
    outcome: &'static str,
    at: i64,
    score: f64,
    counted: bool,
    success: f64,
    confidence: f64,
}

impl EventParams {
    fn params<'a>(&'a self, writer: &'a &'a str) -> [&'a (dyn ToSql + Sync); 9] {
        [
            &self.id,
            &self.uid,
            &self.outcome,
            &self.at,
            &self.score,
            &self.counted,
            &self.success,
            &self.confidence,
            writer,
        ]
    }
}

/// Reads what others changed since the cursor and applies it here; returns rows applied.
pub async fn receive(
    engine: &SharedSync,
    db: &mut Client,
    store_id: &str,
    limit: Duration,
) -> Result<usize> {
    let mut applied = 0;
    let own = format!("{store_id}:");
    loop {
        let at = engine.cursor();
        let cursor = at.read;
        let read = read_batch(db, (cursor, at.news_after), &own);
        let Some((horizon, found)) = within(limit, read).await? else {
            return Ok(applied);
        };
        let full = found.len() as i64 == READ_BATCH;
        let mut rows = Vec::with_capacity(found.len());
        let mut reached = cursor;
        for row in &found {
            match rows::shared_row(row) {
                Ok((seq, r)) => {
                    reached = reached.max(seq);
                    rows.push(r);
                }
                Err(e) => {
                    // Skipped once: the cursor moves past it, so one bad row cannot stall
                    // every later change, and its next change is read again. The message is
                    // cut short: a row's text is a teammate's to choose (issue 36: a 200 KB
                    // label was logged whole on every pass).
                    let seq: i64 = row.try_get("change_seq").unwrap_or(reached);
                    reached = reached.max(seq);
                    tracing::warn!("shared store row skipped: {}", bounded(&format!("{e:#}")));
                }
            }
        }
        // A partial batch is everything up to the horizon: jump there, past this store's own
        // changes, which the query leaves out.
        let cursor = if full { reached } else { horizon };
        applied += rows.len();
        engine
            .received(rows, cursor, !full)
            .await
            .map_err(|e| anyhow::anyhow!("logging what was received: {e}"))?;
        if !full {
            return Ok(applied);
        }
    }
}

/// The horizon and up to `READ_BATCH` changes after `cursor` (this store's own memories only
/// if others changed them after `news_after`), in one snapshot; `None` when nothing changed.
async fn read_batch(
    db: &mut Client,
    (cursor, news_after): (i64, i64),
    own: &str,
) -> Result<Option<(i64, Vec<tokio_postgres::Row>)>, tokio_postgres::Error> {
    let tx = db
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let horizon: i64 = tx.query_one(HORIZON, &[]).await?.get(0);
    if horizon <= cursor {
        tx.commit().await?;
        return Ok(None);
    }
    let store_id = own.trim_end_matches(':');
    let found = tx
        .query(
            FEED,
            &[&cursor, &horizon, &own, &READ_BATCH, &store_id, &news_after],
        )
        .await?;
    tx.commit().await?;
    Ok(Some((horizon, found)))
}
