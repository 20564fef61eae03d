//! What `memd-eval learning` measured, and how it is printed.
//!
//! Owns the result types, the per-run tables (timeline every ten turns, the fate of each
//! note) and the prior-weight comparison. Must never run anything: pure data and formatting.

use super::scenario::{Role, TOPICS};
use std::collections::BTreeMap;
use std::fmt;

/// A timeline row is printed every this many turns.
pub const TIMELINE_EVERY: usize = 10;
/// Top-k that decides "in the top 5".
pub const TOP: usize = 5;

/// The failures a misleading note may take before it must be out of the top 5.
pub const EVICTION_BUDGET: u32 = 3;

/// When a note first left the top 5 of its topic's probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    pub turn: usize,
    /// Failures recorded against it by then.
    pub failures: u32,
}

/// A note's place in one kind of probe over the session.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Placement {
    /// (rank, final_rank_score) at the baseline probe and at the latest one.
    pub first: Option<(usize, f64)>,
    pub latest: Option<(usize, f64)>,
    was_in_top: bool,
    pub left: Option<Left>,
    /// Back in the top 5 after it had left.
    pub returned: bool,
}

impl Placement {
    pub(crate) fn update(
        &mut self,
        rank: Option<(usize, f64)>,
        turn: usize,
        baseline: usize,
        failures: u32,
    ) {
        if turn == baseline {
            self.first = rank;
        }
        self.latest = rank;
        if rank.is_some_and(|(r, _)| r <= TOP) {
            self.was_in_top = true;
            self.returned |= self.left.is_some();
        } else if self.was_in_top && self.left.is_none() {
            self.left = Some(Left { turn, failures });
        }
    }

    pub fn started_in_top5(&self) -> bool {
        self.first.is_some_and(|(r, _)| r <= TOP)
    }

    /// Out of the top 5 for good, having taken at most `budget` failures (or never in it).
    pub fn evicted_within(&self, budget: u32) -> bool {
        if !self.was_in_top {
            return true;
        }
        self.left.is_some_and(|l| l.failures <= budget) && !self.returned
    }

    /// Ranks at least as high at the end as at the baseline (gone counts as lower).
    pub fn held_rank(&self) -> bool {
        match (self.first, self.latest) {
            (Some((a, _)), Some((b, _))) => b <= a,
            (None, _) => true,
            (Some(_), None) => false,
        }
    }

    fn describe_left(&self) -> String {
        match (self.left, self.returned) {
            (Some(l), false) => format!("t{} after {}", l.turn, l.failures),
            (Some(l), true) => format!("t{} after {}, back", l.turn, l.failures),
            (None, _) if !self.was_in_top => "never in".into(),
            (None, _) => "stayed".into(),
        }
    }
}

/// A timeline sample (turn 0 is before any turn).
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineRow {
    pub turn: usize,
    /// Per topic: (correct, misleading, exchange records) in the top 5 of `/api/search`.
    pub per_topic: Vec<(usize, usize, usize)>,
    /// Correct notes in the top 5 ÷ 5, over all topics: `/api/search`, and notes only.
    pub precision_at5: f64,
    pub notes_precision_at5: f64,
    /// Per turn since the previous row: same-topic correct / misleading notes injected.
    pub injected_correct: f64,
    pub injected_misleading: f64,
}

/// One topic note's history over the session.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryFate {
    pub topic: &'static str,
    /// The role after the facts changed (stale notes are `Misleading`).
    pub role: Role,
    pub stale: bool,
    pub content: &'static str,
    pub injected: u32,
    pub worked: u32,
    pub failed: u32,
    /// (collection, score) at the baseline probe.
    pub at_baseline: Option<(String, f64)>,
    /// In everything `/api/search` returns (exchange records included).
    pub search: Placement,
    /// Among the notes only.
    pub notes: Placement,
    pub deleted_at: Option<usize>,
    /// `working`, `history`, `patterns` or `deleted`.
    pub final_collection: String,
    pub final_score: Option<f64>,
}

