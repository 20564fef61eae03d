//! `memd-eval learning`: does outcome learning push misleading memories out and keep correct
//! ones, through the real hook API of a spawned daemon?
//!
//! One simulated session per prior weight and routing-boost setting: notes are stored with
//! `/api/record-response`, then every turn runs get-context → record-outcome (the previous
//! turn's injected notes, judged by the fixed rule of `scenario`) → stop, as an agent with
//! hooks does. After the warm-up the
//! facts of one topic change: its notes go stale and replacements are stored. After every
//! scoring the run waits, bounded, until the lifecycle worker has applied whatever the new
//! scores call for (decided with `learn::lifecycle`, the rules the worker itself uses); after
//! every turn it probes each topic with `/api/search`, over everything and over notes only.
//! Must never read the daemon's files or call it other than over HTTP.

use super::daemon::SpawnedDaemon;
use super::learning_report::{
    LearningReport, MemoryFate, Placement, SessionRun, TIMELINE_EVERY, TOP, TimelineRow,
};
use super::probe::{rank_in, top_counts, transition_due};
use super::scenario::{self, Role, Seed, TOPICS, WARMUP_TURNS};
use anyhow::{Context, Result, bail};
use memd_engine::embed::RuntimePaths;
use proto::{
    GetContextRequest, GetContextResponse, MemoryView, Outcome, RecordOutcomeRequest,
    RecordOutcomeResponse, RecordResponseRequest, RecordResponseResponse, SearchRequest,
    SearchResponse, StatsResponse, StopRequest, StopResponse, Value,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Turns of the simulated session after the warm-up.
pub const DEFAULT_TURNS: usize = 60;
/// Prior weights compared by default.
pub const DEFAULT_PRIOR_WEIGHTS: [f64; 6] = [0.0, 0.1, 0.15, 0.25, 0.4, 0.6];

const CONVERSATION: &str = "eval-learning-session";
/// How deep each probe search looks (ranks beyond it count as "not found").
const PROBE_DEPTH: usize = 20;
/// Longer than the lifecycle worker's 30 s timer, which covers a wake-up it missed.
const SETTLE_LIMIT: Duration = Duration::from_secs(45);
const EMBED_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct LearningOptions {
    /// Turns after the warm-up.
    pub turns: usize,
    pub prior_weights: Vec<f64>,
    /// `learning.exchange_weight` for the daemon; `None` keeps the shipped default.
    pub exchange_weight: Option<f64>,
    /// `learning.graph_boosts` settings to compare; each prior weight runs once per setting.
    pub graph_boosts: Vec<bool>,
    /// The `memd` binary to spawn.
    pub memd: PathBuf,
    pub runtime: RuntimePaths,
}

/// The `memd` binary next to the running program (or the program itself when it is memd).
pub fn sibling_memd_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot locate the running program")?;
    if exe.file_stem().is_some_and(|s| s == "memd") {
        return Ok(exe);
    }
    let sibling = exe.with_file_name(format!("memd{}", std::env::consts::EXE_SUFFIX));
    if !sibling.is_file() {
        bail!(
            "no memd binary at {} (build it, or pass --memd PATH)",
            sibling.display()
        );
    }
    Ok(sibling)
}

/// One simulated session per (prior weight, routing-boost setting), each against a fresh
/// daemon.
pub fn run_learning(options: &LearningOptions) -> Result<LearningReport> {
    let mut runs = Vec::new();
    for &w in &options.prior_weights {
        for &boosts in &options.graph_boosts {
            runs.push(run_session(options, w, boosts)?);
        }
    }
    Ok(LearningReport { runs })
}

fn run_session(options: &LearningOptions, prior_weight: f64, boosts: bool) -> Result<SessionRun> {
    run_variant(options, prior_weight, boosts, &Mode::default())
}

/// Who scores and how the daemon is set up, beyond the prior and the routing boosts.
#[derive(Debug, Clone)]
pub struct Mode {
    /// Printed with the run ("" for `memd-eval learning`).
    pub label: String,
    /// The simulated agent answers every scoring prompt; otherwise nobody scores.
    pub agent_scores: bool,
    /// `[evidence] outcomes` in the daemon's config: an unscored turn takes its commands'
    /// verdict (the simulation counts it the way the daemon applies it).
    pub evidence_outcomes: bool,
    /// `[evidence] failures`: a verdict of `failed` is applied too.
    pub evidence_failures: bool,
    /// More config.toml sections for the daemon.
    pub extra_config: String,
}

