//! The paraphrase probe of issue 34: three notes and a question where a shared word competes
//! with the meaning, stored alone or beside the evaluation sets.
//!
//! Owns the probe's notes, its question and its store; ranking it and printing the result are
//! `summary`'s. Must never import `summary` or `fusion_stores` (both read it).

use super::dataset::Question;
use super::locomo::Indexed;
use anyhow::Result;
use memd_engine::models::embed::Embed;
use proto::Collection;

/// Issue 34's case: the Bazel note shares "staging cluster", the Kubernetes note answers.
pub const PROBE_NOTES: [&str; 3] = [
    "The user deploys the billing service with Kubernetes on Google Cloud",
    "The staging cluster reads its config from Bazel for the EU customers.",
    "The data pipeline deploys through Helm charts to cut costs.",
];
pub const PROBE_QUERY: &str = "how do we ship the payments backend to the cluster?";
/// The note that answers (Kubernetes).
pub const PROBE_ANSWER: usize = 0;

/// The probe's three notes stored alone and embedded, with its query (evidence: the answer).
pub(super) fn probe_index(embedder: &dyn Embed) -> Result<Indexed> {
    let memories = PROBE_NOTES
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let mut rec = memd_engine::core::Core::new_record(
                Collection::MemoryBank,
                text.to_string(),
                1_700_000_000_000 + i as i64,
            );
            rec.score = 1.0;
            (rec, i.to_string())
        })
        .collect();
    let question = Question {
        text: PROBE_QUERY.to_string(),
        category: 0,
        evidence: vec![PROBE_ANSWER.to_string()],
        project: None,
    };
    Indexed::store(memories, &[question], embedder)
}
