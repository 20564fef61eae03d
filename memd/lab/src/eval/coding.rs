//! `memd-eval coding`: retrieval on the coding-memory set (`tests/data/coding-set/`), notes of
//! the kind coding agents save, asked for with paraphrased questions, among distractors that
//! share the questions' words but not their meaning.
//!
//! Owns the set's file format and its checks, the word-overlap figure that says how paraphrased
//! the questions are, and the evaluation: every note stored as a memory-bank record in one
//! temporary store, embedded once, then each configuration (a name and a `Ranking`: data, so
//! more can be added) ranks every question through the same store, indexes and `search::rank`
//! as `memd-eval locomo`. The ranked candidate lists are kept per configuration before any
//! metric is computed, so a later stage (a reranker) can reorder them and be scored the same
//! way. Must never write outside its temporary directory, download anything, or depend on
//! timing for its figures.

use super::dataset::Question;
use super::locomo::{self, Indexed, LEXICAL_ONLY, VECTOR_ONLY};
use super::metrics::{ConfigResult, Scorer};
use super::pipeline::{Pipeline, SHIPPED};
use anyhow::{Context, Result, bail};
use memd_engine::core::Core;
use memd_engine::models::embed::{Embed, OnnxEmbedder, RuntimePaths};
use memd_engine::search::{self, Ranking};
use proto::{Collection, Value};
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The set's directory, relative to the workspace root.
pub const DEFAULT_DATA_DIR: &str = "tests/data/coding-set";
/// The file holding the notes and the questions, inside the set's directory.
pub const DATA_FILE: &str = "set.json";
/// Name of the shipped first stage (fused, with the daemon's default prior); the whole
/// pipeline's row is `pipeline::SHIPPED`.
pub const FUSED: &str = super::pipeline::FIRST_STAGE;
/// Candidates kept per question and configuration: metrics read the top 10, the rest is room
/// for a later reranking stage and for finding where a missed answer went.
pub const CANDIDATE_DEPTH: usize = 30;

/// One note, as an agent would have saved it.
#[derive(Debug, Clone, Deserialize)]
pub struct Note {
    pub id: String,
    pub text: String,
    /// The fictional project it is about (`shared` for repository-wide ones).
    #[serde(default)]
    pub project: String,
    /// build, test, deploy, config, convention, decision, gotcha, preference, …
    #[serde(default)]
    pub kind: String,
}

/// One question and the notes that answer it.
#[derive(Debug, Clone, Deserialize)]
pub struct CodingQuestion {
    pub id: String,
    pub text: String,
    /// Ids of the notes that answer it (any one of them counts as found).
    pub answers: Vec<String>,
    /// Ids of notes written to share its words but not its meaning.
    #[serde(default)]
    pub distractors: Vec<String>,
}

/// The whole set.
#[derive(Debug, Clone, Deserialize)]
pub struct CodingSet {
    pub notes: Vec<Note>,
    pub questions: Vec<CodingQuestion>,
}

impl CodingSet {
    /// Reads `<dir>/set.json` and checks it (`validate`).
    pub fn load(dir: &Path) -> Result<CodingSet> {
        let path = dir.join(DATA_FILE);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read the coding set {}", path.display()))?;
        let set: CodingSet = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a coding set", path.display()))?;
        set.validate()
            .with_context(|| format!("in {}", path.display()))?;
        Ok(set)
    }

    /// Ids unique (notes and questions alike), texts non-empty, every question answered by at
    /// least one existing note, and no note both an answer and a distractor of one question.
    pub fn validate(&self) -> Result<()> {
        let mut seen = HashSet::new();
        for id in self
            .notes
            .iter()
            .map(|n| &n.id)
            .chain(self.questions.iter().map(|q| &q.id))
        {
            if id.trim().is_empty() {
                bail!("an empty id");
            }
            if !seen.insert(id.as_str()) {
                bail!("id {id:?} is used twice");
            }
        }
        if let Some(n) = self.notes.iter().find(|n| n.text.trim().is_empty()) {
            bail!("note {} has no text", n.id);
        }
        let notes: HashSet<&str> = self.notes.iter().map(|n| n.id.as_str()).collect();
        for q in &self.questions {
            if q.text.trim().is_empty() {
                bail!("question {} has no text", q.id);
            }
            if q.answers.is_empty() {
                bail!("question {} has no answer", q.id);
            }
            for id in q.answers.iter().chain(&q.distractors) {
                if !notes.contains(id.as_str()) {
                    bail!("question {} names note {id:?}, which does not exist", q.id);
                }
            }
            if let Some(both) = q.distractors.iter().find(|d| q.answers.contains(d)) {
                bail!(
                    "question {}: note {both} is both an answer and a distractor",
                    q.id
                );
            }
        }
        Ok(())
    }

