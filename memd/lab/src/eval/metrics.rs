//! Retrieval metrics: recall@k (any and all evidence), MRR@10, overall and per category.
//!
//! Owns the arithmetic and the one-line rendering of a configuration's figures. Must never
//! know how results were produced; it sees ranked evidence labels only.

use std::fmt;

/// LoCoMo question categories scored for recall (5, adversarial, has no evidence to find).
pub const CATEGORIES: [(u8, &str); 4] = [
    (1, "multi-hop"),
    (2, "temporal"),
    (3, "open-domain"),
    (4, "single-hop"),
];

/// MRR counts a first relevant result down to this rank; deeper ones count 0.
pub const MRR_DEPTH: usize = 10;

/// Recall figures of one configuration on a set of questions, as fractions in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Recall {
    pub questions: usize,
    /// At least one evidence turn in the top 1 / 5 / 10.
    pub r1: f64,
    pub r5: f64,
    pub r10: f64,
    /// Every evidence turn in the top 5 / 10.
    pub all5: f64,
    pub all10: f64,
    /// Mean reciprocal rank of the first evidence turn (0 beyond rank 10).
    pub mrr: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    n: usize,
    hit1: usize,
    hit5: usize,
    hit10: usize,
    all5: usize,
    all10: usize,
    reciprocal_ranks: f64,
}

impl Tally {
    fn add(&mut self, evidence: &[String], ranked: &[&[String]]) {
        self.n += 1;
        let first = ranked
            .iter()
            .take(MRR_DEPTH)
            .position(|labels| labels.iter().any(|l| evidence.contains(l)));
        if let Some(rank) = first {
            self.hit1 += usize::from(rank < 1);
            self.hit5 += usize::from(rank < 5);
            self.hit10 += usize::from(rank < 10);
            self.reciprocal_ranks += 1.0 / (rank as f64 + 1.0);
        }
        self.all5 += usize::from(all_found(evidence, &ranked[..ranked.len().min(5)]));
        self.all10 += usize::from(all_found(evidence, &ranked[..ranked.len().min(10)]));
    }

    fn recall(&self) -> Recall {
        let share = |x: usize| {
            if self.n == 0 {
                0.0
            } else {
                x as f64 / self.n as f64
            }
        };
        Recall {
            questions: self.n,
            r1: share(self.hit1),
            r5: share(self.hit5),
            r10: share(self.hit10),
            all5: share(self.all5),
            all10: share(self.all10),
            mrr: if self.n == 0 {
                0.0
            } else {
                self.reciprocal_ranks / self.n as f64
            },
        }
    }
}

fn all_found(evidence: &[String], top: &[&[String]]) -> bool {
    !evidence.is_empty() && evidence.iter().all(|e| top.iter().any(|l| l.contains(e)))
}

/// Accumulates one configuration's results question by question.
#[derive(Debug, Default)]
pub(crate) struct Scorer {
    overall: Tally,
    by_category: [Tally; 4],
    hit5: Vec<bool>,
}

impl Scorer {
    /// `ranked[i]` holds the evidence labels (dia_ids) of the i-th result, best first.
    pub(crate) fn add(&mut self, category: u8, evidence: &[String], ranked: &[&[String]]) {
        let before = self.overall.hit5;
        self.overall.add(evidence, ranked);
        self.hit5.push(self.overall.hit5 > before);
        if let Some(i) = CATEGORIES.iter().position(|(c, _)| *c == category) {
            self.by_category[i].add(evidence, ranked);
        }
    }

    pub(crate) fn finish(&self, name: &str) -> ConfigResult {
        ConfigResult {
            name: name.to_string(),
            overall: self.overall.recall(),
            by_category: CATEGORIES
                .iter()
                .zip(&self.by_category)
                .map(|((c, _), t)| (*c, t.recall()))
                .collect(),
            hit5: self.hit5.clone(),
        }
    }
}

/// The figures of one ranking configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigResult {
    pub name: String,
    pub overall: Recall,
    /// `(category, recall)` for categories 1–4.
    pub by_category: Vec<(u8, Recall)>,
    /// Per question, in order: an evidence turn in the top 5.
    pub hit5: Vec<bool>,
}

impl ConfigResult {
    /// Questions this configuration finds in the top 5 and `other` does not, and the reverse.
    pub fn wins_losses_at5(&self, other: &ConfigResult) -> (usize, usize) {
        let pairs = self.hit5.iter().zip(&other.hit5);
        pairs.fold((0, 0), |(w, l), (a, b)| {
            (w + usize::from(*a && !*b), l + usize::from(!*a && *b))
        })
    }
}

impl fmt::Display for ConfigResult {
    /// One line: `name R@1 … R@5 … R@10 … R@5-all … MRR@10 … | per-category R@5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.overall;
        write!(
            f,
            "{:<24} R@1 {:.3}  R@5 {:.3}  R@10 {:.3}  R@5-all {:.3}  R@10-all {:.3}  MRR@10 {:.3} |",
            self.name, o.r1, o.r5, o.r10, o.all5, o.all10, o.mrr
        )?;
        for (c, r) in &self.by_category {
            let label = CATEGORIES
                .iter()
                .find(|(k, _)| k == c)
                .map_or("?", |(_, l)| l);
            write!(f, "  {label} R@5 {:.3}", r.r5)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn first_relevant_rank_drives_recall_and_mrr() {
        let mut s = Scorer::default();
        let results: Vec<Vec<String>> = ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5", "D1:6"]
            .iter()
            .map(|d| labels(&[d]))
            .collect();
        let ranked: Vec<&[String]> = results.iter().map(Vec::as_slice).collect();
        // Evidence at rank 3 (one of two pieces), and at rank 6.
        s.add(4, &labels(&["D1:3", "D9:9"]), &ranked);
        s.add(2, &labels(&["D1:6"]), &ranked);
        let r = s.finish("x");
        assert_eq!(r.hit5, [true, false]);
        assert_eq!(r.wins_losses_at5(&r), (0, 0));
        assert_eq!(r.overall.questions, 2);
        assert_eq!(r.overall.r1, 0.0);
        assert_eq!(r.overall.r5, 0.5);
        assert_eq!(r.overall.r10, 1.0);
        assert_eq!(r.overall.all5, 0.0, "D9:9 is never found");
        assert_eq!(r.overall.all10, 0.5);
        assert!((r.overall.mrr - (1.0 / 3.0 + 1.0 / 6.0) / 2.0).abs() < 1e-12);
        let temporal = r.by_category.iter().find(|(c, _)| *c == 2).unwrap().1;
        assert_eq!(
            (temporal.questions, temporal.r5, temporal.r10),
            (1, 0.0, 1.0)
        );
    }

    #[test]
    fn a_result_standing_for_several_turns_counts_for_each() {
        let mut s = Scorer::default();
        let merged = labels(&["D2:1", "D5:4"]);
        let ranked: Vec<&[String]> = vec![merged.as_slice()];
        s.add(1, &labels(&["D2:1", "D5:4"]), &ranked);
        let r = s.finish("y").overall;
        assert_eq!((r.r1, r.all5, r.mrr), (1.0, 1.0, 1.0));
    }

    #[test]
    fn the_line_carries_grepable_figures() {
        let mut s = Scorer::default();
        let one = labels(&["D1:1"]);
        s.add(4, &one, &[one.as_slice()]);
        let line = s.finish("vector").to_string();
        assert!(line.starts_with("vector"), "{line}");
        assert!(line.contains("R@5 1.000") && line.contains("single-hop R@5 1.000"));
    }
}
