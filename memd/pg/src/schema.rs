//! The shared store's schema: versioned migrations, the roles, and who may see which row.
//!
//! Owns every statement that creates or changes database objects. Visibility is enforced by
//! PostgreSQL itself, with row-level security: a daemon connects as its user's role and the
//! server hands it only that role's rows and the rows marked `team`. Outcomes go through one
//! `SECURITY DEFINER` function that adds them atomically to a row the caller may see, so a
//! teammate can score a shared fact without being able to edit it, and only by memd's rules
//! (version 2: the function computes the change from the label; a store id belongs to the role
//! that claimed it, `memd_claim_store`, and rows go in only under the owner's own store ids).
//! Must never run a migration
//! twice (the version table and an advisory lock see to it) and never change a migration that
//! shipped: a change is a new version.

use anyhow::{Context, Result, bail};
use tokio_postgres::Client;

/// The schema version this memd needs.
pub const VERSION: i32 = 2;
/// Advisory lock key serialising migrations (the ASCII of "memdmigr").
const MIGRATE_LOCK: i64 = 0x6d65_6d64_6d69_6772;
/// The group role every memd user role belongs to.
pub const USER_GROUP: &str = "memd_user";

/// The migrations, in order: `MIGRATIONS[n - 1]` brings the schema from `n - 1` to `n`.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE EXTENSION IF NOT EXISTS vector;

DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'memd_user') THEN
    CREATE ROLE memd_user NOLOGIN;
  END IF;
END $$;

-- Numbers every change (see memd_stamp_change).
CREATE SEQUENCE memd_change_seq;