impl Default for Mode {
    fn default() -> Self {
        Mode {
            label: String::new(),
            agent_scores: true,
            evidence_outcomes: false,
            evidence_failures: false,
            extra_config: String::new(),
        }
    }
}

/// One simulated session with `mode`, against a fresh daemon.
pub fn run_variant(
    options: &LearningOptions,
    prior_weight: f64,
    boosts: bool,
    mode: &Mode,
) -> Result<SessionRun> {
    let started = std::time::Instant::now();
    let mut config =
        format!("[learning]\nprior_weight = {prior_weight}\ngraph_boosts = {boosts}\n");
    if let Some(w) = options.exchange_weight {
        config.push_str(&format!("exchange_weight = {w}\n"));
    }
    config.push_str(&mode.extra_config);
    let daemon = SpawnedDaemon::start(&options.memd, &options.runtime, &config)?;
    let total = WARMUP_TURNS + options.turns;
    let mut sim = Simulation::new(&daemon, total, mode.clone());
    sim.store_notes(|s| !s.after_change)?;
    sim.probe(0)?;
    for turn in 1..=total {
        sim.turn(turn)
            .with_context(|| format!("prior {prior_weight}, graph boosts {boosts}, turn {turn}"))?;
        if turn == WARMUP_TURNS {
            // The facts change: the replacement notes are written down.
            sim.store_notes(|s| s.after_change)?;
        }
        sim.probe(turn)?;
    }
    let run = sim.finish(prior_weight, boosts)?;
    daemon.stop()?;
    eprintln!(
        "memd-eval: learning session with prior_weight {prior_weight}, graph boosts {boosts} \
         {} took {:.1} s",
        mode.label,
        started.elapsed().as_secs_f64()
    );
    Ok(run)
}

/// What the simulation knows about one seeded note.
#[derive(Debug, Default, Clone)]
struct Track {
    injected: u32,
    worked: u32,
    failed: u32,
    /// Over everything `/api/search` returns, and over notes only (exchange records aside).
    search: Placement,
    notes: Placement,
    /// (collection, score) at the baseline probe.
    at_baseline: Option<(String, f64)>,
    deleted_at: Option<usize>,
}

/// The previous turn, whose injected notes the next prompt scores.
struct Previous {
    turn: usize,
    topic: usize,
    injected: Vec<(String, Option<usize>)>,
    doc_id: String,
}

/// A turn nobody scored: its injected notes (id, seed), its commands' verdict, its exchange id.
type Unscored = (Vec<(String, Option<usize>)>, Outcome, String);

/// Same-topic notes injected since the last timeline row.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    correct: u32,
    misleading: u32,
    turns: u32,
}

impl Window {
    fn add(&mut self, other: Window) {
        self.correct += other.correct;
        self.misleading += other.misleading;
        self.turns += other.turns;
    }
}

struct Simulation<'a> {
    d: &'a SpawnedDaemon,
    seeds: Vec<Seed>,
    /// The id each note got when stored (`None` until then).
    ids: Vec<Option<String>>,
    tracks: Vec<Track>,
    previous: Option<Previous>,
    timeline: Vec<TimelineRow>,
    /// The last turn (it always gets a timeline row).
    turns: usize,
    window: Window,
    /// Everything injected over the session (windows added up).
    total: Window,
    mode: Mode,
    /// Unscored turns (injected notes, their commands' verdict, exchange id), oldest first:
    /// the daemon gives one its verdict when the prompt after the next moves past it.
    unscored: std::collections::VecDeque<Unscored>,
}

impl<'a> Simulation<'a> {
    fn new(d: &'a SpawnedDaemon, turns: usize, mode: Mode) -> Self {
        let seeds = scenario::seeds();
        Simulation {
            d,
            ids: vec![None; seeds.len()],
            tracks: vec![Track::default(); seeds.len()],
            seeds,
            previous: None,
            timeline: Vec::new(),
            turns,
            window: Window::default(),
            total: Window::default(),
            mode,
            unscored: Default::default(),
        }
    }

