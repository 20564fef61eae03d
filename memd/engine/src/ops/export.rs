//! Export and import of memories as JSON Lines: one stored [`Record`] per line.
//!
//! Owns the export and import operations behind `GET /api/export[?collection=C]` and
//! `POST /api/import` (the server streams the bytes). An export is lossless: ids, project,
//! former ids, scores, outcome history, timestamps, tags and metadata are written as stored.
//! Import is idempotent: a record whose id (current or former) already exists is skipped, an
//! identical content in the same collection is a duplicate, everything else is inserted as it
//! was (with a new internal key; embeddings are rebuilt in the background). Must never
//! overwrite or merge into an existing memory, and never accept a record it cannot validate.

use crate::error::ApiError;
use crate::record::Record;
use crate::redact;
use crate::state::Db;
use crate::state::ops::{Op, Output};
use proto::Collection;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Largest import request; the CLI sends bigger files in several requests.
pub const IMPORT_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Ops per commit while importing (each commit is one fsync).
const IMPORT_BATCH: usize = 256;
/// Lines reported individually when rejected; beyond that only the count grows.
const REJECTS_LISTED: usize = 100;

/// What `POST /api/import` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ImportResponse {
    /// Records stored.
    pub imported: usize,
    /// Records skipped because their id is already known.
    pub existing: usize,
    /// Records skipped because the same content is already stored in that collection.
    pub duplicates: usize,
    /// Lines that are not valid records (1-based line numbers of the request body).
    pub rejected: usize,
    #[serde(default)]
    pub errors: Vec<RejectedLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RejectedLine {
    pub line: usize,
    pub reason: String,
}

impl ImportResponse {
    fn reject(&mut self, line: usize, reason: String) {
        self.rejected += 1;
        if self.errors.len() < REJECTS_LISTED {
            self.errors.push(RejectedLine { line, reason });
        }
    }
}

/// Export and import read and write the state only.
pub struct Transfer<'a> {
    pub db: &'a Db,
}

impl Transfer<'_> {
    /// Every record (of one collection, if given) as JSON Lines, in insertion order.
    pub fn export(&self, collection: Option<Collection>) -> Result<Vec<u8>, ApiError> {
        let mut records: Vec<Record> = self.db.read(|s| {
            s.records()
                .filter(|r| collection.is_none_or(|c| r.collection == c))
                .cloned()
                .collect()
        });
        records.sort_by_key(|r| r.key);
        let mut out = Vec::with_capacity(records.len() * 512);
        for r in &records {
            serde_json::to_writer(&mut out, r)
                .map_err(|e| ApiError::internal(format!("cannot encode {}: {e}", r.id)))?;
            out.push(b'\n');
        }
        Ok(out)
    }

    /// Imports JSON Lines produced by [`Core::export`] (see the module docs for the rules).
    /// With `dry_run` nothing is written: the answer counts what an import would do now.
    pub async fn import(&self, jsonl: &[u8], dry_run: bool) -> Result<ImportResponse, ApiError> {
        let mut resp = ImportResponse::default();
        let mut seen: HashSet<String> = HashSet::new();
        // Content already counted in this request, as the store compares it (whitespace-blind).
        let mut seen_content: HashSet<(Collection, u64)> = HashSet::new();
        let mut pending: Vec<(usize, Op)> = Vec::new();
        for (n, line) in jsonl.split(|b| *b == b'\n').enumerate() {
            let line_no = n + 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let mut rec: Record = match serde_json::from_slice(line) {
                Ok(r) => r,
                Err(e) => {
                    resp.reject(line_no, format!("not a memd record: {e}"));
                    continue;
                }
            };
            if let Err(reason) = validate(&rec) {
                resp.reject(line_no, reason);
                continue;
            }
            let known = self.db.read(|s| {
                s.by_id(&rec.id).is_some() || rec.former_ids.iter().any(|f| s.by_id(f).is_some())
            });
            if known || !seen.insert(rec.id.clone()) {
                resp.existing += 1;
                continue;
            }
            rec.key = 0;
            // An imported memory is this store's own, wherever it was exported from; one that
            // was a copy of someone's shared memory is not shared again from here.
            if rec.origin.take().is_some() {
                rec.team = false;
            }
            rec.content = redact::scrub(&rec.content).text;
            rec.tags = rec.tags.iter().map(|t| redact::scrub(t).text).collect();
            rec.metadata = crate::redact::scrub_metadata(std::mem::take(&mut rec.metadata));
            if dry_run {
                let stored = self.db.read(|s| {
                    s.duplicate_of(rec.collection, rec.project.as_deref(), &rec.content)
                        .is_some()
                });
                let hash = crate::state::scoped_hash(rec.project.as_deref(), &rec.content);
                let again = !seen_content.insert((rec.collection, hash));
                match stored || again {
                    true => resp.duplicates += 1,
                    false => resp.imported += 1,
                }
                continue;
            }
            pending.push((line_no, Op::Insert(Box::new(rec))));
        }
        while !pending.is_empty() {
            let rest = pending.split_off(pending.len().min(IMPORT_BATCH));
            let batch = std::mem::replace(&mut pending, rest);
            let (lines, ops): (Vec<usize>, Vec<Op>) = batch.into_iter().unzip();
            for (line_no, out) in lines.into_iter().zip(self.db.commit(ops).await?) {
                match out {
                    Output::Inserted { .. } => resp.imported += 1,
                    Output::Duplicate { .. } => resp.duplicates += 1,
                    // The id appeared between the check and the commit (a concurrent import).
                    Output::Rejected(m) if m.contains("already exists") => resp.existing += 1,
                    Output::Rejected(m) => resp.reject(line_no, m),
                    other => resp.reject(line_no, format!("unexpected store answer {other:?}")),
                }
            }
        }
        Ok(resp)
    }
}

