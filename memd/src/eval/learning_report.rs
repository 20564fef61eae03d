//! What `memd eval learning` measured, and how it is printed.
//!
//! Owns the result types, the per-run tables (timeline every ten turns, the fate of each
//! note) and the prior-weight comparison. Must never run anything: pure data and formatting.

use super::learning::TIMELINE_EVERY;
use super::scenario::{Role, TOPICS};
use std::collections::BTreeMap;
use std::fmt;

/// The failures a misleading note may take before it must be out of the top 5.
pub const EVICTION_BUDGET: u32 = 3;

/// When a note first left the top 5 of its topic's probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    pub turn: usize,
    /// Failures recorded against it by then.
    pub failures: u32,
}

/// A timeline sample (turn 0 is before any turn).
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineRow {
    pub turn: usize,
    /// Per topic: (correct, misleading, exchange records) in the probe's top 5.
    pub per_topic: Vec<(usize, usize, usize)>,
    /// Correct notes in the top 5 ÷ 5, averaged over topics.
    pub precision_at5: f64,
    /// Per turn since the previous row: same-topic correct / misleading notes injected.
    pub injected_correct: f64,
    pub injected_misleading: f64,
}

/// One topic note's history over the session.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryFate {
    pub topic: &'static str,
    pub role: Role,
    pub content: &'static str,
    pub injected: u32,
    pub worked: u32,
    pub failed: u32,
    /// (rank, final_rank_score) in the probe before the first turn and in the last one.
    pub first: Option<(usize, f64)>,
    pub latest: Option<(usize, f64)>,
    pub left_top5: Option<Left>,
    pub returned_to_top5: bool,
    pub deleted_at: Option<usize>,
    /// `working`, `history`, `patterns` or `deleted`.
    pub final_collection: String,
    pub final_score: Option<f64>,
}

impl MemoryFate {
    fn started_in_top5(&self) -> bool {
        self.first.is_some_and(|(r, _)| r <= 5)
    }

    /// Out of the top 5 for good, having taken at most `budget` failures (or never in it).
    pub fn evicted_within(&self, budget: u32) -> bool {
        if !self.started_in_top5() {
            return self.latest.is_none_or(|(r, _)| r > 5);
        }
        self.left_top5.is_some_and(|l| l.failures <= budget) && !self.returned_to_top5
    }

    /// Ranks at least as high at the end as at the start (deleted counts as lower).
    pub fn held_rank(&self) -> bool {
        match (self.first, self.latest) {
            (Some((a, _)), Some((b, _))) => b <= a,
            (None, _) => true,
            (Some(_), None) => false,
        }
    }
}

/// One simulated session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRun {
    pub prior_weight: f64,
    pub turns: usize,
    pub timeline: Vec<TimelineRow>,
    /// Topic notes (filler is not tracked).
    pub memories: Vec<MemoryFate>,
    /// Records per collection at the end (exchange records included).
    pub collections: BTreeMap<String, usize>,
    /// The daemon's lifecycle counters at the end.
    pub lifecycle: BTreeMap<String, u64>,
}

impl SessionRun {
    fn of_role(&self, role: Role) -> impl Iterator<Item = &MemoryFate> {
        self.memories.iter().filter(move |m| m.role == role)
    }

    /// Misleading notes out of the top 5 for good within `EVICTION_BUDGET` failures.
    pub fn misleading_evicted(&self) -> (usize, usize) {
        let all: Vec<_> = self.of_role(Role::Misleading).collect();
        let ok = all
            .iter()
            .filter(|m| m.evicted_within(EVICTION_BUDGET))
            .count();
        (ok, all.len())
    }

    /// The most failures any misleading note took before it left the top 5 (None if one
    /// never left).
    pub fn max_failures_to_leave(&self) -> Option<u32> {
        self.of_role(Role::Misleading)
            .filter(|m| m.started_in_top5())
            .map(|m| m.left_top5.map(|l| l.failures))
            .try_fold(0, |acc, f| f.map(|f| acc.max(f)))
    }

