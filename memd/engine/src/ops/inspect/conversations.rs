//! Conversations turn by turn, rebuilt from the trace ledger and the session records.
//!
//! Owns grouping ledger lines into turns (a prompt, the memories injected for it, the exchange
//! stored at its stop, the outcome that scored it) and looking the injected ids up in the store
//! for their current content. Must never read text from the ledger (it has none) and never
//! change a session.

use super::Inspect;
use super::TRACE_LINES;
use crate::clock;
use crate::trace::{TraceEntry, TraceEvent};
use std::collections::BTreeMap;

/// Conversations one list shows at most (newest first).
pub const CONVERSATIONS_MAX: usize = 200;

/// One conversation in the list.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationSummary {
    pub id: String,
    /// Unix milliseconds of its newest ledger line.
    pub last_at: i64,
    pub turns: usize,
    /// Memories injected over all its turns (with repeats).
    pub injected: usize,
    pub scored_turns: usize,
    /// Its project, while its session record lives.
    pub project: Option<String>,
}

/// One prompt and what followed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Unix milliseconds of the prompt.
    pub at: i64,
    pub injected: Vec<InjectedMemory>,
    /// The working-memory id of the exchange stored at its stop.
    pub stored: Option<String>,
    /// `worked` | `failed` | `partial` | `unknown`, once scored.
    pub outcome: Option<String>,
    /// Who scored it: `agent`, `sidecar`, ... (the ledger's note).
    pub scored_by: Option<String>,
}

/// An injected memory as the store knows it now.
#[derive(Debug, Clone, PartialEq)]
pub struct InjectedMemory {
    /// The id the ledger recorded.
    pub id: String,
    /// Its current id, collection and content; `None` once it was deleted.
    pub now: Option<(String, String, String)>,
    /// Whether the turn's outcome line named it (its score moved with the turn; the ledger
    /// keeps the turn's outcome word, not each memory's).
    pub scored: bool,
}

impl Inspect<'_> {
    /// Conversations with ledger lines, newest first.
    pub fn conversations(&self) -> Vec<ConversationSummary> {
        let trace = self.trace.read(None, TRACE_LINES);
        let mut out: Vec<ConversationSummary> = by_conversation(&trace)
            .into_iter()
            .map(|(id, lines)| {
                let turns = turns_of(&lines);
                ConversationSummary {
                    id: id.to_string(),
                    last_at: lines
                        .last()
                        .and_then(|e| clock::parse_rfc3339(&e.ts))
                        .unwrap_or(0),
                    injected: turns.iter().map(|t| t.injected.len()).sum(),
                    scored_turns: turns.iter().filter(|t| t.outcome.is_some()).count(),
                    turns: turns.len(),
                    project: None,
                }
            })
            .collect();
        self.db.read(|s| {
            for c in &mut out {
                c.project = s
                    .sessions
                    .conversations
                    .get(&c.id)
                    .and_then(|conv| conv.project.clone());
            }
        });
        out.sort_by(|a, b| b.last_at.cmp(&a.last_at).then(a.id.cmp(&b.id)));
        out.truncate(CONVERSATIONS_MAX);
        out
    }

    /// One conversation's turns, oldest first, with the injected memories' current content.
    pub fn conversation_turns(&self, conversation: &str) -> Vec<Turn> {
        let trace = self.trace.read(Some(conversation), TRACE_LINES);
        let mut turns = turns_of(&trace.iter().collect::<Vec<_>>());
        self.db.read(|s| {
            for m in turns.iter_mut().flat_map(|t| t.injected.iter_mut()) {
                m.now = s.by_id(&m.id).map(|r| {
                    (
                        r.id.clone(),
                        r.collection.as_str().to_string(),
                        r.content.clone(),
                    )
                });
            }
        });
        turns
    }
}

/// Every conversation's ledger lines, in ledger order, by conversation id.
pub fn by_conversation<'a>(
    trace: impl IntoIterator<Item = &'a TraceEntry>,
) -> BTreeMap<&'a str, Vec<&'a TraceEntry>> {
    let mut out: BTreeMap<&str, Vec<&TraceEntry>> = BTreeMap::new();
    for e in trace {
        out.entry(e.conversation_id.as_str()).or_default().push(e);
    }
    out
}

/// One conversation's lines (in ledger order) as turns. A turn is a prompt's get-context line
/// (a session start's is not a prompt: it belongs to no turn), the stop that stored its
/// exchange before the next prompt, and the outcome line that scored that exchange: the first
/// one naming the exchange's id, which the agent records at the next prompt and the sidecar
/// at a later stop.
pub fn turns_of(lines: &[&TraceEntry]) -> Vec<Turn> {
    let mut turns = Vec::new();
    for (i, e) in lines.iter().enumerate() {
        if e.event != TraceEvent::GetContext || e.is_session_start() {
            continue;
        }
        let rest = &lines[i + 1..];
        let stored = rest
            .iter()
            .find(|x| x.event == TraceEvent::Stop || is_prompt(x))
            .filter(|x| x.event == TraceEvent::Stop)
            .and_then(|x| x.doc_id.clone());
        let scoring = stored.as_deref().and_then(|doc| {
            rest.iter()
                .find(|x| x.event == TraceEvent::RecordOutcome && x.scored.iter().any(|s| s == doc))
        });
        turns.push(Turn {
            at: clock::parse_rfc3339(&e.ts).unwrap_or(0),
            injected: e
                .injected
                .iter()
                .map(|id| InjectedMemory {
                    id: id.clone(),
                    now: None,
                    scored: scoring.is_some_and(|s| s.scored.contains(id)),
                })
                .collect(),
            stored,
            outcome: scoring.and_then(|s| s.outcome.clone()),
            scored_by: scoring.and_then(|s| s.note.clone()),
        });
    }
    turns
}

fn is_prompt(e: &TraceEntry) -> bool {
    e.event == TraceEvent::GetContext && !e.is_session_start()
}
