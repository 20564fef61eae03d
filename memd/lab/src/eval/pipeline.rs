//! What memd ships, measured offline: every question ranked through the daemon's own retrieval
//! pipeline (`memd_engine::retrieve`: the first stage → late interaction → the cross-encoder when
//! `search.cross_encoder_depth` asks for it), with the daemon's default `[search]` and
//! `[learning]` settings, over token states computed for every memory as the ingest worker
//! stores them. The evaluations' "shipped" rows come from here and nowhere else; their "first
//! stage only" rows are the fused ranking alone.
//!
//! Owns the stage labels, the loaded models, the description of the configuration measured
//! (printed at the top of reports) and the three-note paraphrase probe of issue 34. Must never
//! reimplement a stage (it calls `retrieve::first_stage` and `retrieve::second_stage`), set a
//! deadline (offline figures must not depend on the machine's speed), or write outside the
//! evaluations' temporary stores.

use super::coding::{Candidate, CodingIndex, RankedLists};
use super::dataset::Question;
use super::locomo::{Indexed, shipped_ranking};
use super::metrics::{ConfigResult, Scorer};
use anyhow::{Context, Result};
use memd_engine::config::SearchConfig;
use memd_engine::models::embed::{
    CrossEncoder, Embed, LateInteraction, RuntimePaths, late_interaction_dir, reranker_dir,
};
use memd_engine::models::late;
use memd_engine::retrieve::{self, FirstStage, Second};
use memd_engine::search::{Hit, Query, RRF_K, Ranking};
use proto::Collection;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

/// Label of what memd ships: the whole pipeline with the default settings.
pub const SHIPPED: &str = "shipped";
/// Label of the fused first stage (vectors + BM25 + prior) without any reranking.
pub const FIRST_STAGE: &str = "first stage only";

/// The embedder, late-interaction model and cross-encoder the runtime provides (what
/// install/fetch-runtime.sh downloads; named here because the files do not say).
const EMBEDDER: &str = "all-MiniLM-L6-v2 (int8)";
const LATE_MODEL: &str = "answerai-colbert-small-v1 (int8)";
const CROSS_MODEL: &str = "ms-marco-MiniLM-L-12-v2 (int8)";
/// Results scored per LoCoMo question (recall@10 and MRR@10 need ten).
const TOP_K: usize = 10;
/// `view` needs a clock; nothing ranked here depends on it.
const NOW_MS: i64 = 1_800_000_000_000;

/// The settings that choose what the pipeline does: `[search]` and the ranking `[learning]`
/// makes (`Default`: what the daemon ships).
#[derive(Debug, Clone)]
pub struct Settings {
    pub search: SearchConfig,
    pub ranking: Ranking,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            search: SearchConfig::default(),
            ranking: shipped_ranking(),
        }
    }
}

/// The daemon's retrieval pipeline with its models loaded.
pub struct Pipeline {
    pub settings: Settings,
    late: LateInteraction,
    cross: Option<Arc<CrossEncoder>>,
    runtime: tokio::runtime::Runtime,
}

/// Which second stages one ranking runs (the probe runs each on its own).
#[derive(Clone)]
pub struct Stages {
    pub late: bool,
    pub cross: Option<(Arc<CrossEncoder>, usize)>,
}

impl Pipeline {
    /// The shipped configuration: `SearchConfig::default()` and the default learning settings.
    pub fn shipped(runtime: &RuntimePaths, threads: usize) -> Result<Pipeline> {
        Self::with(runtime, threads, Settings::default())
    }

    /// The pipeline with `search` settings; the cross-encoder is loaded only when they use it.
    pub fn with(runtime: &RuntimePaths, threads: usize, settings: Settings) -> Result<Pipeline> {
        let search = &settings.search;
        let late = LateInteraction::load(&runtime.ort_lib, &late_interaction_dir(), threads)
            .context(
                "the shipped pipeline needs the late-interaction model (install/fetch-runtime.sh)",
            )?;
        let cross = match search.rerank && search.cross_encoder_depth > 0 {
            true => Some(Arc::new(load_cross_encoder(runtime, threads)?)),
            false => None,
        };
        Ok(Pipeline {
            settings,
            late,
            cross,
            runtime: tokio::runtime::Builder::new_current_thread()
                .build()
                .context("starting the evaluation's async runtime")?,
        })
    }

    /// The stages the configuration runs.
    pub fn stages(&self) -> Stages {
        Stages {
            late: self.settings.search.rerank,
            cross: self
                .cross
                .clone()
                .map(|c| (c, self.settings.search.cross_encoder_depth)),
        }
    }

