//! The memory bank: facts the agent stores on purpose (add, update, archive), takeaways
//! (`record_response`), and the user's own corrections of any memory (share, delete).
//!
//! Owns validation of memory-bank writes (limits, tags, ranges), redaction before storage, the
//! near-duplicate check (a near duplicate that `contradict` finds saying otherwise supersedes
//! the old fact instead) and archive-by-content. Must never outcome-score a fact (that is
//! `learn::scoring::track_use`, applied through scoring ops) and never look at another
//! project's facts when deciding what is a duplicate.

use crate::clock;
use crate::config::Config;
use crate::error::{ApiError, check_len, check_range_f64};
use crate::models::Models;
use crate::ops::registry::Registry;
use crate::record::Record;
use crate::redact;
use crate::redact::scrub_metadata;
use crate::scope::ProjectCache;
use crate::search::{self, Query, Ranking};
use crate::state::Db;
use crate::state::ops::{Op, Output};
use proto::limits;
use proto::*;

/// Cosine similarity above which a memory-bank add is treated as the same fact.
/// Measured (memd/engine/tests/bank_duplicates.rs): restatements of one fact 0.80–0.98 (5 of 6 above
/// 0.93); distinct facts on the same subject up to 0.84 ("staging db on 5433" vs "production
/// db on 5432"). Merging two different facts loses one, storing a restatement twice costs a
/// line, so the threshold sits above the distinct ones.
pub const BANK_DUPLICATE_COSINE: f32 = 0.90;

/// How many memory-bank facts still waiting for their embedding a new fact is compared with
/// (newest first); each costs one embedding (a few ms) unless the query cache has it.
const QUEUED_FACTS_COMPARED: usize = 8;

/// What the memory-bank writes read: the config, the state, the embedder (duplicates), the
/// project cache (where a fact belongs).
pub struct Bank<'a> {
    pub cfg: &'a Config,
    pub db: &'a Db,
    pub models: &'a Models,
    pub cache: &'a ProjectCache,
}

