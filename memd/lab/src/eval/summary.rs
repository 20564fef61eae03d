//! `memd-eval retrieval`: the one table of what memd retrieves, per evaluation set (the LoCoMo
//! conversations given, the coding set, the holdout set), the first stage alone beside what
//! memd ships (and late scores not shipped, when asked), each set in its own store or every
//! set in one, followed by the paraphrase probe.
//!
//! Owns that table and its rows, and ranking issue 34's paraphrase probe (its notes: `paraphrase`); the stores,
//! the first stage and the shipped pipeline are the other evaluations' (`locomo`, `coding`,
//! `pipeline`). Must never write outside temporary
//! stores, download anything, or let timing decide a figure.

use super::coding::{CodingIndex, CodingSet, Projects, repository_sets};
use super::fusion_stores::{Stores, mixed_store};
use super::late::TurnText;
use super::locomo::Indexed;
use super::metrics::{ConfigResult, Recall, Scorer};
use super::paraphrase::{PROBE_ANSWER, PROBE_NOTES, PROBE_QUERY, probe_index};
use super::pipeline::{
    FIRST_STAGE, Pipeline, SHIPPED, Stages, late_score_label, load_cross_encoder,
};
use anyhow::{Context, Result};
use memd_engine::models::embed::{Embed, OnnxEmbedder, RuntimePaths};
use memd_engine::retrieve::LateScore;
use memd_engine::search::Hit;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One evaluation set's figures.
#[derive(Debug, Clone)]
pub struct SetRow {
    pub set: String,
    pub first_stage: ConfigResult,
    pub shipped: ConfigResult,
    /// Through the pipeline with another late score (`Sets::late_scores`), not shipped.
    pub variants: Vec<ConfigResult>,
}

