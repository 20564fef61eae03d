//! The relevance-floor study: what a cosine floor costs on relevant queries and what it saves
//! on off-topic ones.
//!
//! Owns the off-topic probe set and the arithmetic. Injection is emulated exactly as
//! get-context does it (rank, keep hits whose similarity reaches the floor, take the first
//! five), so a relevant turn deeper in the list can still be injected when better-ranked ones
//! fall below the floor. Must never change the ranking it is given.

use memd_engine::search::Hit;
use std::fmt;

/// Floors compared (cosine similarity of the query and memory embeddings).
pub const FLOORS: [f32; 6] = [0.20, 0.25, 0.30, 0.35, 0.40, 0.45];

/// How many memories get-context injects at most (config `context.max_memories`).
pub const INJECT_MAX: usize = 5;

/// Coding questions with nothing to do with the conversations: nothing should be injected.
pub const OFF_TOPIC_QUERIES: [&str; 50] = [
    "How do I fix a borrow checker error when returning a reference from a function in Rust?",
    "What is the difference between git rebase and git merge?",
    "Why does my Python asyncio event loop say it is already running?",
    "How can I speed up a slow PostgreSQL query with a sequential scan?",
    "What does the TypeScript error 'Object is possibly undefined' mean?",
    "How do I configure a GitHub Actions workflow to cache cargo builds?",
    "Explain the difference between a mutex and a read-write lock.",
    "How do I write a Dockerfile with a multi-stage build for a Go service?",
    "Why is my React component re-rendering on every keystroke?",
    "How do I set up a Kubernetes liveness probe for an HTTP server?",
    "What is the time complexity of inserting into a binary heap?",
    "How do I undo the last commit in git without losing the changes?",
    "Why does cargo clippy warn about needless_range_loop?",
    "How do I parse JSON with serde when a field can be a string or a number?",
    "What is the best way to paginate results from a REST API?",
    "How do I profile CPU usage of a Node.js process?",
    "Why do I get a segmentation fault when calling a C library from Rust via FFI?",
    "How should I structure error types in a Rust library crate?",
    "What is a race condition and how can I detect one in Go?",
    "How do I enable HTTP/2 in an nginx reverse proxy?",
    "How do I mock a database connection in pytest?",
    "What does the Linux OOM killer do and how do I avoid it?",
    "How do I write a SQL migration that renames a column without downtime?",
    "What is the difference between TCP and UDP for a game server?",
    "How can I reduce the size of a release binary built with cargo?",
    "Why does my webpack build take several minutes?",
    "How do I implement exponential backoff with jitter for retries?",
    "What is the purpose of a write-ahead log in a database?",
    "How do I configure ESLint and Prettier so they do not conflict?",
    "What are the trade-offs between gRPC and REST for internal services?",
    "How do I debug a deadlock in a multithreaded C++ program?",
    "How do I set environment variables for a systemd service?",
    "Why does my Java application spend so much time in garbage collection?",
    "How do I write a property-based test with proptest?",
    "How do I stream a large file over HTTP without loading it into memory?",
    "What does 'cannot move out of borrowed content' mean in Rust?",
    "How can I make a bash script exit on the first failing command?",
    "How do I add an index to a large MySQL table without locking it?",
    "What is the difference between a process and a thread?",
    "How do I sign commits with an SSH key in git?",
    "How do I handle CORS errors when calling my API from the browser?",
    "What is tail call optimization and does Rust do it?",
    "How do I benchmark a function with criterion?",
    "Why is floating point addition not associative?",
    "How do I rotate logs for a long-running daemon?",
    "How do I use a Python virtual environment with VS Code?",
    "What is the difference between an inner join and a left join?",
    "How do I measure p99 latency of an HTTP endpoint under load?",
    "How do I resolve a merge conflict in a lock file like Cargo.lock?",
    "What causes a 'too many open files' error on Linux and how do I raise the limit?",
];

/// The probe sets of the LoCoMo study.
pub const LOCOMO_PROBES: ProbeNames = ProbeNames {
    memories: "LoCoMo conversations",
    relevant: "LoCoMo",
    off_topic: "coding",
    hard: "other-conversation",
};

/// The probe sets of the study on the learning scenario's project notes.
pub const NOTES_PROBES: ProbeNames = ProbeNames {
    memories: "project notes",
    relevant: "project",
    off_topic: "chit-chat",
    hard: "other-coding",
};

/// One ranked list as the floor sees it: each hit's cosine similarity and, for LoCoMo
/// questions, whether it is an evidence turn.
pub(crate) type Ranked = Vec<(f32, bool)>;

