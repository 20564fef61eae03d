//! `memd-eval locomo`: retrieval-only recall on LoCoMo conversations through memd's real
//! store, indexes and ranking pipeline.
//!
//! Protocol (the data set's README): every turn is one memory `"<speaker>: <text>"` with its
//! `dia_id` and session date in metadata and `created_at` from the session date; every
//! question of categories 1–4 is a query; recall@k counts a question when an evidence turn
//! (or every one, for "all") is in the top k. Each conversation gets its own temporary store,
//! embedded once; every ranking configuration then runs `search::rank` on the same state.
//! Must never write outside its temporary directories or depend on timing for its figures.

use super::dataset::{self, Conversation, Question};
use super::eviction::{self, EvictionStudy};
use super::floor::{
    self, FloorSamples, FloorStudy, LOCOMO_PROBES, NOTES_PROBES, OFF_TOPIC_QUERIES,
};
use super::metrics::{ConfigResult, Scorer};
use super::pipeline::Pipeline;
use super::scenario;
use anyhow::{Context, Result, anyhow, bail};
use memd_engine::core::Core;
use memd_engine::models::embed::{
    CrossEncoder, DIMS, Embed, OnnxEmbedder, RuntimePaths, reranker_dir,
};
use memd_engine::search::{self, Hit, Query, Ranking};
use memd_engine::state::MemState;
use memd_engine::state::ops::{Op, Output, ScoreBatch};
use memd_engine::store::Store;
use proto::{Collection, Outcome, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tempfile::TempDir;

/// Name of the vector-only configuration in the report.
pub const VECTOR_ONLY: &str = "vector";
/// Name of the lexical-only configuration.
pub const LEXICAL_ONLY: &str = "lexical";
/// The first stage the daemon ships (`Ranking::default()` with the configured prior weight, as
/// `Core::ranking` builds it) is "first stage only"; the whole pipeline is "shipped".
pub use super::pipeline::{FIRST_STAGE, SHIPPED};

/// Name of the shipped first stage with the routing boosts set to `on` (the report holds
/// the variant that differs from `FIRST_STAGE`). At most 24 characters, the report's name column.
pub fn shipped_with_graph_boosts(on: bool) -> &'static str {
    if on {
        "first stage, boosts on"
    } else {
        "first stage, no boosts"
    }
}

/// Results ranked per question (recall@10 and MRR@10 need ten).
const TOP_K: usize = 10;
/// Texts per embedding call (progress granularity; the embedder batches internally).
const EMBED_CHUNK: usize = 64;
/// Outcomes given to each noise-scored memory (3 → prior ±0.8, the largest it gets early).
pub(super) const NOISE_ROUNDS: usize = 3;

/// What to compare besides the fixed vector-only, lexical-only and shipped configurations.
#[derive(Debug, Clone)]
pub struct LocomoOptions {
    /// Lexical weights of the fused grid (vector weight 1, prior off).
    pub lexical_weights: Vec<f32>,
    /// Prior weights of the sensitivity run with random outcomes.
    pub prior_weights: Vec<f64>,
    /// ONNX Runtime intra-op threads (0: one per physical core).
    pub embed_threads: usize,
    /// Lexical weight of the ranking the floor, noise and eviction studies use (the shipped
    /// one unless a candidate default is being checked).
    pub study_lexical_weight: f32,
    /// Depths at which the shipped ranking's head is reranked by the cross-encoder (empty:
    /// no reranked rows; each pair is scored once and reused across depths).
    pub rerank_depths: Vec<usize>,
}

impl Default for LocomoOptions {
    fn default() -> Self {
        LocomoOptions {
            lexical_weights: vec![0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0],
            prior_weights: vec![0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0],
            embed_threads: 0,
            study_lexical_weight: Ranking::default().lexical_weight,
            rerank_depths: Vec::new(),
        }
    }
}