CREATE TABLE memd_memories (
  uid             text PRIMARY KEY,
  owner           text NOT NULL DEFAULT current_user,
  visibility      text NOT NULL DEFAULT 'private' CHECK (visibility IN ('private', 'team')),
  project         text,
  id              text NOT NULL,
  collection      text NOT NULL,
  content         text NOT NULL,
  -- Tags, importance, archived, former ids, metadata, times: the rest of the memory.
  record          jsonb NOT NULL,
  score           double precision NOT NULL,
  uses            integer NOT NULL,
  success_count   double precision NOT NULL,
  confidence      double precision,
  outcome_history jsonb NOT NULL DEFAULT '[]',
  last_outcome    text,
  last_used       bigint,
  embedding       vector(384),
  tsv             tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
  deleted         boolean NOT NULL DEFAULT false,
  -- The store (daemon) that made the last change, and the last change of the text and the
  -- other fields a memory's owner edits (outcomes change only the counts).
  last_writer     text NOT NULL,
  content_writer  text NOT NULL,
  change_seq      bigint NOT NULL,
  -- The last change made by a store other than the one that made the memory (an outcome, or
  -- the same user's edit on another machine): the only news that store can read back.
  foreign_seq     bigint NOT NULL DEFAULT 0
);
CREATE INDEX memd_memories_change ON memd_memories (change_seq);
CREATE INDEX memd_memories_embedding ON memd_memories USING hnsw (embedding vector_cosine_ops);
CREATE INDEX memd_memories_tsv ON memd_memories USING gin (tsv);

-- Every outcome once (by who sent it and its event id), applied to its memory exactly once.
CREATE TABLE memd_outcomes (
  event_id text NOT NULL,
  uid      text NOT NULL,
  owner    text NOT NULL DEFAULT session_user,
  outcome  text NOT NULL,
  at       bigint NOT NULL,
  applied  boolean NOT NULL DEFAULT false,
  PRIMARY KEY (owner, event_id)
);
CREATE INDEX memd_outcomes_uid ON memd_outcomes (uid);

-- Memories made private again: only their uids, so teammates drop their copies.
CREATE TABLE memd_revoked (
  uid        text NOT NULL,
  owner      text NOT NULL,
  change_seq bigint NOT NULL
);
CREATE INDEX memd_revoked_change ON memd_revoked (change_seq);

-- This database's identity: a daemon whose store.url now points at another database starts
-- over there instead of trusting a cursor from here.
CREATE TABLE memd_meta (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO memd_meta VALUES ('database_id', gen_random_uuid()::text);

-- Every written row gets the next change number, under a transaction advisory lock: a writer
-- holds it until it commits, so numbers are handed out in commit order and a reader that saw
-- change n has seen every change before it. Done here, not by memd, so no client can pick its
-- own number or skip the lock.
CREATE FUNCTION memd_stamp_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $fn$
BEGIN
  PERFORM pg_advisory_xact_lock(7882829049437922676);
  NEW.change_seq := nextval('memd_change_seq');
  -- Nested: plpgsql does not promise to stop at a false AND, and memd_revoked has no writer.
  IF TG_TABLE_NAME = 'memd_memories' THEN
    IF NOT starts_with(NEW.uid, NEW.last_writer || ':') THEN
      NEW.foreign_seq := NEW.change_seq;
    END IF;
  END IF;
  RETURN NEW;
END
$fn$;
CREATE TRIGGER memd_memories_stamp BEFORE INSERT OR UPDATE ON memd_memories
  FOR EACH ROW EXECUTE FUNCTION memd_stamp_change();
CREATE TRIGGER memd_revoked_stamp BEFORE INSERT ON memd_revoked
  FOR EACH ROW EXECUTE FUNCTION memd_stamp_change();

ALTER TABLE memd_memories ENABLE ROW LEVEL SECURITY;
CREATE POLICY memd_read ON memd_memories FOR SELECT
  USING (owner = current_user OR visibility = 'team');
CREATE POLICY memd_insert ON memd_memories FOR INSERT
  WITH CHECK (owner = current_user);
CREATE POLICY memd_update ON memd_memories FOR UPDATE
  USING (owner = current_user) WITH CHECK (owner = current_user);

ALTER TABLE memd_outcomes ENABLE ROW LEVEL SECURITY;
CREATE POLICY memd_read ON memd_outcomes FOR SELECT USING (owner = current_user);

ALTER TABLE memd_revoked ENABLE ROW LEVEL SECURITY;
CREATE POLICY memd_read ON memd_revoked FOR SELECT USING (true);
-- Only the owner of a memory may revoke it.
CREATE POLICY memd_insert ON memd_revoked FOR INSERT WITH CHECK (
  owner = current_user AND EXISTS (
    SELECT 1 FROM memd_memories m WHERE m.uid = memd_revoked.uid AND m.owner = current_user));

-- Adds one outcome to a memory the caller may see, once per (caller, event id). An event for a
-- memory not in the store yet is kept unapplied: the memory arrives with it counted, or the
-- event is sent again and applied then. The deltas are bounded by what one outcome can do
-- (learn::scoring: worked +0.2, failed -0.3; a fact's confidence +0.1 / -0.2).
CREATE FUNCTION memd_record_outcome(
  p_event text, p_uid text, p_outcome text, p_at bigint, p_score double precision,
  p_counted boolean, p_success double precision, p_confidence double precision,
  p_writer text
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $fn$
DECLARE
  visible boolean;
  done boolean;
BEGIN
  SELECT (owner = session_user OR visibility = 'team') INTO visible
    FROM memd_memories WHERE uid = p_uid;
  IF visible IS NOT NULL AND NOT visible THEN
    RETURN false;
  END IF;
  INSERT INTO memd_outcomes (event_id, uid, outcome, at)
    VALUES (p_event, p_uid, p_outcome, p_at) ON CONFLICT (owner, event_id) DO NOTHING;
  SELECT applied INTO done FROM memd_outcomes
    WHERE owner = session_user AND event_id = p_event FOR UPDATE;
  IF done OR visible IS NULL THEN
    RETURN done;
  END IF;
  UPDATE memd_memories SET
    score = LEAST(1, GREATEST(0, score + LEAST(0.2, GREATEST(-0.3, p_score)))),
    uses = uses + CASE WHEN p_counted THEN 1 ELSE 0 END,
    success_count = success_count + LEAST(1, GREATEST(0, p_success)),
    confidence = CASE WHEN confidence IS NULL THEN NULL
                      ELSE LEAST(1, GREATEST(0, confidence
                                             + LEAST(0.1, GREATEST(-0.2, p_confidence)))) END,
    outcome_history = CASE WHEN NOT p_counted THEN outcome_history ELSE (
        SELECT coalesce(jsonb_agg(e ORDER BY n), '[]'::jsonb) FROM (
          SELECT e, n FROM jsonb_array_elements(
            outcome_history || jsonb_build_array(jsonb_build_object('outcome', p_outcome, 'at', p_at))
          ) WITH ORDINALITY AS h(e, n) ORDER BY n DESC LIMIT 10) newest)
      END,
    last_outcome = CASE WHEN p_counted THEN p_outcome ELSE last_outcome END,
    last_used = GREATEST(coalesce(last_used, p_at), p_at),
    last_writer = p_writer
  WHERE uid = p_uid AND NOT deleted;
  UPDATE memd_outcomes SET applied = true WHERE owner = session_user AND event_id = p_event;
  RETURN true;
END
$fn$;
REVOKE ALL ON FUNCTION memd_record_outcome(text, text, text, bigint, double precision, boolean,
  double precision, double precision, text) FROM PUBLIC;

GRANT SELECT ON memd_schema TO memd_user;
GRANT SELECT ON memd_meta TO memd_user;
GRANT SELECT, INSERT, UPDATE ON memd_memories TO memd_user;
GRANT SELECT ON memd_outcomes TO memd_user;
GRANT SELECT, INSERT ON memd_revoked TO memd_user;
GRANT EXECUTE ON FUNCTION memd_record_outcome(text, text, text, bigint, double precision,
  boolean, double precision, double precision, text) TO memd_user;
"#,
    include_str!("migrations/0002_owned_stores.sql"),
];

/// The schema version the database is at (0: none yet).
pub async fn current_version(db: &Client) -> Result<i32> {
    let exists: bool = db
        .query_one("SELECT to_regclass('memd_schema') IS NOT NULL", &[])
        .await?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: Option<i32> = db
        .query_one("SELECT max(version) FROM memd_schema", &[])
        .await?
        .get(0);
    Ok(v.unwrap_or(0))
}

/// What `migrate` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    pub from: i32,
    pub to: i32,
}

/// Brings the schema to `VERSION`, one transaction per version, under an advisory lock so two
/// daemons starting at once do not both migrate.
pub async fn migrate(db: &mut Client) -> Result<Migrated> {
    db.execute("SELECT pg_advisory_lock($1)", &[&MIGRATE_LOCK])
        .await?;
    let result = migrate_locked(db).await;
    db.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATE_LOCK])
        .await
        .ok();
    result
}