/// Converts hits to `(similarity, relevant)`; a hit without a vector counts as below any floor.
pub(crate) fn ranked(hits: &[Hit], relevant: impl Fn(&Hit) -> bool) -> Ranked {
    hits.iter()
        .map(|h| (h.similarity.unwrap_or(f32::NEG_INFINITY), relevant(h)))
        .collect()
}

/// What get-context would inject at `floor`: the first `INJECT_MAX` hits that reach it.
fn injected(list: &Ranked, floor: f32) -> impl Iterator<Item = &(f32, bool)> {
    list.iter()
        .filter(move |(s, _)| *s >= floor)
        .take(INJECT_MAX)
}

/// Ranked lists collected over every conversation.
#[derive(Debug, Default)]
pub(crate) struct FloorSamples {
    pub locomo: Vec<Ranked>,
    pub off_topic: Vec<Ranked>,
    /// Questions of another conversation (about other people): hard negatives.
    pub foreign: Vec<Ranked>,
}

/// One floor's figures (fractions in [0, 1]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloorRow {
    pub floor: f32,
    /// Relevant top-1 hits whose similarity is below the floor (they would not be injected).
    pub relevant_top1_lost: f64,
    /// Questions with an evidence turn in the unfloored top 5 and none in the injection.
    pub evidence_lost: f64,
    /// Relevant queries for which nothing at all would be injected.
    pub locomo_nothing: f64,
    /// Off-topic (query, conversation) pairs that would inject at least one memory.
    pub off_topic_injecting: f64,
    /// Mean memories injected per off-topic query.
    pub off_topic_mean_injected: f64,
    /// Foreign-conversation questions that would inject at least one memory.
    pub foreign_injecting: Option<f64>,
}

/// What the three probe sets are called in a printed study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeNames {
    /// The memories the study runs on.
    pub memories: &'static str,
    /// Queries with evidence among those memories.
    pub relevant: &'static str,
    /// Queries from another domain (nothing should be injected).
    pub off_topic: &'static str,
    /// Queries close to the domain but about something else (hard negatives).
    pub hard: &'static str,
}

/// The study's result.
#[derive(Debug, Clone, PartialEq)]
pub struct FloorStudy {
    pub names: ProbeNames,
    pub questions: usize,
    pub relevant_top1: usize,
    pub off_topic_probes: usize,
    pub foreign_probes: usize,
    pub rows: Vec<FloorRow>,
    /// (p10, p25, p50) of the similarity of relevant top-1 hits.
    pub relevant_top1_sim: (f32, f32, f32),
    /// (p50, p90, max) of the best similarity an off-topic query finds.
    pub off_topic_best_sim: (f32, f32, f32),
    /// (p50, p90, max) of the best similarity a foreign question finds.
    pub foreign_best_sim: Option<(f32, f32, f32)>,
}

fn share(count: usize, of: usize) -> f64 {
    if of == 0 {
        0.0
    } else {
        count as f64 / of as f64
    }
}

