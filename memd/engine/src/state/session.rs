//! Per-conversation hook state: what was injected, which exchange waits for a score.
//!
//! Owns the completion-aware scoring state machine of seed 001: scoring is required only when
//! the previous exchange of a conversation completed (its stop ran) and is unscored; never on the
//! first message; never after an interrupted turn. This is data (it survives restarts through
//! the WAL); it must never read the clock itself — every change arrives as a stamped op.

use proto::{Client, Outcome};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// No new sidecar run for a conversation within this long of its previous one (seed 000 Q2).
pub const SIDECAR_MIN_SPACING_MS: i64 = 10_000;

/// Exchange texts kept for the sidecar are cut to this many characters.
pub const EXCHANGE_KEEP_CHARS: usize = 8_000;

/// A finished exchange of a conversation (the unit that gets scored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// The working memory that stores this exchange.
    pub doc_id: String,
    pub user: String,
    pub assistant: String,
    /// Memories injected at the prompt that started this exchange.
    pub injected: Vec<String>,
    /// Concepts of that prompt (routing graph input).
    pub concepts: Vec<String>,
    pub completed_at: i64,
    pub scored: bool,
    /// What the turn's commands said (`[evidence] outcomes`): the outcome it gets if it leaves
    /// the session unscored.
    #[serde(default)]
    pub evidence: Option<Outcome>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Conversation {
    pub client: Option<Client>,
    pub last_seen: i64,
    /// Prompts seen (get-context calls that were not session starts).
    pub turns: u64,
    /// A prompt arrived and its stop has not (yet) come.
    pub awaiting_stop: bool,
    /// The prompt of the current turn (redacted), for Cursor stops and the sidecar.
    pub current_prompt: String,
    pub current_injected: Vec<String>,
    pub current_concepts: Vec<String>,
    /// Set at get-context: this turn asked the agent to score `target`.
    pub scoring_required: bool,
    /// The exchange the current scoring prompt is about.
    pub target: Option<Exchange>,
    /// The most recent completed exchange.
    pub last: Option<Exchange>,
    /// Ids shown in full in this conversation (later injections only reference them).
    pub shown: BTreeSet<String>,
    /// A sidecar run holds the conversation until this time (one at a time).
    pub sidecar_lease_until: i64,
    pub last_sidecar_at: i64,
    /// The project its prompts came from: what it stores belongs there.
    #[serde(default)]
    pub project: Option<String>,
    /// What the session start showed (the user's profile) before any prompt: it joins the
    /// first exchange's injected ids, so those memories are scored like any other.
    #[serde(default)]
    pub profile_shown: Vec<String>,
}

/// A project as a prompt saw it: its id and where its repository root was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectRef {
    pub id: String,
    pub root: String,
}

/// What the prompt hook learns from the state before searching.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoringPlan {
    pub required: bool,
    pub ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Sessions {
    pub conversations: BTreeMap<String, Conversation>,
}

/// Changes to session state, applied in WAL order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SessionOp {
    Prompt {
        conv: String,
        at: i64,
        client: Option<Client>,
        prompt: String,
        injected: Vec<String>,
        /// Ids shown in full this turn.
        shown: Vec<String>,
        concepts: Vec<String>,
        session_start: bool,
        /// Absent in logs written before projects existed, and when the hook sent no directory.
        #[serde(default)]
        project: Option<ProjectRef>,
    },
    Stop {
        conv: String,
        at: i64,
        doc_id: String,
        user: String,
        assistant: String,
        /// The turn's tool verdict; absent in logs written before tool evidence existed.
        #[serde(default)]
        evidence: Option<Outcome>,
    },
    /// A sidecar run for `conv` may proceed until `until`.
    SidecarLease { conv: String, at: i64, until: i64 },
    /// Forget conversations idle since before `before`.
    Expire { before: i64 },
    /// The client cleared or compacted `conv`'s context: nothing memd showed is in view any
    /// more, so the next context shows memories in full again.
    ContextReset { conv: String },
}

impl Sessions {
    /// Would a prompt now require scoring, and of which memories? (Read-only; the decision
    /// is made again, identically, when the `Prompt` op is applied.)
    pub fn plan(&self, conv: &str) -> ScoringPlan {
        match self.conversations.get(conv).and_then(scoring_target) {
            Some(ex) => ScoringPlan {
                required: true,
                ids: ex.injected.clone(),
            },
            None => ScoringPlan {
                required: false,
                ids: Vec::new(),
            },
        }
    }

    pub fn get(&self, conv: &str) -> Option<&Conversation> {
        self.conversations.get(conv)
    }

