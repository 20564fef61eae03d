//! What memd ships, measured offline: every question ranked through the daemon's own retrieval
//! pipeline (`memd_engine::retrieve`: the first stage → late interaction → the cross-encoder when
//! `search.cross_encoder_depth` asks for it), with the daemon's default `[search]` and
//! `[learning]` settings, over token states computed for every memory as the ingest worker
//! stores them. The evaluations' "shipped" rows come from here and nowhere else; their "first
//! stage only" rows are the fused ranking alone.
//!
//! Owns the stage labels, the shipped settings and their description (printed at the top of
//! reports), the loaded models and one question's ranking through the stages. Must never
//! reimplement a stage (it calls `retrieve::first_stage` and `retrieve::second_stage`), set a
//! deadline (offline figures must not depend on the machine's speed), or write to a store.

use super::dataset::Question;
use anyhow::{Context, Result};
use memd_engine::config::{LearningConfig, SearchConfig};
use memd_engine::models::embed::{
    CrossEncoder, LateInteraction, RuntimePaths, colbert, late_interaction_dir, reranker_dir,
};
use memd_engine::models::late;
use memd_engine::retrieve::{
    self, COSINE_GAP_SCALE, COSINE_WEIGHT_MAX, FirstStage, LateScore, Second,
};
use memd_engine::scope::Visibility;
use memd_engine::search::{Hit, Query, RRF_K, Ranking};
use memd_engine::state::MemState;
use memd_engine::store::Store;
use std::fmt;
use std::sync::Arc;

/// Label of what memd ships: the whole pipeline with the default settings.
pub const SHIPPED: &str = "shipped";
/// Label of the fused first stage (vectors + BM25 + prior) without any reranking.
pub const FIRST_STAGE: &str = "first stage only";

/// The embedder, late-interaction model and cross-encoder the runtime provides (what
/// install/fetch-runtime.sh downloads; named here because the files do not say).
const EMBEDDER: &str = "all-MiniLM-L6-v2 (int8)";
const LATE_MODEL: &str = "answerai-colbert-small-v1 (int8)";
const CROSS_MODEL: &str = "ms-marco-MiniLM-L-12-v2 (int8)";
/// `view` needs a clock; nothing ranked here depends on it.
const NOW_MS: i64 = 1_800_000_000_000;

/// The ranking the daemon uses by default (`Core::ranking` with the default config).
pub fn shipped_ranking() -> Ranking {
    Ranking {
        prior_weight: LearningConfig::default().prior_weight,
        exchange_weight: LearningConfig::default().exchange_weight,
        graph_boosts: LearningConfig::default().graph_boosts,
        ..Ranking::default()
    }
}

/// The settings that choose what the pipeline does: `[search]` and the ranking `[learning]`
/// makes (`Default`: what the daemon ships).
#[derive(Debug, Clone)]
pub struct Settings {
    pub search: SearchConfig,
    pub ranking: Ranking,
    /// How late interaction's score meets the first stage's priors.
    pub late_score: LateScore,
    /// Weigh each query token by its smoothed IDF over the memories it is scored against
    /// (`QueryStates::weighed_over_candidates`; bench/EVAL.md sections 16, 22). Not shipped.
    pub candidate_weights: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            search: SearchConfig::default(),
            ranking: shipped_ranking(),
            late_score: retrieve::LATE_SCORE,
            candidate_weights: false,
        }
    }
}

/// How the memories' token states are held while ranking.
#[derive(Debug, Clone, Copy, Default, PartialEq, clap::ValueEnum)]
pub enum StatesForm {
    /// As the daemon holds them: i8 in memory until the store has `late::TRAIN_TOKENS` kept
    /// token vectors, then 16-byte codes in memory and the full states in a log on disk.
    #[default]
    Shipped,
    /// i8 in memory, every memory (the form before the log of full states).
    I8,
    /// Codes and the log whatever the store's size (the codebook trained on all of it).
    Coded,
}

/// What the token-state log's records would keep (`memd-eval retrieval --log-form`,
/// bench/EVAL.md section 14): every token or only the kept ones (the words' tokens the codes
/// stand for), values in 8 bits (as stored) or fewer with the token's scale.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogForm {
    /// Every token in i8: what the log stores.
    I8All,
    I6All,
    I5All,
    I4All,
    /// The kept tokens only.
    I8Kept,
    I4Kept,
}

impl LogForm {
    pub fn engine(self) -> late::LogForm {
        let (kept_only, bits) = match self {
            LogForm::I8All => (false, 8),
            LogForm::I6All => (false, 6),
            LogForm::I5All => (false, 5),
            LogForm::I4All => (false, 4),
            LogForm::I8Kept => (true, 8),
            LogForm::I4Kept => (true, 4),
        };
        late::LogForm { kept_only, bits }
    }
}

