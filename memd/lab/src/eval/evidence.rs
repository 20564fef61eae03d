//! `memd-eval evidence`: does tool evidence teach memd when nobody scores, and does the boost
//! for memories naming what is in play help?
//!
//! Runs the learning scenario (`scenario`, `learning`) against a spawned daemon in several
//! settings. Every turn the agent runs its topic's command: it fails (the problem), and after
//! reading the injected notes it passes if `scenario::fix_works`, else fails again; both
//! results go to `/api/hooks/post-tool` as a hook would send them. Must never call the daemon
//! other than over HTTP, and never score on the daemon's behalf: with nobody scoring, whatever
//! the notes learn comes from the daemon's own use of the evidence.

use super::learning::{LearningOptions, Mode, run_variant};
use super::learning_report::LearningReport;
use anyhow::Result;

/// (label, agent scores, `[evidence] outcomes`, `failures`, `boost`)
const VARIANTS: [(&str, bool, bool, bool, bool); 8] = [
    ("nobody scores, evidence off", false, false, false, false),
    (
        "nobody scores, outcomes (worked only)",
        false,
        true,
        false,
        false,
    ),
    (
        "nobody scores, outcomes + failures",
        false,
        true,
        true,
        false,
    ),
    ("nobody scores, boost", false, false, false, true),
    ("nobody scores, outcomes + boost", false, true, false, true),
    ("agent scores, evidence off", true, false, false, false),
    ("agent scores, outcomes + failures", true, true, true, false),
    ("agent scores, outcomes + boost", true, true, false, true),
];

/// Every setting once, at the shipped prior weight and routing boosts.
pub fn run_evidence(options: &LearningOptions) -> Result<LearningReport> {
    let defaults = memd_engine::config::LearningConfig::default();
    let mut runs = Vec::new();
    for (label, agent_scores, outcomes, failures, boost) in VARIANTS {
        let mode = Mode {
            label: label.to_string(),
            agent_scores,
            evidence_outcomes: outcomes,
            evidence_failures: failures,
            extra_config: format!(
                "[evidence]\noutcomes = {outcomes}\nfailures = {failures}\nboost = {boost}\n"
            ),
        };
        runs.push(run_variant(
            options,
            defaults.prior_weight,
            defaults.graph_boosts,
            &mode,
        )?);
    }
    Ok(LearningReport { runs })
}