async fn migrate_locked(db: &mut Client) -> Result<Migrated> {
    db.batch_execute(
        "CREATE TABLE IF NOT EXISTS memd_schema (
           version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .context("creating memd_schema")?;
    let from = current_version(db).await?;
    if from > VERSION {
        bail!(
            "the shared store's schema is version {from}, newer than this memd's {VERSION}: \
             upgrade memd"
        );
    }
    for version in from + 1..=VERSION {
        let tx = db.transaction().await?;
        tx.batch_execute(MIGRATIONS[(version - 1) as usize])
            .await
            .with_context(|| format!("schema migration {version}"))?;
        tx.execute("INSERT INTO memd_schema (version) VALUES ($1)", &[&version])
            .await?;
        tx.commit().await?;
    }
    Ok(Migrated { from, to: VERSION })
}

/// Creates the login role `name` in the memd user group (or adds an existing role to it),
/// with `password` if given. Run by the database owner.
pub async fn add_user(db: &Client, name: &str, password: Option<&str>) -> Result<()> {
    if name.is_empty()
        || name.len() > 63
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        || name.starts_with(|c: char| c.is_ascii_digit())
    {
        bail!(
            "role name {name:?}: use 1-63 lowercase letters, digits and underscores, not \
             starting with a digit"
        );
    }
    let exists: bool = db
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)",
            &[&name],
        )
        .await?
        .get(0);
    if !exists {
        db.batch_execute(&format!("CREATE ROLE {name} LOGIN"))
            .await?;
    }
    db.batch_execute(&format!("GRANT {USER_GROUP} TO {name}"))
        .await?;
    if let Some(pw) = password {
        // A parameter cannot stand in ALTER ROLE, and a statement may be logged by the server:
        // send a SCRAM-SHA-256 verifier made here, never the password itself.
        let verifier = postgres_protocol::password::scram_sha_256(pw.as_bytes());
        db.batch_execute(&format!("ALTER ROLE {name} PASSWORD '{verifier}'"))
            .await?;
    }
    Ok(())
}
