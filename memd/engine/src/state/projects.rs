//! The project registry (which projects prompts came from, where, and when) and forgetting a
//! project.
//!
//! Owns the part of the state that `memd projects` lists and `memd projects forget` removes.
//! Must never resolve a directory (that happens before an op is logged, in `scope`) and never
//! touch global memories.

use super::MemState;
use super::ops::Output;
use super::session::ProjectRef;
use serde::{Deserialize, Serialize};

/// What the registry keeps about one project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectSeen {
    /// The repository root the latest prompt resolved to (one clone of it, if there are more).
    pub root: String,
    /// Unix milliseconds of the latest prompt in it.
    pub last_used: i64,
}

impl MemState {
    pub(super) fn note_project(&mut self, p: &ProjectRef, at: i64) {
        let seen = self
            .projects
            .entry(p.id.clone())
            .or_insert_with(|| ProjectSeen {
                root: p.root.clone(),
                last_used: at,
            });
        seen.root = p.root.clone();
        seen.last_used = seen.last_used.max(at);
    }

    pub(super) fn apply_forget_project(&mut self, project: &str) -> Output {
        let ids: Vec<String> = self
            .records
            .values()
            .filter(|r| r.project.as_deref() == Some(project))
            .map(|r| r.id.clone())
            .collect();
        let mut deleted = 0;
        for id in ids {
            if matches!(
                self.apply_delete(&id, "project_forgotten"),
                Output::Deleted { .. }
            ) {
                deleted += 1;
            }
        }
        let conversations = self.sessions.forget_project(project);
        self.projects.remove(project);
        Output::Forgotten {
            deleted,
            conversations,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;
    use crate::state::ops::Op;
    use crate::state::session::SessionOp;
    use crate::store::Machine;
    use proto::Collection;

    fn add(s: &mut MemState, text: &str, project: Option<&str>) -> Output {
        let mut rec = Record::new(Collection::MemoryBank, text.to_string(), 1);
        rec.project = project.map(str::to_string);
        s.apply(&Op::Insert(Box::new(rec)))
    }

    fn prompt(conv: &str, at: i64, project: &str) -> Op {
        Op::Session(SessionOp::Prompt {
            conv: conv.into(),
            at,
            client: None,
            prompt: "p".into(),
            injected: vec![],
            shown: vec![],
            concepts: vec![],
            session_start: false,
            project: Some(ProjectRef {
                id: project.into(),
                root: format!("/src/{project}"),
            }),
        })
    }

    #[test]
    fn the_same_text_in_two_projects_is_two_memories() {
        let mut s = MemState::new(384).unwrap();
        let a = add(&mut s, "Run `just test`", Some("shop"));
        let b = add(&mut s, "Run `just test`", Some("blog"));
        assert!(matches!(a, Output::Inserted { .. }), "{a:?}");
        assert!(matches!(b, Output::Inserted { .. }), "{b:?}");
        assert!(matches!(
            add(&mut s, "Run  `just test`", Some("shop")),
            Output::Duplicate { .. }
        ));
        assert!(matches!(
            add(&mut s, "Run `just test`", None),
            Output::Inserted { .. }
        ));
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn prompts_register_projects_and_conversations_remember_theirs() {
        let mut s = MemState::new(384).unwrap();
        s.apply(&prompt("c1", 10, "shop"));
        s.apply(&prompt("c2", 20, "blog"));
        s.apply(&prompt("c1", 30, "shop"));
        assert_eq!(s.projects["shop"].last_used, 30);
        assert_eq!(s.projects["shop"].root, "/src/shop");
        assert_eq!(
            s.sessions.get("c2").unwrap().project.as_deref(),
            Some("blog")
        );
        assert_eq!(s.sessions.latest_project().as_deref(), Some("shop"));
    }

    #[test]
    fn forgetting_a_project_takes_its_memories_and_conversations_only() {
        let mut s = MemState::new(384).unwrap();
        add(&mut s, "shop deploys with make release", Some("shop"));
        add(&mut s, "shop tests need postgres on 5433", Some("shop"));
        add(&mut s, "blog builds with zola", Some("blog"));
        add(&mut s, "the user prefers short answers", None);
        s.apply(&prompt("c1", 10, "shop"));
        s.apply(&prompt("c2", 20, "blog"));
        let out = s.apply(&Op::ForgetProject {
            project: "shop".into(),
        });
        assert_eq!(
            out,
            Output::Forgotten {
                deleted: 2,
                conversations: 1
            }
        );
        let left: Vec<Option<&str>> = s.records().map(|r| r.project.as_deref()).collect();
        assert_eq!(left.len(), 2);
        assert!(!left.contains(&Some("shop")));
        assert!(s.sessions.get("c1").is_none());
        assert!(s.sessions.get("c2").is_some());
        assert!(!s.projects.contains_key("shop"));
        assert_eq!(s.counters.get("deleted_project_forgotten"), Some(&2));
    }

    #[test]
    fn snapshots_keep_scopes_and_the_registry() {
        let mut s = MemState::new(384).unwrap();
        add(&mut s, "shop deploys with make release", Some("shop"));
        add(&mut s, "the user prefers short answers", None);
        s.apply(&prompt("c1", 10, "shop"));
        let bytes = s.encode().unwrap();
        let mut back = MemState::new(384).unwrap();
        back.decode(&bytes).unwrap();
        let mut scopes: Vec<Option<String>> = back.records().map(|r| r.project.clone()).collect();
        scopes.sort();
        assert_eq!(scopes, vec![None, Some("shop".to_string())]);
        assert_eq!(back.projects, s.projects);
        // The duplicate index is rebuilt with the scope in it.
        assert!(matches!(
            add(&mut back, "shop deploys with make release", Some("shop")),
            Output::Duplicate { .. }
        ));
    }
}
