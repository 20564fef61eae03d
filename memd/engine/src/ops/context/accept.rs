//! Which of the ids a score names may take it (issue 37: `score_response` scored any id the
//! agent listed, memories injected with the current prompt and never shown ones included).
//!
//! Owns the rule: an id is scored only when it names (by any of its ids: a memory promoted
//! since has a new one, and the conversation saw the old) a memory the scoring request listed,
//! the exchange itself, or one the asking MCP session was shown by its own tool calls. Every
//! other id is reported back with the reason, never scored. Must never read or change anything
//! but the state it is handed.

use crate::state::MemState;
use crate::state::session::Exchange;
use proto::{IgnoredScore, Outcome};
use std::collections::HashSet;

/// The reason given for an id the current prompt's context showed: it has not been used yet.
pub const SHOWN_THIS_TURN: &str = "shown with the current prompt: score it after it was used";
/// The reason given for any other id the request did not list.
pub const NOT_LISTED: &str = "not among the memories shown for the exchange being scored";

/// `scores` split into those that may be applied (one per memory) and the ignored ids.
pub fn split(
    s: &MemState,
    conv: &str,
    target: &Exchange,
    session_shown: &[String],
    scores: Vec<(String, Outcome)>,
) -> (Vec<(String, Outcome)>, Vec<IgnoredScore>) {
    let key = |id: &str| s.by_id(id).map(|r| r.key);
    let listed: Vec<&String> = std::iter::once(&target.doc_id)
        .chain(&target.injected)
        .chain(session_shown)
        .collect();
    let allowed_keys: HashSet<u64> = listed.iter().filter_map(|id| key(id)).collect();
    let this_turn: HashSet<u64> = s
        .sessions
        .get(conv)
        .map(|c| c.current_injected.iter().filter_map(|id| key(id)).collect())
        .unwrap_or_default();
    let (mut kept, mut ignored, mut scored_keys) = (Vec::new(), Vec::new(), HashSet::new());
    for (id, outcome) in scores {
        let k = key(&id);
        let allowed = match k {
            Some(k) => allowed_keys.contains(&k),
            // Unknown ids the request listed are passed on (and reported unknown).
            None => listed.contains(&&id),
        };
        if !allowed {
            let in_turn = k.is_some_and(|k| this_turn.contains(&k));
            let reason = if in_turn { SHOWN_THIS_TURN } else { NOT_LISTED };
            ignored.push(IgnoredScore {
                id,
                reason: reason.into(),
            });
        } else if k.is_none_or(|k| scored_keys.insert(k)) {
            kept.push((id, outcome));
        }
    }
    (kept, ignored)
}
