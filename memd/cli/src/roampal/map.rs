//! What a Roampal memory becomes in memd.
//!
//! Owns the field-by-field translation of one ChromaDB [`Row`] into a memd [`Record`]: the
//! collection, the learned state (score, uses, success count, outcome history, last outcome,
//! last use), times, importance and confidence, tags, archived status, memory type,
//! conversation id, book title and chunk order, and the Roampal id (kept as a former id, so
//! every lookup by it finds the memory, and as `metadata.roampal_id`). Fields memd has no
//! place for are carried in `metadata` under their Roampal names. Must never invent a value:
//! a known field with a shape it cannot read is an error naming the memory and the field.
//! Redaction happens in the daemon, which scrubs every imported line.

use super::chroma::{Field, Row, Scalar};
use super::when;
use memd_engine::record::{MoveEntry, OutcomeEntry, Record};
use proto::{Collection, Metadata, Outcome, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Fields that become `Record` fields (or are dropped as copies of the document); every other
/// key is kept in `metadata`.
const MAPPED: [&str; 20] = [
    "score",
    "uses",
    "success_count",
    "outcome_history",
    "last_outcome",
    "last_used",
    "created_at",
    "timestamp",
    "updated_at",
    "importance",
    "confidence",
    "tags",
    "noun_tags",
    "status",
    "text",
    "content",
    "total_chunks",
    "promotion_history",
    "type",
    "memory_type",
];

/// Roampal memory-bank tags that say a fact is about the work, not the person: with
/// `--project` such facts belong to the project (memd's own default for facts); identity,
/// preference, goal and agent-growth facts stay global.
const PROJECT_TAGS: [&str; 2] = ["project", "system_mastery"];

/// Rounds Roampal's float arithmetic (0.8999999999999999) to the value it meant, so memd's
/// thresholds (promotion at 0.9) see what Roampal's users saw.
fn tidy(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

/// The memd collection of a ChromaDB collection name.
pub fn collection_of(chroma_name: &str) -> Option<Collection> {
    Collection::parse(chroma_name.strip_prefix("roampal_")?)
}

/// The memd id an imported Roampal memory gets: the same on every run (so a second import
/// knows it), in memd's own `<collection>_<12 hex>` shape.
pub fn memd_id(collection: Collection, roampal_id: &str) -> String {
    let digest = Sha256::digest(format!("roampal\0{roampal_id}").as_bytes());
    format!("{}_{}", collection.as_str(), &hex::encode(digest)[..12])
}

/// The import-wide choices.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--project`: the project of project-bound memories.
    pub project: Option<String>,
    /// Ids of every row in the store: an `original_id` still present as its own row is not
    /// claimed as a former id (two memories cannot share one id).
    pub live_ids: std::collections::HashSet<String>,
    /// Used when a row carries no time at all.
    pub now_ms: i64,
}

/// Translates one row, or says which field of which memory could not be read.
pub fn to_record(row: &Row, opts: &Options) -> Result<Record, String> {
    let fail =
        |field: &str, why: String| format!("{} ({}): {field}: {why}", row.id, row.collection);
    if let Some((key, bytes)) = row.oversized.first() {
        let field = if key == "chroma:document" {
            "document"
        } else {
            key
        };
        return Err(fail(
            field,
            format!(
                "{bytes} bytes, over the {} MB a value may have: not read",
                super::chroma::VALUE_MAX_BYTES / (1024 * 1024)
            ),
        ));
    }
    let collection = collection_of(&row.collection)
        .ok_or_else(|| fail("collection", "not a Roampal collection".into()))?;
    let f = |k: &str| row.fields.get(k);
    let content = row
        .document
        .clone()
        .or_else(|| text(f("text")))
        .or_else(|| text(f("content")))
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| fail("document", "empty: nothing to import".into()))?;
    let created_at = match f("created_at").or(f("timestamp")) {
        Some(v) => time_of(v).map_err(|e| fail("created_at", e))?,
        None => row
            .stored_at
            .as_deref()
            .and_then(|t| when::parse_text(&format!("{t}Z")).ok())
            .unwrap_or(opts.now_ms),
    };
    let last_used = f("last_used")
        .map(time_of)
        .transpose()
        .map_err(|e| fail("last_used", e))?;
    let updated_at = f("updated_at")
        .map(time_of)
        .transpose()
        .map_err(|e| fail("updated_at", e))?
        .or(last_used)
        .unwrap_or(created_at)
        .max(created_at);
    let default_score = match collection {
        Collection::MemoryBank => 1.0,
        _ => 0.5,
    };
    let score = unit(f("score"), default_score).map_err(|e| fail("score", e))?;
    let importance = f("importance")
        .map(|v| unit(Some(v), 0.0))
        .transpose()
        .map_err(|e| fail("importance", e))?;
    let confidence = f("confidence")
        .map(|v| unit(Some(v), 0.0))
        .transpose()
        .map_err(|e| fail("confidence", e))?;
    let uses = count(f("uses")).map_err(|e| fail("uses", e))?;
    let success_count = non_negative(f("success_count")).map_err(|e| fail("success_count", e))?;
    let (outcome_history, reasons) = match f("outcome_history") {
        Some(v) => history(v).map_err(|e| fail("outcome_history", e))?,
        None => (Vec::new(), None),
    };
    let last_outcome = match text(f("last_outcome")).as_deref().map(str::trim) {
        None | Some("") => outcome_history.last().map(|e| e.outcome),
        Some(s) => Some(Outcome::parse(s).ok_or_else(|| {
            fail(
                "last_outcome",
                format!("{s:?} is not worked/failed/partial/unknown"),
            )
        })?),
    };
    let mut tags = string_list(f("tags")).map_err(|e| fail("tags", e))?;
    for t in string_list(f("noun_tags")).map_err(|e| fail("noun_tags", e))? {
        if !tags.contains(&t) {
            tags.push(t);
        }
    }
    let archived = match text(f("status")).as_deref() {
        None | Some("active") | Some("") => false,
        Some("archived") => true,
        Some(other) => {
            return Err(fail(
                "status",
                format!("{other:?} is not active or archived"),
            ));
        }
    };
    let moves = match f("promotion_history") {
        Some(v) => promotions(v).map_err(|e| fail("promotion_history", e))?,
        None => Vec::new(),
    };
    let mut metadata = carried(row);
    metadata.insert("roampal_id".into(), Value::from(row.id.as_str()));
    // Key takeaways say `type`, everything else `memory_type`; memd reads only the latter.
    if let Some(kind) = text(f("memory_type")).or_else(|| text(f("type"))) {
        metadata.insert("memory_type".into(), Value::from(kind));
    }
    if let Some(r) = reasons {
        metadata.insert("roampal_outcome_history".into(), r);
    }
    // memd ages a history memory from when it entered history (`promoted_at`, Unix ms), not
    // from `created_at`, which a promotion inherits.
    if matches!(collection, Collection::History | Collection::Patterns)
        && let Some(at) = entered_at(row, &moves).map_err(|e| fail("promoted_at", e))?
    {
        metadata.insert(
            memd_engine::learn::lifecycle::PROMOTED_AT_KEY.into(),
            Value::Number(at as f64),
        );
    }
    if collection == Collection::Books
        && let Some(total) = f("total_chunks")
    {
        let n = count(Some(total)).map_err(|e| fail("total_chunks", e))?;
        metadata.insert("chunk_count".into(), Value::Number(f64::from(n)));
    }
    let former_ids = former_ids(row, &moves, text(f("original_id")), opts);
    let project = opts
        .project
        .clone()
        .filter(|_| project_bound(collection, &tags));
    Ok(Record {
        key: 0,
        id: memd_id(collection, &row.id),
        collection,
        content,
        created_at,
        updated_at,
        score,
        uses,
        success_count,
        outcome_history,
        last_outcome,
        last_used,
        tags,
        importance,
        confidence,
        archived,
        former_ids,
        metadata,
        project,
        team: false,
        origin: None,
        moves,
    })
}

