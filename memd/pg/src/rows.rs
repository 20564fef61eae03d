//! A memory as a row of `memd_memories`, both ways.
//!
//! Owns the mapping between `Record` and the table's columns: the columns PostgreSQL searches
//! and counts on (content, scores, embedding, visibility) are columns; the rest of the record
//! rides in `record` (jsonb). Must never write a field twice in two places, and never let a
//! row that does not decode stop the others: it is skipped and logged, its message cut short
//! (`bounded`: a row's text is a teammate's to choose).

use anyhow::{Context, Result};
use memd_engine::record::Record;
use memd_engine::state::SharedRow;
use memd_engine::state::sync::quantized;
use proto::Outcome;
use serde_json::Value;
use tokio_postgres::Row;

/// Fields that have a column of their own, or that only mean something on one machine.
const NOT_IN_RECORD: &[&str] = &[
    "key",
    "id",
    "collection",
    "content",
    "project",
    "team",
    "origin",
    "score",
    "uses",
    "success_count",
    "confidence",
    "outcome_history",
    "last_outcome",
    "last_used",
];

/// `r`'s remaining fields, for the `record` column.
pub fn rest_of(r: &Record) -> Result<Value> {
    let Value::Object(mut fields) = serde_json::to_value(r)? else {
        anyhow::bail!("a record did not encode as an object");
    };
    for k in NOT_IN_RECORD {
        fields.remove(*k);
    }
    Ok(Value::Object(fields))
}

/// A row of `sync::FEED`, with its change number.
pub fn shared_row(row: &Row) -> Result<(i64, SharedRow)> {
    let uid: String = row.try_get("uid")?;
    let deleted: bool = row.try_get("deleted")?;
    let change_seq: i64 = row.try_get("change_seq")?;
    let owner: String = row.try_get("owner")?;
    let counts_only: bool = row.try_get("counts_only")?;
    let record = if deleted {
        placeholder(&uid)
    } else if counts_only {
        counts_of(row, placeholder(&uid))?
    } else {
        record_of(row).with_context(|| format!("shared memory {uid}"))?
    };
    let vector: Option<Vec<f32>> = row.try_get("embedding")?;
    Ok((
        change_seq,
        SharedRow {
            uid,
            owner,
            deleted,
            record,
            vector: vector.map(|v| quantized(&v)),
            counts_only,
        },
    ))
}

/// The whole memory of a `memd_memories` row (the columns `sync::FEED` names).
pub fn record_of(row: &Row) -> Result<Record> {
    let Value::Object(mut fields) = row.try_get::<_, Value>("record")? else {
        anyhow::bail!("the record column is not an object");
    };
    for k in ["id", "collection", "content", "project"] {
        fields.insert(k.into(), Value::from(row.try_get::<_, Option<String>>(k)?));
    }
    let team = row.try_get::<_, String>("visibility")? == "team";
    fields.insert("team".into(), Value::from(team));
    // The counts have columns of their own: neutral here, the row's just below.
    for (k, v) in [
        ("key", Value::from(0)),
        ("score", Value::from(0.0)),
        ("uses", Value::from(0)),
        ("success_count", Value::from(0.0)),
        ("outcome_history", Value::Array(Vec::new())),
    ] {
        fields.insert(k.into(), v);
    }
    counts_of(row, serde_json::from_value(Value::Object(fields))?)
}

/// `r` with the row's scores and outcome history.
fn counts_of(row: &Row, mut r: Record) -> Result<Record> {
    r.score = row.try_get("score")?;
    r.uses = u32::try_from(row.try_get::<_, i32>("uses")?).unwrap_or(0);
    r.success_count = row.try_get("success_count")?;
    r.confidence = row.try_get("confidence")?;
    r.outcome_history = readable_history(row.try_get("outcome_history")?, &r.id);
    r.last_outcome = row
        .try_get::<_, Option<String>>("last_outcome")?
        .and_then(|o| Outcome::parse(&o));
    r.last_used = row.try_get("last_used")?;
    Ok(r)
}

/// The entries of an outcome history that read as outcomes. One that does not (a label written
/// before the database checked them, issue 36: one "meh" made every daemon skip the row, so
/// its owner's later edits never arrived) is left out and counted in one short log line that
/// quotes none of it.
fn readable_history(history: Value, id: &str) -> Vec<memd_engine::record::OutcomeEntry> {
    let Value::Array(entries) = history else {
        tracing::warn!("shared memory {id}: its outcome history is not a list; left out");
        return Vec::new();
    };
    let total = entries.len();
    let kept: Vec<_> = entries
        .into_iter()
        .filter_map(|e| serde_json::from_value(e).ok())
        .collect();
    if kept.len() < total {
        tracing::warn!(
            "shared memory {}: {} unreadable outcome entries left out",
            bounded(id),
            total - kept.len()
        );
    }
    kept
}

/// What a deleted row carries: nothing but its uid matters.
fn placeholder(uid: &str) -> Record {
    let mut r = memd_engine::core::Core::new_record(proto::Collection::Working, String::new(), 0);
    r.id = format!("deleted_{uid}");
    r
}

/// What a log line quotes of a message that may carry a teammate's text.
pub const LOG_QUOTE_CHARS: usize = 200;

/// `text` cut to [`LOG_QUOTE_CHARS`] characters, with how much was left out.
pub fn bounded(text: &str) -> String {
    let total = text.chars().count();
    if total <= LOG_QUOTE_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(LOG_QUOTE_CHARS).collect();
    format!("{head}… ({} more characters)", total - LOG_QUOTE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_column_leaves_out_what_has_a_column() {
        let mut r =
            memd_engine::core::Core::new_record(proto::Collection::MemoryBank, "x".into(), 5);
        r.tags = vec!["deploy".into()];
        r.team = true;
        let rest = rest_of(&r).unwrap();
        for k in NOT_IN_RECORD {
            assert!(rest.get(*k).is_none(), "{k} in {rest}");
        }
        assert_eq!(rest["tags"][0], "deploy");
        assert_eq!(rest["created_at"], 5);
    }
}