/// Every set's row, then the probe.
#[derive(Debug, Clone)]
pub struct Summary {
    pub rows: Vec<SetRow>,
    pub probe: Probe,
    /// Where the questions were ranked.
    pub stores: Stores,
    /// Whether the notes kept their projects.
    pub projects: Projects,
    /// What the late-interaction query encodings of the pipeline's rows cost.
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
    /// Each set in its own store, or every set in one (bench/EVAL.md section 17).
    pub stores: Stores,
    /// Late scores to measure beside the shipped one (not shipped).
    pub late_scores: Vec<LateScore>,
    /// Whether the notes keep their projects and each question is asked from its answer's
    /// (bench/EVAL.md section 22).
    pub projects: Projects,
    /// Query tokens weighed by IDF over each query's candidates (not shipped).
    pub candidate_weights: bool,
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

/// Measures every set with the first stage alone and through the daemon's pipeline (the
/// shipped late score, then each of `sets.late_scores`), in the stores `sets.stores` asks for.
pub fn run(sets: &Sets, runtime: &RuntimePaths, threads: usize) -> Result<Summary> {
    let (embedder, queries) = embedders(sets.vectors, runtime, threads)?;
    let mut pipeline = Pipeline::shipped(runtime, threads)?;
    pipeline.settings.candidate_weights = sets.candidate_weights;
    pipeline.states_form = sets.states;
    pipeline.log_form = sets.log_form;
    let parts = load_parts(sets, &embedder, queries.as_ref())?;
    let mixed;
    let stores: Vec<(&Indexed, Vec<(String, usize)>)> = match sets.stores {
        Stores::Own => parts
            .iter()
            .map(|(n, ix)| (ix, vec![(n.clone(), ix.questions.len())]))
            .collect(),
        Stores::Mixed => {
            anyhow::ensure!(
                sets.vectors == Vectors::Shipped,
                "--stores mixed embeds every memory again: it takes --vectors shipped only"
            );
            // Its turns are exchanges, which the engine already indexes after their date.
            anyhow::ensure!(
                matches!(
                    sets.turn_text,
                    TurnText::Speaker | TurnText::Plain | TurnText::Exchange
                ),
                "--stores mixed stores LoCoMo's turns as exchanges, already indexed with their \
                 dates (indexed_text::of): --turn-text {:?} would date them twice",
                sets.turn_text
            );
            let mut refs: Vec<(String, &Indexed)> =
                parts.iter().map(|(n, ix)| (n.clone(), ix)).collect();
            let probe = probe_index(&embedder)?;
            refs.push((PROBE_SET.to_string(), &probe));
            mixed = mixed_store(&refs, &embedder)?;
            vec![(&mixed.ix, mixed.sets.clone())]
        }
    };
    let mut variants = vec![pipeline.settings.late_score];
    for v in &sets.late_scores {
        if !variants.contains(v) {
            variants.push(*v);
        }
    }
    let mut tallies: Vec<Tally> = Vec::new();
    for (ix, split) in stores {
        let lists = rank_store(&mut pipeline, ix, &variants)?;
        tally(&mut tallies, ix, split, &lists, variants.len());
    }
    pipeline.settings.late_score = variants[0];
    let rows = tallies
        .into_iter()
        .map(|t| row_of(t, sets, &variants))
        .collect();
    let late_cost = pipeline.late_cost();
    let probe = probe(&pipeline, runtime, &embedder)?;
    Ok(Summary {
        rows,
        probe,
        stores: sets.stores,
        projects: sets.projects,
        late_cost,
    })
}

/// The label of the paraphrase probe's notes and question in the mixed store.
const PROBE_SET: &str = "paraphrase probe (3 notes)";

/// Every set's store, each LoCoMo conversation apart, with the set's name for its row.
fn load_parts(
    sets: &Sets,
    embedder: &OnnxEmbedder,
    queries: Option<&OnnxEmbedder>,
) -> Result<Vec<(String, Indexed)>> {
    let mut parts = Vec::new();
    if !sets.locomo.is_empty() {
        let turn_text = sets.turn_text;
        let form = match turn_text {
            TurnText::Speaker => String::new(),
            other => format!(", turns {other:?}"),
        };
        let name = format!("LoCoMo ({} conversations{form})", sets.locomo.len());
        for ix in super::late::index_files(&sets.locomo, embedder, turn_text)? {
            parts.push((name.clone(), ix));
        }
    }
    for (name, dir) in &sets.coding {
        let index = CodingIndex::build_with(CodingSet::load(dir)?, embedder, sets.projects)?;
        let name = format!("{name} ({} notes)", index.set().notes.len());
        parts.push((name, index.into_indexed()));
    }
    if let Some(queries) = queries {
        for (_, ix) in &mut parts {
            ix.embed_questions(queries)?;
        }
    }
    Ok(parts)
}

/// Per question of `ix`, its first `TOP` hits: the first stage alone, then through the
/// pipeline with each late score of `variants` (token states computed once).
fn rank_store(
    pipeline: &mut Pipeline,
    ix: &Indexed,
    variants: &[LateScore],
) -> Result<Vec<Vec<Vec<Hit>>>> {
    let (states, _log) = pipeline.states(&ix.store, ix.labels.keys().copied())?;
    let first = Stages {
        late: false,
        cross: None,
    };
    let mut runs = vec![first];
    runs.extend(variants.iter().map(|_| pipeline.stages()));
    let mut lists = Vec::new();
    for (i, stages) in runs.iter().enumerate() {
        if i > 0 {
            pipeline.settings.late_score = variants[i - 1];
        }
        let ranked = ix
            .questions
            .iter()
            .zip(&ix.question_vecs)
            .map(|(q, v)| pipeline.rank(&ix.store, &states, q.asked(v), stages, TOP))
            .collect::<Result<Vec<_>>>()?;
        lists.push(ranked);
    }
    Ok(lists)
}

/// The hits kept per question: what R@10 and MRR@10 read.
const TOP: usize = 10;

/// One set's scorers: the first stage's, then one per late score.
struct Tally {
    set: String,
    scorers: Vec<Scorer>,
}

/// Adds `lists` (per run, per question of `ix`) to the tallies of the sets `split` names, in
/// question order.
fn tally(
    tallies: &mut Vec<Tally>,
    ix: &Indexed,
    split: Vec<(String, usize)>,
    lists: &[Vec<Vec<Hit>>],
    variants: usize,
) {
    let mut q = 0;
    for (set, n) in split {
        let at = match tallies.iter().position(|t| t.set == set) {
            Some(at) => at,
            None => {
                let scorers = (0..=variants).map(|_| Scorer::default()).collect();
                tallies.push(Tally { set, scorers });
                tallies.len() - 1
            }
        };
        for question in &ix.questions[q..q + n] {
            for (run, scorer) in lists.iter().zip(&mut tallies[at].scorers) {
                let ranked: Vec<&[String]> = run[q]
                    .iter()
                    .filter_map(|h| ix.labels.get(&h.key).map(Vec::as_slice))
                    .collect();
                scorer.add(question.category, &question.evidence, &ranked);
            }
            q += 1;
        }
    }
}

/// A set's row: the first stage, what ships, then the other late scores.
fn row_of(t: Tally, sets: &Sets, variants: &[LateScore]) -> SetRow {
    let mut results = t.scorers.iter().enumerate().map(|(i, s)| match i {
        0 => s.finish(FIRST_STAGE),
        1 => s.finish(&shipped_name(sets)),
        i => s.finish(&format!("late score {}", late_score_label(variants[i - 1]))),
    });
    let first_stage = results.next().expect("the first stage's scorer");
    let shipped = results.next().expect("the shipped scorer");
    let set = match sets.vectors {
        Vectors::Shipped => t.set,
        other => format!("{}, vectors {other:?}", t.set),
    };
    SetRow {
        set,
        first_stage,
        shipped,
        variants: results.collect(),
    }
}

/// "shipped", and how the token states or the log differ from what ships, when they do.
fn shipped_name(sets: &Sets) -> String {
    let mut name = SHIPPED.to_string();
    if sets.states != super::pipeline::StatesForm::Shipped {
        name = format!("{name}, token states {:?}", sets.states);
    }
    if let Some(form) = sets.log_form {
        name = format!("{name}, log {form:?}");
    }
    if sets.candidate_weights {
        name = format!("{name} + token weights over the candidates (not shipped)");
    }
    name
}

/// One of the repository's coding-format sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NoteSet {
    /// tests/data/coding-set.
    Coding,
    /// tests/data/holdout-set.
    Holdout,
}