/// Every id this memory had in Roampal, oldest first, ending with its current one: Roampal
/// keeps an id's suffix through promotions (`working_1a2b3c4d` → `history_1a2b3c4d`), so each
/// collection it moved from names an id an agent may still quote. (`promoted_from` names a
/// collection, not an id.) An id that is still another row's own is left to that row.
fn former_ids(
    row: &Row,
    moves: &[MoveEntry],
    original: Option<String>,
    opts: &Options,
) -> Vec<String> {
    let suffix = id_suffix(&row.id);
    let mut ids: Vec<String> = Vec::new();
    // Roampal's hourly batch promotion and its demotion write only the collection they came
    // from (`promoted_from`, `demoted_from`), no `promotion_history`.
    let named_from = ["promoted_from", "demoted_from"]
        .iter()
        .filter_map(|k| text(row.fields.get(*k)))
        .filter_map(|c| Collection::parse(&c));
    let moved_from = moves
        .iter()
        .map(|m| m.from)
        .chain(named_from)
        .filter_map(|c| suffix.map(|s| format!("{}_{s}", c.as_str())));
    for id in moved_from.chain(original) {
        if id != row.id && !opts.live_ids.contains(&id) && !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids.push(row.id.clone());
    ids
}

/// The hex part of a Roampal id, which promotions keep (`history_1a2b3c4d` → `1a2b3c4d`).
fn id_suffix(id: &str) -> Option<&str> {
    Collection::ALL
        .iter()
        .find_map(|c| id.strip_prefix(c.as_str())?.strip_prefix('_'))
        .filter(|s| !s.is_empty())
}

/// When the memory entered history or patterns: its last move, else the time Roampal wrote
/// with a promotion (`promoted_at`, `promotion_time`, `promoted_to_history_at`).
fn entered_at(row: &Row, moves: &[MoveEntry]) -> Result<Option<i64>, String> {
    if let Some(last) = moves.last() {
        return Ok(Some(last.at));
    }
    for key in ["promoted_at", "promotion_time", "promoted_to_history_at"] {
        if let Some(v) = row.fields.get(key) {
            return time_of(v).map(Some);
        }
    }
    Ok(None)
}

/// `promotion_history`: a JSON list of `{from, to, timestamp, ...}` (collection names).
fn promotions(field: &Field) -> Result<Vec<MoveEntry>, String> {
    let Field::One(Scalar::Str(s)) = field else {
        return Err("not a JSON list in text".into());
    };
    if s.trim().is_empty() {
        return Ok(Vec::new());
    }
    let items: Vec<BTreeMap<String, serde_json::Value>> =
        serde_json::from_str(s).map_err(|e| format!("not a JSON list of moves: {e}"))?;
    let collection = |item: &BTreeMap<String, serde_json::Value>, k: &str, i: usize| {
        let name = item.get(k).and_then(|v| v.as_str()).unwrap_or("");
        Collection::parse(name)
            .ok_or_else(|| format!("entry {i}: {k} {name:?} is not a collection"))
    };
    let mut moves = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = match item.get("timestamp") {
            Some(serde_json::Value::String(t)) => when::parse_text(t),
            Some(serde_json::Value::Number(n)) => when::parse_number(n.as_f64().unwrap_or(-1.0)),
            _ => Err("no timestamp".into()),
        }
        .map_err(|e| format!("entry {i}: {e}"))?;
        moves.push(MoveEntry {
            from: collection(item, "from", i)?,
            to: collection(item, "to", i)?,
            at,
        });
    }
    let start = moves.len().saturating_sub(memd_engine::record::MOVES_KEPT);
    Ok(moves.split_off(start))
}