    /// Token states of every memory of `ix`, as the daemon's background pass stores them.
    pub(super) fn states(&self, ix: &Indexed) -> Result<late::States> {
        let texts: Vec<(u64, String)> = ix.store.read(|s| {
            let mut keys: Vec<u64> = ix.labels.keys().copied().collect();
            keys.sort_unstable();
            keys.into_iter()
                .filter_map(|k| Some((k, s.by_key(k)?.content.clone())))
                .collect()
        });
        let states = late::States::default();
        for (key, text) in texts {
            states.insert(key, &text, self.late.encode_doc(&text)?);
        }
        Ok(states)
    }

    /// Question `text` (embedded as `vector`) ranked through `stages`; the first `k` hits.
    pub(super) fn rank(
        &self,
        ix: &Indexed,
        states: &late::States,
        (text, vector): (&str, &[f32]),
        stages: &Stages,
        k: usize,
    ) -> Result<Vec<Hit>> {
        let reranking = stages.late || stages.cross.is_some();
        let query = Query {
            limit: k,
            ..Query::default()
        };
        // As `/api/search` does: a reranked head is `rerank_depth` deep, whatever the limit.
        let depth = match reranking {
            true => k.max(self.settings.search.rerank_depth),
            false => k,
        };
        let stage = FirstStage {
            query: &query,
            text,
            vector: Some(vector),
            ranking: &self.settings.ranking,
        };
        let head = ix
            .store
            .read(|s| retrieve::first_stage(s, &stage, depth, |_| true, NOW_MS));
        let query_states = match stages.late {
            true => Some(self.late.encode_query(text)?),
            false => None,
        };
        let how = Second {
            late: query_states
                .as_ref()
                .map(|q| (q, self.settings.search.rerank_depth)),
            deadline: None,
            cross: stages.cross.clone(),
        };
        let (head, _) = self
            .runtime
            .block_on(retrieve::second_stage(states, text, head, how));
        Ok(head.into_iter().take(k).map(|c| c.hit).collect())
    }

    /// Every question of `ix` ranked as shipped, the first `k` hits of each.
    pub(super) fn rank_all(&self, ix: &Indexed, k: usize) -> Result<Vec<Vec<Hit>>> {
        let states = self.states(ix)?;
        let stages = self.stages();
        ix.questions
            .iter()
            .zip(&ix.question_vecs)
            .map(|(q, v)| self.rank(ix, &states, (&q.text, v), &stages, k))
            .collect()
    }
}

/// The shipped pipeline's figures on LoCoMo conversations (each store with its own states).
pub(super) fn score_locomo(indexed: &[Indexed], p: &Pipeline) -> Result<ConfigResult> {
    let started = Instant::now();
    let mut scorer = Scorer::default();
    for ix in indexed {
        for (q, hits) in ix.questions.iter().zip(p.rank_all(ix, TOP_K)?) {
            let ranked: Vec<&[String]> = hits
                .iter()
                .filter_map(|h| ix.labels.get(&h.key).map(Vec::as_slice))
                .collect();
            scorer.add(q.category, &q.evidence, &ranked);
        }
    }
    eprintln!(
        "memd-eval: shipped pipeline over {} conversations in {:.1} s",
        indexed.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(scorer.finish(SHIPPED))
}

/// The shipped pipeline's lists on a coding set, `depth` candidates a question.
pub(super) fn coding_lists(index: &CodingIndex, p: &Pipeline, depth: usize) -> Result<RankedLists> {
    let ix = &index.indexed;
    Ok(p.rank_all(ix, depth)?
        .into_iter()
        .map(|hits| {
            hits.into_iter()
                .filter_map(|h| {
                    Some(Candidate {
                        note: ix.labels.get(&h.key)?.first()?.clone(),
                        score: h.rank_score,
                        similarity: h.similarity,
                        lexical: h.lexical,
                    })
                })
                .collect()
        })
        .collect())
}

fn load_cross_encoder(runtime: &RuntimePaths, threads: usize) -> Result<CrossEncoder> {
    CrossEncoder::load(&runtime.ort_lib, &reranker_dir(), threads)
        .context("the cross-encoder is not installed (install/fetch-runtime.sh)")
}

impl fmt::Display for Settings {
    /// The configuration measured, in the words of the settings that choose it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.ranking;
        let s = &self.search;
        writeln!(
            f,
            "{FIRST_STAGE}: {EMBEDDER} vectors (weight {:.2}) + BM25 (weight {:.2}), reciprocal \
             rank fusion k {RRF_K}, outcome prior weight {:.2}, exchange weight {:.2}, graph \
             boosts {}",
            r.vector_weight,
            r.lexical_weight,
            r.prior_weight,
            r.exchange_weight,
            if r.graph_boosts { "on" } else { "off" },
        )?;
        let late = match s.rerank {
            true => format!(
                "late interaction {LATE_MODEL} (MaxSim per query token + {} x cosine) over the \
                 first {} (search.rerank_depth)",
                late::COSINE_WEIGHT,
                s.rerank_depth
            ),
            false => "no reranking (search.rerank = false)".to_string(),
        };
        let cross = match (s.rerank, s.cross_encoder_depth) {
            (true, d) if d > 0 => format!("cross-encoder {CROSS_MODEL} over the first {d}"),
            _ => "cross-encoder off (search.cross_encoder_depth 0)".to_string(),
        };
        writeln!(f, "{SHIPPED}: the first stage -> {late} -> {cross}")?;
        write!(
            f,
            "prompt budget {} ms applies to the prompt path only: offline, every stage runs to \
             the end",
            s.prompt_budget_ms
        )
    }
}