    pub fn get_mut(&mut self, conv: &str) -> Option<&mut Conversation> {
        self.conversations.get_mut(conv)
    }

    /// The conversation whose scoring prompt is the most recent one still unanswered; used
    /// when a score arrives without a conversation id (MCP clients do not know it).
    pub fn most_recent_pending(&self) -> Option<String> {
        self.conversations
            .iter()
            .filter(|(_, c)| c.target.as_ref().is_some_and(|t| !t.scored))
            .max_by_key(|(_, c)| c.last_seen)
            .map(|(k, _)| k.clone())
    }

    /// The project of the conversation seen most recently: where an MCP call that cannot tell
    /// its own directory most likely comes from.
    pub fn latest_project(&self) -> Option<String> {
        self.conversations
            .values()
            .filter(|c| c.project.is_some())
            .max_by_key(|c| c.last_seen)
            .and_then(|c| c.project.clone())
    }

    /// Drops the hook state of every conversation in `project` (it holds exchange text).
    pub fn forget_project(&mut self, project: &str) -> usize {
        let before = self.conversations.len();
        self.conversations
            .retain(|_, c| c.project.as_deref() != Some(project));
        before - self.conversations.len()
    }

    /// Applies `op`. Returns false only for a sidecar lease that was refused (a run is already
    /// under way for the conversation, or the last one was under 10 s ago).
    pub fn apply(&mut self, op: &SessionOp) -> bool {
        match op {
            SessionOp::Prompt {
                conv,
                at,
                client,
                prompt,
                injected,
                shown,
                concepts,
                session_start,
                project,
            } => {
                let c = self.conversations.entry(conv.clone()).or_default();
                c.last_seen = *at;
                c.client = *client;
                if let Some(p) = project {
                    c.project = Some(p.id.clone());
                }
                c.shown.extend(shown.iter().cloned());
                if *session_start {
                    for id in injected {
                        if !c.profile_shown.contains(id) {
                            c.profile_shown.push(id.clone());
                        }
                    }
                    return true;
                }
                c.target = scoring_target(c).cloned();
                c.scoring_required = c.target.is_some();
                c.turns += 1;
                c.awaiting_stop = true;
                c.current_prompt = prompt.clone();
                let mut in_context = std::mem::take(&mut c.profile_shown);
                in_context.retain(|id| !injected.contains(id));
                c.current_injected = injected.iter().cloned().chain(in_context).collect();
                c.current_concepts = concepts.clone();
            }
            SessionOp::Stop {
                conv,
                at,
                doc_id,
                user,
                assistant,
                evidence,
            } => {
                let c = self.conversations.entry(conv.clone()).or_default();
                c.last_seen = *at;
                c.last = Some(Exchange {
                    doc_id: doc_id.clone(),
                    user: user.clone(),
                    assistant: assistant.clone(),
                    injected: std::mem::take(&mut c.current_injected),
                    concepts: std::mem::take(&mut c.current_concepts),
                    completed_at: *at,
                    scored: false,
                    evidence: *evidence,
                });
                c.awaiting_stop = false;
            }
            SessionOp::SidecarLease { conv, at, until } => {
                let Some(c) = self.conversations.get_mut(conv) else {
                    return false;
                };
                let busy = c.sidecar_lease_until > *at;
                let too_soon =
                    c.last_sidecar_at > 0 && *at - c.last_sidecar_at < SIDECAR_MIN_SPACING_MS;
                if busy || too_soon {
                    return false;
                }
                c.sidecar_lease_until = *until;
                c.last_sidecar_at = *at;
            }
            SessionOp::Expire { before } => {
                self.conversations.retain(|_, c| c.last_seen >= *before);
            }
            SessionOp::ContextReset { conv } => {
                if let Some(c) = self.conversations.get_mut(conv) {
                    c.shown.clear();
                    c.profile_shown.clear();
                }
            }
        }
        true
    }

    /// Marks the exchange `doc_id` of `conv` scored. False when it already was (exactly-once).
    pub fn mark_scored(&mut self, conv: &str, doc_id: &str) -> bool {
        let Some(c) = self.conversations.get_mut(conv) else {
            return false;
        };
        let mut newly = false;
        for ex in [c.target.as_mut(), c.last.as_mut()].into_iter().flatten() {
            if ex.doc_id == doc_id && !ex.scored {
                ex.scored = true;
                newly = true;
            }
        }
        newly
    }
}