/// The daemon's retrieval pipeline with its models loaded.
pub struct Pipeline {
    pub settings: Settings,
    pub states_form: StatesForm,
    /// What the log's records keep (`None`: what the daemon writes).
    pub log_form: Option<LogForm>,
    late: LateInteraction,
    cross: Option<Arc<CrossEncoder>>,
    runtime: tokio::runtime::Runtime,
    /// What the questions' late-interaction encodings cost.
    late_cost: std::sync::Mutex<LateCost>,
}

/// The questions' late-interaction encodings: how many, their tokens, the process's CPU time
/// and the wall time they took (one at a time, on the thread count the pipeline was loaded
/// with).
#[derive(Debug, Default, Clone)]
pub struct LateCost {
    pub queries: usize,
    pub tokens: usize,
    pub cpu: std::time::Duration,
    pub wall: std::time::Duration,
    /// The cut (`MAX_QUERY_TOKENS` unless `MEMD_STUDY_QUERY_CUT` set another).
    pub cut: usize,
}

impl fmt::Display for LateCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.queries.max(1) as f64;
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0 / n;
        write!(
            f,
            "late-interaction query encodings (cut at {} tokens): {}, {:.1} tokens, CPU {:.2} ms, wall {:.2} ms each (mean)",
            self.cut,
            self.queries,
            self.tokens as f64 / n,
            ms(self.cpu),
            ms(self.wall)
        )
    }
}

/// This process's CPU time (user + system, all threads).
fn cpu_time() -> std::time::Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// `MEMD_STUDY_QUERY_CUT`: where the study cuts questions for late interaction (tokens).
fn study_query_cut() -> Option<usize> {
    std::env::var("MEMD_STUDY_QUERY_CUT").ok()?.parse().ok()
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
        let cut = study_query_cut().unwrap_or(colbert::MAX_QUERY_TOKENS);
        let late = late.with_query_cut(cut);
        let cross = match search.rerank && search.cross_encoder_depth > 0 {
            true => Some(Arc::new(load_cross_encoder(runtime, threads)?)),
            false => None,
        };
        Ok(Pipeline {
            settings,
            states_form: StatesForm::default(),
            log_form: None,
            late,
            cross,
            runtime: tokio::runtime::Builder::new_current_thread()
                .build()
                .context("starting the evaluation's async runtime")?,
            late_cost: std::sync::Mutex::new(LateCost {
                cut,
                ..LateCost::default()
            }),
        })
    }

    /// What the questions' late-interaction encodings have cost so far.
    pub fn late_cost(&self) -> LateCost {
        self.late_cost
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A question's late-interaction states, its encoding timed.
    fn encode_late(&self, text: &str) -> Result<memd_engine::models::embed::QueryStates> {
        let (cpu, wall) = (cpu_time(), std::time::Instant::now());
        let mut states = self.late.encode_query(text)?;
        if self.settings.candidate_weights {
            let ids = self.late.query_ids(text)?;
            states = states.weighed_over_candidates(ids, self.late.doc_tokenizer());
        }
        let (cpu, wall) = (cpu_time().saturating_sub(cpu), wall.elapsed());
        let mut cost = self
            .late_cost
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cost.queries += 1;
        cost.tokens += states.tokens();
        cost.cpu += cpu;
        cost.wall += wall;
        Ok(states)
    }

    /// The cross-encoder, when the settings use it.
    pub fn cross_encoder(&self) -> Option<Arc<CrossEncoder>> {
        self.cross.clone()
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

    /// Token states of the memories `keys` of `store`, as the daemon's background pass
    /// stores them (in `states_form`), and the directory of their log on disk (the states
    /// read it while it lives).
    pub fn states(
        &self,
        store: &Store<MemState>,
        keys: impl Iterator<Item = u64>,
    ) -> Result<(late::States, Option<tempfile::TempDir>)> {
        let mut keys: Vec<u64> = keys.collect();
        keys.sort_unstable();
        let texts: Vec<(u64, String)> = store.read(|s| {
            keys.into_iter()
                .filter_map(|k| Some((k, memd_engine::indexed_text::of(s.by_key(k)?).into_owned())))
                .collect()
        });
        let states = late::States::default();
        let dir = match self.states_form {
            StatesForm::I8 => None,
            _ => Some(tempfile::tempdir().context("a directory for the token-state log")?),
        };
        if let Some(form) = self.log_form {
            states.set_log_form(form.engine());
        }
        if let Some(d) = &dir {
            states.open(d.path(), &self.late.digest());
        }
        for (key, text) in texts {
            states.insert_full(key, &text, late::encode_memory(&self.late, &text)?)?;
            // The daemon's pass trains as soon as the log holds enough (`due_for_codebook`).
            if states.due_for_codebook(false) {
                states.train_codebook();
            }
        }
        if self.states_form == StatesForm::Coded {
            states.train_codebook();
        }
        Ok((states, dir))
    }

    /// Question `asked` ranked through `stages` among the memories its project sees; the
    /// first `k` hits.
    pub fn rank(
        &self,
        store: &Store<MemState>,
        states: &late::States,
        asked: Asked,
        stages: &Stages,
        k: usize,
    ) -> Result<Vec<Hit>> {
        let Asked {
            text,
            vector,
            project,
        } = asked;
        let reranking = stages.late || stages.cross.is_some();
        let query = Query {
            limit: k,
            // As the prompt hook reads: the caller's project and the global memories, or
            // the global ones alone when no project is known (every memory, in a store
            // where none has a project).
            visibility: Visibility::of_current(project),
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
            vector_extra: match stages.late {
                true => retrieve::VECTOR_CANDIDATES,
                false => 0,
            },
        };
        let head = store.read(|s| retrieve::first_stage(s, &stage, depth, |_| true, NOW_MS));
        let query_states = match stages.late {
            true => Some(self.encode_late(text)?),
            false => None,
        };
        let how = Second {
            late: query_states.as_ref().map(|q| (q, head.len())),
            deadline: None,
            cross: stages.cross.clone(),
            score: self.settings.late_score,
        };
        let (head, _) = self
            .runtime
            .block_on(retrieve::second_stage(states, text, head, how));
        Ok(head.into_iter().take(k).map(|c| c.hit).collect())
    }
}

/// One question as the pipeline ranks it.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub text: &'a str,
    /// Its embedding.
    pub vector: &'a [f32],
    /// The project it is asked from (`None`: a caller in no project).
    pub project: Option<&'a str>,
}