impl Bank<'_> {
    fn registry(&self) -> Registry<'_> {
        Registry {
            db: self.db,
            cache: self.cache,
        }
    }

    /// `fallback`: the caller's project when `req.cwd` is absent (an MCP session's).
    pub async fn add(
        &self,
        req: &MemoryBankAdd,
        fallback: Option<String>,
    ) -> Result<MemoryBankResponse, ApiError> {
        let content = req.content.trim();
        if content.is_empty() {
            return Err(ApiError::bad("content", "content must not be empty"));
        }
        check_len("content", content, limits::MEMORY_BANK_MAX_CHARS)?;
        let tags = validate_tags(&req.tags)?;
        let importance = req.importance.unwrap_or(0.7);
        let confidence = req.confidence.unwrap_or(0.7);
        check_range_f64("importance", importance, 0.0, 1.0)?;
        check_range_f64("confidence", confidence, 0.0, 1.0)?;
        let current = self
            .registry()
            .current_project("cwd", req.cwd.as_deref(), None)?
            .or(fallback);
        let project = crate::scope::home(req.scope.unwrap_or_default(), current.as_deref());
        let content = redact::scrub(content).text;
        let near = self
            .near_duplicate_in_bank(&content, project.as_deref())
            .await;
        // Reads alike but says otherwise (negated, another number or identifier): a new fact
        // that replaces the old one, which is archived (kept, findable), not merged into it.
        let superseded = near.as_ref().and_then(|id| {
            let old = self.db.read(|s| s.by_id(id).map(|r| r.content.clone()))?;
            crate::ops::contradict::differs(&content, &old).map(|_| id.clone())
        });
        if let Some(existing) = near.filter(|_| superseded.is_none()) {
            if req.share {
                self.share(&ShareRequest {
                    id: existing.clone(),
                    shared: true,
                })
                .await?;
            }
            return Ok(MemoryBankResponse {
                project: self.db.read(|s| s.by_id(&existing)?.project.clone()),
                success: true,
                doc_id: existing,
                duplicate: true,
                superseded: None,
            });
        }
        let now = clock::now_ms();
        let mut rec = Record::new(Collection::MemoryBank, content, now);
        rec.project = project.clone();
        rec.score = 1.0;
        rec.tags = tags;
        rec.importance = Some(importance);
        rec.confidence = Some(confidence);
        rec.metadata = scrub_metadata(req.metadata.clone().unwrap_or_default());
        if let Some(old) = &superseded {
            rec.metadata
                .insert("supersedes".into(), Value::from(old.as_str()));
        }
        rec.team = req.share;
        let (doc_id, duplicate) = self.db.insert(rec).await?;
        if let Some(old) = &superseded {
            self.archive_superseded(old).await;
        }
        Ok(MemoryBankResponse {
            success: true,
            doc_id,
            duplicate,
            project,
            superseded,
        })
    }

    /// A takeaway (MCP `record_response`): it belongs to its conversation's project, else to
    /// `fallback`'s.
    pub async fn record_response(
        &self,
        req: &RecordResponseRequest,
        fallback: Option<String>,
    ) -> Result<RecordResponseResponse, ApiError> {
        let text = req.key_takeaway.trim();
        if text.is_empty() {
            return Err(ApiError::bad(
                "key_takeaway",
                "key_takeaway must not be empty",
            ));
        }
        check_len("key_takeaway", text, limits::TAKEAWAY_MAX_CHARS)?;
        let initial = match req.initial_score.as_deref() {
            None | Some("") => None,
            Some(s) => Some(Outcome::parse(s).ok_or_else(|| {
                ApiError::bad(
                    "initial_score",
                    format!("initial_score must be worked, failed or partial (got {s:?})"),
                )
            })?),
        };
        let now = clock::now_ms();
        let mut rec = Record::new(Collection::Working, redact::scrub(text).text, now);
        rec.score = crate::learn::scoring::initial_score(initial);
        rec.metadata
            .insert("memory_type".into(), Value::from("key_takeaway"));
        let conv = req
            .conversation_id
            .as_deref()
            .map(|c| redact::safe_id(c.trim()));
        rec.project = conv
            .as_deref()
            .and_then(|c| self.registry().conversation_project(c))
            .or(fallback);
        if let Some(c) = conv {
            rec.metadata
                .insert("conversation_id".into(), Value::from(c.as_ref()));
        }
        let (doc_id, _) = self.db.insert(rec).await?;
        Ok(RecordResponseResponse {
            success: true,
            doc_id,
        })
    }

    /// An active memory-bank entry saying the same thing (cosine ≥ BANK_DUPLICATE_COSINE) that
    /// a new entry of `project` would stand beside: that project's or a global one. Another
    /// project's identical fact is not a duplicate (it is never shown here). Facts whose
    /// embedding is still queued are compared too: two facts added back to back must meet
    /// even when the embedder has not caught up with the first.
    async fn near_duplicate_in_bank(&self, content: &str, project: Option<&str>) -> Option<String> {
        let v = self.models.embed_query(content).await?;
        let visible = crate::scope::Visibility::of_current(project);
        let (indexed, queued) = self.db.read(|s| {
            let keep = |k: u64| {
                s.by_key(k).is_some_and(|r| {
                    r.collection == Collection::MemoryBank
                        && !r.archived
                        && visible.admits(r.project.as_deref())
                })
            };
            let indexed = s
                .vectors()
                .search(&v, 1, &keep)
                .ok()
                .and_then(|hits| hits.into_iter().next())
                .and_then(|(k, cos)| Some((s.by_key(k)?.id.clone(), cos)));
            // Newest first, and only a few: a bulk ingest can queue thousands of book chunks,
            // but facts arrive one call at a time and the embedder drains them in milliseconds.
            let queued: Vec<(String, String)> = s
                .pending_iter()
                .rev()
                .filter(|k| keep(*k))
                .take(QUEUED_FACTS_COMPARED)
                .filter_map(|k| s.by_key(k).map(|r| (r.id.clone(), r.content.clone())))
                .collect();
            (indexed, queued)
        });
        let mut best = indexed;
        let embedder = self.models.embedder().filter(|_| !queued.is_empty());
        for (id, text) in queued {
            // Not through the query cache: these are stored texts, not queries.
            let Some(e) = embedder.clone() else { break };
            let Ok(Ok(mut embedded)) =
                tokio::task::spawn_blocking(move || e.embed(&[text.as_str()])).await
            else {
                continue;
            };
            let Some(other) = embedded.pop() else {
                continue;
            };
            let cos: f32 = v.iter().zip(other.iter()).map(|(a, b)| a * b).sum();
            if best.as_ref().is_none_or(|(_, c)| cos > *c) {
                best = Some((id, cos));
            }
        }
        best.filter(|(_, cos)| *cos >= BANK_DUPLICATE_COSINE)
            .map(|(id, _)| id)
    }

    /// Archives the fact a new one contradicts. One the store refuses to archive (a teammate's
    /// shared fact: only its owner changes it) stays active; the new fact's `supersedes` still
    /// names it.
    async fn archive_superseded(&self, id: &str) {
        let op = Op::Archive {
            id: id.to_string(),
            at: clock::now_ms(),
        };
        match self.db.commit_one(op).await {
            Ok(Output::Updated { .. }) => {}
            Ok(other) => tracing::info!("superseded memory {id} not archived: {other:?}"),
            Err(e) => tracing::warn!("superseded memory {id} not archived: {e}"),
        }
    }

    /// `POST /api/share` and `memd share`.
    pub async fn share(&self, req: &ShareRequest) -> Result<ShareResponse, ApiError> {
        let id = req.id.trim();
        if id.is_empty() {
            return Err(ApiError::bad("id", "id must not be empty"));
        }
        check_len("id", id, limits::ID_MAX_CHARS)?;
        let op = Op::Share {
            id: id.to_string(),
            team: req.shared,
            at: clock::now_ms(),
        };
        match self.db.commit_one(op).await? {
            Output::Updated { id } => Ok(ShareResponse {
                id,
                shared: req.shared,
                shared_store: self.cfg.store.url.is_some(),
            }),
            Output::NotFound { id } => Err(ApiError::not_found(format!("no memory {id}"))),
            Output::Rejected(why) => Err(ApiError::unprocessable("id", why)),
            other => Err(ApiError::internal(format!("share: {other:?}"))),
        }
    }

    /// `POST /api/memory/delete` and the dashboard's delete: one memory, any collection, for
    /// good. Mirrored memories follow the same rule as edits (only their owner deletes them).
    pub async fn delete(
        &self,
        req: &DeleteMemoryRequest,
    ) -> Result<DeleteMemoryResponse, ApiError> {
        let id = req.id.trim();
        if id.is_empty() {
            return Err(ApiError::bad("id", "id must not be empty"));
        }
        check_len("id", id, limits::ID_MAX_CHARS)?;
        let op = Op::Delete {
            id: id.to_string(),
            reason: "user".into(),
        };
        match self.db.commit_one(op).await? {
            Output::Deleted { id } => Ok(DeleteMemoryResponse { success: true, id }),
            Output::NotFound { id } => Err(ApiError::not_found(format!("no memory {id}"))),
            Output::Rejected(why) => Err(ApiError::unprocessable("id", why)),
            other => Err(ApiError::internal(format!("delete: {other:?}"))),
        }
    }

    pub async fn update(&self, req: &MemoryBankUpdate) -> Result<MemoryBankResponse, ApiError> {
        let id = req.id.trim();
        check_len("id", id, limits::ID_MAX_CHARS)?;
        let is_bank = self
            .db
            .read(|s| s.by_id(id).map(|r| r.collection == Collection::MemoryBank));
        match is_bank {
            None => return Err(ApiError::not_found(format!("no memory with id {id}"))),
            Some(false) => {
                return Err(ApiError::bad(
                    "id",
                    format!(
                        "{id} is not a memory_bank entry; only memory_bank entries can be edited"
                    ),
                ));
            }
            Some(true) => {}
        }
        let content = match &req.content {
            Some(c) if c.trim().is_empty() => {
                return Err(ApiError::bad("content", "content must not be empty"));
            }
            Some(c) => {
                check_len("content", c.trim(), limits::MEMORY_BANK_MAX_CHARS)?;
                Some(redact::scrub(c.trim()).text)
            }
            None => None,
        };
        let tags = req.tags.as_ref().map(|t| validate_tags(t)).transpose()?;
        for (field, v) in [
            ("importance", req.importance),
            ("confidence", req.confidence),
        ] {
            if let Some(v) = v {
                check_range_f64(field, v, 0.0, 1.0)?;
            }
        }
        let op = Op::Update {
            id: id.to_string(),
            content,
            tags,
            importance: req.importance,
            confidence: req.confidence,
            at: clock::now_ms(),
        };
        match self.db.commit_one(op).await? {
            Output::Updated { id } => Ok(self.changed(id)),
            Output::NotFound { id } => Err(ApiError::not_found(format!("no memory with id {id}"))),
            Output::Rejected(why) => Err(ApiError::unprocessable("id", why)),
            other => Err(ApiError::internal(format!(
                "unexpected store answer {other:?}"
            ))),
        }
    }

    /// The answer to an update or archive of the entry now called `id`.
    fn changed(&self, id: String) -> MemoryBankResponse {
        MemoryBankResponse {
            project: self.db.read(|s| s.by_id(&id)?.project.clone()),
            success: true,
            doc_id: id,
            duplicate: false,
            superseded: None,
        }
    }

    /// Archiving by content looks only at what `current`'s caller can see.
    pub async fn archive(
        &self,
        req: &MemoryBankArchive,
        current: Option<String>,
    ) -> Result<MemoryBankResponse, ApiError> {
        let id = match (&req.id, &req.content) {
            (Some(id), _) if !id.trim().is_empty() => id.trim().to_string(),
            (_, Some(content)) if !content.trim().is_empty() => self
                .closest_bank_entry(content.trim(), current.as_deref())
                .await
                .ok_or_else(|| {
                    ApiError::not_found("no active memory_bank entry matches that content")
                })?,
            _ => return Err(ApiError::bad_request("Provide id or content")),
        };
        match self
            .db
            .commit_one(Op::Archive {
                id: id.clone(),
                at: clock::now_ms(),
            })
            .await?
        {
            Output::Updated { id } => Ok(self.changed(id)),
            Output::NotFound { id } => Err(ApiError::not_found(format!("no memory with id {id}"))),
            Output::Rejected(m) => Err(ApiError::bad("id", m)),
            other => Err(ApiError::internal(format!(
                "unexpected store answer {other:?}"
            ))),
        }
    }

    async fn closest_bank_entry(&self, content: &str, current: Option<&str>) -> Option<String> {
        let q = Query {
            collections: Some(vec![Collection::MemoryBank]),
            visibility: crate::scope::Visibility::select(None, current).ok()?,
            limit: 1,
            ..Query::default()
        };
        let qvec = self.models.embed_query(content).await;
        let ranking = Ranking::of(&self.cfg.learning);
        self.db.read(|s| {
            let hit = search::rank(s, &q, content, qvec.as_deref().map(|v| &v[..]), &ranking, 1)
                .into_iter()
                .next()?;
            // Archiving by content needs a real match, not merely the least-bad one.
            let strong = hit.similarity.is_some_and(|x| x >= 0.6) || hit.lexical.is_some();
            strong.then(|| s.by_key(hit.key).map(|r| r.id.clone()))?
        })
    }
}

fn validate_tags(tags: &[String]) -> Result<Vec<String>, ApiError> {
    if tags.len() > limits::TAGS_MAX {
        return Err(ApiError::bad(
            "tags",
            format!("at most {} tags (got {})", limits::TAGS_MAX, tags.len()),
        ));
    }
    tags.iter()
        .map(|t| {
            let t = redact::scrub(t.trim()).text.to_lowercase();
            if t.is_empty() || t.chars().count() > limits::TAG_MAX_CHARS {
                Err(ApiError::bad(
                    "tags",
                    format!("each tag must be 1-{} characters", limits::TAG_MAX_CHARS),
                ))
            } else {
                Ok(t)
            }
        })
        .collect()
}