/// One simulated session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRun {
    /// Which `memd-eval evidence` setting ran ("" for `memd-eval learning`).
    pub variant: String,
    pub prior_weight: f64,
    /// Whether the daemon ranked with the routing boosts (`learning.graph_boosts`).
    pub graph_boosts: bool,
    pub warmup_turns: usize,
    /// The last turn (warm-up included).
    pub turns: usize,
    /// Notes of the asked topic injected over the session while right / while wrong.
    pub injected_right: u32,
    pub injected_wrong: u32,
    pub timeline: Vec<TimelineRow>,
    /// Topic notes (filler is not tracked).
    pub memories: Vec<MemoryFate>,
    /// Records per collection at the end (exchange records included).
    pub collections: BTreeMap<String, usize>,
    /// The daemon's lifecycle counters at the end.
    pub lifecycle: BTreeMap<String, u64>,
}

impl SessionRun {
    /// Misleading notes wrong from the start (`stale == false`) or stale ones.
    pub fn misleading(&self, stale: bool) -> impl Iterator<Item = &MemoryFate> {
        self.memories
            .iter()
            .filter(move |m| m.role == Role::Misleading && m.stale == stale)
    }

    pub fn correct(&self) -> impl Iterator<Item = &MemoryFate> {
        self.memories.iter().filter(|m| m.role == Role::Correct)
    }

    fn final_row(&self) -> Option<&TimelineRow> {
        self.timeline.last()
    }
}

/// Every session of `memd-eval learning`.
#[derive(Debug, Clone, PartialEq)]
pub struct LearningReport {
    pub runs: Vec<SessionRun>,
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let cut: String = s.chars().take(n.saturating_sub(1)).collect();
    format!("{cut}…")
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

fn rank_text(r: Option<(usize, f64)>) -> String {
    r.map_or_else(
        || "-".to_string(),
        |(rank, score)| format!("{rank} ({score:.2})"),
    )
}

/// `ok/n` of notes whose placement passes `test`.
fn count<'a>(
    notes: impl Iterator<Item = &'a MemoryFate>,
    test: impl Fn(&MemoryFate) -> bool,
) -> String {
    let (mut ok, mut n) = (0, 0);
    for m in notes {
        n += 1;
        ok += usize::from(test(m));
    }
    format!("{ok}/{n}")
}

