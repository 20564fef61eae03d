//! `memd-eval rerankers`: which second stage to put behind the fused ranking, on LoCoMo and on
//! the coding set together: the late-interaction model (ColBERT MaxSim over stored token
//! states) at several depths, the cross-encoder behind it on a few of its best, and the
//! cross-encoder alone; with the time each costs per question.
//!
//! Owns the study's cases (a question, its evidence and the fused candidates with their texts)
//! and the reorders. Token states are computed once per distinct memory text, as the daemon
//! would store them at ingest. Must never write outside temporary directories or let a time
//! decide a figure of quality.

use super::locomo::Indexed;
use super::metrics::{ConfigResult, Scorer};
use anyhow::{Context, Result};
use memd_engine::models::embed::Embed;
use memd_engine::models::embed::{
    CrossEncoder, LateInteraction, OnnxEmbedder, RuntimePaths, TokenStates, late_interaction_dir,
    reranker_dir,
};
use memd_engine::search::Ranking;
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Instant;

/// Results scored per question.
pub(crate) const TOP_K: usize = 10;
/// First-stage candidates kept per question (the deepest head studied).
pub(crate) const CANDIDATES: usize = 60;

/// One question with the first stage's candidates.
pub struct Case {
    pub query: String,
    pub category: u8,
    pub evidence: Vec<String>,
    /// Fused order: (labels the memory stands for, its text).
    pub candidates: Vec<(Vec<String>, String)>,
    /// Each candidate's cosine similarity to the question (0 when only BM25 found it).
    pub similarities: Vec<f32>,
}

/// What to compare.
#[derive(Debug, Clone)]
pub struct StudyOptions {
    /// MaxSim reorders the fused head of each depth.
    pub late_depths: Vec<usize>,
    /// The late-interaction head (`late_depths`' deepest at most) whose best `k` the
    /// cross-encoder then reorders, for each k.
    pub late_then_ce: (usize, Vec<usize>),
    /// The cross-encoder alone over the fused head, for each depth (costly: ~9 ms a pair).
    pub ce_depths: Vec<usize>,
}

impl Default for StudyOptions {
    fn default() -> Self {
        StudyOptions {
            late_depths: vec![10, 20, 40, 60],
            late_then_ce: (40, vec![3, 5, 10]),
            ce_depths: vec![20],
        }
    }
}

/// Figures of one data set.
pub struct StudyReport {
    pub data: String,
    pub questions: usize,
    pub memories_encoded: usize,
    pub configs: Vec<ConfigResult>,
    /// (what, p50 ms, p99 ms) per question or per memory, over the run.
    pub costs: Vec<(String, f64, f64)>,
    /// Mean stored bytes and tokens of a memory's token states.
    pub state_bytes: f64,
    pub state_tokens: f64,
}

/// How a LoCoMo turn becomes a memory's text (the first stage and the token states read it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TurnText {
    /// `<speaker>: <text>`, the protocol's (and memd's exchange-like) form.
    Speaker,
    /// `<text>` alone.
    Plain,
    /// `[<session date>] <speaker>: <text>`.
    Dated,
    /// `[8 May 2023] <speaker>: <text>`: the session's day as the daemon indexes an exchange
    /// (`memd_engine::indexed_text::dated` of the session's start).
    Daemon,
    /// `<speaker>: <text>` followed by the previous turn of the same session.
    Neighbour,
    /// `<speaker>: <text>` stored as an exchange (`memory_type` "exchange", created at its
    /// time in the session), as the stop hook files a turn: the engine indexes it as it
    /// indexes one (`memd_engine::indexed_text`: its terms and vector after the session's day,
    /// its token states of the text alone). `Daemon` puts the day in the text, so every index
    /// reads it.
    Exchange,
}

impl TurnText {
    pub(super) fn text(self, turns: &[super::dataset::Turn], i: usize) -> String {
        let t = &turns[i];
        match self {
            TurnText::Speaker | TurnText::Exchange => t.content(),
            TurnText::Plain => t.text.clone(),
            TurnText::Dated => format!("[{}] {}", t.session_date, t.content()),
            TurnText::Daemon => match super::dataset::parse_session_date(&t.session_date) {
                Some(at) => memd_engine::indexed_text::dated(at, &t.content()),
                None => t.content(),
            },
            TurnText::Neighbour => {
                let session = |d: &str| d.split(':').next().unwrap_or("").to_string();
                match i.checked_sub(1).map(|p| &turns[p]) {
                    Some(p) if session(&p.dia_id) == session(&t.dia_id) => {
                        format!("{}\n(before: {})", t.content(), p.content())
                    }
                    _ => t.content(),
                }
            }
        }
    }

