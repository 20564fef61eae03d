//! Which memories a prompt gets: candidates above the relevance floor, the brief (facts and
//! proven patterns) for a conversation's first context, and the conversation's own words for
//! short follow-ups.
//!
//! Owns the selection rules of get-context (floor, count, disputed memories, follow-ups, the
//! session-start brief, and where late interaction reorders the head: after the floor, before
//! the count; the tool evidence boost comes last, before the count): what the snapshot under
//! the store's read takes (`snapshot`) and how the reranked head is cut (`cut`, outside the
//! lock). Must never write, never call a model and never format: the caller runs the
//! pipeline's second stage between the two and lays the result out within its budget.

use crate::learn;
use crate::record::Record;
use crate::retrieve::{self, Candidate, FirstStage};
use crate::scope::Visibility;
use crate::search::{self, Hit, Query, Ranking};
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

/// The selection rules of one prompt.
pub struct Rules<'a> {
    pub conv: &'a str,
    pub visible: &'a Visibility,
    pub with_disputed: bool,
    pub floor: f32,
    pub max_memories: usize,
    /// How many survive the second stage: `max_memories`, plus the places the tool evidence
    /// boost may lift a memory from.
    pub keep: usize,
    /// How deep the first stage goes: `keep`, or the late-interaction depth when reranking.
    pub depth: usize,
    /// The vector list's first this many join the head when reranking (else 0).
    pub vector_extra: usize,
}

impl<'a> Rules<'a> {
    /// The rules under `cfg` for a prompt of `conv`; `boosting`: the conversation has tool
    /// evidence terms in play; `reranking`: the late-interaction states arrived.
    pub fn new(
        cfg: &crate::config::Config,
        conv: &'a str,
        visible: &'a Visibility,
        with_disputed: bool,
        boosting: bool,
        reranking: bool,
    ) -> Rules<'a> {
        let max_memories = cfg.context.max_memories;
        let keep = match boosting {
            true => max_memories + crate::ops::evidence::BOOST_PLACES,
            false => max_memories,
        };
        Rules {
            conv,
            visible,
            with_disputed,
            floor: cfg.context.relevance_floor,
            max_memories,
            keep,
            depth: match reranking {
                true => keep.max(cfg.search.rerank_depth),
                false => keep,
            },
            vector_extra: match reranking {
                true => retrieve::VECTOR_CANDIDATES,
                false => 0,
            },
        }
    }

    fn query(&self) -> Query {
        Query {
            limit: self.max_memories,
            visibility: self.visible.clone(),
            ..Query::default()
        }
    }

    /// Above the floor, and neither disputed (unless asked for) nor this conversation's own.
    fn allowed(&self, s: &MemState, h: &Hit) -> bool {
        let above_floor = match h.similarity {
            Some(sim) => sim >= self.floor,
            // Not embedded yet (or no model loaded): only a lexical match counts.
            None => h.lexical.is_some(),
        };
        above_floor
            && s.by_key(h.key).is_some_and(|r| {
                (self.with_disputed || !learn::scoring::disputed(r)) && !own_exchange(r, self.conv)
            })
    }
}

/// What a prompt's retrieval reads from the store, under one read: the prompt's head (the
/// first `depth` allowed candidates, fused order) and, for a follow-up, what the
/// conversation's context adds (best first, at most `keep`).
pub struct Found {
    pub head: Vec<Candidate>,
    pub extra: Vec<Candidate>,
}

/// The snapshot of one prompt's candidates. `prompt` and `followup` are (query, embedding).
/// A follow-up's candidates must be notes still similar to the prompt itself.
pub fn snapshot(
    s: &MemState,
    rules: &Rules,
    ranking: &Ranking,
    prompt: (&str, Option<&[f32]>),
    followup: Option<(&str, Option<&[f32]>)>,
    now: i64,
) -> Found {
    let q = rules.query();
    let stage = FirstStage {
        query: &q,
        text: prompt.0,
        vector: prompt.1,
        ranking,
        vector_extra: rules.vector_extra,
    };
    let head = retrieve::first_stage(s, &stage, rules.depth, |h| rules.allowed(s, h), now);
    let extra = match (followup, prompt.1) {
        (Some((text, fvec)), Some(pvec)) => {
            let taken: Vec<u64> = head.iter().take(rules.keep).map(Candidate::key).collect();
            let stage = FirstStage {
                query: &q,
                text,
                vector: fvec,
                ranking,
                vector_extra: 0,
            };
            let admits = |h: &Hit| {
                rules.allowed(s, h)
                    && !taken.contains(&h.key)
                    // Notes only: chatty transcripts ("User: great, that worked") resemble
                    // every short prompt (0.17-0.25 from "thanks!" in the replay).
                    && s.by_key(h.key).is_some_and(|r| !is_exchange(r))
                    && similarity(s, h.key, pvec).is_some_and(|x| x >= FOLLOWUP_PROMPT_FLOOR)
            };
            retrieve::first_stage(s, &stage, rules.keep, admits, now)
        }
        _ => Vec::new(),
    };
    Found { head, extra }
}