// ---- the paraphrase probe ----

/// Issue 34's case: the Bazel note shares "staging cluster", the Kubernetes note answers.
pub const PROBE_NOTES: [&str; 3] = [
    "The user deploys the billing service with Kubernetes on Google Cloud",
    "The staging cluster reads its config from Bazel for the EU customers.",
    "The data pipeline deploys through Helm charts to cut costs.",
];
pub const PROBE_QUERY: &str = "how do we ship the payments backend to the cluster?";
/// The note that answers (Kubernetes).
pub const PROBE_ANSWER: usize = 0;

/// Each stage's order of the probe's notes (indexes into `PROBE_NOTES`).
#[derive(Debug, Clone)]
pub struct Probe {
    pub stages: Vec<(String, Vec<usize>)>,
}

impl Pipeline {
    /// The three notes stored alone, the query ranked by each stage on its own and as shipped;
    /// the cross-encoder's row only when its files are installed.
    pub fn probe(&self, runtime: &RuntimePaths, embedder: &dyn Embed) -> Result<Probe> {
        let memories = PROBE_NOTES
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let mut rec = memd_engine::core::Core::new_record(
                    Collection::MemoryBank,
                    text.to_string(),
                    1_700_000_000_000 + i as i64,
                );
                rec.score = 1.0;
                (rec, i.to_string())
            })
            .collect();
        let question = Question {
            text: PROBE_QUERY.to_string(),
            category: 0,
            evidence: vec![PROBE_ANSWER.to_string()],
        };
        let ix = Indexed::store(memories, &[question], embedder)?;
        let states = self.states(&ix)?;
        let cross = match &self.cross {
            Some(c) => Some(c.clone()),
            None => load_cross_encoder(runtime, 0).ok().map(Arc::new),
        };
        let none = Stages {
            late: false,
            cross: None,
        };
        let mut runs = vec![
            (FIRST_STAGE.to_string(), none.clone()),
            (
                "+ late interaction".to_string(),
                Stages { late: true, ..none },
            ),
        ];
        if let Some(c) = cross {
            let depth = self
                .settings
                .search
                .cross_encoder_depth
                .max(PROBE_NOTES.len());
            runs.push((
                format!("+ late + cross-encoder@{depth}"),
                Stages {
                    late: true,
                    cross: Some((c, depth)),
                },
            ));
        }
        runs.push((SHIPPED.to_string(), self.stages()));
        let q = (PROBE_QUERY, ix.question_vecs[0].as_slice());
        let stages = runs
            .into_iter()
            .map(|(name, stages)| {
                let hits = self.rank(&ix, &states, q, &stages, PROBE_NOTES.len())?;
                let order = hits
                    .iter()
                    .filter_map(|h| ix.labels.get(&h.key)?.first()?.parse().ok())
                    .collect();
                Ok((name, order))
            })
            .collect::<Result<_>>()?;
        Ok(Probe { stages })
    }
}

impl Probe {
    /// The note `stage` ranks first.
    pub fn first(&self, stage: &str) -> Option<usize> {
        let (_, order) = self.stages.iter().find(|(n, _)| n == stage)?;
        order.first().copied()
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "paraphrase probe: {PROBE_QUERY:?} over three notes (the answer is note {}, \
             Kubernetes)",
            PROBE_ANSWER + 1
        )?;
        for (i, note) in PROBE_NOTES.iter().enumerate() {
            writeln!(f, "  note {}: {note}", i + 1)?;
        }
        for (stage, order) in &self.stages {
            let names: Vec<String> = order.iter().map(|i| (i + 1).to_string()).collect();
            let verdict = match order.first() {
                Some(&i) if i == PROBE_ANSWER => "answer first",
                _ => "answer NOT first",
            };
            writeln!(f, "  {stage:<32} order {} ({verdict})", names.join(" > "))?;
        }
        Ok(())
    }
}