impl Question {
    /// This question, embedded as `vector`, asked from its project.
    pub fn asked<'a>(&'a self, vector: &'a [f32]) -> Asked<'a> {
        Asked {
            text: &self.text,
            vector,
            project: self.project.as_deref(),
        }
    }
}

/// How a late score variant reads in reports and on the command line (`parse_late_score`).
pub fn late_score_label(v: LateScore) -> String {
    match v {
        LateScore::Alike => "alike".to_string(),
        LateScore::Priors(p) => format!("priors:{p}"),
        LateScore::ByKind(None) => "by-kind".to_string(),
        LateScore::ByKind(Some(p)) => format!("by-kind:{p}"),
    }
}

/// `alike`, `priors:<power>`, `by-kind` or `by-kind:<power>` (`memd-eval retrieval
/// --late-score`).
pub fn parse_late_score(s: &str) -> Result<LateScore, String> {
    let (name, power) = match s.split_once(':') {
        Some((n, p)) => {
            let p: f32 = p
                .parse()
                .map_err(|_| format!("--late-score {s}: the power after ':' must be a number"))?;
            if !(0.0..=10.0).contains(&p) {
                return Err(format!("--late-score {s}: the power must be within 0..=10"));
            }
            (n, Some(p))
        }
        None => (s, None),
    };
    match (name, power) {
        ("alike", None) => Ok(LateScore::Alike),
        ("priors", Some(p)) => Ok(LateScore::Priors(p)),
        ("by-kind", p) => Ok(LateScore::ByKind(p)),
        _ => Err(format!(
            "--late-score {s}: expected alike, priors:<power>, by-kind or by-kind:<power>"
        )),
    }
}

/// The cross-encoder of the runtime (`reranker_dir`).
pub fn load_cross_encoder(runtime: &RuntimePaths, threads: usize) -> Result<CrossEncoder> {
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
                "late interaction {LATE_MODEL} (MaxSim per query token + w x cosine, w = {} x the \
                 cosine's lead / MaxSim's lead, at most {}; with the first stage's priors: {}) \
                 over the first {} (search.rerank_depth) and the vector list's first {}",
                COSINE_GAP_SCALE,
                COSINE_WEIGHT_MAX,
                match self.candidate_weights {
                    true => format!(
                        "{}; query tokens weighed by IDF over the candidates (not shipped)",
                        late_score_label(self.late_score)
                    ),
                    false => late_score_label(self.late_score),
                },
                s.rerank_depth,
                retrieve::VECTOR_CANDIDATES
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
