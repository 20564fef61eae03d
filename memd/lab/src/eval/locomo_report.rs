//! How `memd-eval locomo`'s report reads: the configurations' table (each compared with what
//! memd ships), the outcome prior under noise (compared with the first stage it varies), then
//! the floor and eviction studies.
//!
//! Owns the layout only. Must never compute a figure.

use super::locomo::{FIRST_STAGE, NOISE_ROUNDS, Report, SHIPPED};
use memd_engine::search;
use std::fmt;

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "LoCoMo retrieval-only: conversations {} | {} memories ({} verbatim repeats merged) | \
             {} questions of categories 1-4 ({} without evidence skipped)",
            self.conversations.join(", "),
            self.memories,
            self.merged_duplicates,
            self.questions,
            self.skipped_without_evidence
        )?;
        writeln!(
            f,
            "all-MiniLM-L6-v2 vectors + BM25, reciprocal rank fusion (k {}), nothing outcome-scored",
            search::RRF_K
        )?;
        writeln!(f)?;
        let shipped = self.config(SHIPPED);
        for c in &self.configs {
            match shipped.filter(|s| s.name != c.name) {
                Some(s) => {
                    let (w, l) = c.wins_losses_at5(s);
                    writeln!(f, "{c} | vs shipped at R@5: +{w} -{l}")?;
                }
                None => writeln!(f, "{c}")?,
            }
        }
        writeln!(f)?;
        writeln!(
            f,
            "outcome prior under noise: vector 1.00 + lexical {:.2} after {NOISE_ROUNDS} outcomes \
             on 2/3 of the memories (1/3 worked, 1/3 failed, unrelated to relevance; no lifecycle)",
            self.study_lexical_weight
        )?;
        for c in &self.noise {
            match self.config(FIRST_STAGE) {
                Some(s) => {
                    let (w, l) = c.wins_losses_at5(s);
                    writeln!(f, "{c} | vs first stage at R@5: +{w} -{l}")?;
                }
                None => writeln!(f, "{c}")?,
            }
        }
        writeln!(f)?;
        writeln!(
            f,
            "studies below rank with vector 1.00 + lexical {:.2}",
            self.study_lexical_weight
        )?;
        writeln!(f, "{}", self.floor)?;
        writeln!(f, "{}", self.notes_floor)?;
        write!(f, "{}", self.eviction)
    }
}