    pub fn note(&self, id: &str) -> Option<&Note> {
        self.notes.iter().find(|n| n.id == id)
    }
}

/// The holdout set's directory (same format; written before any tuning on it).
pub const HOLDOUT_DATA_DIR: &str = "tests/data/holdout-set";

/// The repository's coding set (`data_dir(DEFAULT_DATA_DIR)`).
pub fn default_data_dir() -> PathBuf {
    data_dir(DEFAULT_DATA_DIR)
}

/// A set of the repository: the first `relative` holding `set.json` above the current
/// directory (a binary run inside another checkout evaluates that checkout's set), else the one
/// of the workspace this crate was built from.
pub fn data_dir(relative: &str) -> PathBuf {
    let above = |start: &Path| {
        start
            .ancestors()
            .map(|a| a.join(relative))
            .find(|d| d.join(DATA_FILE).is_file())
    };
    std::env::current_dir()
        .ok()
        .and_then(|cwd| above(&cwd))
        .or_else(|| above(Path::new(env!("CARGO_MANIFEST_DIR"))))
        .unwrap_or_else(|| PathBuf::from(relative))
}

/// The repository's coding-format sets: ("coding set", tests/data/coding-set) and
/// ("holdout set", tests/data/holdout-set).
pub fn repository_sets() -> Vec<(String, PathBuf)> {
    vec![
        ("coding set".to_string(), default_data_dir()),
        ("holdout set".to_string(), data_dir(HOLDOUT_DATA_DIR)),
    ]
}

pub use super::overlap::{Overlap, content_words, jaccard};

impl Overlap {
    /// The figures of `set`'s questions.
    pub fn of(set: &CodingSet) -> Overlap {
        let best = |q: &CodingQuestion, ids: &[String]| {
            ids.iter()
                .filter_map(|id| set.note(id))
                .map(|n| jaccard(&q.text, &n.text))
                .fold(0.0, f64::max)
        };
        Overlap {
            answer: set.questions.iter().map(|q| best(q, &q.answers)).collect(),
            distractor: set
                .questions
                .iter()
                .filter(|q| !q.distractors.is_empty())
                .map(|q| best(q, &q.distractors))
                .collect(),
        }
    }
}

// ---- evaluation ----

/// One ranking configuration: what the report calls it and how it ranks.
#[derive(Debug, Clone)]
pub struct Configuration {
    pub name: String,
    pub ranking: Ranking,
}

/// Vector only, lexical only, and the fusion the daemon ships (its default prior included:
/// every note carries the same memory-bank importance and confidence, so the prior scales all
/// candidates alike and cannot reorder them).
pub fn default_configurations() -> Vec<Configuration> {
    let off = Ranking {
        prior_weight: 0.0,
        ..Ranking::default()
    };
    vec![
        Configuration {
            name: VECTOR_ONLY.to_string(),
            ranking: Ranking {
                vector_weight: 1.0,
                lexical_weight: 0.0,
                ..off
            },
        },
        Configuration {
            name: LEXICAL_ONLY.to_string(),
            ranking: Ranking {
                vector_weight: 0.0,
                lexical_weight: 1.0,
                ..off
            },
        },
        Configuration {
            name: FUSED.to_string(),
            ranking: locomo::shipped_ranking(),
        },
    ]
}

/// One ranked candidate of one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub note: String,
    /// The ranking's final score (what ordered the list).
    pub score: f64,
    /// Cosine similarity to the question, when the vector signal was computed.
    pub similarity: Option<f32>,
    /// BM25 score, when the note matched lexically.
    pub lexical: Option<f32>,
}