/// The exchange a new prompt should ask about: the last one, if it completed (its stop ran
/// after the previous prompt, so the user answered a finished response) and is unscored.
pub fn scoring_target(c: &Conversation) -> Option<&Exchange> {
    if c.awaiting_stop {
        // The previous turn never finished: the user interrupted. Nothing to score.
        return None;
    }
    c.last.as_ref().filter(|ex| !ex.scored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(conv: &str, at: i64, injected: &[&str]) -> SessionOp {
        SessionOp::Prompt {
            conv: conv.into(),
            at,
            client: None,
            prompt: format!("prompt at {at}"),
            injected: injected.iter().map(|s| s.to_string()).collect(),
            shown: vec![],
            concepts: vec![],
            session_start: false,
            project: None,
        }
    }

    #[test]
    fn a_context_reset_forgets_what_the_conversation_was_shown() {
        let mut s = Sessions::default();
        let mut p = prompt("c", 1, &["m1"]);
        if let SessionOp::Prompt { shown, .. } = &mut p {
            shown.push("m1".into());
        }
        s.apply(&p);
        assert_eq!(s.get("c").unwrap().shown.len(), 1);
        s.apply(&SessionOp::ContextReset { conv: "c".into() });
        assert!(s.get("c").unwrap().shown.is_empty());
        s.apply(&SessionOp::ContextReset {
            conv: "other".into(),
        });
        assert!(s.get("other").is_none(), "a reset creates no conversation");
    }

    fn stop(conv: &str, at: i64, doc: &str) -> SessionOp {
        SessionOp::Stop {
            conv: conv.into(),
            at,
            doc_id: doc.into(),
            user: "u".into(),
            assistant: "a".into(),
            evidence: None,
        }
    }

    #[test]
    fn first_message_never_requires_scoring() {
        let s = Sessions::default();
        assert!(!s.plan("c").required);
    }

    #[test]
    fn completed_unscored_exchange_requires_scoring_of_its_injected_ids() {
        let mut s = Sessions::default();
        s.apply(&prompt("c", 1, &["working_a", "history_b"]));
        s.apply(&stop("c", 2, "working_x"));
        let plan = s.plan("c");
        assert!(plan.required);
        assert_eq!(plan.ids, vec!["working_a", "history_b"]);
        s.apply(&prompt("c", 3, &[]));
        assert!(s.get("c").unwrap().scoring_required);
        assert_eq!(
            s.get("c").unwrap().target.as_ref().unwrap().doc_id,
            "working_x"
        );
    }

    #[test]
    fn interrupted_turn_skips_scoring() {
        let mut s = Sessions::default();
        s.apply(&prompt("c", 1, &["working_a"]));
        s.apply(&stop("c", 2, "working_x"));
        s.apply(&prompt("c", 3, &[])); // requires scoring of working_x
        // no stop: the user interrupts and sends another prompt
        assert!(!s.plan("c").required);
        s.apply(&prompt("c", 4, &[]));
        assert!(!s.get("c").unwrap().scoring_required);
    }

    #[test]
    fn scoring_is_exactly_once() {
        let mut s = Sessions::default();
        s.apply(&prompt("c", 1, &[]));
        s.apply(&stop("c", 2, "working_x"));
        s.apply(&prompt("c", 3, &[]));
        assert!(s.mark_scored("c", "working_x"));
        assert!(!s.mark_scored("c", "working_x"));
        s.apply(&stop("c", 4, "working_y"));
        // the new exchange is pending, the old one stays scored
        assert!(s.plan("c").required);
        assert_eq!(s.most_recent_pending(), None, "target was scored");
    }

    /// Issue 12: the profile a session start showed was never scored.
    #[test]
    fn a_session_starts_profile_is_scored_with_the_first_exchange() {
        let mut s = Sessions::default();
        let mut start = prompt("c", 1, &["memory_bank_a", "memory_bank_b"]);
        if let SessionOp::Prompt { session_start, .. } = &mut start {
            *session_start = true;
        }
        s.apply(&start);
        assert!(!s.plan("c").required, "a session start is not a turn");
        s.apply(&prompt("c", 2, &["working_x", "memory_bank_b"]));
        s.apply(&stop("c", 3, "working_ex"));
        assert_eq!(
            s.plan("c").ids,
            vec!["working_x", "memory_bank_b", "memory_bank_a"]
        );
        s.apply(&prompt("c", 4, &[]));
        s.apply(&stop("c", 5, "working_ex2"));
        assert!(s.plan("c").ids.is_empty(), "the profile is scored once");
    }

    #[test]
    fn expire_forgets_idle_conversations() {
        let mut s = Sessions::default();
        s.apply(&prompt("old", 1, &[]));
        s.apply(&prompt("new", 100, &[]));
        s.apply(&SessionOp::Expire { before: 50 });
        assert!(s.get("old").is_none());
        assert!(s.get("new").is_some());
    }
}
