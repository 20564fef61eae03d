//! Retrieval: validating a search request, finding candidates, ranking, shaping results.
//!
//! Owns the query pipeline shared by `/api/search`, get-context and the MCP tools: vector and
//! lexical candidates fused by reciprocal rank, routing-graph collection boosts (off unless
//! `learning.graph_boosts`), the bounded outcome prior, filters (collections, days_back,
//! metadata, archived) and the normalized memory shape. Must never write: everything here runs
//! under the store's read lock.

use crate::clock::{self, DAY_MS};
use crate::error::ApiError;
use crate::index::reciprocal_rank_fusion;
/// The lexical index's suffix folding, for tools that count words the way it does.
pub use crate::index::tokenize::stem as stem_term;
use crate::learn;
use crate::record::Record;
use crate::scope::Visibility;
use crate::state::MemState;
use proto::limits;
use proto::{Collection, MemoryView, SearchRequest, SortBy, Value};
use std::collections::{BTreeMap, HashMap};

/// Rank constant of reciprocal rank fusion. Measured on LoCoMo (5 conversations, 760
/// questions; `memd-eval locomo`): k 60 with lexical weight 0.5 gave R@5 0.543, worse than BM25
/// alone (0.601); k 5 with equal weights gave R@5 0.638 / R@10 0.727, better than either alone.
/// A small k lets the top of each list dominate, which suits two lists that disagree often.
pub const RRF_K: f32 = 5.0;

/// Which retrieval signals to use; the defaults are what `memd-eval locomo` measured best.
#[derive(Debug, Clone, Copy)]
pub struct Ranking {
    pub vector_weight: f32,
    pub lexical_weight: f32,
    pub prior_weight: f64,
    /// Multiplies the relevance of raw exchange records (`memory_type` "exchange").
    pub exchange_weight: f64,
    pub graph_boosts: bool,
}

impl Ranking {
    /// The ranking `[learning]` asks for (the fusion weights keep their defaults).
    pub fn of(learning: &crate::config::LearningConfig) -> Ranking {
        Ranking {
            prior_weight: learning.prior_weight,
            exchange_weight: learning.exchange_weight,
            graph_boosts: learning.graph_boosts,
            ..Ranking::default()
        }
    }
}

impl Default for Ranking {
    fn default() -> Self {
        Ranking {
            vector_weight: 1.0,
            lexical_weight: 1.0,
            prior_weight: 0.15,
            exchange_weight: 1.0,
            graph_boosts: crate::config::GRAPH_BOOSTS,
        }
    }
}

/// A validated search.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub text: Option<String>,
    pub id: Option<String>,
    pub collections: Option<Vec<Collection>>,
    pub since_ms: Option<i64>,
    pub limit: usize,
    pub filters: BTreeMap<String, Value>,
    pub sort_by: Option<SortBy>,
    pub include_archived: bool,
    /// Whose memories are candidates at all (applied before ranking, not after).
    pub visibility: Visibility,
}

/// One ranked candidate.
#[derive(Debug, Clone)]
pub struct Hit {
    pub key: u64,
    pub similarity: Option<f32>,
    /// Place in the vector list (0: the most similar), when it made the list.
    pub vector_rank: Option<usize>,
    pub lexical: Option<f32>,
    pub rank_score: f64,
    /// What the first stage multiplied the fused relevance by for this memory's own sake:
    /// its kind's weight (`Ranking::exchange_weight`) and the outcome prior's factor, not the
    /// graph boost. The second stage carries these priors into its own score.
    pub weight: f64,
}

impl Query {
    /// Validates a request: every limit enforced with a message naming the field. `current` is
    /// the caller's project, when the request (or its conversation) tells it.
    pub fn from_request(
        req: &SearchRequest,
        now_ms: i64,
        current: Option<&str>,
    ) -> Result<Query, ApiError> {
        let text = req
            .query
            .as_deref()
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .map(str::to_string);
        let id = req.id.as_deref().map(str::trim).filter(|s| !s.is_empty());
        if text.is_none() && req.days_back.is_none() && id.is_none() {
            return Err(ApiError::bad_request(
                "Provide at least one of: query, days_back, id",
            ));
        }
        if let Some(t) = &text {
            crate::error::check_len("query", t, limits::QUERY_MAX_CHARS)?;
        }
        if let Some(i) = id {
            crate::error::check_len("id", i, limits::ID_MAX_CHARS)?;
        }
        if let Some(c) = &req.conversation_id {
            crate::error::check_len("conversation_id", c, limits::ID_MAX_CHARS)?;
        }
        let since_ms = match req.days_back {
            None => None,
            Some(d) if (limits::DAYS_BACK.0..=limits::DAYS_BACK.1).contains(&d) => {
                Some(now_ms - d * DAY_MS)
            }
            Some(d) => {
                return Err(ApiError::bad(
                    "days_back",
                    format!("days_back must be between 1 and 365 (got {d})"),
                ));
            }
        };
        let limit = match req.limit {
            None => 10,
            Some(l) if (limits::SEARCH_LIMIT.0..=limits::SEARCH_LIMIT.1).contains(&l) => l as usize,
            Some(l) => {
                return Err(ApiError::bad(
                    "limit",
                    format!("limit must be between 1 and 100 (got {l})"),
                ));
            }
        };
        Ok(Query {
            text,
            id: id.map(str::to_string),
            collections: parse_collections(req.collections.as_deref())?,
            since_ms,
            limit,
            filters: validate_filters(req.metadata_filters.as_ref())?,
            sort_by: req.sort_by,
            include_archived: req.include_archived.unwrap_or(false),
            visibility: Visibility::select(req.project.as_deref(), current)?,
        })
    }
}

