//! The search operation (`/api/search`, MCP `search`, the dashboard's list): a lookup by id, a
//! browse by filters, or a text search through the retrieval pipeline.
//!
//! Owns where a search stands (its directory, else its conversation, else the caller's
//! project) and how deep the pipeline reranks for it. Must never hold the store lock across a
//! model call: the first stage is one read, late interaction and the cross-encoder run on its
//! snapshot.

use crate::clock;
use crate::config::Config;
use crate::error::ApiError;
use crate::models::Models;
use crate::models::late::States;
use crate::ops::registry::Registry;
use crate::redact;
use crate::retrieve;
use crate::scope::ProjectCache;
use crate::search::{self, Query, Ranking};
use crate::state::Db;
use proto::{MemoryView, SearchRequest, SearchResponse, SortBy};

/// What a search reads.
pub struct Search<'a> {
    pub cfg: &'a Config,
    pub db: &'a Db,
    pub models: &'a Models,
    pub late: &'a States,
    pub cache: &'a ProjectCache,
}

impl Search<'_> {
    /// `fallback` is the caller's project when the request itself does not tell it (an MCP
    /// session's directory).
    pub async fn run(
        &self,
        req: &SearchRequest,
        fallback: Option<String>,
    ) -> Result<SearchResponse, ApiError> {
        let now = clock::now_ms();
        let conv = req
            .conversation_id
            .as_deref()
            .map(|c| redact::safe_id(c.trim()));
        let registry = Registry {
            db: self.db,
            cache: self.cache,
        };
        let current = registry
            .current_project("cwd", req.cwd.as_deref(), conv.as_deref())?
            .or(fallback);
        let q = Query::from_request(req, now, current.as_deref())?;
        let results: Vec<MemoryView> = if let Some(id) = &q.id {
            self.db
                .read(|s| s.by_id(id).map(|r| search::view(r, now, None)))
                .into_iter()
                .collect()
        } else if let Some(text) = &q.text {
            self.text(&q, text, now).await
        } else {
            self.db.read(|s| {
                search::browse(s, &q)
                    .into_iter()
                    .map(|r| search::view(r, now, None))
                    .collect()
            })
        };
        Ok(SearchResponse {
            count: results.len(),
            results,
        })
    }

    /// A text search through the retrieval pipeline: the fused head (deeper than `limit` when
    /// reranking) under one read, then late interaction and the cross-encoder outside it.
    async fn text(&self, q: &Query, text: &str, now: i64) -> Vec<MemoryView> {
        let relevance_order = matches!(q.sort_by, None | Some(SortBy::Relevance));
        let rerank = relevance_order && self.cfg.search.rerank;
        let wait = match rerank {
            true => retrieve::LateWait::Search,
            false => retrieve::LateWait::Skip,
        };
        let encoded = retrieve::encode(self.models, text, wait).await;
        let depth = match rerank {
            true => q.limit.max(self.cfg.search.rerank_depth),
            false => q.limit,
        };
        let ranking = Ranking::of(&self.cfg.learning);
        let stage = retrieve::FirstStage {
            query: q,
            text,
            vector: encoded.vector(),
            ranking: &ranking,
            vector_extra: match encoded.late {
                Some(_) => retrieve::VECTOR_CANDIDATES,
                None => 0,
            },
        };
        let head = self
            .db
            .read(|s| retrieve::first_stage(s, &stage, depth, |_| true, now));
        let ce_depth = self.cfg.search.cross_encoder_depth;
        let how = retrieve::Second {
            late: encoded.late.as_ref().map(|l| (l, head.len())),
            deadline: None,
            cross: self
                .models
                .cross_encoder()
                .filter(|_| rerank && ce_depth > 0)
                .map(|ce| (ce, ce_depth)),
            score: retrieve::LATE_SCORE,
        };
        let (head, _) = retrieve::second_stage(self.late, text, head, how).await;
        head.into_iter().take(q.limit).map(|c| c.view).collect()
    }
}
