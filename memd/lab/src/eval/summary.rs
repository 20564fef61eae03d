//! `memd-eval retrieval`: the one table of what memd retrieves, per evaluation set (the LoCoMo
//! conversations given, the coding set, the holdout set), the first stage alone beside what
//! memd ships, followed by the paraphrase probe.
//!
//! Owns that table and its rows, and the three-note paraphrase probe of issue 34; the stores,
//! the first stage and the shipped pipeline are the other evaluations' (`locomo`, `coding`,
//! `pipeline`). Must never write outside temporary
//! stores, download anything, or let timing decide a figure.

use super::coding::{self, CodingIndex, CodingSet};
use super::dataset::Question;
use super::late::TurnText;
use super::locomo::{self, Indexed};
use super::metrics::{ConfigResult, Recall};
use super::pipeline::{FIRST_STAGE, Pipeline, SHIPPED, Stages, load_cross_encoder};
use anyhow::{Context, Result};
use memd_engine::models::embed::{Embed, OnnxEmbedder, RuntimePaths};
use proto::Collection;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One evaluation set's figures.
#[derive(Debug, Clone)]
pub struct SetRow {
    pub set: String,
    pub first_stage: ConfigResult,
    pub shipped: ConfigResult,
}

/// Every set's row, then the probe.
#[derive(Debug, Clone)]
pub struct Summary {
    pub rows: Vec<SetRow>,
    pub probe: Probe,
    /// What the shipped rows' late-interaction query encodings cost.
    pub late_cost: super::pipeline::LateCost,
}

/// The sets to measure: LoCoMo conversation files (none: no LoCoMo row) and coding-format sets
/// (a name and a directory holding `set.json`).
pub struct Sets {
    pub locomo: Vec<PathBuf>,
    /// How a LoCoMo turn becomes a memory's text (`Speaker`: the protocol's).
    pub turn_text: TurnText,
    pub coding: Vec<(String, PathBuf)>,
    /// How the token states are held (`Shipped`: as the daemon does).
    pub states: super::pipeline::StatesForm,
    /// What the log's records keep (`None`: what the daemon writes).
    pub log_form: Option<super::pipeline::LogForm>,
    /// Which embedder makes the memories' and the questions' vectors.
    pub vectors: Vectors,
}

/// Which embedder makes the vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Vectors {
    /// `OnnxEmbedder::load`, as the daemon does.
    Shipped,
    /// `OnnxEmbedder::load_with_fp32_matmuls`: memd's vectors before the matrix weights
    /// stayed int8.
    Fp32Matmuls,
    /// Memories by `Fp32Matmuls`, questions by `Shipped`: a store made before the change,
    /// queried after it.
    Upgraded,
}

/// The embedder of the memories and the one of the questions (`None`: the same).
fn embedders(
    vectors: Vectors,
    runtime: &RuntimePaths,
    threads: usize,
) -> Result<(OnnxEmbedder, Option<OnnxEmbedder>)> {
    let context = "memd-eval retrieval needs the embedding runtime";
    Ok(match vectors {
        Vectors::Shipped => (OnnxEmbedder::load(runtime, threads).context(context)?, None),
        Vectors::Fp32Matmuls => (
            OnnxEmbedder::load_with_fp32_matmuls(runtime, threads).context(context)?,
            None,
        ),
        Vectors::Upgraded => (
            OnnxEmbedder::load_with_fp32_matmuls(runtime, threads).context(context)?,
            Some(OnnxEmbedder::load(runtime, threads).context(context)?),
        ),
    })
}

/// Measures every set with the first stage alone and with the shipped pipeline.
pub fn run(sets: &Sets, runtime: &RuntimePaths, threads: usize) -> Result<Summary> {
    let (embedder, queries) = embedders(sets.vectors, runtime, threads)?;
    let mut pipeline = Pipeline::shipped(runtime, threads)?;
    pipeline.states_form = sets.states;
    pipeline.log_form = sets.log_form;
    let ranking = pipeline.settings.ranking;
    let mut rows = Vec::new();
    if !sets.locomo.is_empty() {
        let turn_text = sets.turn_text;
        let text = |turns: &[super::dataset::Turn], i: usize| turn_text.text(turns, i);
        let mut indexed = super::late::index_files(&sets.locomo, &embedder, &text)?;
        if let Some(queries) = &queries {
            for conversation in &mut indexed {
                conversation.embed_questions(queries)?;
            }
        }
        let form = match turn_text {
            TurnText::Speaker => String::new(),
            other => format!(", turns {other:?}"),
        };
        rows.push(SetRow {
            set: format!("LoCoMo ({} conversations{form})", indexed.len()),
            first_stage: locomo::score_config(&indexed, FIRST_STAGE, &ranking),
            shipped: locomo::score_shipped(&indexed, &pipeline)?,
        });
    }
    for (name, dir) in &sets.coding {
        let mut index = CodingIndex::build(CodingSet::load(dir)?, &embedder)?;
        if let Some(queries) = &queries {
            index.embed_questions(queries)?;
        }
        let first = index.rank(&ranking, coding::CANDIDATE_DEPTH);
        let shipped = index.shipped(&pipeline, coding::CANDIDATE_DEPTH)?;
        let score = |name: &str, lists| coding::score(index.set(), name, lists).result;
        rows.push(SetRow {
            set: format!("{name} ({} notes)", index.set().notes.len()),
            first_stage: score(FIRST_STAGE, first),
            shipped: score(SHIPPED, shipped),
        });
    }
    if sets.states != super::pipeline::StatesForm::Shipped {
        for row in &mut rows {
            row.shipped.name = format!("{SHIPPED}, token states {:?}", sets.states);
        }
    }
    if let Some(form) = sets.log_form {
        for row in &mut rows {
            row.shipped.name = format!("{}, log {form:?}", row.shipped.name);
        }
    }
    if sets.vectors != Vectors::Shipped {
        for row in &mut rows {
            row.set = format!("{}, vectors {:?}", row.set, sets.vectors);
        }
    }
    let late_cost = pipeline.late_cost();
    let probe = probe(&pipeline, runtime, &embedder)?;
    Ok(Summary {
        rows,
        probe,
        late_cost,
    })
}