/// The prompt's memories from its reranked head and a follow-up's extra candidates: the best
/// `keep` of the head, the follow-up's merged in by rank, the tool evidence boost (memories
/// naming a word of `in_play` climb a few places), then the count.
pub fn cut(
    mut head: Vec<Candidate>,
    extra: Vec<Candidate>,
    rules: &Rules,
    in_play: &[String],
) -> Vec<Candidate> {
    head.truncate(rules.keep);
    if !extra.is_empty() {
        head.extend(extra);
        head.sort_by(|a, b| {
            b.hit
                .rank_score
                .total_cmp(&a.hit.rank_score)
                .then(a.key().cmp(&b.key()))
        });
        head.truncate(rules.keep);
    }
    if !in_play.is_empty() {
        head = crate::ops::evidence::boost(head, |c| {
            crate::ops::evidence::names_any(&c.view.content, in_play)
        });
    }
    head.truncate(rules.max_memories);
    head
}

/// An exchange of this very conversation: its text is already in the agent's context, so
/// injecting it only spends budget (issue 12's replay: "thanks!" got the previous turn back).
/// The same for its digests: the client's own compaction summary carries what they do.
fn own_exchange(r: &crate::record::Record, conv: &str) -> bool {
    (is_exchange(r)
        || r.metadata.get("memory_type").and_then(proto::Value::as_str)
            == Some(super::compact::DIGEST_TYPE))
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

/// A proven pattern's raw score must still be at least this (history's promotion bar): one
/// that has slipped since its promotion waits for the lifecycle, outside the brief.
const PROVEN_SCORE: f64 = crate::learn::lifecycle::PROMOTE_TO_HISTORY_SCORE;

/// For a conversation's first context (a session start, with no prompt): the project's brief.
/// Its memory-bank facts (best quality first) and its proven memories (patterns: promoted for
/// their outcomes, best Wilson score first) alternate, fact first, so neither kind crowds out
/// the other; the token budget cuts the tail when the lines are laid out.
pub fn profile(
    s: &MemState,
    visible: &Visibility,
    n: usize,
    with_disputed: bool,
    now: i64,
) -> Vec<(u64, proto::MemoryView)> {
    let eligible = |r: &&Record| {
        !r.archived
            && visible.admits(r.project.as_deref())
            && (with_disputed || !learn::scoring::disputed(r))
    };
    let mut facts: Vec<&Record> = s
        .records()
        .filter(|r| r.collection == Collection::MemoryBank)
        .filter(eligible)
        .collect();
    facts.sort_by(|a, b| {
        learn::scoring::memory_bank_quality(b)
            .total_cmp(&learn::scoring::memory_bank_quality(a))
            .then(b.created_at.cmp(&a.created_at))
    });
    let mut proven: Vec<&Record> = s
        .records()
        .filter(|r| r.collection == Collection::Patterns && r.score >= PROVEN_SCORE)
        .filter(eligible)
        .collect();
    proven.sort_by(|a, b| {
        learn::scoring::wilson_score(b)
            .total_cmp(&learn::scoring::wilson_score(a))
            .then(b.score.total_cmp(&a.score))
            .then(b.created_at.cmp(&a.created_at))
    });
    alternate(facts, proven)
        .take(n)
        .map(|r| (r.key, search::view(r, now, None)))
        .collect()
}

/// `a[0], b[0], a[1], b[1], …`, then the rest of the longer one.
fn alternate<T>(a: Vec<T>, b: Vec<T>) -> impl Iterator<Item = T> {
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    let mut take_a = true;
    std::iter::from_fn(move || {
        let next = match take_a {
            true => a.next().or_else(|| b.next()),
            false => b.next().or_else(|| a.next()),
        };
        take_a = !take_a;
        next
    })
}

#[cfg(test)]
mod tests {
    use super::alternate;

    #[test]
    fn alternate_takes_turns_then_drains_the_longer() {
        let got: Vec<i32> = alternate(vec![1, 3, 5, 7], vec![2, 4]).collect();
        assert_eq!(got, [1, 2, 3, 4, 5, 7]);
        let got: Vec<i32> = alternate(vec![], vec![2, 4]).collect();
        assert_eq!(got, [2, 4]);
    }
}