/// Per question (in the set's order), candidates best first.
pub type RankedLists = Vec<Vec<Candidate>>;

/// Whether the notes keep their made-up projects (bench/EVAL.md section 22).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Projects {
    /// Stored with no project: every question's candidates include every project's notes
    /// (a user whose notes are all global; the harder case).
    #[default]
    Ignored,
    /// Each note stored in its project, each question asked from its answer's project: other
    /// projects' notes are never candidates (`scope::Visibility`), as in a user's daemon.
    Kept,
}

/// The set stored as memory-bank records in a temporary store and embedded, questions too.
pub struct CodingIndex {
    set: CodingSet,
    indexed: Indexed,
}

impl CodingIndex {
    /// The notes stored with no project: every question sees every note.
    pub fn build(set: CodingSet, embedder: &dyn Embed) -> Result<CodingIndex> {
        Self::build_with(set, embedder, Projects::Ignored)
    }

    pub fn build_with(
        set: CodingSet,
        embedder: &dyn Embed,
        projects: Projects,
    ) -> Result<CodingIndex> {
        let kept = |project: &str| match projects {
            Projects::Kept => Some(project.to_string()).filter(|p| !p.is_empty()),
            Projects::Ignored => None,
        };
        let memories = set
            .notes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut rec = bank_record(n, i);
                rec.project = kept(&n.project);
                (rec, n.id.clone())
            })
            .collect();
        let questions: Vec<Question> = set
            .questions
            .iter()
            .map(|q| Question {
                text: q.text.clone(),
                category: 0,
                evidence: q.answers.clone(),
                // Asked where its (first) answer belongs, as an agent working there would.
                project: q.answers.first().and_then(|a| kept(&set.note(a)?.project)),
            })
            .collect();
        let indexed = Indexed::store(memories, &questions, embedder)?;
        // Every question has an answer (validated), so none was set aside and the embedded
        // questions are the set's, in its order: the lists below rely on it.
        if indexed.questions.len() != set.questions.len() {
            bail!(
                "{} of {} questions were embedded",
                indexed.questions.len(),
                set.questions.len()
            );
        }
        Ok(CodingIndex { set, indexed })
    }

    pub fn set(&self) -> &CodingSet {
        &self.set
    }

    /// The store, its labels and the embedded questions (evidence: each question's answers).
    pub(super) fn into_indexed(self) -> Indexed {
        self.indexed
    }

    /// The store, its labels and the embedded questions (evidence: each question's answers).
    pub(super) fn indexed(&self) -> &Indexed {
        &self.indexed
    }

    /// Every question ranked with `ranking` (the first stage alone), the first `depth`
    /// candidates kept.
    pub fn rank(&self, ranking: &Ranking, depth: usize) -> RankedLists {
        let ix = &self.indexed;
        ix.store.read(|s| {
            ix.questions
                .iter()
                .zip(&ix.question_vecs)
                .map(|(q, v)| self.candidates(ix.rank(s, &q.text, v, ranking, depth), depth))
                .collect()
        })
    }

    /// Every question ranked by what memd ships (`pipeline`), the first `depth` kept.
    pub fn shipped(&self, pipeline: &Pipeline, depth: usize) -> Result<RankedLists> {
        let hits = self.indexed.shipped(pipeline, depth)?;
        Ok(hits
            .into_iter()
            .map(|h| self.candidates(h, depth))
            .collect())
    }

    fn candidates(&self, hits: Vec<memd_engine::search::Hit>, depth: usize) -> Vec<Candidate> {
        hits.into_iter()
            .filter_map(|h| {
                Some(Candidate {
                    note: self.indexed.labels.get(&h.key)?.first()?.clone(),
                    score: h.rank_score,
                    similarity: h.similarity,
                    lexical: h.lexical,
                })
            })
            .take(depth)
            .collect()
    }
}