/// Does this memory belong to a project when the user names one? What came out of
/// conversations does (memd stores its own that way); memory-bank facts only when tagged as
/// being about the work; books stay global (memd's default for books).
fn project_bound(collection: Collection, tags: &[String]) -> bool {
    match collection {
        Collection::Working | Collection::History | Collection::Patterns => true,
        Collection::MemoryBank => tags.iter().any(|t| PROJECT_TAGS.contains(&t.as_str())),
        Collection::Books => false,
    }
}

/// Every field memd has no place for, under its Roampal name (JSON text decoded when it is a
/// JSON list or object, as Roampal writes `promotion_history`).
fn carried(row: &Row) -> Metadata {
    row.fields
        .iter()
        .filter(|(k, _)| !MAPPED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), value_of(v)))
        .collect()
}

fn value_of(field: &Field) -> Value {
    match field {
        Field::One(Scalar::Str(s)) => decoded_json(s).unwrap_or_else(|| Value::from(s.as_str())),
        Field::One(s) => scalar_value(s),
        Field::Many(items) => Value::List(items.iter().map(scalar_value).collect()),
    }
}

fn scalar_value(s: &Scalar) -> Value {
    match s {
        Scalar::Str(s) => Value::from(s.as_str()),
        Scalar::Int(i) => Value::Number(*i as f64),
        Scalar::Float(x) => Value::Number(tidy(*x)),
        Scalar::Bool(b) => Value::Bool(*b),
    }
}

/// A JSON list or object written as text; plain strings stay strings.
fn decoded_json(s: &str) -> Option<Value> {
    let t = s.trim_start();
    if !(t.starts_with('[') || t.starts_with('{')) {
        return None;
    }
    serde_json::from_str::<serde_json::Value>(s)
        .ok()
        .map(json_value)
}

fn json_value(v: serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().map(tidy).unwrap_or(0.0)),
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Array(a) => Value::List(a.into_iter().map(json_value).collect()),
        serde_json::Value::Object(o) => {
            Value::Map(o.into_iter().map(|(k, v)| (k, json_value(v))).collect())
        }
    }
}

fn text(field: Option<&Field>) -> Option<String> {
    match field? {
        Field::One(Scalar::Str(s)) => Some(s.clone()),
        Field::One(Scalar::Int(i)) => Some(i.to_string()),
        _ => None,
    }
}