/// Everything `memd-eval locomo` measured.
#[derive(Debug, Clone)]
pub struct Report {
    pub conversations: Vec<String>,
    /// Memories stored (turns with identical text in one conversation share one memory).
    pub memories: usize,
    pub merged_duplicates: usize,
    /// Questions of categories 1–4 with evidence (the ones scored).
    pub questions: usize,
    pub skipped_without_evidence: usize,
    /// Vector only, lexical only, the fused grid, the shipped configuration.
    pub configs: Vec<ConfigResult>,
    /// Fused with the prior at each weight after random outcomes were recorded.
    pub noise: Vec<ConfigResult>,
    /// Lexical weight of the ranking behind the noise, floor and eviction studies.
    pub study_lexical_weight: f32,
    pub floor: FloorStudy,
    /// The same floors on the learning scenario's project notes (coding memories), probed
    /// with the scenario's questions, LoCoMo questions (chit-chat) and unrelated coding ones.
    pub notes_floor: FloorStudy,
    pub eviction: EvictionStudy,
}

impl Report {
    pub fn config(&self, name: &str) -> Option<&ConfigResult> {
        self.configs.iter().find(|c| c.name == name)
    }
}

/// Every conversation file in `data_dir`, default options.
pub fn run_locomo(data_dir: &Path, runtime: &RuntimePaths) -> Result<Report> {
    let files = dataset::conversation_files(data_dir)?;
    run_locomo_on(&files, runtime, &LocomoOptions::default())
}

/// The given conversation files (each its own store).
pub fn run_locomo_on(
    files: &[PathBuf],
    runtime: &RuntimePaths,
    options: &LocomoOptions,
) -> Result<Report> {
    if files.is_empty() {
        bail!("no LoCoMo conversation files given");
    }
    let started = Instant::now();
    let embedder = OnnxEmbedder::load(runtime, options.embed_threads)
        .context("memd-eval locomo needs the embedding runtime")?;
    let conversations = files
        .iter()
        .map(|f| dataset::load_conversation(f))
        .collect::<Result<Vec<_>>>()?;
    let off_topic = embed_all(&embedder, &OFF_TOPIC_QUERIES)?;
    let indexed = conversations
        .iter()
        .map(|c| Indexed::build(c, &embedder))
        .collect::<Result<Vec<_>>>()?;
    eprintln!(
        "memd-eval: {} conversations stored and embedded in {:.1} s",
        indexed.len(),
        started.elapsed().as_secs_f64()
    );
    let mut configs: Vec<ConfigResult> = configurations(options)
        .into_iter()
        .map(|(name, ranking)| score_config(&indexed, &name, &ranking))
        .collect();
    let pipeline = Pipeline::shipped(runtime, options.embed_threads)?;
    configs.push(score_shipped(&indexed, &pipeline)?);
    if !options.rerank_depths.is_empty() {
        let ce = CrossEncoder::load(&runtime.ort_lib, &reranker_dir(), options.embed_threads)
            .context("memd-eval locomo --rerank needs the reranker (install/fetch-runtime.sh)")?;
        configs.extend(score_reranked(&indexed, &ce, &options.rerank_depths)?);
    }
    let study = study_ranking(options);
    let floor = floor_samples(&indexed, &off_topic, &study).study(LOCOMO_PROBES);
    let notes_floor =
        notes_floor_samples(&indexed, &off_topic, &embedder, &study)?.study(NOTES_PROBES);
    let eviction = eviction::study(&relevance_lists(&indexed, &study));
    for ix in &indexed {
        ix.record_noise_outcomes()?;
    }
    let noise = options
        .prior_weights
        .iter()
        .map(|&w| {
            let ranking = Ranking {
                prior_weight: w,
                ..study_ranking(options)
            };
            score_config(&indexed, &format!("noise prior w={w:.2}"), &ranking)
        })
        .collect();
    eprintln!(
        "memd-eval: locomo done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(Report {
        conversations: conversations.iter().map(|c| c.name.clone()).collect(),
        memories: indexed.iter().map(|ix| ix.labels.len()).sum(),
        merged_duplicates: indexed.iter().map(|ix| ix.merged_duplicates).sum(),
        questions: indexed.iter().map(|ix| ix.questions.len()).sum(),
        skipped_without_evidence: indexed.iter().map(|ix| ix.skipped).sum(),
        configs,
        noise,
        study_lexical_weight: options.study_lexical_weight,
        floor,
        notes_floor,
        eviction,
    })
}