/// A note as `memory_bank_add` stores it with the defaults an agent leaves: score 1.0,
/// importance and confidence 0.7, no project (`CodingIndex::build_with` sets one when asked;
/// without, every note competes with every other, the harder case: distractors from other
/// projects are not filtered out). Fixed timestamps keep
/// the store byte-identical from run to run.
fn bank_record(n: &Note, i: usize) -> memd_engine::record::Record {
    let mut rec = Core::new_record(
        Collection::MemoryBank,
        n.text.clone(),
        1_700_000_000_000 + i as i64 * 1000,
    );
    rec.score = 1.0;
    rec.importance = Some(0.7);
    rec.confidence = Some(0.7);
    rec.metadata
        .insert("note_id".into(), Value::from(n.id.as_str()));
    rec
}

/// One configuration's figures and the lists they came from.
#[derive(Debug, Clone)]
pub struct ConfigRun {
    pub result: ConfigResult,
    pub lists: RankedLists,
    /// Questions with labelled distractors, and among them those where a distractor ranks
    /// above every answer (an answer missing from the list counts as below).
    pub with_distractors: usize,
    pub distractor_above: usize,
    /// Questions whose first result is a labelled distractor.
    pub distractor_first: usize,
}

impl ConfigRun {
    /// The rank (1-based) of the first answer of question `i`, if it is in the list.
    pub fn answer_rank(&self, set: &CodingSet, i: usize) -> Option<usize> {
        first_of(&self.lists[i], &set.questions[i].answers).map(|p| p + 1)
    }
}

fn first_of(list: &[Candidate], ids: &[String]) -> Option<usize> {
    list.iter().position(|c| ids.contains(&c.note))
}