/// The repository's coding-format sets: ("coding set", tests/data/coding-set) and
/// ("holdout set", tests/data/holdout-set).
pub fn repository_sets() -> Vec<(String, PathBuf)> {
    vec![
        ("coding set".to_string(), coding::default_data_dir()),
        (
            "holdout set".to_string(),
            coding::data_dir(coding::HOLDOUT_DATA_DIR),
        ),
    ]
}

/// The files of a LoCoMo directory (`None`: no LoCoMo row).
pub fn locomo_files(dir: Option<&Path>) -> Result<Vec<PathBuf>> {
    dir.map_or(Ok(Vec::new()), super::dataset::conversation_files)
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "| set | questions | stage | R@1 | R@5 | R@10 | MRR@10 |\n|---|---:|---|---:|---:|---:|---:|"
        )?;
        for row in &self.rows {
            for r in [&row.first_stage, &row.shipped] {
                let o: Recall = r.overall;
                writeln!(
                    f,
                    "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    row.set, o.questions, r.name, o.r1, o.r5, o.r10, o.mrr
                )?;
            }
        }
        writeln!(f)?;
        for row in &self.rows {
            let (w, l) = row.shipped.wins_losses_at5(&row.first_stage);
            writeln!(
                f,
                "{}: {SHIPPED} vs {FIRST_STAGE} at R@5: +{w} -{l} questions",
                row.set
            )?;
        }
        writeln!(f, "{}\n", self.late_cost)?;
        write!(f, "{}", self.probe)
    }
}

// ---- the paraphrase probe (issue 34) ----

/// Issue 34's case: the Bazel note shares "staging cluster", the Kubernetes note answers.
pub const PROBE_NOTES: [&str; 3] = [
    "The user deploys the billing service with Kubernetes on Google Cloud",
    "The staging cluster reads its config from Bazel for the EU customers.",
    "The data pipeline deploys through Helm charts to cut costs.",
];
pub const PROBE_QUERY: &str = "how do we ship the payments backend to the cluster?";
/// The note that answers (Kubernetes).
pub const PROBE_ANSWER: usize = 0;

/// The probe's three notes stored alone and embedded, with its query (evidence: the answer).
pub(super) fn probe_index(embedder: &dyn Embed) -> Result<Indexed> {
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
    Indexed::store(memories, &[question], embedder)
}

/// Each stage's order of the probe's notes (indexes into `PROBE_NOTES`).
#[derive(Debug, Clone)]
pub struct Probe {
    pub stages: Vec<(String, Vec<usize>)>,
}

/// The three notes stored alone, the query ranked by each stage on its own and as shipped;
/// the cross-encoder's row only when its files are installed.
pub fn probe(p: &Pipeline, runtime: &RuntimePaths, embedder: &dyn Embed) -> Result<Probe> {
    let ix = probe_index(embedder)?;
    let (states, _log) = p.states(&ix.store, ix.labels.keys().copied())?;
    let cross = match p.cross_encoder() {
        Some(c) => Some(c),
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
        let depth = p.settings.search.cross_encoder_depth.max(PROBE_NOTES.len());
        runs.push((
            format!("+ late + cross-encoder@{depth}"),
            Stages {
                late: true,
                cross: Some((c, depth)),
            },
        ));
    }
    runs.push((SHIPPED.to_string(), p.stages()));
    let q = (PROBE_QUERY, ix.question_vecs[0].as_slice());
    let stages = runs
        .into_iter()
        .map(|(name, stages)| {
            let hits = p.rank(&ix.store, &states, q, &stages, PROBE_NOTES.len())?;
            let order = hits
                .iter()
                .filter_map(|h| ix.labels.get(&h.key)?.first()?.parse().ok())
                .collect();
            Ok((name, order))
        })
        .collect::<Result<_>>()?;
    Ok(Probe { stages })
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
