//! Which memories a prompt gets: candidates above the relevance floor, the profile for a
//! conversation's first context, and the conversation's own words for short follow-ups.
//!
//! Owns the selection rules of get-context (floor, count, disputed memories, follow-ups, and
//! where late interaction reorders the head: after the floor, before the count; the tool
//! evidence boost comes last, before the count).
//! Must never write and never format: the caller lays the result out within its budget.

use crate::core::Core;
use crate::learn;
use crate::scope::Visibility;
use crate::search::{self, Hit, Query};
use crate::state::MemState;
use proto::Collection;

/// A prompt of at most this many words is a possible follow-up ("commit that", "push the new
/// build to prod, please"): alone it says too little to find what it refers to.
pub const SHORT_PROMPT_WORDS: usize = 8;
/// A memory found through the conversation's context must still be this similar to the short
/// prompt itself, so "thanks!" after a deploy discussion does not re-inject the deploy notes.
/// Measured in tests/tests/replay.rs (issue 12, all-MiniLM-L6-v2): "commit that" and "ok,
/// commit it" sit at 0.34 and 0.28 from the commit convention they refer to (under the 0.35
/// floor on their own); "thanks!" sits at 0.14 from the deploy note of the turn before, and
/// "What's a good name for a cat?" under 0.09 from every note. 0.2 is between the two groups.
pub const FOLLOWUP_PROMPT_FLOOR: f32 = 0.2;
/// How much of the last answer joins a follow-up's query (its gist: the opening sentences).
const ANSWER_GIST_CHARS: usize = 300;

/// For a short prompt in a conversation with history: the prompt, the previous prompt and the
/// gist of the last answer, as one query. `None` for long prompts and first prompts.
pub fn followup_query(s: &MemState, conv: &str, prompt: &str) -> Option<String> {
    let words = prompt.split_whitespace().count();
    if words == 0 || words > SHORT_PROMPT_WORDS {
        return None;
    }
    let c = s.sessions.get(conv)?;
    let previous = c.last.as_ref()?;
    let gist: String = previous.assistant.chars().take(ANSWER_GIST_CHARS).collect();
    Some(format!("{prompt}\n{}\n{gist}", previous.user.trim()))
}

/// The prompt's late-interaction states and when reranking must stop.
pub type LateQuery<'a> = (&'a crate::embed::QueryStates, std::time::Instant);

/// Candidates above the relevance floor, best first, at most `max_memories`. Only memories
/// `visible` admits are candidates at all; disputed ones only when `with_disputed`. With
/// `late`, the first `search.rerank_depth` allowed candidates are reordered by MaxSim before
/// the cut. A follow-up query adds what the conversation's context finds, if the prompt
/// itself is not unrelated to it.
#[allow(clippy::too_many_arguments)]
pub fn relevant(
    core: &Core,
    s: &MemState,
    conv: &str,
    visible: &Visibility,
    prompt: (&str, Option<&[f32]>),
    followup: Option<(&str, Option<&[f32]>)>,
    late: Option<LateQuery>,
    with_disputed: bool,
) -> Vec<(u64, Option<Hit>)> {
    let cfg = &core.cfg.context;
    let q = Query {
        limit: cfg.max_memories,
        visibility: visible.clone(),
        ..Query::default()
    };
    let floor = cfg.relevance_floor;
    let allowed = |h: &Hit| {
        let above_floor = match h.similarity {
            Some(sim) => sim >= floor,
            // Not embedded yet (or no model loaded): only a lexical match counts.
            None => h.lexical.is_some(),
        };
        above_floor
            && s.by_key(h.key).is_some_and(|r| {
                (with_disputed || !learn::scoring::disputed(r)) && !own_exchange(r, conv)
            })
    };
    let ranking = core.ranking();
    // Words of the conversation's recent tool events (`[evidence] boost`): the few places a
    // memory naming one may climb are ranked too.
    let in_play = if core.cfg.evidence.boost {
        core.evidence.terms(conv)
    } else {
        Vec::new()
    };
    let keep = if in_play.is_empty() {
        cfg.max_memories
    } else {
        cfg.max_memories + crate::evidence::BOOST_PLACES
    };
    let depth = match late {
        Some(_) => keep.max(core.cfg.search.rerank_depth),
        None => keep,
    };
    let mut hits: Vec<Hit> = search::rank(s, &q, prompt.0, prompt.1, &ranking, depth)
        .into_iter()
        .filter(|h| allowed(h))
        .take(depth)
        .collect();
    if let Some((query, deadline)) = late {
        hits = late_order(core, s, hits, query, deadline);
    }
    hits.truncate(keep);
    if let (Some((text, fvec)), Some(pvec)) = (followup, prompt.1) {
        let more: Vec<Hit> = search::rank(s, &q, text, fvec, &ranking, cfg.max_memories)
            .into_iter()
            .filter(|h| allowed(h) && !hits.iter().any(|k| k.key == h.key))
            // Notes only: chatty transcripts ("User: great, that worked") resemble every
            // short prompt (0.17-0.25 from "thanks!" in the replay).
            .filter(|h| s.by_key(h.key).is_some_and(|r| !is_exchange(r)))
            .filter(|h| similarity(s, h.key, pvec).is_some_and(|x| x >= FOLLOWUP_PROMPT_FLOOR))
            .collect();
        hits.extend(more);
        hits.sort_by(|a, b| {
            b.rank_score
                .total_cmp(&a.rank_score)
                .then(a.key.cmp(&b.key))
        });
        hits.truncate(keep);
    }
    if !in_play.is_empty() {
        hits = crate::evidence::boost(hits, |h| {
            s.by_key(h.key)
                .is_some_and(|r| crate::evidence::names_any(&r.content, &in_play))
        });
    }
    hits.truncate(cfg.max_memories);
    hits.into_iter().map(|h| (h.key, Some(h))).collect()
}