/// Scores ranked lists (one per question, in the set's order) as configuration `name`.
pub fn score(set: &CodingSet, name: &str, lists: RankedLists) -> ConfigRun {
    let mut scorer = Scorer::default();
    let (mut with, mut above, mut first) = (0, 0, 0);
    for (q, list) in set.questions.iter().zip(&lists) {
        let labels: Vec<[String; 1]> = list.iter().map(|c| [c.note.clone()]).collect();
        let ranked: Vec<&[String]> = labels.iter().map(|l| l.as_slice()).collect();
        scorer.add(0, &q.answers, &ranked);
        if q.distractors.is_empty() {
            continue;
        }
        with += 1;
        let answer = first_of(list, &q.answers).unwrap_or(usize::MAX);
        let distractor = first_of(list, &q.distractors);
        above += usize::from(distractor.is_some_and(|d| d < answer));
        first += usize::from(distractor == Some(0));
    }
    let mut result = scorer.finish(name);
    // The LoCoMo categories mean nothing here.
    result.by_category.retain(|(_, r)| r.questions > 0);
    ConfigRun {
        result,
        lists,
        with_distractors: with,
        distractor_above: above,
        distractor_first: first,
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct CodingOptions {
    pub configurations: Vec<Configuration>,
    pub depth: usize,
    /// ONNX Runtime intra-op threads (0: one per physical core).
    pub embed_threads: usize,
    /// Print each question's answer rank under every configuration.
    pub per_question: bool,
    /// Depths at which the shipped ranking's head is reranked by the cross-encoder.
    pub rerank_depths: Vec<usize>,
}

impl Default for CodingOptions {
    fn default() -> Self {
        CodingOptions {
            configurations: default_configurations(),
            depth: CANDIDATE_DEPTH,
            embed_threads: 0,
            per_question: false,
            rerank_depths: Vec::new(),
        }
    }
}

/// The shipped ranking's lists with each head of `depth` reordered by the cross-encoder's
/// scores (pure cross-encoder order inside the head, as in `memd-eval locomo --rerank`).
fn reranked_runs(
    index: &CodingIndex,
    ce: &memd_engine::models::embed::CrossEncoder,
    depths: &[usize],
) -> Result<Vec<ConfigRun>> {
    let set = index.set();
    let deepest = depths.iter().copied().max().unwrap_or(0);
    let lists = index.rank(&locomo::shipped_ranking(), CANDIDATE_DEPTH.max(deepest));
    let mut scores: Vec<Vec<f32>> = Vec::with_capacity(lists.len());
    for (q, list) in set.questions.iter().zip(&lists) {
        let texts: Vec<&str> = list
            .iter()
            .take(deepest)
            .map(|c| set.note(&c.note).map_or("", |n| n.text.as_str()))
            .collect();
        scores.push(ce.score(&q.text, &texts)?);
    }
    Ok(depths
        .iter()
        .map(|&depth| {
            let lists: RankedLists = lists
                .iter()
                .zip(&scores)
                .map(|(list, s)| {
                    let n = depth.min(list.len()).min(s.len());
                    let mut order: Vec<usize> = (0..n).collect();
                    order.sort_by(|&a, &b| s[b].total_cmp(&s[a]));
                    order.extend(n..list.len());
                    order.into_iter().map(|i| list[i].clone()).collect()
                })
                .collect();
            score(set, &format!("{FUSED} + ce@{depth}"), lists)
        })
        .collect())
}

/// Everything `memd-eval coding` measured.
#[derive(Debug, Clone)]
pub struct CodingReport {
    /// The set's directory name (`coding-set`, `holdout-set`).
    pub name: String,
    pub set: CodingSet,
    pub overlap: Overlap,
    pub runs: Vec<ConfigRun>,
    pub per_question: bool,
}

impl CodingReport {
    pub fn run(&self, name: &str) -> Option<&ConfigRun> {
        self.runs.iter().find(|r| r.result.name == name)
    }
}

/// Loads the set in `dir`, stores and embeds it, ranks every question with every
/// configuration and scores the lists.
pub fn run_coding(
    dir: &Path,
    runtime: &RuntimePaths,
    options: &CodingOptions,
) -> Result<CodingReport> {
    let started = Instant::now();
    let set = CodingSet::load(dir)?;
    let embedder = OnnxEmbedder::load(runtime, options.embed_threads)
        .context("memd-eval coding needs the embedding runtime")?;
    let index = CodingIndex::build(set, &embedder)?;
    eprintln!(
        "memd-eval: {} notes stored and embedded in {:.1} s",
        index.set().notes.len(),
        started.elapsed().as_secs_f64()
    );
    let mut runs: Vec<ConfigRun> = options
        .configurations
        .iter()
        .map(|c| score(index.set(), &c.name, index.rank(&c.ranking, options.depth)))
        .collect();
    let pipeline = Pipeline::shipped(runtime, options.embed_threads)?;
    let lists = index.shipped(&pipeline, options.depth)?;
    runs.push(score(index.set(), SHIPPED, lists));
    if !options.rerank_depths.is_empty() {
        let ce = memd_engine::models::embed::CrossEncoder::load(
            &runtime.ort_lib,
            &memd_engine::models::embed::reranker_dir(),
            options.embed_threads,
        )
        .context("memd-eval coding --rerank needs the reranker (install/fetch-runtime.sh)")?;
        runs.extend(reranked_runs(&index, &ce, &options.rerank_depths)?);
    }
    let set = index.set().clone();
    Ok(CodingReport {
        name: dir
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned()),
        overlap: Overlap::of(&set),
        set,
        runs,
        per_question: options.per_question,
    })
}

impl fmt::Display for CodingReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let questions = self.set.questions.len();
        writeln!(
            f,
            "{} (coding-memory format): {} notes stored as memory_bank records | {questions} \
             questions, {} with labelled distractors",
            self.name,
            self.set.notes.len(),
            self.overlap.distractor.len()
        )?;
        writeln!(
            f,
            "question/answer content-word overlap (Jaccard): mean {:.3}, max {:.3}; \
             question/distractor: mean {:.3}",
            self.overlap.mean_answer(),
            self.overlap.max_answer(),
            self.overlap.mean_distractor()
        )?;
        writeln!(
            f,
            "all-MiniLM-L6-v2 vectors + BM25, reciprocal rank fusion (k {}), nothing outcome-scored",
            search::RRF_K
        )?;
        writeln!(f)?;
        let fused = self.run(FUSED);
        for r in &self.runs {
            let o = &r.result.overall;
            write!(
                f,
                "{:<24} R@1 {:.3}  R@5 {:.3}  R@10 {:.3}  MRR@10 {:.3} | distractor above every \
                 answer {}/{}, distractor first {}/{}",
                r.result.name,
                o.r1,
                o.r5,
                o.r10,
                o.mrr,
                r.distractor_above,
                r.with_distractors,
                r.distractor_first,
                r.with_distractors
            )?;
            match fused.filter(|s| s.result.name != r.result.name) {
                Some(s) => {
                    let (w, l) = r.result.wins_losses_at5(&s.result);
                    writeln!(f, " | vs first stage at R@5: +{w} -{l}")?;
                }
                None => writeln!(f)?,
            }
        }
        if self.per_question {
            writeln!(f)?;
            self.write_per_question(f)?;
        }
        Ok(())
    }
}

