//! Lifecycle decisions: when a memory moves up (working → history → patterns), moves down
//! (patterns → history), is deleted for a low score, or expires by age (archived first, then
//! restored or deleted: `expiry_step`), and what the moved record looks like.
//!
//! Pure decisions over a `Record` and a caller-supplied `now` (Unix ms). It must never
//! perform the move, touch a store or index, or decide anything for books or memory_bank:
//! those are never promoted, demoted or deleted here.

use super::scoring::effective_score;
use crate::record::Record;
use proto::{Collection, Value};
use std::fmt;

/// working → history: score at least this…
pub const PROMOTE_TO_HISTORY_SCORE: f64 = 0.7;
/// …and at least this many uses.
pub const PROMOTE_TO_HISTORY_USES: u32 = 2;
/// history → patterns: score at least this…
pub const PROMOTE_TO_PATTERNS_SCORE: f64 = 0.9;
/// …at least this many uses…
pub const PROMOTE_TO_PATTERNS_USES: u32 = 3;
/// …and at least this much `success_count` (earned since arriving in history).
pub const PROMOTE_TO_PATTERNS_SUCCESSES: f64 = 5.0;
/// patterns → history below this score.
pub const DEMOTE_BELOW: f64 = 0.4;
/// Deleted at or below this score…
pub const DELETE_BELOW: f64 = 0.2;
/// …or, while younger than `NEW_ITEM_AGE_MS` and without a track record, at or below this one
/// (anchor §5: a new memory gets one more chance before it is judged).
pub const NEW_ITEM_DELETE_BELOW: f64 = 0.1;
/// A memory counts as new for deletion while `now − created_at` is below this (7 days).
pub const NEW_ITEM_AGE_MS: i64 = 7 * DAY_MS;
/// A working memory still in working after this long (24 h) has expired.
pub const WORKING_MAX_AGE_MS: i64 = DAY_MS;
/// A history memory this long (30 days) after entering history has expired.
pub const HISTORY_MAX_AGE_MS: i64 = 30 * DAY_MS;
/// Metadata key `promote` writes (Unix ms as a number): when the memory entered its
/// current collection, by promotion or demotion.
pub const PROMOTED_AT_KEY: &str = "promoted_at";

const DAY_MS: i64 = 86_400_000;

/// Why a memory should be deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Score under the deletion threshold.
    LowScore,
    /// Older than its collection allows (`expired`).
    Expired,
}

impl DeleteReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteReason::LowScore => "low_score",
            DeleteReason::Expired => "expired",
        }
    }
}

/// What should happen to a memory after it was scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Promote { to: Collection },
    Demote { to: Collection },
    Delete { reason: DeleteReason },
}

/// The move `promote` was asked for is not one the lifecycle makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveError {
    /// Only working → history, history → patterns and patterns → history exist.
    NotAllowed { from: Collection, to: Collection },
    /// The new id's prefix is not the target collection.
    IdMismatch { id: String, to: Collection },
}

impl fmt::Display for MoveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MoveError::NotAllowed { from, to } => {
                write!(
                    f,
                    "no lifecycle move from {} to {}",
                    from.as_str(),
                    to.as_str()
                )
            }
            MoveError::IdMismatch { id, to } => {
                write!(f, "id {id} does not belong to {}", to.as_str())
            }
        }
    }
}

impl std::error::Error for MoveError {}

/// The transition a memory qualifies for now, checked after each scoring.
///
/// Deletion comes first (a memory far below every promotion bar), then the one move its
/// collection allows. Books and memory_bank never get one.
pub fn next_transition(rec: &Record, now_ms: i64) -> Option<Transition> {
    if !rec.collection.is_outcome_scored() {
        return None;
    }
    let score = effective_score(rec);
    // At the threshold counts: 0.5 → 0.7 (worked) → 0.4 → 0.1 is three failures, and the
    // memory must go then, not after a fourth (issue 12's replay).
    if score <= deletion_threshold(rec, now_ms) {
        return Some(Transition::Delete {
            reason: DeleteReason::LowScore,
        });
    }
    match rec.collection {
        Collection::Working if qualifies_for_history(rec, score) => Some(Transition::Promote {
            to: Collection::History,
        }),
        Collection::History if qualifies_for_patterns(rec, score) => Some(Transition::Promote {
            to: Collection::Patterns,
        }),
        Collection::Patterns if score < DEMOTE_BELOW => Some(Transition::Demote {
            to: Collection::History,
        }),
        _ => None,
    }
}

/// The score under which `rec` is deleted at `now_ms`.
///
/// The lenient threshold is one more chance for a memory nobody has vouched for yet. A memory
/// in history or patterns has a track record: without this rule a proven note younger than a
/// week survived three failures in a row (1.0 → 0.7 → 0.4 → 0.1) and kept misleading the
/// agent (bench/EVAL.md, simulated session).
pub fn deletion_threshold(rec: &Record, now_ms: i64) -> f64 {
    // A former id of another collection means it was moved here; an imported memory's own old
    // id (same collection, `memd import --from-roampal`) is no track record.
    let own_prefix = format!("{}_", rec.collection.as_str());
    let has_track_record = matches!(rec.collection, Collection::History | Collection::Patterns)
        || !rec.moves.is_empty()
        || rec.former_ids.iter().any(|f| !f.starts_with(&own_prefix));
    if !has_track_record && age_ms(rec.created_at, now_ms) < NEW_ITEM_AGE_MS {
        NEW_ITEM_DELETE_BELOW
    } else {
        DELETE_BELOW
    }
}

fn qualifies_for_history(rec: &Record, score: f64) -> bool {
    score >= PROMOTE_TO_HISTORY_SCORE && rec.uses >= PROMOTE_TO_HISTORY_USES
}