/// Failures each note had taken when it left the top 5 ("-" if it never left, "0*" if it
/// was never in it), in note order.
fn fails_to_leave<'a>(
    notes: impl Iterator<Item = &'a MemoryFate>,
    placement: impl Fn(&MemoryFate) -> &Placement,
) -> String {
    notes
        .map(|m| {
            let p = placement(m);
            match p.left {
                Some(l) if !p.returned => l.failures.to_string(),
                Some(l) => format!("{}b", l.failures),
                None if !p.started_in_top5() && p.latest.is_none_or(|(r, _)| r > TOP) => {
                    "out".to_string()
                }
                None => "-".to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl SessionRun {
    fn fmt_timeline(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "turn ")?;
        for t in &TOPICS {
            write!(f, " {:>14}", format!("{} c/m/x", t.name))?;
        }
        writeln!(
            f,
            "   P@5  notes-P@5  inj-correct/turn  inj-misleading/turn"
        )?;
        for row in &self.timeline {
            write!(f, "{:>4} ", row.turn)?;
            for (c, m, x) in &row.per_topic {
                write!(f, " {:>14}", format!("{c}/{m}/{x}"))?;
            }
            writeln!(
                f,
                "  {:.3}  {:>9.3}  {:>16.2}  {:>19.2}",
                row.precision_at5,
                row.notes_precision_at5,
                row.injected_correct,
                row.injected_misleading
            )?;
        }
        writeln!(
            f,
            "(c/m/x: correct / misleading notes / exchange records in the top {TOP} of /api/search \
             for the topic's first question; every {TIMELINE_EVERY} turns; notes-P@5 ranks notes only)"
        )
    }

    fn fmt_memories(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "topic       role        inj  ok fail  baseline          left top5: search     notes              notes rank start -> end    final"
        )?;
        for m in &self.memories {
            let role = if m.stale { "stale" } else { m.role.as_str() };
            let baseline = m
                .at_baseline
                .as_ref()
                .map_or_else(|| "-".to_string(), |(c, s)| format!("{c} {s:.2}"));
            let fate = match (m.deleted_at, m.final_score) {
                (Some(t), _) => format!("deleted at t{t}"),
                (None, Some(s)) => format!("{} {s:.2}", m.final_collection),
                (None, None) => m.final_collection.clone(),
            };
            writeln!(
                f,
                "{:<11} {:<10} {:>4} {:>3} {:>4}  {:<16}  {:<18}  {:<17}  {:>10} -> {:<10}  {:<16} \"{}\"",
                m.topic,
                role,
                m.injected,
                m.worked,
                m.failed,
                baseline,
                m.search.describe_left(),
                m.notes.describe_left(),
                rank_text(m.notes.first),
                rank_text(m.notes.latest),
                fate,
                clip(m.content, 44)
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for SessionRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "== {}prior_weight {:.2}, graph boosts {}: {} warm-up turns on ci, then {} turns over \
             all topics ==",
            if self.variant.is_empty() {
                String::new()
            } else {
                format!("{}: ", self.variant)
            },
            self.prior_weight,
            on_off(self.graph_boosts),
            self.warmup_turns,
            self.turns - self.warmup_turns
        )?;
        self.fmt_timeline(f)?;
        self.fmt_memories(f)?;
        let counters: Vec<String> = self
            .lifecycle
            .iter()
            .filter(|(k, _)| {
                k.starts_with("promoted") || k.starts_with("demoted") || k.starts_with("deleted")
            })
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let collections: Vec<String> = self
            .collections
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(f, "lifecycle: {}", counters.join(", "))?;
        writeln!(f, "collections at the end: {}", collections.join(", "))
    }
}

impl fmt::Display for LearningReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "outcome learning: a simulated session through the hook API (get-context, \
             record-outcome, stop) of a spawned daemon"
        )?;
        writeln!(
            f,
            "user rule: a note of the asked topic worked if right, failed if wrong; other notes \
             unknown; the exchange failed if a wrong note was injected. The ci notes are right \
             during the warm-up and stale after it (replacements stored then)."
        )?;
        writeln!(f)?;
        for run in &self.runs {
            writeln!(f, "{run}")?;
        }
        writeln!(
            f,
            "prior  graph  wrong-from-start out within {EVICTION_BUDGET} fails: search  notes  \
             fails-to-leave(notes)  stale fails-to-leave: search  notes  correct rank held(notes)  \
             final P@5  notes-P@5  injected right  wrong  variant"
        )?;
        for run in &self.runs {
            let (p, np) = run
                .final_row()
                .map_or((0.0, 0.0), |r| (r.precision_at5, r.notes_precision_at5));
            writeln!(
                f,
                "{:.2}   {:<5}  {:>38}  {:>5}  {:>21}  {:>28}  {:>5}  {:>24}  {:>9.3}  {:>9.3}  {:>14}  {:>5}  {}",
                run.prior_weight,
                on_off(run.graph_boosts),
                count(run.misleading(false), |m| m
                    .search
                    .evicted_within(EVICTION_BUDGET)),
                count(run.misleading(false), |m| m
                    .notes
                    .evicted_within(EVICTION_BUDGET)),
                fails_to_leave(run.misleading(false), |m| &m.notes),
                fails_to_leave(run.misleading(true), |m| &m.search),
                fails_to_leave(run.misleading(true), |m| &m.notes),
                count(run.correct(), |m| m.notes.held_rank()),
                p,
                np,
                run.injected_right,
                run.injected_wrong,
                run.variant
            )?;
        }
        writeln!(
            f,
            "(fails-to-leave: failures taken when the note first left the top {TOP}; b = came back \
             later; - = never left; out = never in it)"
        )
    }
}