    /// Stores the notes `which` selects, as the agent's key takeaways, and waits for their
    /// embeddings.
    fn store_notes(&mut self, which: impl Fn(&Seed) -> bool) -> Result<()> {
        for (i, s) in self.seeds.iter().enumerate().filter(|(_, s)| which(s)) {
            let r: RecordResponseResponse = self.d.post(
                "/api/record-response",
                &RecordResponseRequest {
                    key_takeaway: s.content.to_string(),
                    initial_score: s.initial.map(str::to_string),
                    conversation_id: None,
                },
            )?;
            self.ids[i] = Some(r.doc_id);
        }
        self.d.wait_embedded(EMBED_LIMIT)
    }

    fn seed_of(&self, content: &str) -> Option<usize> {
        self.seeds.iter().position(|s| s.content == content.trim())
    }

    fn turn(&mut self, turn: usize) -> Result<()> {
        let (topic, query) = scenario::question(turn);
        let ctx: GetContextResponse = self.d.post(
            "/api/hooks/get-context",
            &GetContextRequest {
                query: query.to_string(),
                conversation_id: CONVERSATION.into(),
                cwd: None,
                project_dir: None,
                client: None,
                session_start: false,
                session_source: None,
            },
        )?;
        if self.mode.agent_scores {
            if ctx.scoring_required {
                self.score_previous(&ctx, turn)?;
            }
        } else if self.unscored.len() == 2 {
            self.left_unscored(turn)?;
        }
        let injected: Vec<(String, Option<usize>)> = ctx
            .relevant_memories
            .iter()
            .map(|m| (m.id.clone(), self.seed_of(&m.content)))
            .collect();
        self.window.turns += 1;
        for (_, seed) in &injected {
            let Some(i) = *seed else { continue };
            self.tracks[i].injected += 1;
            let s = &self.seeds[i];
            match (s.topic == Some(topic), s.role_at(turn)) {
                (true, Role::Correct) => self.window.correct += 1,
                (true, Role::Misleading) => self.window.misleading += 1,
                _ => {}
            }
        }
        let fixed = scenario::fix_works(
            injected
                .iter()
                .filter_map(|(_, s)| s.map(|i| &self.seeds[i])),
            topic,
            turn,
        );
        self.d
            .run_command(CONVERSATION, TOPICS[topic].command, fixed)?;
        let stop: StopResponse = self.d.post(
            "/api/hooks/stop",
            &StopRequest {
                conversation_id: CONVERSATION.into(),
                user_message: query.to_string(),
                // Unique per turn, as real answers are: identical exchanges would be merged
                // into one record and scored again and again.
                assistant_response: format!(
                    "Answered the {} question from the project notes (turn {turn}).",
                    TOPICS[topic].name
                ),
                client: None,
                project_dir: None,
                score_call_seen: None,
            },
        )?;
        if !self.mode.agent_scores {
            let verdict = if fixed {
                Outcome::Worked
            } else {
                Outcome::Failed
            };
            self.unscored
                .push_back((injected.clone(), verdict, stop.doc_id.clone()));
        }
        self.previous = Some(Previous {
            turn,
            topic,
            injected,
            doc_id: stop.doc_id,
        });
        self.d.wait_embedded(EMBED_LIMIT)
    }