    /// The memory turn `i` of `turns` becomes: its text (`text`), marked an exchange for
    /// `Exchange`.
    pub(super) fn record(
        self,
        turns: &[super::dataset::Turn],
        i: usize,
    ) -> memd_engine::record::Record {
        let mut rec = super::locomo::turn_record(&turns[i]);
        rec.content = self.text(turns, i);
        if self == TurnText::Exchange {
            rec.metadata
                .insert("memory_type".into(), proto::Value::from("exchange"));
        }
        rec
    }
}

/// The study on the LoCoMo conversations in `locomo_dir` and on the coding set in `coding_dir`.
pub fn run(
    locomo_dir: &std::path::Path,
    coding_dir: &std::path::Path,
    runtime: &RuntimePaths,
    with_cross_encoder: bool,
    bge: Option<&std::path::Path>,
    turn_text: TurnText,
    lexical_weight: Option<f32>,
) -> Result<Vec<StudyReport>> {
    // Another first stage: the same pipeline with bge-small-en-v1.5 vectors instead of MiniLM's
    // (no query instruction; CLS pooling, as the model was trained).
    let (embedder, first_stage) = match bge {
        Some(dir) => {
            let paths = RuntimePaths {
                model: dir.join("model.onnx"),
                tokenizer: dir.join("tokenizer.json"),
                ..runtime.clone()
            };
            let bge = OnnxEmbedder::load(&paths, 0)
                .context("loading bge-small-en-v1.5")?
                .with_cls_pooling();
            (bge, " (bge-small first stage)")
        }
        None => (
            OnnxEmbedder::load(runtime, 0).context("the study needs the embedding runtime")?,
            "",
        ),
    };
    let late = LateInteraction::load(&runtime.ort_lib, &late_interaction_dir(), 0)
        .context("the study needs the late-interaction model (install/fetch-runtime.sh)")?;
    let late = match std::env::var("MEMD_STUDY_QUERY_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(n) => late.with_query_tokens(n),
        None => late,
    };
    let late = match std::env::var("MEMD_STUDY_DIMS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(n) => late.with_dims(n),
        None => late,
    };
    let ce = match with_cross_encoder {
        true => Some(
            CrossEncoder::load(&runtime.ort_lib, &reranker_dir(), 0)
                .context("the study needs the reranker (install/fetch-runtime.sh)")?,
        ),
        false => None,
    };
    let options = StudyOptions::default();
    let depth = CANDIDATES;
    let mut ranking = super::locomo::shipped_ranking();
    if let Some(w) = lexical_weight {
        ranking.lexical_weight = w;
    }
    let first_stage = match lexical_weight {
        Some(w) => format!("{first_stage} (lexical weight {w})"),
        None => first_stage.to_string(),
    };
    let (cases, coding_cases) = study_cases(
        locomo_dir, coding_dir, &embedder, &ranking, depth, turn_text,
    )?;
    let locomo = study(
        &format!("LoCoMo{first_stage}, turns as {turn_text:?}"),
        &cases,
        &late,
        ce.as_ref(),
        &options,
    )?;
    let coding = study(
        &format!("coding set{first_stage}"),
        &coding_cases,
        &late,
        ce.as_ref(),
        &options,
    )?;
    Ok(vec![locomo, coding])
}

/// The questions of LoCoMo (in `locomo_dir`) and of the coding set (in `coding_dir`), each with
/// the first `depth` candidates of `ranking` over `embedder`'s vectors.
pub fn study_cases(
    locomo_dir: &std::path::Path,
    coding_dir: &std::path::Path,
    embedder: &dyn Embed,
    ranking: &Ranking,
    depth: usize,
    turn_text: TurnText,
) -> Result<(Vec<Case>, Vec<Case>)> {
    let files = super::dataset::conversation_files(locomo_dir)?;
    let locomo: Vec<Case> = index_files(&files, embedder, turn_text)?
        .iter()
        .flat_map(|ix| locomo_cases(ix, ranking, depth))
        .collect();
    let set = super::coding::CodingSet::load(coding_dir)?;
    let index = super::coding::CodingIndex::build(set, embedder)?;
    Ok((locomo, coding_cases(&index, ranking, depth)))
}

/// Every scored question with the first `depth` candidates of `ranking` and their texts,
/// as the study needs them.
fn locomo_cases(ix: &Indexed, ranking: &Ranking, depth: usize) -> Vec<Case> {
    ix.store.read(|s| {
        ix.questions
            .iter()
            .zip(&ix.question_vecs)
            .map(|(q, qvec)| Case {
                query: q.text.clone(),
                category: q.category,
                evidence: q.evidence.clone(),
                ..case_of(
                    ix.rank(s, &q.text, qvec, ranking, depth)
                        .iter()
                        .filter_map(|h| {
                            let labels = ix.labels.get(&h.key)?.clone();
                            let text = s.by_key(h.key)?.content.clone();
                            Some(((labels, text), h.similarity.unwrap_or(0.0)))
                        })
                        .collect(),
                )
            })
            .collect()
    })
}

