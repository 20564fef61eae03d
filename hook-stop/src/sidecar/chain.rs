//! The sidecar chain: targets in order, models in order, until one model gives a valid verdict
//! or the budget runs out.
//!
//! Rules: a model listed in `skip` is not tried; each call gets min(per-model budget, time left);
//! 429 waits `retry-after` once when that still leaves time for a call, else moves on; a
//! free-tier refusal (403 `FreeTierError`, 426) or an unreachable target skips the rest of that
//! target; every other failure moves to the next model. This module must never exceed the total
//! budget by more than one call's scheduling slack, and never record exchange text in attempts.

use super::openai::{Endpoint, Reply, Response};
use super::prompt;
use super::verdict::{self, Verdict};
use proto::{SidecarAttempt, SidecarData, SidecarTarget};
use std::time::{Duration, Instant};

/// Discovery (`GET /models`) gets at most this long.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(3);
/// A call is not started with less time than this left.
const MIN_CALL_TIME: Duration = Duration::from_millis(250);

/// The chain's time budget.
#[derive(Debug, Clone)]
pub struct Budget {
    start: Instant,
    total: Duration,
    per_model: Duration,
}

impl Budget {
    pub fn new(total: Duration, per_model: Duration) -> Budget {
        Budget {
            start: Instant::now(),
            total,
            per_model: per_model.min(total),
        }
    }

    pub fn total(&self) -> Duration {
        self.total
    }

    pub fn remaining(&self) -> Duration {
        self.total.saturating_sub(self.start.elapsed())
    }

    fn per_call(&self) -> Duration {
        self.per_model.min(self.remaining())
    }

    fn can_start_call(&self) -> bool {
        self.remaining() >= MIN_CALL_TIME
    }
}

/// What the chain produced: a verdict (if any model gave one) and every attempt made.
#[derive(Debug, Default)]
pub struct ChainOutcome {
    pub verdict: Option<Verdict>,
    pub attempts: Vec<SidecarAttempt>,
}

/// What to do after one model.
enum Step {
    Scored(Verdict),
    NextModel,
    SkipTarget,
}

/// Runs the chain for `data` within `budget`.
pub fn run_chain(data: &SidecarData, budget: &Budget) -> ChainOutcome {
    let (system, user) = prompt::messages(data);
    let ids: Vec<&str> = data.memories.iter().map(|m| m.id.as_str()).collect();
    let call = Call {
        system: &system,
        user: &user,
        ids: &ids,
        budget,
    };
    let mut outcome = ChainOutcome::default();
    for target in &data.targets {
        if !budget.can_start_call() {
            break;
        }
        let endpoint = Endpoint::new(target);
        for model in models_for(target, &endpoint, budget) {
            if data.skip.contains(&format!("{}/{model}", target.name)) {
                continue;
            }
            if !budget.can_start_call() {
                return outcome;
            }
            match call.try_model(&endpoint, target, &model, &mut outcome.attempts) {
                Step::Scored(v) => {
                    outcome.verdict = Some(v);
                    return outcome;
                }
                Step::NextModel => {}
                Step::SkipTarget => break,
            }
        }
    }
    outcome
}

/// How many discovered models of a local server are tried (it lists every model pulled).
const LOCAL_MODELS_TRIED: usize = 2;

/// The models to try on `target`: discovered ones when asked for and available (Zen: only its
/// free models; a local server: the first few it lists), else the configured list.
fn models_for(target: &SidecarTarget, endpoint: &Endpoint, budget: &Budget) -> Vec<String> {
    if target.discover_models {
        let timeout = DISCOVERY_TIMEOUT.min(budget.remaining());
        let free_only = target.kind == proto::TargetKind::Zen;
        if let Some(mut found) = endpoint.discover_models(timeout, free_only) {
            if target.kind == proto::TargetKind::Local {
                found.truncate(LOCAL_MODELS_TRIED);
            }
            return found;
        }
    }
    target.models.clone()
}

/// The parts of a chat call shared by every model.
struct Call<'a> {
    system: &'a str,
    user: &'a str,
    ids: &'a [&'a str],
    budget: &'a Budget,
}

impl Call<'_> {
    fn try_model(
        &self,
        endpoint: &Endpoint,
        target: &SidecarTarget,
        model: &str,
        attempts: &mut Vec<SidecarAttempt>,
    ) -> Step {
        let mut waited = false;
        loop {
            let at = hookrt::clock::now_rfc3339();
            let started = Instant::now();
            let response = endpoint.chat(model, self.system, self.user, self.budget.per_call());
            let latency_ms = started.elapsed().as_millis() as u64;
            let (result, next) = self.judge(&response);
            attempts.push(SidecarAttempt {
                at,
                target: target.name.clone(),
                model: model.to_string(),
                status: response.status,
                latency_ms,
                result,
            });
            match response.reply {
                Reply::RateLimited {
                    retry_after: Some(wait),
                } if !waited && wait + MIN_CALL_TIME <= self.budget.remaining() => {
                    waited = true;
                    // The server asked for this pause; it is protocol, not synchronisation.
                    std::thread::sleep(wait);
                }
                _ => return next,
            }
        }
    }

    /// The attempt's `result` string and what to do next.
    fn judge(&self, response: &Response) -> (String, Step) {
        match &response.reply {
            Reply::Json(body) => match verdict::answer_text(body) {
                None => ("unparseable".into(), Step::NextModel),
                Some(text) => match verdict::parse_verdict(&text, self.ids) {
                    Ok(v) => (format!("ok:{}", v.outcome), Step::Scored(v)),
                    Err(e) => (e.result().into(), Step::NextModel),
                },
            },
            Reply::NotJson => ("unparseable".into(), Step::NextModel),
            Reply::RateLimited { .. } => ("rate_limited".into(), Step::NextModel),
            Reply::Refused => ("refused:FreeTierError".into(), Step::SkipTarget),
            Reply::Status => (format!("http:{}", response.status), Step::NextModel),
            Reply::Timeout => ("timeout".into(), Step::NextModel),
            Reply::Reset => ("reset".into(), Step::NextModel),
            Reply::Unreachable => ("unreachable".into(), Step::SkipTarget),
            Reply::Transport => ("transport".into(), Step::NextModel),
        }
    }
}