pub use super::pipeline::shipped_ranking;

/// The shipped ranking with the lexical weight under study.
fn study_ranking(options: &LocomoOptions) -> Ranking {
    Ranking {
        lexical_weight: options.study_lexical_weight,
        ..shipped_ranking()
    }
}

fn configurations(options: &LocomoOptions) -> Vec<(String, Ranking)> {
    let off = Ranking {
        prior_weight: 0.0,
        ..Ranking::default()
    };
    let mut list = vec![
        (
            VECTOR_ONLY.to_string(),
            Ranking {
                vector_weight: 1.0,
                lexical_weight: 0.0,
                ..off
            },
        ),
        (
            LEXICAL_ONLY.to_string(),
            Ranking {
                vector_weight: 0.0,
                lexical_weight: 1.0,
                ..off
            },
        ),
    ];
    for &lw in &options.lexical_weights {
        list.push((
            format!("fused lw={lw:.2}"),
            Ranking {
                vector_weight: 1.0,
                lexical_weight: lw,
                ..off
            },
        ));
    }
    list.push((FIRST_STAGE.to_string(), shipped_ranking()));
    let shipped = shipped_ranking();
    list.push((
        shipped_with_graph_boosts(!shipped.graph_boosts).to_string(),
        Ranking {
            graph_boosts: !shipped.graph_boosts,
            ..shipped
        },
    ));
    list
}

pub(super) fn score_config(indexed: &[Indexed], name: &str, ranking: &Ranking) -> ConfigResult {
    let mut scorer = Scorer::default();
    for ix in indexed {
        ix.evaluate(ranking, &mut scorer);
    }
    scorer.finish(name)
}

