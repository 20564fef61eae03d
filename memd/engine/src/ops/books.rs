//! Books: reference documents stored as chunks in the `books` collection.
//!
//! Owns ingest (chunk, scrub, store without duplicates), the book list and removal by title.
//! Must never score book chunks (they are reference material) and never store a chunk twice.

use crate::clock;
use crate::error::{ApiError, check_len};
use crate::ops::ingest;
use crate::ops::registry::Registry;
use crate::record::Record;
use crate::redact;
use crate::scope::ProjectCache;
use crate::state::Db;
use crate::state::ops::{Op, Output};
use proto::limits;
use proto::*;
use std::collections::BTreeMap;

use crate::ops::ingest::{CHUNK_CHARS, CHUNK_OVERLAP};
/// Ops per commit while ingesting (each commit is one fsync).
const INGEST_BATCH: usize = 256;

/// What the book operations read: the state and the project cache (a project-scoped book).
pub struct Books<'a> {
    pub db: &'a Db,
    pub cache: &'a ProjectCache,
}

impl Books<'_> {
    fn registry(&self) -> Registry<'_> {
        Registry {
            db: self.db,
            cache: self.cache,
        }
    }

    /// Books are global unless `req.scope` is `project`: then they belong to the project of
    /// `req.cwd` (a project-scoped ingest with no directory is refused, not made global).
    pub async fn ingest(&self, req: &IngestRequest) -> Result<IngestResponse, ApiError> {
        let title = redact::scrub(req.title.trim()).text;
        let title = title.as_str();
        if title.is_empty() {
            return Err(ApiError::bad("title", "title must not be empty"));
        }
        check_len("title", title, 200)?;
        if req.content.len() > limits::INGEST_MAX_BYTES {
            return Err(ApiError::too_large(limits::INGEST_MAX_BYTES));
        }
        // Scrub the whole document first: a secret split across two chunks would otherwise
        // escape both halves' patterns (a PEM block's BEGIN line in one chunk, its body in the next).
        let project = match req.scope.unwrap_or(Scope::Global) {
            Scope::Global => None,
            Scope::Project => Some(
                self.registry()
                    .current_project("cwd", req.cwd.as_deref(), None)?
                    .ok_or_else(|| {
                        ApiError::bad(
                            "cwd",
                            "scope \"project\" needs cwd, the project's directory",
                        )
                    })?,
            ),
        };
        let clean = redact::scrub(&req.content).text;
        let chunks = ingest::chunk(&clean, CHUNK_CHARS, CHUNK_OVERLAP);
        if chunks.is_empty() {
            return Err(ApiError::bad("content", "the document has no text"));
        }
        let now = clock::now_ms();
        let total = chunks.len();
        let mut ops = Vec::with_capacity(total);
        for c in chunks {
            let mut rec = Record::new(Collection::Books, c.text, now);
            rec.project = project.clone();
            rec.metadata.insert("title".into(), Value::from(title));
            rec.metadata
                .insert("chunk_index".into(), Value::Number(c.index as f64));
            rec.metadata
                .insert("chunk_count".into(), Value::Number(total as f64));
            if let Some(src) = &req.source {
                rec.metadata
                    .insert("source".into(), Value::from(redact::scrub(src).text));
            }
            ops.push(Op::Insert(Box::new(rec)));
        }
        let mut already_present = 0;
        let mut batches = Vec::new();
        while !ops.is_empty() {
            let rest = ops.split_off(ops.len().min(INGEST_BATCH));
            batches.push(std::mem::replace(&mut ops, rest));
        }
        for batch in batches {
            for out in self.db.commit(batch).await? {
                if matches!(out, Output::Duplicate { .. }) {
                    already_present += 1;
                }
            }
        }
        Ok(IngestResponse {
            success: true,
            title: title.to_string(),
            project,
            chunks: total,
            already_present,
        })
    }

    pub fn list(&self) -> Result<BooksResponse, ApiError> {
        // The same title in two projects is two books.
        let mut by_title: BTreeMap<(String, Option<String>), BookInfo> = BTreeMap::new();
        self.db.read(|s| {
            for r in s.records().filter(|r| r.collection == Collection::Books) {
                let title = r
                    .metadata
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or("(untitled)");
                let e = by_title
                    .entry((title.to_string(), r.project.clone()))
                    .or_insert_with(|| BookInfo {
                        title: title.to_string(),
                        chunks: 0,
                        created_at: clock::rfc3339(r.created_at),
                        source: r
                            .metadata
                            .get("source")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                        project: r.project.clone(),
                    });
                e.chunks += 1;
            }
        });
        Ok(BooksResponse {
            books: by_title.into_values().collect(),
        })
    }

    pub async fn remove(&self, req: &RemoveBookRequest) -> Result<RemoveBookResponse, ApiError> {
        let title = req.title.trim();
        let ids: Vec<String> = self.db.read(|s| {
            s.records()
                .filter(|r| r.collection == Collection::Books)
                .filter(|r| r.metadata.get("title").and_then(Value::as_str) == Some(title))
                .map(|r| r.id.clone())
                .collect()
        });
        if ids.is_empty() {
            return Err(ApiError::not_found(format!(
                "no book titled {title:?} (see `memd books`)"
            )));
        }
        let ops = ids
            .into_iter()
            .map(|id| Op::Delete {
                id,
                reason: "book_removed".into(),
            })
            .collect();
        let removed = self
            .db
            .commit(ops)
            .await?
            .iter()
            .filter(|o| matches!(o, Output::Deleted { .. }))
            .count();
        Ok(RemoveBookResponse {
            success: true,
            removed_chunks: removed,
        })
    }
}