    /// The agent answers the scoring prompt: each note injected last turn judged by the rule.
    fn score_previous(&mut self, ctx: &GetContextResponse, turn: usize) -> Result<()> {
        let Some(prev) = self.previous.take() else {
            bail!("memd asked for a score before any turn completed");
        };
        let asked: Vec<&str> = ctx.scoring_memories.iter().map(|m| m.id.as_str()).collect();
        let injected: Vec<&str> = prev.injected.iter().map(|(id, _)| id.as_str()).collect();
        if asked != injected {
            bail!("memd asks to score {asked:?}, but {injected:?} were injected");
        }
        let judged: Vec<(String, Option<usize>, Outcome)> = prev
            .injected
            .iter()
            .map(|(id, seed)| {
                let o = scenario::judge(seed.map(|i| &self.seeds[i]), prev.topic, prev.turn);
                (id.clone(), *seed, o)
            })
            .collect();
        let outcomes: Vec<Outcome> = judged.iter().map(|j| j.2).collect();
        let exchange = scenario::exchange_outcome(&outcomes);
        let scores: BTreeMap<String, String> = judged
            .iter()
            .map(|(id, _, o)| (id.clone(), o.as_str().to_string()))
            .collect();
        let r: RecordOutcomeResponse = self.d.post(
            "/api/record-outcome",
            &RecordOutcomeRequest {
                conversation_id: CONVERSATION.into(),
                outcome: exchange.as_str().into(),
                memory_scores: Some(scores),
                related: None,
                exchange_summary: None,
                source: Some("agent".into()),
            },
        )?;
        if r.already_scored {
            bail!("the previous exchange was already scored");
        }
        // A note deleted since it was injected is reported unknown, not scored.
        for (id, seed, o) in &judged {
            if r.unknown_ids.contains(id) {
                continue;
            }
            if let Some(i) = *seed {
                match o {
                    Outcome::Worked => self.tracks[i].worked += 1,
                    Outcome::Failed => self.tracks[i].failed += 1,
                    _ => {}
                }
            }
        }
        let mut touched: Vec<(String, Option<usize>)> =
            judged.into_iter().map(|(id, seed, _)| (id, seed)).collect();
        touched.push((prev.doc_id, None));
        for (id, seed) in touched {
            self.settle(&id, seed, turn)?;
        }
        Ok(())
    }

    /// Nobody scored the turn before last and this prompt moved past it: with
    /// `[evidence] outcomes` the daemon gave its notes the verdict; count it and wait for the
    /// lifecycle as after an agent's score.
    fn left_unscored(&mut self, turn: usize) -> Result<()> {
        let Some((injected, verdict, doc_id)) = self.unscored.pop_front() else {
            return Ok(());
        };
        if !self.mode.evidence_outcomes
            || (verdict == Outcome::Failed && !self.mode.evidence_failures)
        {
            return Ok(());
        }
        for (id, seed) in injected.iter().chain([(doc_id, None)].iter()) {
            if let Some(i) = *seed {
                match verdict {
                    Outcome::Failed => self.tracks[i].failed += 1,
                    _ => self.tracks[i].worked += 1,
                }
            }
            self.settle(id, *seed, turn)?;
        }
        Ok(())
    }

    fn find(&self, id: &str) -> Result<Option<MemoryView>> {
        let r: SearchResponse = self.d.post(
            "/api/search",
            &SearchRequest {
                id: Some(id.to_string()),
                ..SearchRequest::default()
            },
        )?;
        Ok(r.results.into_iter().next())
    }

    /// Waits until the lifecycle worker has moved or deleted `id` if its scores call for it.
    fn settle(&mut self, id: &str, seed: Option<usize>, turn: usize) -> Result<()> {
        let gone = self.d.wait_for(
            &format!("the lifecycle pass for {id}"),
            SETTLE_LIMIT,
            || {
                Ok(match self.find(id)? {
                    None => Some(true),
                    Some(v) => (!transition_due(&v)).then_some(false),
                })
            },
        )?;
        if gone
            && let Some(i) = seed
            && self.tracks[i].deleted_at.is_none()
        {
            self.tracks[i].deleted_at = Some(turn);
        }
        Ok(())
    }

    /// The top `PROBE_DEPTH` for a topic's first question; notes only when `notes_only`.
    fn probe_search(&self, topic: usize, notes_only: bool) -> Result<Vec<MemoryView>> {
        let filters = notes_only
            .then(|| BTreeMap::from([("memory_type".to_string(), Value::from("key_takeaway"))]));
        let r: SearchResponse = self.d.post(
            "/api/search",
            &SearchRequest {
                query: Some(TOPICS[topic].queries[0].to_string()),
                limit: Some(PROBE_DEPTH as i64),
                metadata_filters: filters,
                ..SearchRequest::default()
            },
        )?;
        Ok(r.results)
    }

