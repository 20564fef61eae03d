//! `memd eval learning`: does outcome learning push misleading memories out and keep correct
//! ones, through the real hook API of a spawned daemon?
//!
//! One simulated session per prior weight: notes are stored with `/api/record-response`, then
//! every turn runs get-context → record-outcome (the previous turn's injected notes, judged by
//! the fixed rule of `scenario`) → stop, as an agent with hooks does. After every scoring the
//! run waits, bounded, until the lifecycle worker has applied whatever the new scores call for
//! (decided with `learn::lifecycle`, the rules the worker itself uses); after every turn it
//! probes each topic with `/api/search`. Must never read the daemon's files or call it other
//! than over HTTP.

use super::daemon::SpawnedDaemon;
use super::learning_report::{Left, LearningReport, MemoryFate, SessionRun, TimelineRow};
use super::scenario::{self, Role, Seed, TOPICS};
use crate::clock;
use crate::core::Core;
use crate::embed::RuntimePaths;
use crate::learn;
use anyhow::{Context, Result, bail};
use proto::{
    Collection, GetContextRequest, GetContextResponse, MemoryView, Outcome, RecordOutcomeRequest,
    RecordOutcomeResponse, RecordResponseRequest, RecordResponseResponse, SearchRequest,
    SearchResponse, StatsResponse, StopRequest, StopResponse,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Turns of the simulated session.
pub const DEFAULT_TURNS: usize = 60;
/// Prior weights compared by default.
pub const DEFAULT_PRIOR_WEIGHTS: [f64; 5] = [0.0, 0.1, 0.15, 0.25, 0.4];
/// A timeline row is printed every this many turns.
pub const TIMELINE_EVERY: usize = 10;

const CONVERSATION: &str = "eval-learning-session";
/// How deep each probe search looks (ranks beyond it count as "not found").
const PROBE_DEPTH: usize = 20;
/// Top-k that decides "in the top 5".
const TOP: usize = 5;
/// Longer than the lifecycle worker's 30 s timer, which covers a wake-up it missed.
const SETTLE_LIMIT: Duration = Duration::from_secs(45);
const EMBED_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct LearningOptions {
    pub turns: usize,
    pub prior_weights: Vec<f64>,
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

/// One simulated session per prior weight, each against a fresh daemon.
pub fn run_learning(options: &LearningOptions) -> Result<LearningReport> {
    let runs = options
        .prior_weights
        .iter()
        .map(|&w| run_session(options, w))
        .collect::<Result<Vec<_>>>()?;
    Ok(LearningReport { runs })
}

fn run_session(options: &LearningOptions, prior_weight: f64) -> Result<SessionRun> {
    let started = std::time::Instant::now();
    let config = format!("[learning]\nprior_weight = {prior_weight}\n");
    let daemon = SpawnedDaemon::start(&options.memd, &options.runtime, &config)?;
    let mut sim = Simulation::seed(&daemon, options.turns)?;
    sim.probe(0)?;
    for turn in 1..=options.turns {
        sim.turn(turn)
            .with_context(|| format!("prior {prior_weight}, turn {turn}"))?;
        sim.probe(turn)?;
    }
    let run = sim.finish(prior_weight)?;
    daemon.stop()?;
    eprintln!(
        "memd eval: learning session with prior_weight {prior_weight} took {:.1} s",
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
    /// (rank, final_rank_score) in the first and the latest probe.
    first: Option<(usize, f64)>,
    latest: Option<(usize, f64)>,
    was_in_top: bool,
    left: Option<Left>,
    returned: bool,
    deleted_at: Option<usize>,
}

/// The previous turn, whose injected notes the next prompt scores.
struct Previous {
    topic: usize,
    injected: Vec<(String, Option<usize>)>,
    doc_id: String,
}

struct Simulation<'a> {
    d: &'a SpawnedDaemon,
    seeds: Vec<Seed>,
    ids: Vec<String>,
    tracks: Vec<Track>,
    previous: Option<Previous>,
    timeline: Vec<TimelineRow>,
    /// Turns the session will run (the last one always gets a timeline row).
    turns: usize,
    /// Same-topic (correct, misleading) notes injected since the last timeline row, and turns.
    window: (u32, u32, u32),
}

impl<'a> Simulation<'a> {
    fn seed(d: &'a SpawnedDaemon, turns: usize) -> Result<Self> {
        let seeds = scenario::seeds();
        let mut ids = Vec::with_capacity(seeds.len());
        for s in &seeds {
            let r: RecordResponseResponse = d.post(
                "/api/record-response",
                &RecordResponseRequest {
                    key_takeaway: s.content.to_string(),
                    initial_score: s.initial.map(str::to_string),
                    conversation_id: None,
                },
            )?;
            ids.push(r.doc_id);
        }
        d.wait_embedded(EMBED_LIMIT)?;
        Ok(Simulation {
            d,
            tracks: vec![Track::default(); seeds.len()],
            seeds,
            ids,
            previous: None,
            timeline: Vec::new(),
            turns,
            window: (0, 0, 0),
        })
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
                client: None,
                session_start: false,
            },
        )?;
        if ctx.scoring_required {
            self.score_previous(&ctx, turn)?;
        }
        let injected: Vec<(String, Option<usize>)> = ctx
            .relevant_memories
            .iter()
            .map(|m| (m.id.clone(), self.seed_of(&m.content)))
            .collect();
        self.window.2 += 1;
        for (_, seed) in &injected {
            let Some(i) = *seed else { continue };
            self.tracks[i].injected += 1;
            match (self.seeds[i].topic == Some(topic), self.seeds[i].role) {
                (true, Role::Correct) => self.window.0 += 1,
                (true, Role::Misleading) => self.window.1 += 1,
                _ => {}
            }
        }
        let stop: StopResponse = self.d.post(
            "/api/hooks/stop",
            &StopRequest {
                conversation_id: CONVERSATION.into(),
                user_message: query.to_string(),
                assistant_response: format!(
                    "Answered the {} question from the project notes.",
                    TOPICS[topic].name
                ),
                client: None,
            },
        )?;
        self.previous = Some(Previous {
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
                let o = scenario::judge(seed.map(|i| &self.seeds[i]), prev.topic);
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
        for (_, seed, o) in &judged {
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
        let gone = self
            .d
            .wait_for(&format!("the lifecycle pass for {id}"), SETTLE_LIMIT, || {
                Ok(match self.find(id)? {
                    None => Some(true),
                    Some(v) => (!transition_due(&v)).then_some(false),
                })
            })?;
        if gone
            && let Some(i) = seed
            && self.tracks[i].deleted_at.is_none()
        {
            self.tracks[i].deleted_at = Some(turn);
        }
        Ok(())
    }

    /// Searches each topic's first question and updates ranks, top-5 membership, timeline.
    fn probe(&mut self, turn: usize) -> Result<()> {
        let mut per_topic = Vec::with_capacity(TOPICS.len());
        for (t, topic) in TOPICS.iter().enumerate() {
            let r: SearchResponse = self.d.post(
                "/api/search",
                &SearchRequest {
                    query: Some(topic.queries[0].to_string()),
                    limit: Some(PROBE_DEPTH as i64),
                    ..SearchRequest::default()
                },
            )?;
            let ranked: Vec<(Option<usize>, &MemoryView)> = r
                .results
                .iter()
                .map(|m| (self.seed_of(&m.content), m))
                .collect();
            per_topic.push(top_counts(&self.seeds, t, &ranked));
            for i in (0..self.seeds.len()).filter(|&i| self.seeds[i].topic == Some(t)) {
                let rank = ranked
                    .iter()
                    .position(|(s, _)| *s == Some(i))
                    .map(|p| (p + 1, ranked[p].1.final_rank_score.unwrap_or(0.0)));
                self.tracks[i].update_rank(rank, turn);
            }
        }
        if turn == 0 || turn.is_multiple_of(TIMELINE_EVERY) || turn == self.turns {
            let (c, m, n) = std::mem::take(&mut self.window);
            let per_turn = |x: u32| if n == 0 { 0.0 } else { f64::from(x) / f64::from(n) };
            self.timeline.push(TimelineRow {
                turn,
                precision_at5: per_topic.iter().map(|p| p.0 as f64 / TOP as f64).sum::<f64>()
                    / per_topic.len() as f64,
                per_topic,
                injected_correct: per_turn(c),
                injected_misleading: per_turn(m),
            });
        }
        Ok(())
    }

    fn finish(self, prior_weight: f64) -> Result<SessionRun> {
        let mut memories = Vec::new();
        for (i, s) in self.seeds.iter().enumerate() {
            let Some(topic) = s.topic else { continue };
            let now = self.find(&self.ids[i])?;
            let t = &self.tracks[i];
            memories.push(MemoryFate {
                topic: TOPICS[topic].name,
                role: s.role,
                content: s.content,
                injected: t.injected,
                worked: t.worked,
                failed: t.failed,
                first: t.first,
                latest: t.latest,
                left_top5: t.left,
                returned_to_top5: t.returned,
                deleted_at: t.deleted_at,
                final_collection: now
                    .as_ref()
                    .map_or_else(|| "deleted".to_string(), |v| v.collection.clone()),
                final_score: now.as_ref().map(|v| v.score),
            });
        }
        let stats: StatsResponse = self.d.get("/api/stats")?;
        Ok(SessionRun {
            prior_weight,
            turns: self.turns,
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

impl Track {
    fn update_rank(&mut self, rank: Option<(usize, f64)>, turn: usize) {
        if turn == 0 {
            self.first = rank;
        }
        self.latest = rank;
        let in_top = rank.is_some_and(|(r, _)| r <= TOP);
        if in_top {
            self.was_in_top = true;
            if self.left.is_some() {
                self.returned = true;
            }
        } else if self.was_in_top && self.left.is_none() {
            self.left = Some(Left {
                turn,
                failures: self.failed,
            });
        }
    }
}

/// (correct, misleading, exchange records) of topic `t` among the top 5 of a probe.
fn top_counts(
    seeds: &[Seed],
    t: usize,
    ranked: &[(Option<usize>, &MemoryView)],
) -> (usize, usize, usize) {
    let mut counts = (0, 0, 0);
    for (seed, m) in ranked.iter().take(TOP) {
        match seed.map(|i| &seeds[i]) {
            Some(s) if s.topic == Some(t) && s.role == Role::Correct => counts.0 += 1,
            Some(s) if s.topic == Some(t) && s.role == Role::Misleading => counts.1 += 1,
            None if m.metadata.get("memory_type") == Some(&proto::Value::from("exchange")) => {
                counts.2 += 1
            }
            _ => {}
        }
    }
    counts
}

/// Would the lifecycle worker move or delete this memory now? (The worker's own rules.)
fn transition_due(v: &MemoryView) -> bool {
    let Some(collection) = Collection::parse(&v.collection) else {
        return false;
    };
    let created = clock::parse_rfc3339(&v.created_at).unwrap_or(0);
    let mut rec = Core::new_record(collection, v.content.clone(), created);
    rec.score = v.score;
    rec.uses = v.uses;
    rec.success_count = v.success_count;
    learn::lifecycle::next_transition(&rec, clock::now_ms()).is_some()
}
