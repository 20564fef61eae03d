//! What the dashboard shows: read-only views over the store and the trace ledger.
//!
//! Owns listing memories under the dashboard's filters, one memory with its history and the
//! turns it was injected into (`detail`), conversations turn by turn (`conversations`) and the
//! health figures over time (`health`, which also keeps the daily counts file). Must never
//! change a memory: every action the dashboard offers goes through the same operations as the
//! HTTP API. Must never show text from the trace (it holds ids and digests only): content comes
//! from the store.

pub mod conversations;
pub mod health;

use crate::clock;
use crate::error::ApiError;
use crate::learn;
use crate::ops::find::Search;
use crate::record::Record;
use crate::search::{self, Query};
use crate::state::Db;
use crate::trace::Trace;
use crate::trace::TraceEntry;
use proto::{Collection, MemoryView, SearchRequest, SortBy};
use std::path::Path;

/// Trace lines read for one page: the live ledger and its rotated copy hold at most 8 MiB,
/// well under this many lines.
pub const TRACE_LINES: usize = 200_000;
/// Most memories one list shows.
pub const LIST_MAX: usize = 200;

/// Which memories a list shows. Everything optional narrows; defaults show every active one.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Ranked like the agent's own searches when given; newest first otherwise.
    pub query: Option<String>,
    pub collection: Option<Collection>,
    /// `all` (default), `global` (global memories only) or a project id (that project's and
    /// the global ones, as the agent sees them there).
    pub project: Option<String>,
    /// Only memories bound to a project (`Some(true)`) or only global ones (`Some(false)`).
    pub project_bound: Option<bool>,
    pub tag: Option<String>,
    pub disputed_only: bool,
    pub archived: Archived,
    pub limit: usize,
}

/// How archived memory-bank facts appear in a list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Archived {
    #[default]
    Hide,
    Include,
    Only,
}

/// One memory with everything its page shows.
#[derive(Debug, Clone)]
pub struct MemoryDetail {
    pub record: Record,
    pub view: MemoryView,
    /// Turns whose context carried this memory, newest first.
    pub injected: Vec<Injection>,
}

/// One turn that put a memory in front of the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Injection {
    pub conversation_id: String,
    /// Unix milliseconds.
    pub at: i64,
    /// The turn's outcome, when the turn was scored and its outcome line named the memory.
    pub outcome: Option<String>,
    /// Injected as a session opened (no prompt, never scored).
    pub session_start: bool,
}

/// What the dashboard's views read: the state, the trace ledger, the data dir (daily counts).
pub struct Inspect<'a> {
    pub db: &'a Db,
    pub trace: &'a Trace,
    pub data_dir: &'a Path,
}

impl Inspect<'_> {
    /// The dashboard's list. With a query it is the agent's search (same ranking, at most 100
    /// results) narrowed by the filters the search has no field for; without one, every
    /// memory that passes the filters, newest first.
    pub async fn list_memories(
        &self,
        search: &Search<'_>,
        f: &ListFilter,
    ) -> Result<Vec<MemoryView>, ApiError> {
        let limit = f.limit.clamp(1, LIST_MAX);
        let project = f.project.clone().unwrap_or_else(|| "all".into());
        let include_archived = f.archived != Archived::Hide;
        if let Some(text) = f.query.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            let req = SearchRequest {
                query: Some(text.to_string()),
                collections: f.collection.map(|c| vec![c.as_str().to_string()]),
                limit: Some(proto::limits::SEARCH_LIMIT.1),
                include_archived: Some(include_archived),
                project: Some(project),
                sort_by: Some(SortBy::Relevance),
                ..SearchRequest::default()
            };
            let mut views = search.run(&req, None).await?.results;
            views.retain(|v| keeps_view(f, v));
            views.truncate(limit);
            return Ok(views);
        }
        let q = Query {
            collections: f.collection.map(|c| vec![c]),
            visibility: crate::scope::Visibility::select(Some(&project), None)?,
            include_archived,
            limit: usize::MAX,
            sort_by: Some(SortBy::Recency),
            ..Query::default()
        };
        let now = clock::now_ms();
        Ok(self.db.read(|s| {
            search::browse(s, &q)
                .into_iter()
                .filter(|r| keeps_record(f, r))
                .take(limit)
                .map(|r| search::view(r, now, None))
                .collect()
        }))
    }

    /// One memory by its id or a former one, with the turns it was injected into.
    pub fn memory_detail(&self, id: &str) -> Option<MemoryDetail> {
        let now = clock::now_ms();
        let (record, view) = self.db.read(|s| {
            let r = s.by_id(id)?;
            Some((r.clone(), search::view(r, now, None)))
        })?;
        let injected = injections_of(&record, &self.trace.read(None, TRACE_LINES));
        Some(MemoryDetail {
            record,
            view,
            injected,
        })
    }

    /// Every distinct tag in use, for the filter's choices.
    pub fn tags_in_use(&self) -> Vec<String> {
        let mut tags: Vec<String> = self.db.read(|s| {
            s.records()
                .flat_map(|r| r.tags.iter().cloned())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect()
        });
        tags.truncate(500);
        tags
    }
}

fn keeps_view(f: &ListFilter, v: &MemoryView) -> bool {
    (f.archived != Archived::Only || v.archived)
        && (!f.disputed_only || v.disputed)
        && f.project_bound.is_none_or(|b| b == v.project.is_some())
        && f.tag.as_ref().is_none_or(|t| v.tags.contains(t))
}

fn keeps_record(f: &ListFilter, r: &Record) -> bool {
    (f.archived != Archived::Only || r.archived)
        && (!f.disputed_only || learn::scoring::disputed(r))
        && f.project_bound.is_none_or(|b| b == r.project.is_some())
        && f.tag.as_ref().is_none_or(|t| r.tags.contains(t))
}

/// The turns (newest first) whose injected context named `record` under any of its ids, with
/// the outcome word of the turn when it was scored and the outcome line named the memory.
pub fn injections_of(record: &Record, trace: &[TraceEntry]) -> Vec<Injection> {
    let names = |id: &String| *id == record.id || record.former_ids.contains(id);
    // Only the conversations that injected it are grouped into turns (most are not).
    let involved: std::collections::BTreeSet<&str> = trace
        .iter()
        .filter(|e| e.injected.iter().any(names))
        .map(|e| e.conversation_id.as_str())
        .collect();
    let relevant: Vec<&TraceEntry> = trace
        .iter()
        .filter(|e| involved.contains(e.conversation_id.as_str()))
        .collect();
    let mut out = Vec::new();
    for (conversation, lines) in conversations::by_conversation(relevant) {
        for t in conversations::turns_of(&lines) {
            if let Some(mine) = t.injected.iter().find(|m| names(&m.id)) {
                out.push(Injection {
                    conversation_id: conversation.to_string(),
                    at: t.at,
                    outcome: t.outcome.clone().filter(|_| mine.scored),
                    session_start: false,
                });
            }
        }
        // A session start's context is in front of the model too, though no turn scores it.
        for e in lines.iter().filter(|e| e.is_session_start()) {
            if e.injected.iter().any(names) {
                out.push(Injection {
                    conversation_id: conversation.to_string(),
                    at: clock::parse_rfc3339(&e.ts).unwrap_or(0),
                    outcome: None,
                    session_start: true,
                });
            }
        }
    }
    out.sort_by_key(|i| std::cmp::Reverse(i.at));
    out
}

#[cfg(test)]
mod tests;