pub fn parse_collections(names: Option<&[String]>) -> Result<Option<Vec<Collection>>, ApiError> {
    let Some(names) = names else { return Ok(None) };
    if names.is_empty() {
        return Ok(None);
    }
    names
        .iter()
        .map(|n| {
            Collection::parse(n.trim()).ok_or_else(|| {
                ApiError::bad(
                    "collections",
                    format!(
                        "unknown collection {n:?}; use books, working, history, patterns, memory_bank"
                    ),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

const FILTER_OPS: [&str; 6] = ["$gte", "$gt", "$lte", "$lt", "$eq", "$ne"];

fn validate_filters(
    f: Option<&BTreeMap<String, Value>>,
) -> Result<BTreeMap<String, Value>, ApiError> {
    let Some(f) = f else {
        return Ok(BTreeMap::new());
    };
    if f.len() > 16 {
        return Err(ApiError::bad("metadata_filters", "at most 16 filter keys"));
    }
    for (k, v) in f {
        if let Value::Map(ops) = v {
            for op in ops.keys() {
                if !FILTER_OPS.contains(&op.as_str()) {
                    return Err(ApiError::bad(
                        "metadata_filters",
                        format!("unknown operator {op:?} on {k:?}; use one of {FILTER_OPS:?}"),
                    ));
                }
            }
        }
    }
    Ok(f.clone())
}

/// Does `rec` pass every filter of `q` (project, collections, archive, time, metadata)?
pub fn matches(rec: &Record, q: &Query) -> bool {
    if !q.visibility.admits(rec.project.as_deref()) {
        return false;
    }
    if let Some(cs) = &q.collections
        && !cs.contains(&rec.collection)
    {
        return false;
    }
    if rec.archived && !q.include_archived {
        return false;
    }
    if q.since_ms.is_some_and(|since| rec.created_at < since) {
        return false;
    }
    q.filters
        .iter()
        .all(|(k, cond)| field_matches(rec, k, cond))
}

fn field_value(rec: &Record, key: &str) -> Option<Value> {
    match key {
        "created_at" => Some(Value::String(clock::rfc3339(rec.created_at))),
        "collection" => Some(Value::String(rec.collection.as_str().into())),
        "score" => Some(Value::Number(rec.score)),
        "uses" => Some(Value::Number(f64::from(rec.uses))),
        "last_outcome" => rec.last_outcome.map(|o| Value::String(o.as_str().into())),
        "project" => rec.project.clone().map(Value::String),
        "tags" => Some(Value::List(
            rec.tags.iter().map(|t| Value::String(t.clone())).collect(),
        )),
        _ => rec.metadata.get(key).cloned(),
    }
}

fn field_matches(rec: &Record, key: &str, cond: &Value) -> bool {
    let actual = field_value(rec, key);
    match cond {
        Value::Map(ops) => ops
            .iter()
            .all(|(op, want)| compare(actual.as_ref(), op, want)),
        want => match (&actual, want) {
            (Some(Value::List(items)), Value::String(_)) => items.contains(want),
            (Some(a), w) => a == w,
            (None, _) => false,
        },
    }
}

fn compare(actual: Option<&Value>, op: &str, want: &Value) -> bool {
    let Some(a) = actual else { return op == "$ne" };
    let ord = match (a, want) {
        (Value::Number(x), Value::Number(y)) => x.partial_cmp(y),
        (Value::String(x), Value::String(y)) => Some(x.as_str().cmp(y.as_str())),
        _ => None,
    };
    use std::cmp::Ordering::*;
    match (op, ord) {
        ("$eq", _) => a == want,
        ("$ne", _) => a != want,
        ("$gte", Some(o)) => o != Less,
        ("$gt", Some(o)) => o == Greater,
        ("$lte", Some(o)) => o != Greater,
        ("$lt", Some(o)) => o == Less,
        _ => false,
    }
}

/// Ranked candidates for a text query. `qvec` is the query embedding when the model is loaded.
pub fn rank(
    state: &MemState,
    q: &Query,
    text: &str,
    qvec: Option<&[f32]>,
    ranking: &Ranking,
    want: usize,
) -> Vec<Hit> {
    let keep = |key: u64| state.by_key(key).is_some_and(|r| matches(r, q));
    let pool = (want * 4).max(40);
    let vec_hits: Vec<(u64, f32)> = match qvec {
        Some(v) if ranking.vector_weight > 0.0 => {
            state.vectors().search(v, pool, &keep).unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let lex_hits: Vec<(u64, f32)> = if ranking.lexical_weight > 0.0 {
        state.lexical().search(text, pool, &keep)
    } else {
        Vec::new()
    };
    let sim: HashMap<u64, f32> = vec_hits.iter().copied().collect();
    let vector_rank: HashMap<u64, usize> =
        vec_hits.iter().enumerate().map(|(r, h)| (h.0, r)).collect();
    let lex: HashMap<u64, f32> = lex_hits.iter().copied().collect();
    let fused = reciprocal_rank_fusion(
        &[&vec_hits, &lex_hits],
        &[ranking.vector_weight, ranking.lexical_weight],
        RRF_K,
    );
    let best_possible = f64::from((ranking.vector_weight + ranking.lexical_weight) / (RRF_K + 1.0));
    let boosts = if ranking.graph_boosts {
        state
            .graph
            .routing
            .collection_boosts(&learn::graph::extract_concepts(text))
    } else {
        Vec::new()
    };
    let mut hits: Vec<Hit> = fused
        .into_iter()
        .filter_map(|(key, score)| {
            let rec = state.by_key(key)?;
            let similarity = sim.get(&key).copied().or_else(|| {
                let (v, q) = (state.vectors().get(key)?, qvec?);
                Some(v.iter().zip(q).map(|(a, b)| a * b).sum())
            });
            let boost = boosts
                .iter()
                .find(|(c, _)| *c == rec.collection)
                .map_or(1.0, |(_, b)| *b);
            let kind = kind_weight(rec, ranking);
            let relevance = (f64::from(score) / best_possible).min(1.0) * boost * kind;
            let prior = learn::scoring::outcome_prior(rec);
            Some(Hit {
                key,
                similarity,
                vector_rank: vector_rank.get(&key).copied(),
                lexical: lex.get(&key).copied(),
                rank_score: learn::scoring::apply_prior(relevance, prior, ranking.prior_weight),
                weight: kind * learn::scoring::apply_prior(1.0, prior, ranking.prior_weight),
            })
        })
        .collect();
    hits.sort_by(|a, b| {
        b.rank_score
            .total_cmp(&a.rank_score)
            .then(a.key.cmp(&b.key))
    });
    hits
}

/// How much a memory's kind counts: raw exchange transcripts rank below curated notes.
fn kind_weight(rec: &Record, ranking: &Ranking) -> f64 {
    let is_exchange = matches!(
        rec.metadata.get("memory_type"),
        Some(Value::String(t)) if t == "exchange"
    );
    if is_exchange {
        ranking.exchange_weight
    } else {
        1.0
    }
}

/// Memories matching the filters without a text query, newest (or best-scored) first.
pub fn browse<'a>(state: &'a MemState, q: &Query) -> Vec<&'a Record> {
    let mut recs: Vec<&Record> = state.records().filter(|r| matches(r, q)).collect();
    match q.sort_by {
        Some(SortBy::Score) => recs.sort_by(|a, b| {
            learn::scoring::learned_score(b)
                .total_cmp(&learn::scoring::learned_score(a))
                .then(b.created_at.cmp(&a.created_at))
                .then(b.key.cmp(&a.key))
        }),
        // Keys grow with every insert: within one millisecond the later write is the newer.
        _ => recs.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.key.cmp(&a.key))),
    }
    recs.truncate(q.limit);
    recs
}

/// Re-orders ranked hits for `sort_by` recency/score (relevance keeps the ranking).
pub fn sort_hits(state: &MemState, hits: &mut [Hit], sort_by: Option<SortBy>) {
    let created = |h: &Hit| state.by_key(h.key).map_or(0, |r| r.created_at);
    let learned = |h: &Hit| {
        state
            .by_key(h.key)
            .map_or(0.0, learn::scoring::learned_score)
    };
    match sort_by {
        Some(SortBy::Recency) => hits.sort_by_key(|h| std::cmp::Reverse((created(h), h.key))),
        Some(SortBy::Score) => hits.sort_by(|a, b| learned(b).total_cmp(&learned(a))),
        _ => {}
    }
}

/// The normalized memory shape (seed 002 feature 2).
pub fn view(rec: &Record, now_ms: i64, hit: Option<&Hit>) -> MemoryView {
    let bank = rec.collection == Collection::MemoryBank;
    MemoryView {
        id: rec.id.clone(),
        collection: rec.collection.as_str().to_string(),
        content: rec.content.clone(),
        created_at: clock::rfc3339(rec.created_at),
        age: clock::age(rec.created_at, now_ms),
        score: round4(rec.score),
        wilson_score: round4(learn::scoring::wilson_lower(
            rec.success_count,
            f64::from(rec.uses),
        )),
        uses: rec.uses,
        success_count: rec.success_count,
        learned_score: round4(learn::scoring::learned_score(rec)),
        last_outcome: rec
            .last_outcome
            .map(|o| o.as_str().to_string())
            .unwrap_or_default(),
        outcome_history: rec.outcome_symbols(),
        tags: rec.tags.clone(),
        disputed: learn::scoring::disputed(rec),
        archived: rec.archived,
        project: rec.project.clone(),
        importance: if bank {
            rec.importance.or(Some(0.7))
        } else {
            None
        },
        confidence: if bank {
            rec.confidence.or(Some(0.7))
        } else {
            None
        },
        embedding_similarity: hit.and_then(|h| h.similarity).map(|s| round4(f64::from(s))),
        final_rank_score: hit.map(|h| round4(h.rank_score)),
        rerank_score: None,
        shared: rec.team,
        owner: rec.origin.as_ref().map(|o| o.owner.clone()),
        metadata: rec.metadata.clone(),
    }
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ops::{Op, Output};
    use crate::store::Machine;

    fn insert(state: &mut MemState, text: &str, exchange: bool) -> u64 {
        let mut rec = Record::new(Collection::Working, text.to_string(), 0);
        if exchange {
            rec.metadata
                .insert("memory_type".into(), Value::from("exchange"));
        }
        match state.apply(&Op::Insert(Box::new(rec))) {
            Output::Inserted { key, .. } => key,
            other => panic!("insert: {other:?}"),
        }
    }

    fn ranked(state: &MemState, exchange_weight: f64) -> Vec<(u64, f64)> {
        let query = "how do I deploy lantern to production";
        let q = Query {
            text: Some(query.into()),
            limit: 5,
            ..Query::default()
        };
        let ranking = Ranking {
            exchange_weight,
            ..Ranking::default()
        };
        rank(state, &q, query, None, &ranking, 5)
            .into_iter()
            .map(|h| (h.key, h.rank_score))
            .collect()
    }

    /// Writes in the same millisecond (one client writing fast) still come back newest first.
    #[test]
    fn newest_first_holds_within_one_millisecond() {
        let mut state = MemState::new(384).unwrap();
        let keys: Vec<u64> = ["first", "second", "third"]
            .iter()
            .map(|t| insert(&mut state, t, false))
            .collect();
        let q = Query {
            since_ms: Some(-1),
            limit: 10,
            sort_by: Some(SortBy::Recency),
            ..Query::default()
        };
        let order: Vec<u64> = browse(&state, &q).iter().map(|r| r.key).collect();
        assert_eq!(order, keys.iter().rev().copied().collect::<Vec<_>>());
        let mut hits: Vec<Hit> = keys
            .iter()
            .map(|&key| Hit {
                key,
                similarity: None,
                vector_rank: None,
                lexical: None,
                rank_score: 0.0,
                weight: 1.0,
            })
            .collect();
        sort_hits(&state, &mut hits, Some(SortBy::Recency));
        assert_eq!(hits[0].key, keys[2]);
    }

    #[test]
    fn exchange_records_rank_below_notes_by_their_weight() {
        let mut state = MemState::new(384).unwrap();
        let exchange = insert(
            &mut state,
            "User: how do I deploy lantern to production? Assistant: run make release",
            true,
        );
        let note = insert(
            &mut state,
            "To deploy lantern to production, run make release",
            false,
        );
        let equal = ranked(&state, 1.0);
        let weighted = ranked(&state, 0.5);
        let score = |hits: &[(u64, f64)], key| hits.iter().find(|h| h.0 == key).unwrap().1;
        assert_eq!(
            equal[0].0, exchange,
            "it repeats the question: first at weight 1"
        );
        assert_eq!(weighted[0].0, note);
        assert_eq!(score(&equal, note), score(&weighted, note));
        assert!(score(&weighted, exchange) < score(&equal, exchange));
    }
}