impl CodingReport {
    /// One line per question: the answer's rank under each configuration ("-": not among the
    /// candidates kept) and, under the last configuration, the note ranked first when it is
    /// not an answer (`!` marks a labelled distractor).
    fn write_per_question(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.runs.iter().map(|r| r.result.name.as_str()).collect();
        writeln!(
            f,
            "answer rank per question ({}), then the last one's wrong first hit",
            names.join(" / ")
        )?;
        let Some(last) = self.runs.last() else {
            return Ok(());
        };
        let distractor_of: HashMap<&str, Vec<&str>> = self
            .set
            .questions
            .iter()
            .map(|q| {
                (
                    q.id.as_str(),
                    q.distractors.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        for (i, q) in self.set.questions.iter().enumerate() {
            let ranks: Vec<String> = self
                .runs
                .iter()
                .map(|r| {
                    r.answer_rank(&self.set, i)
                        .map_or("-".into(), |k| k.to_string())
                })
                .collect();
            write!(f, "{} {:>11}  {}", q.id, ranks.join(" / "), q.text)?;
            match last.lists[i].first() {
                Some(top) if !q.answers.contains(&top.note) => {
                    let mark = if distractor_of[q.id.as_str()].contains(&top.note.as_str()) {
                        "!"
                    } else {
                        ""
                    };
                    writeln!(f, "  <- {}{mark}", top.note)?;
                }
                _ => writeln!(f)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(json: &str) -> CodingSet {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn validation_names_the_broken_entry() {
        let ok = r#"{"notes":[{"id":"n1","text":"x"},{"id":"n2","text":"y"}],
                     "questions":[{"id":"q1","text":"z","answers":["n1"],"distractors":["n2"]}]}"#;
        set(ok).validate().unwrap();
        let missing = ok.replace(r#""answers":["n1"]"#, r#""answers":["n9"]"#);
        let e = set(&missing).validate().unwrap_err().to_string();
        assert!(e.contains("q1") && e.contains("n9"), "{e}");
        let twice = ok.replace(r#""id":"n2""#, r#""id":"n1""#);
        assert!(set(&twice).validate().is_err());
        let both = ok.replace(r#""distractors":["n2"]"#, r#""distractors":["n1"]"#);
        assert!(set(&both).validate().is_err());
    }

    #[test]
    fn a_distractor_above_a_missing_answer_counts() {
        let s = set(
            r#"{"notes":[{"id":"a","text":"x"},{"id":"d","text":"y"},{"id":"o","text":"z"}],
                        "questions":[{"id":"q1","text":"?","answers":["a"],"distractors":["d"]},
                                     {"id":"q2","text":"?","answers":["a"],"distractors":["d"]},
                                     {"id":"q3","text":"?","answers":["a"]}]}"#,
        );
        let c = |id: &str| Candidate {
            note: id.into(),
            score: 0.0,
            similarity: None,
            lexical: None,
        };
        let lists = vec![
            vec![c("o"), c("d")],
            vec![c("a"), c("d")],
            vec![c("o"), c("a")],
        ];
        let run = score(&s, "x", lists);
        assert_eq!((run.with_distractors, run.distractor_above), (2, 1));
        assert_eq!(run.distractor_first, 0);
        assert_eq!(run.answer_rank(&s, 0), None);
        assert_eq!(run.answer_rank(&s, 2), Some(2));
        let o = run.result.overall;
        assert_eq!((o.questions, o.r1, o.r5), (3, 1.0 / 3.0, 2.0 / 3.0));
        assert!(run.result.by_category.is_empty());
    }
}
