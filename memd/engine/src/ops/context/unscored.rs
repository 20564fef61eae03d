//! Exchanges that leave their conversation unscored take their turn's tool verdict as outcome
//! (`[evidence] outcomes`, experimental).
//!
//! Owns when an exchange counts as abandoned (a prompt moves the scoring target past it, or
//! the conversation expires) and the score batch that gives it the verdict, exactly once: the
//! batch names the exchange, and the state machine checks and marks it inside the op, so an
//! agent's or sidecar's score that lands first wins. Must never touch an exchange somebody
//! can still score, and never act when the setting is off.

use crate::config::Config;
use crate::state::MemState;
use crate::state::ops::{Op, ScoreBatch};
use crate::state::session::{self, Exchange};
use crate::trace::{Trace, TraceEntry};

/// The ledger's word for an outcome the tool evidence gave.
pub const SOURCE: &str = "evidence";

/// At a (non session-start) prompt of `conv`: the score batch for the exchange this prompt
/// leaves behind unscored, if its turn has a verdict.
pub fn on_prompt(cfg: &Config, trace: &Trace, s: &MemState, conv: &str) -> Option<Op> {
    if !cfg.evidence.outcomes {
        return None;
    }
    let c = s.sessions.get(conv)?;
    let leaving = c.target.as_ref().filter(|t| !t.scored)?;
    let next = session::scoring_target(c);
    if next.is_some_and(|n| n.doc_id == leaving.doc_id) {
        return None;
    }
    batch(cfg, trace, s, conv, leaving)
}

/// Before conversations idle since before `before` are forgotten: a batch for each unscored
/// exchange with a verdict they still hold.
pub fn on_expire(cfg: &Config, trace: &Trace, s: &MemState, before: i64) -> Vec<Op> {
    if !cfg.evidence.outcomes {
        return Vec::new();
    }
    let mut ops = Vec::new();
    for (conv, c) in &s.sessions.conversations {
        if c.last_seen >= before {
            continue;
        }
        let mut held: Vec<&Exchange> = c.target.iter().chain(c.last.iter()).collect();
        held.dedup_by(|a, b| a.doc_id == b.doc_id);
        ops.extend(
            held.into_iter()
                .filter(|ex| !ex.scored)
                .filter_map(|ex| batch(cfg, trace, s, conv, ex)),
        );
    }
    ops
}

/// The exchange and every memory it was shown get the verdict, as an agent's score without
/// `related` would give them; the ledger says the evidence scored it.
fn batch(cfg: &Config, trace: &Trace, s: &MemState, conv: &str, ex: &Exchange) -> Option<Op> {
    let outcome = match ex.evidence? {
        // Which of the memories shown misled cannot be told from a failure alone.
        proto::Outcome::Failed if !cfg.evidence.failures => return None,
        o => o,
    };
    let mut scores = vec![(ex.doc_id.clone(), outcome)];
    scores.extend(
        ex.injected
            .iter()
            .filter(|id| **id != ex.doc_id && s.by_id(id).is_some())
            .map(|id| (id.clone(), outcome)),
    );
    let ids: Vec<String> = scores.iter().map(|(id, _)| id.clone()).collect();
    trace.append(&TraceEntry::record_outcome(
        conv,
        outcome.as_str(),
        &ids,
        Some(SOURCE),
        false,
    ));
    Some(Op::ScoreExchange(Box::new(ScoreBatch {
        exchange: Some((conv.to_string(), ex.doc_id.clone())),
        exchange_outcome: outcome,
        scores,
        concepts: ex.concepts.clone(),
        at: crate::clock::now_ms(),
        time_weighting: cfg.learning.time_weighting,
    })))
}
