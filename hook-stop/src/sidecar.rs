//! The sidecar: when memd says the previous exchange went unscored (`needs_sidecar`), hook-stop
//! asks an OpenAI-compatible model to score it and posts the result back to memd.
//!
//! Flow: run the chain (see [`chain`]) within `sidecar_data`'s budgets; on a verdict POST
//! `/api/record-outcome` (`source: "sidecar"`); always POST `/api/sidecar/report` with every
//! attempt. This module must never send exchange text anywhere but the configured targets, never
//! put it in the report or the log, and never outlive the extended hook deadline.

pub mod chain;
pub mod openai;
pub mod prompt;
pub mod verdict;

use hookrt::daemon::Daemon;
use hookrt::log;
use hookrt::watchdog::Deadline;
use proto::{RecordOutcomeRequest, SidecarData, SidecarReport};
use serde::de::IgnoredAny;
use std::time::Duration;

/// Used when memd sends 0 for a budget.
const DEFAULT_PER_MODEL_MS: u64 = 6_000;
const DEFAULT_TOTAL_MS: u64 = 15_000;
/// Upper bound on any chain, whatever memd asks (the client's hook timeout is the real limit).
const MAX_TOTAL_MS: u64 = 60_000;
/// Time after the chain for posting the outcome and the report.
pub const POST_CHAIN_MARGIN: Duration = Duration::from_secs(1);

const RECORD_OUTCOME_PATH: &str = "/api/record-outcome";
const REPORT_PATH: &str = "/api/sidecar/report";

/// The chain budget `data` asks for, with defaults and the upper bound applied.
pub fn budget_for(data: &SidecarData) -> chain::Budget {
    let total = match data.total_ms {
        0 => DEFAULT_TOTAL_MS,
        ms => ms.min(MAX_TOTAL_MS),
    };
    let per_model = match data.per_model_ms {
        0 => DEFAULT_PER_MODEL_MS,
        ms => ms,
    };
    chain::Budget::new(
        Duration::from_millis(total),
        Duration::from_millis(per_model),
    )
}

/// Scores the exchange in `data`, records the verdict and reports the attempts.
pub fn score_and_report(data: &SidecarData, daemon: &Daemon, deadline: &Deadline) {
    let budget = budget_for(data);
    deadline.extend_to(budget.total() + POST_CHAIN_MARGIN);
    let outcome = chain::run_chain(data, &budget);
    let scored = match &outcome.verdict {
        Some(verdict) => record_outcome(data, verdict, daemon, deadline),
        None => {
            log::failure("sidecar_unscored", &describe_attempts(&outcome.attempts));
            false
        }
    };
    let report = SidecarReport {
        conversation_id: data.conversation_id.clone(),
        attempts: outcome.attempts,
        scored,
    };
    if let Err(e) = daemon.post::<_, IgnoredAny>(REPORT_PATH, &report, deadline.call_budget()) {
        log::failure(e.kind(), &format!("sidecar report: {}", e.summary()));
    }
}

/// The record-outcome body for a verdict (no memory scores → memd applies the outcome to all).
pub fn record_request(data: &SidecarData, verdict: &verdict::Verdict) -> RecordOutcomeRequest {
    RecordOutcomeRequest {
        conversation_id: data.conversation_id.clone(),
        outcome: verdict.outcome.clone(),
        memory_scores: (!verdict.memory_scores.is_empty()).then(|| verdict.memory_scores.clone()),
        related: None,
        exchange_summary: (!verdict.summary.is_empty()).then(|| verdict.summary.clone()),
        source: Some("sidecar".into()),
    }
}

fn record_outcome(
    data: &SidecarData,
    verdict: &verdict::Verdict,
    daemon: &Daemon,
    deadline: &Deadline,
) -> bool {
    let request = record_request(data, verdict);
    match daemon.post::<_, IgnoredAny>(RECORD_OUTCOME_PATH, &request, deadline.call_budget()) {
        Ok(_) => true,
        Err(e) => {
            log::failure(e.kind(), &format!("record-outcome: {}", e.summary()));
            false
        }
    }
}

/// `target/model=result` for each attempt: enough to diagnose, no exchange text.
fn describe_attempts(attempts: &[proto::SidecarAttempt]) -> String {
    if attempts.is_empty() {
        return "no model could be tried".into();
    }
    let parts: Vec<String> = attempts
        .iter()
        .map(|a| format!("{}/{}={}", a.target, a.model, a.result))
        .collect();
    format!("no verdict: {}", parts.join(", "))
}