fn validate(r: &Record) -> Result<(), String> {
    let unit = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
    if r.id.trim().is_empty() || r.id.len() > proto::limits::ID_MAX_CHARS {
        return Err(format!(
            "id must be 1-{} characters",
            proto::limits::ID_MAX_CHARS
        ));
    }
    if r.content.trim().is_empty() {
        return Err(format!("{}: content is empty", r.id));
    }
    if !unit(r.score) {
        return Err(format!("{}: score must be within 0-1", r.id));
    }
    if !(r.success_count.is_finite() && r.success_count >= 0.0) {
        return Err(format!(
            "{}: success_count must be a non-negative number",
            r.id
        ));
    }
    if r.importance.is_some_and(|x| !unit(x)) || r.confidence.is_some_and(|x| !unit(x)) {
        return Err(format!(
            "{}: importance and confidence must be within 0-1",
            r.id
        ));
    }
    if r.project
        .as_deref()
        .is_some_and(|p| p.trim().is_empty() || p.len() > proto::limits::PROJECT_MAX_CHARS)
    {
        return Err(format!(
            "{}: project must be 1-{} characters (leave it out for a global memory)",
            r.id,
            proto::limits::PROJECT_MAX_CHARS
        ));
    }
    Ok(())
}

/// `dry_run=true` (or `1`) in a query string: count, write nothing.
pub fn dry_run_param(query: Option<&str>) -> bool {
    query
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .any(|(k, v)| k == "dry_run" && matches!(v, "true" | "1"))
}

/// `collection` from a query string such as `collection=patterns`.
pub fn collection_param(query: Option<&str>) -> Result<Option<Collection>, ApiError> {
    let Some(value) = query
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "collection")
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
    else {
        return Ok(None);
    };
    Collection::parse(value).map(Some).ok_or_else(|| {
        ApiError::bad(
            "collection",
            format!(
                "unknown collection {value:?} (books, working, history, patterns, memory_bank)"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_parameter() {
        assert_eq!(collection_param(None).unwrap(), None);
        assert_eq!(
            collection_param(Some("x=1&collection=patterns")).unwrap(),
            Some(Collection::Patterns)
        );
        assert_eq!(collection_param(Some("collection=")).unwrap(), None);
        let e = collection_param(Some("collection=nope")).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::BadInput);
        assert_eq!(e.field.as_deref(), Some("collection"));
    }

    #[test]
    fn validation_names_the_problem() {
        let mut r = Record::new(Collection::Working, "x".into(), 1);
        assert!(validate(&r).is_ok());
        r.score = f64::NAN;
        assert!(validate(&r).unwrap_err().contains("score"));
        r.score = 0.5;
        r.content = " ".into();
        assert!(validate(&r).unwrap_err().contains("content"));
        r.content = "x".into();
        r.project = Some(String::new());
        assert!(validate(&r).unwrap_err().contains("project"));
    }

    /// The scope travels with a memory: export writes it, import restores it, and a line
    /// written before projects existed imports as global.
    #[test]
    fn project_round_trips_and_old_lines_are_global() {
        let mut r = Record::new(Collection::MemoryBank, "Run just test".into(), 1);
        r.project = Some("github.com/acme/shop".into());
        let line = serde_json::to_string(&r).unwrap();
        assert!(
            line.contains(r#""project":"github.com/acme/shop""#),
            "{line}"
        );
        let back: Record = serde_json::from_str(&line).unwrap();
        assert_eq!(back.project.as_deref(), Some("github.com/acme/shop"));
        r.project = None;
        let old = serde_json::to_string(&r).unwrap();
        assert!(
            !old.contains("project"),
            "global records look as they did: {old}"
        );
        assert_eq!(serde_json::from_str::<Record>(&old).unwrap().project, None);
    }
}