    /// Probes every topic, updates ranks and top-5 membership, adds a timeline row when due.
    fn probe(&mut self, turn: usize) -> Result<()> {
        let mut per_topic = Vec::with_capacity(TOPICS.len());
        let mut notes_correct = 0usize;
        for t in 0..TOPICS.len() {
            let all = self.probe_search(t, false)?;
            let notes = self.probe_search(t, true)?;
            let all: Vec<(Option<usize>, &MemoryView)> =
                all.iter().map(|m| (self.seed_of(&m.content), m)).collect();
            let notes: Vec<(Option<usize>, &MemoryView)> = notes
                .iter()
                .map(|m| (self.seed_of(&m.content), m))
                .collect();
            per_topic.push(top_counts(&self.seeds, t, turn, &all));
            notes_correct += top_counts(&self.seeds, t, turn, &notes).0;
            for i in (0..self.seeds.len()).filter(|&i| self.seeds[i].topic == Some(t)) {
                let baseline = self.seeds[i].baseline_turn();
                if turn < baseline {
                    continue;
                }
                let failed = self.tracks[i].failed;
                let track = &mut self.tracks[i];
                track
                    .search
                    .update(rank_in(&all, i), turn, baseline, failed);
                track
                    .notes
                    .update(rank_in(&notes, i), turn, baseline, failed);
            }
        }
        self.record_baselines(turn)?;
        if turn == 0 || turn.is_multiple_of(TIMELINE_EVERY) || turn == self.turns {
            let w = std::mem::take(&mut self.window);
            self.total.add(w);
            let per_turn = |x: u32| {
                if w.turns == 0 {
                    0.0
                } else {
                    f64::from(x) / f64::from(w.turns)
                }
            };
            let slots = (TOP * TOPICS.len()) as f64;
            self.timeline.push(TimelineRow {
                turn,
                precision_at5: per_topic.iter().map(|p| p.0).sum::<usize>() as f64 / slots,
                notes_precision_at5: notes_correct as f64 / slots,
                per_topic,
                injected_correct: per_turn(w.correct),
                injected_misleading: per_turn(w.misleading),
            });
        }
        Ok(())
    }

    /// Each note's collection and score at its baseline probe (stale notes: when the facts
    /// changed, after the warm-up promoted them).
    fn record_baselines(&mut self, turn: usize) -> Result<()> {
        for i in 0..self.seeds.len() {
            if self.seeds[i].topic.is_none() || self.seeds[i].baseline_turn() != turn {
                continue;
            }
            let Some(id) = self.ids[i].clone() else {
                continue;
            };
            self.tracks[i].at_baseline = self.find(&id)?.map(|v| (v.collection, v.score));
        }
        Ok(())
    }

    fn finish(self, prior_weight: f64, graph_boosts: bool) -> Result<SessionRun> {
        let mut memories = Vec::new();
        for (i, s) in self.seeds.iter().enumerate() {
            let (Some(topic), Some(id)) = (s.topic, &self.ids[i]) else {
                continue;
            };
            let now = self.find(id)?;
            let t = &self.tracks[i];
            memories.push(MemoryFate {
                topic: TOPICS[topic].name,
                role: s.role,
                stale: s.stale,
                content: s.content,
                injected: t.injected,
                worked: t.worked,
                failed: t.failed,
                at_baseline: t.at_baseline.clone(),
                search: t.search.clone(),
                notes: t.notes.clone(),
                deleted_at: t.deleted_at,
                final_collection: now
                    .as_ref()
                    .map_or_else(|| "deleted".to_string(), |v| v.collection.clone()),
                final_score: now.as_ref().map(|v| v.score),
            });
        }
        let stats: StatsResponse = self.d.get("/api/stats")?;
        Ok(SessionRun {
            variant: self.mode.label.clone(),
            prior_weight,
            graph_boosts,
            warmup_turns: WARMUP_TURNS,
            turns: self.turns,
            injected_right: self.total.correct,
            injected_wrong: self.total.misleading,
            timeline: self.timeline,
            memories,
            collections: stats
                .collections
                .iter()
                .map(|(k, v)| (k.clone(), v.count))
                .collect(),
            lifecycle: stats.lifecycle,
        })
    }
}