/// Nearest-rank percentile of an ascending-sorted slice (`p` in [0, 1]).
fn percentile(sorted: &[f32], p: f64) -> f32 {
    if sorted.is_empty() {
        return f32::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn best_sims(lists: &[Ranked]) -> Vec<f32> {
    let mut best: Vec<f32> = lists
        .iter()
        .map(|l| l.iter().map(|(s, _)| *s).fold(f32::NEG_INFINITY, f32::max))
        .collect();
    best.sort_by(f32::total_cmp);
    best
}

impl FloorSamples {
    pub(crate) fn study(&self, names: ProbeNames) -> FloorStudy {
        let mut top1: Vec<f32> = self
            .locomo
            .iter()
            .filter_map(|l| l.first().filter(|(_, rel)| *rel).map(|(s, _)| *s))
            .collect();
        top1.sort_by(f32::total_cmp);
        let with_evidence: Vec<&Ranked> = self
            .locomo
            .iter()
            .filter(|l| l.iter().take(INJECT_MAX).any(|(_, rel)| *rel))
            .collect();
        let rows = FLOORS
            .iter()
            .map(|&floor| FloorRow {
                floor,
                relevant_top1_lost: share(top1.iter().filter(|s| **s < floor).count(), top1.len()),
                evidence_lost: share(
                    with_evidence
                        .iter()
                        .filter(|l| !injected(l, floor).any(|(_, rel)| *rel))
                        .count(),
                    with_evidence.len(),
                ),
                locomo_nothing: share(
                    self.locomo
                        .iter()
                        .filter(|l| injected(l, floor).next().is_none())
                        .count(),
                    self.locomo.len(),
                ),
                off_topic_injecting: share(
                    self.off_topic
                        .iter()
                        .filter(|l| injected(l, floor).next().is_some())
                        .count(),
                    self.off_topic.len(),
                ),
                off_topic_mean_injected: if self.off_topic.is_empty() {
                    0.0
                } else {
                    self.off_topic
                        .iter()
                        .map(|l| injected(l, floor).count())
                        .sum::<usize>() as f64
                        / self.off_topic.len() as f64
                },
                foreign_injecting: (!self.foreign.is_empty()).then(|| {
                    share(
                        self.foreign
                            .iter()
                            .filter(|l| injected(l, floor).next().is_some())
                            .count(),
                        self.foreign.len(),
                    )
                }),
            })
            .collect();
        let off = best_sims(&self.off_topic);
        let foreign = best_sims(&self.foreign);
        FloorStudy {
            names,
            questions: self.locomo.len(),
            relevant_top1: top1.len(),
            off_topic_probes: self.off_topic.len(),
            foreign_probes: self.foreign.len(),
            rows,
            relevant_top1_sim: (
                percentile(&top1, 0.10),
                percentile(&top1, 0.25),
                percentile(&top1, 0.50),
            ),
            off_topic_best_sim: (
                percentile(&off, 0.50),
                percentile(&off, 0.90),
                percentile(&off, 1.0),
            ),
            foreign_best_sim: (!foreign.is_empty()).then(|| {
                (
                    percentile(&foreign, 0.50),
                    percentile(&foreign, 0.90),
                    percentile(&foreign, 1.0),
                )
            }),
        }
    }
}

impl fmt::Display for FloorStudy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = &self.names;
        writeln!(
            f,
            "relevance floor on {} (get-context emulated: floor on cosine, then top {INJECT_MAX}): \
             {} {} queries ({} with a relevant top-1), {} {} probes, {} {} probes",
            n.memories,
            self.questions,
            n.relevant,
            self.relevant_top1,
            self.off_topic_probes,
            n.off_topic,
            self.foreign_probes,
            n.hard
        )?;
        writeln!(
            f,
            "floor  relevant-top1-lost  evidence-lost  nothing-injected  {:>19}  {:>19}  {:>19}",
            format!("{}-injecting", n.off_topic),
            format!("{}-mean-injected", n.off_topic),
            format!("{}-injecting", n.hard)
        )?;
        for r in &self.rows {
            let hard = r
                .foreign_injecting
                .map_or_else(|| "n/a".to_string(), |x| format!("{x:.3}"));
            writeln!(
                f,
                "{:.2}   {:>18.3}  {:>13.3}  {:>16.3}  {:>19.3}  {:>19.2}  {:>19}",
                r.floor,
                r.relevant_top1_lost,
                r.evidence_lost,
                r.locomo_nothing,
                r.off_topic_injecting,
                r.off_topic_mean_injected,
                hard
            )?;
        }
        let (p10, p25, p50) = self.relevant_top1_sim;
        writeln!(
            f,
            "similarity of relevant top-1 hits: p10 {p10:.3}  p25 {p25:.3}  p50 {p50:.3}"
        )?;
        let (m, p90, max) = self.off_topic_best_sim;
        writeln!(
            f,
            "best similarity of {} probes: p50 {m:.3}  p90 {p90:.3}  max {max:.3}",
            n.off_topic
        )?;
        if let Some((m, p90, max)) = self.foreign_best_sim {
            writeln!(
                f,
                "best similarity of {} probes: p50 {m:.3}  p90 {p90:.3}  max {max:.3}",
                n.hard
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_can_drop_the_relevant_top_hit_but_keep_a_deeper_one() {
        let samples = FloorSamples {
            // top-1 relevant at 0.32; another relevant at rank 3 with 0.41
            locomo: vec![vec![(0.32, true), (0.50, false), (0.41, true)]],
            off_topic: vec![vec![(0.28, false), (0.22, false)], vec![(0.10, false)]],
            foreign: vec![],
        };
        let s = samples.study(LOCOMO_PROBES);
        let row = |x: f32| *s.rows.iter().find(|r| (r.floor - x).abs() < 1e-6).unwrap();
        assert_eq!(row(0.30).relevant_top1_lost, 0.0);
        assert_eq!(row(0.35).relevant_top1_lost, 1.0);
        assert_eq!(row(0.35).evidence_lost, 0.0, "0.41 still injected");
        assert_eq!(row(0.45).evidence_lost, 1.0);
        assert_eq!(row(0.25).off_topic_injecting, 0.5);
        assert_eq!(row(0.20).off_topic_mean_injected, 1.0);
        assert_eq!(row(0.30).off_topic_injecting, 0.0);
        assert_eq!(row(0.20).foreign_injecting, None);
        assert_eq!(s.off_topic_best_sim.2, 0.28);
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let v = [0.1, 0.2, 0.3, 0.4];
        assert_eq!(percentile(&v, 0.5), 0.2);
        assert_eq!(percentile(&v, 0.9), 0.4);
        assert_eq!(percentile(&v, 0.0), 0.1);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