    /// Correct notes that rank at least as high at the end as at the start.
    pub fn correct_held(&self) -> (usize, usize) {
        let all: Vec<_> = self.of_role(Role::Correct).collect();
        (all.iter().filter(|m| m.held_rank()).count(), all.len())
    }

    fn final_row(&self) -> Option<&TimelineRow> {
        self.timeline.last()
    }
}

/// Every session of `memd eval learning`.
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

fn rank_text(r: Option<(usize, f64)>) -> String {
    r.map_or_else(|| "-".to_string(), |(rank, score)| format!("{rank} ({score:.3})"))
}

impl fmt::Display for SessionRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "== prior_weight {:.2}: {} turns ==",
            self.prior_weight, self.turns
        )?;
        write!(f, "turn ")?;
        for t in &TOPICS {
            write!(f, " {:>12}", format!("{} c/m/x", t.name))?;
        }
        writeln!(f, "   P@5  injected correct/turn  misleading/turn")?;
        for row in &self.timeline {
            write!(f, "{:>4} ", row.turn)?;
            for (c, m, x) in &row.per_topic {
                write!(f, " {:>12}", format!("{c}/{m}/{x}"))?;
            }
            writeln!(
                f,
                "  {:.3}  {:>22.2}  {:>15.2}",
                row.precision_at5, row.injected_correct, row.injected_misleading
            )?;
        }
        writeln!(
            f,
            "(c/m/x: correct / misleading notes / exchange records in the top 5 of the topic's \
             first question; rows every {TIMELINE_EVERY} turns)"
        )?;
        writeln!(
            f,
            "topic       role        inj  ok fail  left top5 (turn, fails)  rank start -> end        final"
        )?;
        for m in &self.memories {
            let left = match (m.left_top5, m.returned_to_top5) {
                (Some(l), false) => format!("turn {} after {}", l.turn, l.failures),
                (Some(l), true) => format!("turn {} after {}, back", l.turn, l.failures),
                (None, _) if m.first.is_none_or(|(r, _)| r > 5) => "never in top 5".into(),
                (None, _) => "stayed".into(),
            };
            let fate = match (m.deleted_at, m.final_score) {
                (Some(t), _) => format!("deleted at turn {t}"),
                (None, Some(s)) => format!("{} (score {s:.2})", m.final_collection),
                (None, None) => m.final_collection.clone(),
            };
            writeln!(
                f,
                "{:<11} {:<10} {:>4} {:>3} {:>4}  {:<23}  {:>9} -> {:<11}  {fate}   \"{}\"",
                m.topic,
                m.role.as_str(),
                m.injected,
                m.worked,
                m.failed,
                left,
                rank_text(m.first),
                rank_text(m.latest),
                clip(m.content, 48)
            )?;
        }
        let counters: Vec<String> = self
            .lifecycle
            .iter()
            .filter(|(k, _)| k.starts_with("promoted") || k.starts_with("demoted") || k.starts_with("deleted"))
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
            "user rule: a note of the asked topic worked if correct, failed if misleading; \
             other notes unknown; the exchange failed if a misleading note was injected"
        )?;
        writeln!(f)?;
        for run in &self.runs {
            writeln!(f, "{run}")?;
        }
        writeln!(
            f,
            "prior   misleading out within {EVICTION_BUDGET} fails  max fails to leave  \
             correct rank held  final P@5  final misleading@5"
        )?;
        for run in &self.runs {
            let (ok, n) = run.misleading_evicted();
            let (held, nc) = run.correct_held();
            let max = run
                .max_failures_to_leave()
                .map_or_else(|| "never left".to_string(), |x| x.to_string());
            let (p, mis) = run.final_row().map_or((0.0, 0), |r| {
                (r.precision_at5, r.per_topic.iter().map(|t| t.1).sum())
            });
            writeln!(
                f,
                "{:.2}    {:>27}  {:>18}  {:>17}  {:>9.3}  {:>18}",
                run.prior_weight,
                format!("{ok}/{n}"),
                max,
                format!("{held}/{nc}"),
                p,
                mis
            )?;
        }
        Ok(())
    }
}
