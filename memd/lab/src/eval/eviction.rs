//! The eviction study: how many failures push a memory out of the top 5, per prior weight,
//! on real ranked lists.
//!
//! For each LoCoMo question's fused list (nothing scored), each memory in the top 5 in turn
//! takes `k` failures while everything else stays unscored; it is evicted when five others
//! now outrank it. The failing memory's state comes from `learn::scoring::apply_outcome` on a
//! record in one of three starting states, its new rank score from `outcome_prior` and
//! `apply_prior`: the daemon's own arithmetic. Deletion is left out on purpose: it decides
//! nothing for a proven memory after three failures (1.0 → 0.1 stays above the threshold),
//! and that is the case the prior exists for. Must never change a store.

use memd_engine::core::Core;
use memd_engine::learn::scoring::{apply_outcome, apply_prior, outcome_prior};
use memd_engine::record::{OutcomeEntry, Record};
use proto::{Collection, Outcome};
use std::fmt;

/// Prior weights compared.
pub const WEIGHTS: [f64; 11] = [0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0];
/// Failures applied (1, 2, 3).
pub const MAX_FAILURES: u32 = 3;
const TOP: usize = 5;

/// Where a memory stands before it starts failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Stored without an outcome (score 0.5), never used.
    New,
    /// Stored as `worked` (0.7) by an agent that believed it.
    Believed,
    /// Promoted to patterns at 1.0 after seven `worked` (counters reset by the promotion):
    /// a memory that served well until the facts changed.
    Proven,
}

impl Start {
    pub const ALL: [Start; 3] = [Start::New, Start::Believed, Start::Proven];

    pub fn label(self) -> &'static str {
        match self {
            Start::New => "new (working 0.5)",
            Start::Believed => "believed (working 0.7)",
            Start::Proven => "proven (patterns 1.0)",
        }
    }

    fn record(self) -> Record {
        let (collection, score) = match self {
            Start::New => (Collection::Working, 0.5),
            Start::Believed => (Collection::Working, 0.7),
            Start::Proven => (Collection::Patterns, 1.0),
        };
        let mut rec = Core::new_record(collection, String::new(), 0);
        rec.score = score;
        if self == Start::Proven {
            rec.outcome_history = (0..7)
                .map(|i| OutcomeEntry {
                    outcome: Outcome::Worked,
                    at: i,
                })
                .collect();
            rec.last_outcome = Some(Outcome::Worked);
        }
        rec
    }

    /// The outcome prior after `failures` failures from this start.
    pub fn prior_after(self, failures: u32) -> f64 {
        let mut rec = self.record();
        for i in 0..failures {
            // Scored collections only; every start above is one.
            let _ = apply_outcome(&mut rec, Outcome::Failed, 100 + i64::from(i), false);
        }
        outcome_prior(&rec)
    }
}

/// Share of memories that leave the top 5 after `failures`, for one start and weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvictionCell {
    pub weight: f64,
    /// Among memories ranked first.
    pub from_rank1: f64,
    /// Among every memory in the top 5.
    pub from_top5: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EvictionRow {
    pub start: Start,
    pub failures: u32,
    pub prior: f64,
    pub cells: Vec<EvictionCell>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EvictionStudy {
    pub lists: usize,
    pub rows: Vec<EvictionRow>,
}

impl EvictionStudy {
    pub fn row(&self, start: Start, failures: u32) -> Option<&EvictionRow> {
        self.rows
            .iter()
            .find(|r| r.start == start && r.failures == failures)
    }
}

/// Is the memory at `pos` out of the top 5 once its relevance is scaled by `prior`?
/// `list` holds relevance scores best first (ties already broken by key order, which the
/// failing memory keeps against equal scores ahead of it).
fn evicted(list: &[f64], pos: usize, prior: f64, weight: f64) -> bool {
    let new = apply_prior(list[pos], prior, weight);
    let above = list
        .iter()
        .enumerate()
        .filter(|&(i, &s)| i != pos && (s > new || (s == new && i < pos)))
        .count();
    above >= TOP
}

/// `lists`: each question's fused relevance scores, best first, with no outcome prior.
pub(crate) fn study(lists: &[Vec<f64>]) -> EvictionStudy {
    let mut rows = Vec::new();
    for start in Start::ALL {
        for failures in 1..=MAX_FAILURES {
            let prior = start.prior_after(failures);
            let cells = WEIGHTS
                .iter()
                .map(|&weight| {
                    let (mut top1, mut n1, mut top5, mut n5) = (0usize, 0usize, 0usize, 0usize);
                    for list in lists {
                        for pos in 0..list.len().min(TOP) {
                            let out = evicted(list, pos, prior, weight);
                            n5 += 1;
                            top5 += usize::from(out);
                            if pos == 0 {
                                n1 += 1;
                                top1 += usize::from(out);
                            }
                        }
                    }
                    let share = |a: usize, n: usize| if n == 0 { 0.0 } else { a as f64 / n as f64 };
                    EvictionCell {
                        weight,
                        from_rank1: share(top1, n1),
                        from_top5: share(top5, n5),
                    }
                })
                .collect();
            rows.push(EvictionRow {
                start,
                failures,
                prior,
                cells,
            });
        }
    }
    EvictionStudy {
        lists: lists.len(),
        rows,
    }
}

impl fmt::Display for EvictionStudy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "eviction by failures: {} LoCoMo ranked lists; one memory of the top 5 fails, the rest \
             stays unscored; share that leaves the top 5 (from rank 1 | from ranks 1-5), no deletion",
            self.lists
        )?;
        write!(f, "{:<24} fails  prior ", "start")?;
        for w in WEIGHTS {
            write!(f, " {:>13}", format!("w={w:.2}"))?;
        }
        writeln!(f)?;
        for r in &self.rows {
            write!(
                f,
                "{:<24} {:>5}  {:>5.2} ",
                r.start.label(),
                r.failures,
                r.prior
            )?;
            for c in &r.cells {
                write!(
                    f,
                    " {:>13}",
                    format!("{:.2}|{:.2}", c.from_rank1, c.from_top5)
                )?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priors_follow_the_outcome_arithmetic() {
        // A proven memory still has a positive prior after one failure…
        assert!(Start::Proven.prior_after(1) > 0.0);
        // …and every start is clearly negative after three.
        for s in Start::ALL {
            assert!(s.prior_after(3) <= -0.6, "{s:?}: {}", s.prior_after(3));
            assert!(s.prior_after(3) <= s.prior_after(1));
        }
        assert_eq!(Start::New.prior_after(0), 0.0, "never scored: no opinion");
    }

    #[test]
    fn a_memory_is_evicted_when_five_others_outrank_it() {
        let list = [1.0, 0.95, 0.94, 0.93, 0.92, 0.91, 0.5];
        // 1.0 × (1 − 0.1) = 0.90 < 0.91: six above? no, five (0.95..0.91): out.
        assert!(evicted(&list, 0, -1.0, 0.1));
        assert!(!evicted(&list, 0, -1.0, 0.05));
        assert!(!evicted(&list, 0, -1.0, 0.0));
        // A lone strong hit cannot be pushed out by a bounded prior.
        let lone = [1.0, 0.4, 0.39, 0.38, 0.37, 0.36];
        assert!(!evicted(&lone, 0, -0.8, 0.4));
        let s = study(&[list.to_vec(), lone.to_vec()]);
        let row = s.row(Start::New, 3).unwrap();
        let at = |w: f64| *row.cells.iter().find(|c| c.weight == w).unwrap();
        assert_eq!(at(0.0).from_rank1, 0.0);
        assert_eq!(at(0.4).from_rank1, 0.5);
    }
}