fn qualifies_for_patterns(rec: &Record, score: f64) -> bool {
    score >= PROMOTE_TO_PATTERNS_SCORE
        && rec.uses >= PROMOTE_TO_PATTERNS_USES
        && rec.success_count.is_finite()
        && rec.success_count >= PROMOTE_TO_PATTERNS_SUCCESSES
}

/// Scheduled cleanup: a working memory more than 24 h old (it is still in working, so it
/// was never promoted) or a history memory more than 30 days after it entered history.
///
/// History age counts from `promoted_at` (see `entered_collection_at`), not `created_at`:
/// `created_at` is inherited through promotions, so a months-old pattern demoted to
/// history would otherwise be deleted at the next sweep with no chance to recover.
pub fn expired(rec: &Record, now_ms: i64) -> bool {
    match rec.collection {
        Collection::Working => age_ms(rec.created_at, now_ms) > WORKING_MAX_AGE_MS,
        Collection::History => age_ms(entered_collection_at(rec), now_ms) > HISTORY_MAX_AGE_MS,
        Collection::Books | Collection::Patterns | Collection::MemoryBank => false,
    }
}

/// How long an expired memory stays archived (and restorable) before it is deleted.
pub const EXPIRED_KEEP_MS: i64 = 7 * DAY_MS;

/// The metadata key an expiry sets (Unix ms) and a restore removes (`state::expiry`).
pub const EXPIRED_AT_KEY: &str = "expired_at";

/// When `rec` was archived as expired, if it was.
pub fn expired_at(rec: &Record) -> Option<i64> {
    match rec.metadata.get(EXPIRED_AT_KEY) {
        Some(Value::Number(ms)) if ms.is_finite() => Some(*ms as i64),
        _ => None,
    }
}

/// What expiry owes a memory at a lifecycle pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiryStep {
    /// It has expired: archive it, restorable.
    Archive,
    /// Archived as expired but not expired at `now` (the clock had jumped ahead): restore it.
    Restore,
    /// Expired more than `EXPIRED_KEEP_MS` ago: delete it.
    Delete,
}

/// The expiry step `rec` is due at `now`, if any. A memory with a promotion due is not
/// archived for age (it earned its place); one archived for another reason is left alone.
pub fn expiry_step(rec: &Record, now_ms: i64) -> Option<ExpiryStep> {
    match expired_at(rec) {
        Some(_) if !expired(rec, now_ms) => Some(ExpiryStep::Restore),
        Some(at) if now_ms - at > EXPIRED_KEEP_MS => Some(ExpiryStep::Delete),
        Some(_) => None,
        None if rec.archived || next_transition(rec, now_ms).is_some() => None,
        None => expired(rec, now_ms).then_some(ExpiryStep::Archive),
    }
}

/// When the memory entered its current collection: `metadata.promoted_at` when it holds a
/// usable timestamp, else `created_at` (a memory stored straight into its collection).
pub fn entered_collection_at(rec: &Record) -> i64 {
    match rec.metadata.get(PROMOTED_AT_KEY) {
        Some(Value::Number(ms)) if ms.is_finite() && *ms >= rec.created_at as f64 => *ms as i64,
        _ => rec.created_at,
    }
}

/// Time since `then`; a timestamp in the future counts as age 0.
fn age_ms(then: i64, now_ms: i64) -> i64 {
    now_ms.saturating_sub(then).max(0)
}

/// The record as it will live in `to`, under `new_id`.
///
/// Keeps content, score, created_at (inherited, as seed 002 documents), outcome history,
/// last outcome/use and the internal `key` (the caller may assign a new one); appends the
/// old id to `former_ids`; stamps `metadata.promoted_at = now_ms` and `updated_at`.
///
/// Moving up (working → history, history → patterns) resets `uses` and `success_count` to
/// 0: each level is earned afresh, so reaching patterns takes at least five successes
/// scored while in history (e.g. five `worked`), not ones carried over from working.
/// Resetting `uses` together with `success_count` keeps Wilson honest: keeping the uses
/// alone would read as "used N times, never helped" right after a promotion. Moving down
/// keeps the counters: the memory's record does not improve by being demoted.
pub fn promote(
    rec: &Record,
    to: Collection,
    new_id: String,
    now_ms: i64,
) -> Result<Record, MoveError> {
    let upward = match (rec.collection, to) {
        (Collection::Working, Collection::History)
        | (Collection::History, Collection::Patterns) => true,
        (Collection::Patterns, Collection::History) => false,
        (from, to) => return Err(MoveError::NotAllowed { from, to }),
    };
    if Collection::of_id(&new_id) != Some(to) {
        return Err(MoveError::IdMismatch { id: new_id, to });
    }
    let mut moved = rec.clone();
    if rec.id != new_id && !moved.former_ids.contains(&rec.id) {
        moved.former_ids.push(rec.id.clone());
    }
    // An id can come back (history → patterns → history reusing a suffix); it is then
    // current again, not former.
    moved.former_ids.retain(|old| *old != new_id);
    moved.id = new_id;
    moved.collection = to;
    moved.updated_at = now_ms;
    moved.moves.push(crate::record::MoveEntry {
        from: rec.collection,
        to,
        at: now_ms,
    });
    let excess = moved.moves.len().saturating_sub(crate::record::MOVES_KEPT);
    moved.moves.drain(..excess);
    moved
        .metadata
        .insert(PROMOTED_AT_KEY.to_string(), Value::Number(now_ms as f64));
    if upward {
        moved.uses = 0;
        moved.success_count = 0.0;
    }
    Ok(moved)
}
