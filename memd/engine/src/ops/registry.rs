//! Projects as the user sees them: which project a caller stands in, `memd projects` (counts and
//! last use) and `memd projects forget` (every memory of one project, atomically).
//!
//! Owns the operations that deal with projects as a whole (`Registry`, over the store and
//! the project cache). Must never delete a global
//! memory, and never decide visibility itself: `scope` does.

use crate::clock;
use crate::error::{ApiError, check_len};
use crate::scope::ProjectCache;
use crate::state::Db;
use crate::state::ops::{Op, Output};
use proto::{ForgetProjectRequest, ForgetProjectResponse, ProjectInfo, ProjectsResponse, limits};
use std::collections::BTreeMap;

/// What the project operations read: the state and the directory → project cache.
#[derive(Clone, Copy)]
pub struct Registry<'a> {
    pub db: &'a Db,
    pub cache: &'a ProjectCache,
}

impl Registry<'_> {
    /// The project a caller stands in: its directory resolved (`field` names the directory in
    /// errors), else the project of its conversation, else unknown.
    pub fn current_project(
        &self,
        field: &str,
        dir: Option<&str>,
        conversation: Option<&str>,
    ) -> Result<Option<String>, ApiError> {
        if let Some(p) = self.cache.resolve(field, dir)? {
            return Ok(Some(p.id));
        }
        Ok(conversation.and_then(|c| self.conversation_project(c.trim())))
    }

    /// The project a conversation's prompts came from, if memd saw one.
    pub fn conversation_project(&self, conversation: &str) -> Option<String> {
        self.db
            .read(|s| s.sessions.get(conversation).and_then(|c| c.project.clone()))
    }

    /// The project of the most recently active conversation (MCP calls that send no directory).
    pub fn latest_project(&self) -> Option<String> {
        self.db.read(|s| s.sessions.latest_project())
    }

    /// Every project with memories or prompts, most recently used first.
    pub fn projects(&self) -> ProjectsResponse {
        self.db.read(|s| {
            let mut by_id: BTreeMap<String, ProjectInfo> = BTreeMap::new();
            let mut newest: BTreeMap<String, i64> = BTreeMap::new();
            let mut global: BTreeMap<String, usize> = BTreeMap::new();
            for r in s.records() {
                let collection = r.collection.as_str().to_string();
                let Some(p) = &r.project else {
                    *global.entry(collection).or_default() += 1;
                    continue;
                };
                let info = by_id.entry(p.clone()).or_insert_with(|| ProjectInfo {
                    id: p.clone(),
                    ..ProjectInfo::default()
                });
                *info.memories.entry(collection).or_default() += 1;
                info.total += 1;
                let t = newest.entry(p.clone()).or_default();
                *t = (*t).max(r.updated_at);
            }
            for (id, seen) in &s.projects {
                let info = by_id.entry(id.clone()).or_insert_with(|| ProjectInfo {
                    id: id.clone(),
                    ..ProjectInfo::default()
                });
                info.root = Some(seen.root.clone());
                let t = newest.entry(id.clone()).or_default();
                *t = (*t).max(seen.last_used);
            }
            let mut projects: Vec<ProjectInfo> = by_id
                .into_values()
                .map(|mut info| {
                    info.last_used = newest
                        .get(&info.id)
                        .filter(|t| **t > 0)
                        .map(|t| clock::rfc3339(*t));
                    info
                })
                .collect();
            projects.sort_by(|a, b| b.last_used.cmp(&a.last_used).then(a.id.cmp(&b.id)));
            ProjectsResponse { projects, global }
        })
    }

    /// Deletes every memory of one project and its conversations' hook state, in one logged op.
    pub async fn forget_project(
        &self,
        req: &ForgetProjectRequest,
    ) -> Result<ForgetProjectResponse, ApiError> {
        let project = req.project.trim();
        if project.is_empty() {
            return Err(ApiError::bad("project", "project must not be empty"));
        }
        check_len("project", project, limits::PROJECT_MAX_CHARS)?;
        let known = self.db.read(|s| {
            s.projects.contains_key(project)
                || s.records().any(|r| r.project.as_deref() == Some(project))
        });
        if !known {
            return Err(ApiError::not_found(
                "no such project; `memd projects` lists the known ones",
            ));
        }
        let op = Op::ForgetProject {
            project: project.to_string(),
        };
        match self.db.commit_one(op).await? {
            Output::Forgotten {
                deleted,
                conversations,
            } => Ok(ForgetProjectResponse {
                success: true,
                deleted,
                conversations,
            }),
            other => Err(ApiError::internal(format!(
                "unexpected store answer {other:?}"
            ))),
        }
    }
}
