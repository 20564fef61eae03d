//! `memd-eval retrieval`: the one table of what memd retrieves, per evaluation set (the LoCoMo
//! conversations given, the coding set, the holdout set), the first stage alone beside what
//! memd ships, followed by the paraphrase probe.
//!
//! Owns that table and its rows; the stores, the first stage and the shipped pipeline are the
//! other evaluations' (`locomo`, `coding`, `pipeline`). Must never write outside temporary
//! stores, download anything, or let timing decide a figure.

use super::coding::{self, CodingIndex, CodingSet};
use super::late::TurnText;
use super::locomo;
use super::metrics::{ConfigResult, Recall};
use super::pipeline::{self, FIRST_STAGE, Pipeline, Probe, SHIPPED};
use anyhow::{Context, Result};
use memd_engine::models::embed::{OnnxEmbedder, RuntimePaths};
use std::fmt;
use std::path::{Path, PathBuf};

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
}

/// The sets to measure: LoCoMo conversation files (none: no LoCoMo row) and coding-format sets
/// (a name and a directory holding `set.json`).
pub struct Sets {
    pub locomo: Vec<PathBuf>,
    /// How a LoCoMo turn becomes a memory's text (`Speaker`: the protocol's).
    pub turn_text: TurnText,
    pub coding: Vec<(String, PathBuf)>,
}

/// Measures every set with the first stage alone and with the shipped pipeline.
pub fn run(sets: &Sets, runtime: &RuntimePaths, threads: usize) -> Result<Summary> {
    let embedder = OnnxEmbedder::load(runtime, threads)
        .context("memd-eval retrieval needs the embedding runtime")?;
    let pipeline = Pipeline::shipped(runtime, threads)?;
    let ranking = pipeline.settings.ranking;
    let mut rows = Vec::new();
    if !sets.locomo.is_empty() {
        let turn_text = sets.turn_text;
        let text = |turns: &[super::dataset::Turn], i: usize| turn_text.text(turns, i);
        let indexed = super::late::index_files(&sets.locomo, &embedder, &text)?;
        let form = match turn_text {
            TurnText::Speaker => String::new(),
            other => format!(", turns {other:?}"),
        };
        rows.push(SetRow {
            set: format!("LoCoMo ({} conversations{form})", indexed.len()),
            first_stage: locomo::score_config(&indexed, FIRST_STAGE, &ranking),
            shipped: pipeline::score_locomo(&indexed, &pipeline)?,
        });
    }
    for (name, dir) in &sets.coding {
        let index = CodingIndex::build(CodingSet::load(dir)?, &embedder)?;
        let first = index.rank(&ranking, coding::CANDIDATE_DEPTH);
        let shipped = pipeline::coding_lists(&index, &pipeline, coding::CANDIDATE_DEPTH)?;
        let score = |name: &str, lists| coding::score(index.set(), name, lists).result;
        rows.push(SetRow {
            set: format!("{name} ({} notes)", index.set().notes.len()),
            first_stage: score(FIRST_STAGE, first),
            shipped: score(SHIPPED, shipped),
        });
    }
    let probe = pipeline.probe(runtime, &embedder)?;
    Ok(Summary { rows, probe })
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
        writeln!(f)?;
        write!(f, "{}", self.probe)
    }
}
