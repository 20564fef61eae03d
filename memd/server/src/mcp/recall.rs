//! What the MCP layer remembers about each client session, in memory only: which memories
//! `get_context_insights` showed and `search_memory` returned since the last score, and when the
//! self-audit reminder is due.
//!
//! Owns the self-audit trigger. Must stay bounded (a fixed number of sessions, a fixed number of
//! ids each) and must never hold anything that has to survive a restart: the durable doc-id
//! cache is the conversation state in the store; this only adds the MCP side of it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// The self-audit reminder is appended to every AUDIT_EVERY-th `get_context_insights` answer
/// that shows memory_bank facts, counted per client session. Tying it to memory_bank being in
/// view means the reminder always has something to act on; a count (not chance) makes it
/// predictable for users and testable; five keeps its cost (about 40 tokens) to a small
/// fraction of calls while a working session still meets it.
pub const AUDIT_EVERY: u32 = 5;
/// Sessions remembered at once; the least recently used is forgotten first.
const MAX_SESSIONS: usize = 1024;
/// Ids remembered per session between two scores.
const MAX_SHOWN: usize = 64;
/// Key for clients that speak the stateless protocol (no session id).
pub const STATELESS: &str = "stateless";

#[derive(Debug)]
struct SessionRecall {
    bank_context_calls: u32,
    shown_unscored: Vec<String>,
    /// Returned by search_memory: scoreable when named, never scored by default (browsing is
    /// no evidence that a memory was used).
    searched_unscored: Vec<String>,
    last_used: Instant,
}

impl Default for SessionRecall {
    fn default() -> Self {
        SessionRecall {
            bank_context_calls: 0,
            shown_unscored: Vec::new(),
            searched_unscored: Vec::new(),
            last_used: Instant::now(),
        }
    }
}

fn remember(list: &mut Vec<String>, ids: &[String]) {
    for id in ids {
        if !list.contains(id) {
            list.push(id.clone());
        }
    }
    let excess = list.len().saturating_sub(MAX_SHOWN);
    list.drain(..excess);
}

#[derive(Debug, Default)]
pub struct Recall {
    sessions: Mutex<HashMap<String, SessionRecall>>,
}

impl Recall {
    fn with_session<T>(&self, session: &str, f: impl FnOnce(&mut SessionRecall) -> T) -> T {
        let mut map = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if !map.contains_key(session) && map.len() >= MAX_SESSIONS {
            let oldest = map
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        let entry = map.entry(session.to_string()).or_default();
        entry.last_used = Instant::now();
        f(entry)
    }

    /// Notes a `get_context_insights` answer; true when the self-audit reminder is due.
    pub fn note_context(&self, session: &str, shown: &[String], shows_memory_bank: bool) -> bool {
        self.with_session(session, |s| {
            remember(&mut s.shown_unscored, shown);
            if !shows_memory_bank {
                return false;
            }
            s.bank_context_calls += 1;
            s.bank_context_calls % AUDIT_EVERY == 0
        })
    }

    /// Notes the ids a `search_memory` answer returned.
    pub fn note_search(&self, session: &str, found: &[String]) {
        self.with_session(session, |s| remember(&mut s.searched_unscored, found));
    }

    /// Memories shown to this session since its last successful score.
    pub fn shown_unscored(&self, session: &str) -> Vec<String> {
        self.with_session(session, |s| s.shown_unscored.clone())
    }

    /// Memories this session's searches returned since they were last scored.
    pub fn searched_unscored(&self, session: &str) -> Vec<String> {
        self.with_session(session, |s| s.searched_unscored.clone())
    }

    /// After a score landed: those memories have had their outcome.
    pub fn forget_shown(&self, session: &str, scored: &[String]) {
        self.with_session(session, |s| {
            s.shown_unscored.retain(|id| !scored.contains(id));
            s.searched_unscored.retain(|id| !scored.contains(id));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_fires_on_every_fifth_call_showing_memory_bank() {
        let r = Recall::default();
        let mut fired = Vec::new();
        for call in 1..=12 {
            // Calls without memory_bank facts in view do not count.
            assert!(!r.note_context("s", &[], false));
            if r.note_context("s", &[], true) {
                fired.push(call);
            }
        }
        assert_eq!(fired, vec![5, 10]);
        assert!(!r.note_context("other", &[], true), "counted per session");
    }

    #[test]
    fn shown_ids_accumulate_until_scored() {
        let r = Recall::default();
        r.note_context("s", &["a".into(), "b".into()], false);
        r.note_context("s", &["b".into(), "c".into()], false);
        assert_eq!(r.shown_unscored("s"), vec!["a", "b", "c"]);
        r.note_search("s", &["c".into(), "d".into()]);
        r.forget_shown("s", &["a".into(), "b".into(), "d".into()]);
        assert_eq!(r.shown_unscored("s"), vec!["c"]);
        assert_eq!(r.searched_unscored("s"), vec!["c"]);
    }

    #[test]
    fn bounded() {
        let r = Recall::default();
        let many: Vec<String> = (0..200).map(|i| format!("id{i}")).collect();
        r.note_context("s", &many, false);
        assert_eq!(r.shown_unscored("s").len(), MAX_SHOWN);
        assert_eq!(r.shown_unscored("s")[0], "id136", "oldest dropped first");
        for i in 0..MAX_SESSIONS + 10 {
            r.note_context(&format!("s{i}"), &[], false);
        }
        assert!(r.sessions.lock().unwrap().len() <= MAX_SESSIONS);
    }
}