fn number(field: &Field) -> Result<f64, String> {
    match field {
        Field::One(Scalar::Int(i)) => Ok(*i as f64),
        Field::One(Scalar::Float(x)) => Ok(*x),
        Field::One(Scalar::Str(s)) => s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a number")),
        Field::One(Scalar::Bool(b)) => Err(format!("{b} is not a number")),
        Field::Many(_) => Err("a list, not a number".into()),
    }
}

fn unit(field: Option<&Field>, default: f64) -> Result<f64, String> {
    let Some(field) = field else {
        return Ok(default);
    };
    let x = tidy(number(field)?);
    match x.is_finite() && (0.0..=1.0).contains(&x) {
        true => Ok(x),
        false => Err(format!("{x} is outside 0-1")),
    }
}

fn non_negative(field: Option<&Field>) -> Result<f64, String> {
    let Some(field) = field else { return Ok(0.0) };
    let x = tidy(number(field)?);
    match x.is_finite() && x >= 0.0 {
        true => Ok(x),
        false => Err(format!("{x} is negative")),
    }
}

fn count(field: Option<&Field>) -> Result<u32, String> {
    let x = non_negative(field)?;
    match x.fract() == 0.0 && x <= f64::from(u32::MAX) {
        true => Ok(x as u32),
        false => Err(format!("{x} is not a whole number")),
    }
}

fn time_of(field: &Field) -> Result<i64, String> {
    match field {
        Field::One(Scalar::Str(s)) => when::parse_text(s),
        Field::One(Scalar::Int(i)) => when::parse_number(*i as f64),
        Field::One(Scalar::Float(x)) => when::parse_number(*x),
        _ => Err("not a time".into()),
    }
}

/// Tags as Roampal writes them: a JSON list in text, a ChromaDB array, or (older rows) one
/// comma-separated text. Empty entries are dropped.
fn string_list(field: Option<&Field>) -> Result<Vec<String>, String> {
    let items: Vec<String> = match field {
        None => Vec::new(),
        Some(Field::Many(items)) => items
            .iter()
            .map(|s| match s {
                Scalar::Str(s) => Ok(s.clone()),
                other => Err(format!("{other:?} is not text")),
            })
            .collect::<Result<_, _>>()?,
        Some(Field::One(Scalar::Str(s))) if s.trim_start().starts_with('[') => {
            serde_json::from_str::<Vec<String>>(s).map_err(|e| format!("{s:?}: {e}"))?
        }
        Some(Field::One(Scalar::Str(s))) => s.split(',').map(str::to_string).collect(),
        Some(Field::One(other)) => return Err(format!("{other:?} is not a list of text")),
    };
    Ok(items
        .into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect())
}

/// `outcome_history`: a JSON list of `{outcome, timestamp, reason}`. Returns memd's entries
/// and, when any entry gave a reason, the list as Roampal wrote it (memd keeps no reasons).
fn history(field: &Field) -> Result<(Vec<OutcomeEntry>, Option<Value>), String> {
    let Field::One(Scalar::Str(s)) = field else {
        return Err("not a JSON list in text".into());
    };
    if s.trim().is_empty() {
        return Ok((Vec::new(), None));
    }
    let items: Vec<BTreeMap<String, serde_json::Value>> =
        serde_json::from_str(s).map_err(|e| format!("not a JSON list of entries: {e}"))?;
    let mut entries = Vec::with_capacity(items.len());
    let mut any_reason = false;
    for (i, item) in items.iter().enumerate() {
        let outcome = item
            .get("outcome")
            .and_then(|v| v.as_str())
            .and_then(Outcome::parse)
            .ok_or_else(|| format!("entry {i}: no outcome worked/failed/partial/unknown"))?;
        let at = match item.get("timestamp") {
            Some(serde_json::Value::String(t)) => when::parse_text(t),
            Some(serde_json::Value::Number(n)) => when::parse_number(n.as_f64().unwrap_or(-1.0)),
            _ => Err("no timestamp".into()),
        }
        .map_err(|e| format!("entry {i}: {e}"))?;
        any_reason |= item
            .get("reason")
            .and_then(|r| r.as_str())
            .is_some_and(|r| !r.trim().is_empty());
        entries.push(OutcomeEntry { outcome, at });
    }
    let keep = memd_engine::record::HISTORY_LEN;
    let start = entries.len().saturating_sub(keep);
    let raw = any_reason.then(|| json_value(serde_json::from_str(s).unwrap_or_default()));
    Ok((entries.split_off(start), raw))
}

#[cfg(test)]
#[path = "map_tests.rs"]
mod tests;