/// What memd ships (`pipeline`) over every conversation, each with its own token states.
pub(super) fn score_shipped(indexed: &[Indexed], pipeline: &Pipeline) -> Result<ConfigResult> {
    let started = Instant::now();
    let mut scorer = Scorer::default();
    for ix in indexed {
        for (q, hits) in ix.questions.iter().zip(ix.shipped(pipeline, TOP_K)?) {
            let ranked: Vec<&[String]> = hits
                .iter()
                .filter_map(|h| ix.labels.get(&h.key).map(Vec::as_slice))
                .collect();
            scorer.add(q.category, &q.evidence, &ranked);
        }
    }
    eprintln!(
        "memd-eval: shipped pipeline over {} stores in {:.1} s",
        indexed.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(scorer.finish(SHIPPED))
}

/// The shipped ranking with its head reranked by the cross-encoder, one result per depth:
/// inside the head the cross-encoder's order alone (the study found blending with the fused
/// rank gave back 0.13 of R@1), the fused order below it.
fn score_reranked(
    indexed: &[Indexed],
    ce: &CrossEncoder,
    depths: &[usize],
) -> Result<Vec<ConfigResult>> {
    let started = Instant::now();
    let deepest = depths.iter().copied().max().unwrap_or(0);
    let mut scorers: Vec<Scorer> = depths.iter().map(|_| Scorer::default()).collect();
    let ranking = shipped_ranking();
    for ix in indexed {
        ix.store.read(|s| -> Result<()> {
            for (q, qvec) in ix.questions.iter().zip(&ix.question_vecs) {
                let hits = ix.rank(s, &q.text, qvec, &ranking, TOP_K.max(deepest));
                let head = deepest.min(hits.len());
                let texts: Vec<&str> = hits[..head]
                    .iter()
                    .map(|h| s.by_key(h.key).map_or("", |r| r.content.as_str()))
                    .collect();
                let scores = ce.score(&q.text, &texts)?;
                for (&depth, scorer) in depths.iter().zip(&mut scorers) {
                    let n = depth.min(hits.len());
                    let mut order: Vec<usize> = (0..n).collect();
                    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
                    order.extend(n..hits.len());
                    let ranked: Vec<&[String]> = order
                        .iter()
                        .take(TOP_K)
                        .filter_map(|&i| ix.labels.get(&hits[i].key).map(Vec::as_slice))
                        .collect();
                    scorer.add(q.category, &q.evidence, &ranked);
                }
            }
            Ok(())
        })?;
    }
    eprintln!(
        "memd-eval: reranked at depths {depths:?} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(depths
        .iter()
        .zip(scorers)
        .map(|(d, scorer)| scorer.finish(&format!("{FIRST_STAGE} + ce@{d}")))
        .collect())
}

/// Embeds texts in chunks; one vector per text, in order.
fn embed_all(embedder: &dyn Embed, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(EMBED_CHUNK) {
        out.extend(embedder.embed(chunk)?);
    }
    Ok(out)
}

/// One conversation in its own store, embedded, with its scored questions embedded. Also
/// the coding set's notes (`coding.rs`), so both evaluations store, embed and rank alike.
pub(super) struct Indexed {
    pub(super) store: Store<MemState>,
    /// Memory key → the dia_ids it stands for (several when turns repeat verbatim).
    pub(super) labels: HashMap<u64, Vec<String>>,
    /// (key, id) of every memory, by key.
    ids: Vec<(u64, String)>,
    merged_duplicates: usize,
    pub(super) questions: Vec<Question>,
    pub(super) question_vecs: Vec<Vec<f32>>,
    skipped: usize,
    // Declared last: dropped after the store has closed its files.
    _dir: TempDir,
}

impl Indexed {
    fn build(conv: &Conversation, embedder: &dyn Embed) -> Result<Indexed> {
        let memories = conv
            .turns
            .iter()
            .map(|t| (turn_record(t), t.dia_id.clone()))
            .collect();
        Self::store(memories, &conv.questions, embedder)
    }

    /// Stores `(record, label)` pairs in a fresh store, embeds them and the questions that
    /// have evidence (the others are only counted).
    pub(super) fn store(
        memories: Vec<(memd_engine::record::Record, String)>,
        questions: &[Question],
        embedder: &dyn Embed,
    ) -> Result<Indexed> {
        let dir = tempfile::Builder::new()
            .prefix("memd-eval-locomo")
            .tempdir()
            .context("creating the evaluation store dir")?;
        let (store, _) = Store::open(dir.path(), MemState::new(DIMS)?)
            .map_err(|e| anyhow!("opening the evaluation store: {e}"))?;
        let ops = memories
            .iter()
            .map(|(rec, _)| Op::Insert(Box::new(rec.clone())))
            .collect();
        let outputs = store.commit(ops).map_err(|e| anyhow!("{e}"))?;
        let mut labels: HashMap<u64, Vec<String>> = HashMap::new();
        let mut key_of: HashMap<String, u64> = HashMap::new();
        let mut fresh: Vec<(u64, String)> = Vec::new();
        let mut merged_duplicates = 0;
        for ((rec, label), out) in memories.into_iter().zip(outputs) {
            match out {
                Output::Inserted { id, key } => {
                    labels.insert(key, vec![label]);
                    key_of.insert(id, key);
                    // Embedded as the daemon embeds it (an exchange with its date).
                    fresh.push((key, memd_engine::indexed_text::of(&rec).into_owned()));
                }
                Output::Duplicate { id } => {
                    let key = key_of
                        .get(&id)
                        .with_context(|| format!("duplicate of unknown memory {id}"))?;
                    labels.entry(*key).or_default().push(label);
                    merged_duplicates += 1;
                }
                other => bail!("storing memory {label} failed: {other:?}"),
            }
        }
        let texts: Vec<&str> = fresh.iter().map(|(_, c)| c.as_str()).collect();
        let vectors = embed_all(embedder, &texts)?;
        let vector_ops = fresh
            .iter()
            .zip(vectors)
            .map(|((key, _), vector)| Op::vector(*key, &vector))
            .collect();
        store.commit(vector_ops).map_err(|e| anyhow!("{e}"))?;
        let (questions, skipped): (Vec<Question>, Vec<Question>) = questions
            .iter()
            .cloned()
            .partition(|q| !q.evidence.is_empty());
        let texts: Vec<&str> = questions.iter().map(|q| q.text.as_str()).collect();
        let question_vecs = embed_all(embedder, &texts)?;
        let mut ids: Vec<(u64, String)> = key_of.into_iter().map(|(id, k)| (k, id)).collect();
        ids.sort();
        Ok(Indexed {
            store,
            labels,
            ids,
            merged_duplicates,
            questions,
            question_vecs,
            skipped: skipped.len(),
            _dir: dir,
        })
    }

    /// Embeds the questions again with `embedder`, the memories' vectors left as they are
    /// (`memd-eval retrieval --vectors upgraded`).
    pub(super) fn embed_questions(&mut self, embedder: &dyn Embed) -> Result<()> {
        let texts: Vec<&str> = self.questions.iter().map(|q| q.text.as_str()).collect();
        self.question_vecs = embed_all(embedder, &texts)?;
        Ok(())
    }

    pub(super) fn rank(
        &self,
        s: &MemState,
        text: &str,
        qvec: &[f32],
        ranking: &Ranking,
        k: usize,
    ) -> Vec<Hit> {
        let q = Query {
            limit: k,
            ..Query::default()
        };
        search::rank(s, &q, text, Some(qvec), ranking, k)
    }

    /// Every question ranked by the shipped pipeline, the first `k` hits of each.
    pub(super) fn shipped(&self, pipeline: &Pipeline, k: usize) -> Result<Vec<Vec<Hit>>> {
        let (states, _log) = pipeline.states(&self.store, self.labels.keys().copied())?;
        let stages = pipeline.stages();
        self.questions
            .iter()
            .zip(&self.question_vecs)
            .map(|(q, v)| pipeline.rank(&self.store, &states, q.asked(v), &stages, k))
            .collect()
    }

    fn evaluate(&self, ranking: &Ranking, scorer: &mut Scorer) {
        self.store.read(|s| {
            for (q, qvec) in self.questions.iter().zip(&self.question_vecs) {
                let hits = self.rank(s, &q.text, qvec, ranking, TOP_K);
                let ranked: Vec<&[String]> = hits
                    .iter()
                    .take(TOP_K)
                    .filter_map(|h| self.labels.get(&h.key).map(Vec::as_slice))
                    .collect();
                scorer.add(q.category, &q.evidence, &ranked);
            }
        });
    }

    /// get-context's view of a probe: its ranked list as `(similarity, relevant)`.
    fn probe(
        &self,
        s: &MemState,
        q: (&str, &[f32]),
        evidence: &[String],
        ranking: &Ranking,
    ) -> floor::Ranked {
        let hits = self.rank(s, q.0, q.1, ranking, floor::INJECT_MAX);
        floor::ranked(&hits, |h| {
            self.labels
                .get(&h.key)
                .is_some_and(|l| l.iter().any(|d| evidence.contains(d)))
        })
    }

    /// Records outcomes that have nothing to do with relevance: a third of the memories
    /// `worked` and a third `failed`, `NOISE_ROUNDS` times, chosen by a hash of the dia_id.
    fn record_noise_outcomes(&self) -> Result<()> {
        let scores: Vec<(String, Outcome)> = self
            .ids
            .iter()
            .filter_map(|(key, id)| {
                let label = self.labels.get(key)?.first()?;
                match fnv1a(label.as_bytes()) % 3 {
                    0 => Some((id.clone(), Outcome::Worked)),
                    1 => Some((id.clone(), Outcome::Failed)),
                    _ => None,
                }
            })
            .collect();
        let ops = (0..NOISE_ROUNDS)
            .map(|round| {
                Op::ScoreExchange(Box::new(ScoreBatch {
                    exchange: None,
                    exchange_outcome: Outcome::Unknown,
                    scores: scores.clone(),
                    concepts: Vec::new(),
                    at: round as i64,
                    time_weighting: false,
                }))
            })
            .collect();
        self.store.commit(ops).map_err(|e| anyhow!("{e}"))?;
        Ok(())
    }
}

pub(super) fn turn_record(t: &dataset::Turn) -> memd_engine::record::Record {
    let mut rec = Core::new_record(Collection::Working, t.content(), t.created_at);
    rec.metadata
        .insert("dia_id".into(), Value::from(t.dia_id.as_str()));
    rec.metadata
        .insert("session_date".into(), Value::from(t.session_date.as_str()));
    rec.metadata
        .insert("speaker".into(), Value::from(t.speaker.as_str()));
    rec
}

/// Every probe of the floor study.
fn floor_samples(indexed: &[Indexed], off_topic: &[Vec<f32>], ranking: &Ranking) -> FloorSamples {
    let mut samples = FloorSamples::default();
    for (i, ix) in indexed.iter().enumerate() {
        // The next conversation's questions are about other people: hard negatives.
        let foreign = (indexed.len() > 1).then(|| &indexed[(i + 1) % indexed.len()]);
        ix.store.read(|s| {
            for (q, v) in ix.questions.iter().zip(&ix.question_vecs) {
                samples
                    .locomo
                    .push(ix.probe(s, (&q.text, v), &q.evidence, ranking));
            }
            for (text, v) in OFF_TOPIC_QUERIES.iter().zip(off_topic) {
                samples.off_topic.push(ix.probe(s, (text, v), &[], ranking));
            }
            if let Some(other) = foreign {
                for (q, v) in other.questions.iter().zip(&other.question_vecs) {
                    samples
                        .foreign
                        .push(ix.probe(s, (&q.text, v), &[], ranking));
                }
            }
        });
    }
    samples
}

/// The floor probes on the learning scenario's notes: its questions (evidence: the notes of
/// the asked topic), every LoCoMo question as chit-chat, the coding questions as other-coding.
fn notes_floor_samples(
    indexed: &[Indexed],
    coding: &[Vec<f32>],
    embedder: &dyn Embed,
    ranking: &Ranking,
) -> Result<FloorSamples> {
    let seeds = scenario::seeds();
    let label = |i: usize| match seeds[i].topic {
        Some(t) => format!("{}:{i}", scenario::TOPICS[t].name),
        None => format!("filler:{i}"),
    };
    let memories = (0..seeds.len())
        .map(|i| {
            let rec = Core::new_record(Collection::Working, seeds[i].content.to_string(), 0);
            (rec, label(i))
        })
        .collect();
    let questions: Vec<Question> = scenario::TOPICS
        .iter()
        .enumerate()
        .flat_map(|(t, topic)| {
            let evidence: Vec<String> = (0..seeds.len())
                .filter(|&i| seeds[i].topic == Some(t))
                .map(label)
                .collect();
            topic.queries.iter().map(move |q| Question {
                text: q.to_string(),
                category: 4,
                evidence: evidence.clone(),
                project: None,
            })
        })
        .collect();
    let notes = Indexed::store(memories, &questions, embedder)?;
    let mut samples = FloorSamples::default();
    notes.store.read(|s| {
        for (q, v) in notes.questions.iter().zip(&notes.question_vecs) {
            samples
                .locomo
                .push(notes.probe(s, (&q.text, v), &q.evidence, ranking));
        }
        for ix in indexed {
            for (q, v) in ix.questions.iter().zip(&ix.question_vecs) {
                samples
                    .off_topic
                    .push(notes.probe(s, (&q.text, v), &[], ranking));
            }
        }
        for (text, v) in OFF_TOPIC_QUERIES.iter().zip(coding) {
            samples
                .foreign
                .push(notes.probe(s, (text, v), &[], ranking));
        }
    });
    Ok(samples)
}

/// Each question's fused scores with the prior off (relevance only), best first.
fn relevance_lists(indexed: &[Indexed], study: &Ranking) -> Vec<Vec<f64>> {
    let ranking = Ranking {
        prior_weight: 0.0,
        ..*study
    };
    let mut lists = Vec::new();
    for ix in indexed {
        ix.store.read(|s| {
            for (q, v) in ix.questions.iter().zip(&ix.question_vecs) {
                let hits = ix.rank(s, &q.text, v, &ranking, TOP_K);
                lists.push(hits.iter().map(|h| h.rank_score).collect());
            }
        });
    }
    lists
}

/// FNV-1a: a fixed, platform-independent hash for choosing noise outcomes.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