/// `hits` reordered by MaxSim (memories without token states, and those left when the deadline
/// passed, keep their places).
fn late_order(
    core: &Core,
    s: &MemState,
    hits: Vec<Hit>,
    query: &crate::embed::QueryStates,
    deadline: std::time::Instant,
) -> Vec<Hit> {
    let keyed: Vec<crate::late::Candidate> = hits
        .iter()
        .map(|h| {
            let text = s.by_key(h.key).map_or("", |r| r.content.as_str());
            (h.key, text, h.similarity.unwrap_or(0.0))
        })
        .collect();
    let order = crate::late::reorder(
        &core.late_states,
        query,
        &keyed,
        keyed.len(),
        Some(deadline),
    );
    // MaxSim stops at the deadline: past it, (part of) the head kept its fused places.
    core.late_states
        .prompts
        .count(match std::time::Instant::now() < deadline {
            true => crate::late::PromptRerank::Reranked,
            false => crate::late::PromptRerank::OverBudget,
        });
    let mut slots: Vec<Option<Hit>> = hits.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// An exchange of this very conversation: its text is already in the agent's context, so
/// injecting it only spends budget (issue 12's replay: "thanks!" got the previous turn back).
fn own_exchange(r: &crate::record::Record, conv: &str) -> bool {
    is_exchange(r)
        && r.metadata
            .get("conversation_id")
            .and_then(proto::Value::as_str)
            == Some(conv)
}

fn is_exchange(r: &crate::record::Record) -> bool {
    r.metadata.get("memory_type").and_then(proto::Value::as_str) == Some("exchange")
}

fn similarity(s: &MemState, key: u64, qvec: &[f32]) -> Option<f32> {
    let v = s.vectors().get(key)?;
    Some(v.iter().zip(qvec).map(|(a, b)| a * b).sum())
}

/// For a conversation's first context (Cursor sessionStart): the user's most important facts.
pub fn profile(
    s: &MemState,
    visible: &Visibility,
    n: usize,
    with_disputed: bool,
) -> Vec<(u64, Option<Hit>)> {
    let mut bank: Vec<_> = s
        .records()
        .filter(|r| r.collection == Collection::MemoryBank && !r.archived)
        .filter(|r| visible.admits(r.project.as_deref()))
        .filter(|r| with_disputed || !learn::scoring::disputed(r))
        .collect();
    bank.sort_by(|a, b| {
        learn::scoring::memory_bank_quality(b)
            .total_cmp(&learn::scoring::memory_bank_quality(a))
            .then(b.created_at.cmp(&a.created_at))
    });
    bank.into_iter().take(n).map(|r| (r.key, None)).collect()
}