/// Every coding-set question with the first `depth` candidates of `ranking` and their texts; a
/// question's answers are its evidence.
fn coding_cases(index: &super::coding::CodingIndex, ranking: &Ranking, depth: usize) -> Vec<Case> {
    let set = index.set();
    set.questions
        .iter()
        .zip(index.rank(ranking, depth))
        .map(|(q, list)| Case {
            query: q.text.clone(),
            category: 0,
            evidence: q.answers.clone(),
            ..case_of(
                list.into_iter()
                    .filter_map(|c| {
                        let text = set.note(&c.note)?.text.clone();
                        Some(((vec![c.note], text), c.similarity.unwrap_or(0.0)))
                    })
                    .collect(),
            )
        })
        .collect()
}

/// A case's candidate fields from (candidate, similarity) pairs; the caller sets the rest.
fn case_of(pairs: Vec<((Vec<String>, String), f32)>) -> Case {
    let (candidates, similarities) = pairs.into_iter().unzip();
    Case {
        query: String::new(),
        category: 0,
        evidence: Vec::new(),
        candidates,
        similarities,
    }
}

/// The conversations in `files`, each stored and embedded in its own temporary store, every
/// turn's memory text written by `text` (the turns of its conversation and its index).
pub(super) fn index_files(
    files: &[PathBuf],
    embedder: &dyn Embed,
    turn_text: TurnText,
) -> Result<Vec<Indexed>> {
    files
        .iter()
        .map(|f| {
            let conv = super::dataset::load_conversation(f)?;
            let memories = conv
                .turns
                .iter()
                .enumerate()
                .map(|(i, t)| (turn_text.record(&conv.turns, i), t.dia_id.clone()))
                .collect();
            Indexed::store(memories, &conv.questions, embedder)
        })
        .collect()
}