/// The repository's coding-format sets `which` names, in the repository's order.
pub fn note_sets(which: &[NoteSet]) -> Vec<(String, PathBuf)> {
    repository_sets()
        .into_iter()
        .zip([NoteSet::Coding, NoteSet::Holdout])
        .filter(|(_, n)| which.contains(n))
        .map(|(set, _)| set)
        .collect()
}

/// The files of a LoCoMo directory (`None`: no LoCoMo row).
pub fn locomo_files(dir: Option<&Path>) -> Result<Vec<PathBuf>> {
    dir.map_or(Ok(Vec::new()), super::dataset::conversation_files)
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stores = match self.stores {
            Stores::Own => "each set in a store of its own",
            Stores::Mixed => {
                "every set in one store (LoCoMo turns as exchanges, notes in the memory bank)"
            }
        };
        let projects = match self.projects {
            Projects::Ignored => "notes stored with no project, every question sees every note",
            Projects::Kept => {
                "notes in their projects, each question asked from its answer's project \
                 (other projects' notes are not candidates)"
            }
        };
        writeln!(f, "stores: {stores}; {projects}\n")?;
        writeln!(
            f,
            "| set | questions | stage | R@1 | R@5 | R@10 | MRR@10 |\n|---|---:|---|---:|---:|---:|---:|"
        )?;
        for row in &self.rows {
            let rows = [&row.first_stage, &row.shipped];
            for r in rows.into_iter().chain(&row.variants) {
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

// ---- the paraphrase probe (issue 34; its notes and store: `paraphrase`) ----

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
    let q = ix.questions[0].asked(&ix.question_vecs[0]);
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