/// Runs every configuration over `cases`.
pub fn study(
    data: &str,
    cases: &[Case],
    late: &LateInteraction,
    ce: Option<&CrossEncoder>,
    options: &StudyOptions,
) -> Result<StudyReport> {
    let deepest = options
        .late_depths
        .iter()
        .copied()
        .chain([options.late_then_ce.0])
        .max()
        .unwrap_or(0);
    let mut states: HashMap<&str, TokenStates> = HashMap::new();
    let mut doc_ms = Vec::new();
    for case in cases {
        for (_, text) in case.candidates.iter().take(deepest) {
            if !states.contains_key(text.as_str()) {
                let t = Instant::now();
                states.insert(text, late.encode_doc(text)?);
                doc_ms.push(ms(t));
            }
        }
    }
    let mut scorers: Vec<(String, Scorer)> = Vec::new();
    let mut add = |name: String, case: &Case, order: &[usize]| {
        let at = match scorers.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                scorers.push((name, Scorer::default()));
                scorers.len() - 1
            }
        };
        let ranked: Vec<&[String]> = order
            .iter()
            .take(TOP_K)
            .map(|&i| case.candidates[i].0.as_slice())
            .collect();
        scorers[at].1.add(case.category, &case.evidence, &ranked);
    };
    let (mut query_ms, mut maxsim_ms, mut ce_ms) = (Vec::new(), Vec::new(), Vec::new());
    for case in cases {
        let n = case.candidates.len();
        let fused: Vec<usize> = (0..n).collect();
        add(super::pipeline::FIRST_STAGE.into(), case, &fused);
        let t = Instant::now();
        let q = late.encode_query(&case.query)?;
        query_ms.push(ms(t));
        let t = Instant::now();
        let late_scores: Vec<f32> = case
            .candidates
            .iter()
            .take(deepest)
            .map(|(_, text)| states.get(text.as_str()).map_or(0.0, |s| q.maxsim(s)))
            .collect();
        maxsim_ms.push(ms(t));
        for &d in &options.late_depths {
            add(
                format!("+ late@{d}"),
                case,
                &reorder_head(&fused, d, &late_scores),
            );
        }
        // The daemon's score (`memd_engine::models::late::score`) over the head of 40; the
        // shipped pipeline's own figures are `memd-eval retrieval`'s.
        let shipped: Vec<f32> = (0..late_scores.len().min(n))
            .map(|i| {
                let text = case.candidates[i].1.as_str();
                states.get(text).map_or(f32::NEG_INFINITY, |s| {
                    memd_engine::models::late::score(&q, s, case.similarities[i])
                })
            })
            .collect();
        add(
            "+ late@40 (late::score)".to_string(),
            case,
            &reorder_head(&fused, 40, &shipped),
        );
        // Blends of MaxSim per query token with the cosine similarity of the first stage.
        let per_token = late_scores.len().min(n);
        for w in [0.05f32, 0.1, 0.2, 0.3] {
            let qt = q.tokens().max(1) as f32;
            let mixed: Vec<f32> = (0..per_token)
                .map(|i| late_scores[i] / qt + w * case.similarities[i])
                .collect();
            add(
                format!("+ late@40 + {w}×cosine"),
                case,
                &reorder_head(&fused, 40, &mixed),
            );
        }
        // Blends: reciprocal rank fusion (k 5, as the first stage) of the late-interaction rank
        // and the fused rank inside the head of 40.
        for k in [5.0f32, 20.0] {
            let by_late = reorder_head(&fused, 40, &late_scores);
            let head = 40.min(n);
            let mut blend = vec![0f32; head];
            for (rank, &i) in by_late.iter().take(head).enumerate() {
                blend[i] += 1.0 / (k + rank as f32 + 1.0);
            }
            for (rank, b) in blend.iter_mut().enumerate() {
                *b += 1.0 / (k + rank as f32 + 1.0);
            }
            add(
                format!("+ late@40 blend k{k}"),
                case,
                &reorder_head(&fused, head, &blend),
            );
        }
        let (ld, ref ks) = options.late_then_ce;
        let by_late = reorder_head(&fused, ld, &late_scores);
        if let Some(ce) = ce {
            let kmax = ks.iter().copied().max().unwrap_or(0).min(n);
            let texts: Vec<&str> = by_late[..kmax]
                .iter()
                .map(|&i| case.candidates[i].1.as_str())
                .collect();
            let t = Instant::now();
            let scores = ce.score(&case.query, &texts)?;
            ce_ms.push(ms(t) / kmax.max(1) as f64);
            for &k in ks {
                let local = reorder_head(&(0..by_late.len()).collect::<Vec<_>>(), k, &scores);
                let order: Vec<usize> = local.iter().map(|&i| by_late[i]).collect();
                add(format!("+ late@{ld} + ce@{k}"), case, &order);
            }
            for &d in &options.ce_depths {
                let texts: Vec<&str> = case
                    .candidates
                    .iter()
                    .take(d)
                    .map(|(_, t)| t.as_str())
                    .collect();
                let scores = ce.score(&case.query, &texts)?;
                add(format!("+ ce@{d}"), case, &reorder_head(&fused, d, &scores));
            }
        }
    }
    let bytes: Vec<f64> = states.values().map(|s| s.bytes() as f64).collect();
    let tokens: Vec<f64> = states.values().map(|s| s.tokens() as f64).collect();
    let mut costs = vec![
        percentiles("token states of one memory", &mut doc_ms),
        percentiles("query token states", &mut query_ms),
        percentiles(&format!("MaxSim over {deepest} memories"), &mut maxsim_ms),
    ];
    if !ce_ms.is_empty() {
        costs.push(percentiles("cross-encoder, one pair", &mut ce_ms));
    }
    Ok(StudyReport {
        data: data.to_string(),
        questions: cases.len(),
        memories_encoded: states.len(),
        configs: scorers.iter().map(|(n, s)| s.finish(n)).collect(),
        costs,
        state_bytes: mean(&bytes),
        state_tokens: mean(&tokens),
    })
}

/// `order` with its first `depth` entries sorted by `scores` (indexed by position in `order`
/// for the head), highest first; the rest as it was.
pub(crate) fn reorder_head(order: &[usize], depth: usize, scores: &[f32]) -> Vec<usize> {
    let n = depth.min(order.len()).min(scores.len());
    let mut head: Vec<usize> = (0..n).collect();
    head.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    head.into_iter()
        .map(|i| order[i])
        .chain(order[n..].iter().copied())
        .collect()
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// (what, p50, p99) of `v`.
fn percentiles(what: &str, v: &mut [f64]) -> (String, f64, f64) {
    if v.is_empty() {
        return (what.to_string(), 0.0, 0.0);
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (what.to_string(), at(0.5), at(0.99))
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

impl fmt::Display for StudyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} questions, {} memories encoded (token states: {:.0} tokens, {:.1} KB a memory)",
            self.data,
            self.questions,
            self.memories_encoded,
            self.state_tokens,
            self.state_bytes / 1024.0
        )?;
        for c in &self.configs {
            writeln!(f, "{c}")?;
        }
        for (what, p50, p99) in &self.costs {
            writeln!(f, "  {what}: p50 {p50:.2} ms, p99 {p99:.2} ms")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reorder_head_sorts_only_the_head() {
        let order = vec![7, 8, 9, 10];
        assert_eq!(reorder_head(&order, 3, &[0.1, 0.9, 0.5]), vec![8, 9, 7, 10]);
        assert_eq!(reorder_head(&order, 0, &[]), order);
        // Fewer scores than the depth: only the scored part moves.
        assert_eq!(reorder_head(&order, 4, &[0.0, 1.0]), vec![8, 7, 9, 10]);
    }
}
