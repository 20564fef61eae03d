//! Outcome scoring: how one outcome changes a memory, and the quality signals read from it.
//!
//! Owns the outcome deltas, optional time weighting, the Wilson lower bound, the learned
//! score, memory_bank quality, the ranking prior and the original's dynamic weights.
//! Everything here is a pure function of its arguments: no I/O, no clock (callers pass `now`
//! in Unix ms), no locks. It must never move a memory between collections (that is
//! `lifecycle`) nor touch books or memory_bank scores (a memory_bank fact's outcomes move its
//! confidence instead).

use crate::record::{HISTORY_LEN, OutcomeEntry, Record};
use proto::{Collection, Outcome};
use std::fmt;

/// Raw score change for `worked`.
pub const WORKED_DELTA: f64 = 0.20;
/// Raw score change for `partial`.
pub const PARTIAL_DELTA: f64 = 0.05;
/// Raw score change for `failed`.
pub const FAILED_DELTA: f64 = -0.30;
/// z for a 95 % two-sided interval.
pub const WILSON_Z: f64 = 1.96;
/// Wilson value of a memory that was never used.
pub const WILSON_UNTESTED: f64 = 0.5;
/// Time weighting: the delta is divided by `1 + age_days / TIME_WEIGHT_DAYS`.
pub const TIME_WEIGHT_DAYS: f64 = 30.0;
/// memory_bank raw score: constant, memory_bank is never outcome-scored.
pub const MEMORY_BANK_SCORE: f64 = 1.0;
/// importance / confidence assumed when a memory_bank entry lacks them.
pub const DEFAULT_BANK_FACTOR: f64 = 0.7;
/// memory_bank quality blends in Wilson from this many uses on.
pub const BANK_WILSON_MIN_USES: u32 = 3;
/// Share of Wilson in memory_bank quality once blended (the rest is importance × confidence).
pub const BANK_WILSON_SHARE: f64 = 0.2;
/// The learned score moves from raw to Wilson over this many uses.
pub const LEARNED_BLEND_USES: u32 = 3;
/// Decimal places a stored raw score keeps.
pub const SCORE_DECIMALS: i32 = 6;
/// Failures since a memory last worked that make it *disputed*: the hooks stop injecting it,
/// and every read flags it so the agent verifies it. Three is the replay's bar: a wrong fact
/// or exchange may mislead at most three times (issue 12).
pub const DISPUTE_FAILURES: usize = 3;
/// How much one failure takes from a memory_bank fact's confidence, and one success gives back.
/// 0.2 takes the default 0.7 to 0.1 (the floor) in three failures: the quality that ranks the
/// fact drops with the confidence.
pub const BANK_FAILED_CONFIDENCE: f64 = 0.2;
pub const BANK_WORKED_CONFIDENCE: f64 = 0.1;
/// A memory_bank fact's confidence never drops under this through outcomes alone.
pub const BANK_CONFIDENCE_FLOOR: f64 = 0.1;
/// Pseudo-uses that damp the observed success rate in the ranking prior.
const PRIOR_EVIDENCE_DAMPING: f64 = 3.0;

const DAY_MS: i64 = 86_400_000;

/// What `apply_outcome` did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutcomeEffect {
    pub outcome: Outcome,
    pub score_before: f64,
    pub score_after: f64,
    /// The factor applied to the base delta (1.0 when time weighting is off).
    pub time_weight: f64,
    /// False for `unknown`: it is not a use and changes nothing but `last_used`.
    pub counted: bool,
}

/// The memory's collection does not take outcome scores (books, memory_bank).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotScorable {
    pub collection: Collection,
}

impl fmt::Display for NotScorable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} memories are not outcome-scored",
            self.collection.as_str()
        )
    }
}

impl std::error::Error for NotScorable {}

/// `track_use` was given a memory outside memory_bank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotMemoryBank {
    pub collection: Collection,
}

impl fmt::Display for NotMemoryBank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "expected a memory_bank memory, got {}",
            self.collection.as_str()
        )
    }
}

impl std::error::Error for NotMemoryBank {}

/// Base raw-score delta of an outcome; `unknown` carries no signal.
pub fn base_delta(outcome: Outcome) -> f64 {
    match outcome {
        Outcome::Worked => WORKED_DELTA,
        Outcome::Partial => PARTIAL_DELTA,
        Outcome::Failed => FAILED_DELTA,
        Outcome::Unknown => 0.0,
    }
}

/// How much an outcome adds to `success_count`.
pub fn success_credit(outcome: Outcome) -> f64 {
    match outcome {
        Outcome::Worked => 1.0,
        Outcome::Partial => 0.5,
        Outcome::Failed | Outcome::Unknown => 0.0,
    }
}

/// Raw score of a new takeaway given the outcome the agent attached to it.
pub fn initial_score(outcome: Option<Outcome>) -> f64 {
    match outcome {
        Some(Outcome::Worked) => 0.7,
        Some(Outcome::Partial) => 0.55,
        Some(Outcome::Failed) => 0.2,
        Some(Outcome::Unknown) | None => 0.5,
    }
}

/// `1 / (1 + whole_days / 30)` where the age is the time since the memory was last used
/// (as the original measured it); a never-used memory or a clock that went backwards gets 1.
pub fn time_weight(last_used: Option<i64>, now_ms: i64) -> f64 {
    let Some(last) = last_used else {
        return 1.0;
    };
    let whole_days = now_ms.saturating_sub(last).max(0) / DAY_MS;
    1.0 / (1.0 + whole_days as f64 / TIME_WEIGHT_DAYS)
}

/// Applies one outcome to a scored memory (working, history, patterns).
///
/// worked/partial/failed move the raw score by their delta (time-weighted if enabled) and
/// clamp it to [0, 1], count a use, add the success credit, append to the history (capped
/// at `HISTORY_LEN`), and set `last_outcome` and `last_used`. `unknown` carries no signal
/// (seed 001: no score change) and only sets `last_used`: it is neither a use nor a history
/// entry, so it cannot dilute Wilson. (The 0.6.0 original counted it as a use, −0.05 and
/// +0.25 success; memd follows the seed.) `updated_at` is left alone: it tracks content
/// edits.
///
/// `time_weighting` scales the delta by `time_weight` (days since the previous use). It is
/// off by default in memd: the original removed it in v0.3.6 on the grounds that an
/// outcome means the same whatever the memory's age, and the damping shields stale
/// memories: one last used 90 days ago loses only 0.075 per failure, so a wrong old memory
/// barely moves toward deletion.
pub fn apply_outcome(
    rec: &mut Record,
    outcome: Outcome,
    now_ms: i64,
    time_weighting: bool,
) -> Result<OutcomeEffect, NotScorable> {
    if !rec.collection.is_outcome_scored() {
        return Err(NotScorable {
            collection: rec.collection,
        });
    }
    let before = sane_score(rec.score);
    if outcome == Outcome::Unknown {
        rec.last_used = Some(now_ms);
        return Ok(OutcomeEffect {
            outcome,
            score_before: before,
            score_after: before,
            time_weight: 1.0,
            counted: false,
        });
    }
    // Weight from the previous use, read before `last_used` moves to now.
    let weight = if time_weighting {
        time_weight(rec.last_used, now_ms)
    } else {
        1.0
    };
    let after = quantize(clamp01(before + base_delta(outcome) * weight));
    rec.score = after;
    count_use(rec, outcome, now_ms);
    Ok(OutcomeEffect {
        outcome,
        score_before: before,
        score_after: after,
        time_weight: weight,
        counted: true,
    })
}

/// Records feedback on a memory_bank fact without touching its score (memory_bank is not
/// outcome-scored). Counting uses and successes is what lets `memory_bank_quality` blend in
/// Wilson after `BANK_WILSON_MIN_USES`; a failure also lowers the fact's confidence and a
/// success raises it, so a wrong fact ranks lower at once and is disputed after
/// `DISPUTE_FAILURES`. `unknown` only sets `last_used`, as in `apply_outcome`.
pub fn track_use(
    rec: &mut Record,
    outcome: Outcome,
    now_ms: i64,
) -> Result<OutcomeEffect, NotMemoryBank> {
    if rec.collection != Collection::MemoryBank {
        return Err(NotMemoryBank {
            collection: rec.collection,
        });
    }
    let score = rec.score;
    if outcome == Outcome::Unknown {
        rec.last_used = Some(now_ms);
    } else {
        count_use(rec, outcome, now_ms);
        let confidence = bank_factor(rec.confidence);
        rec.confidence = Some(match outcome {
            Outcome::Failed => (confidence - BANK_FAILED_CONFIDENCE).max(BANK_CONFIDENCE_FLOOR),
            Outcome::Worked => (confidence + BANK_WORKED_CONFIDENCE).min(1.0),
            _ => confidence,
        });
    }
    Ok(OutcomeEffect {
        outcome,
        score_before: score,
        score_after: score,
        time_weight: 1.0,
        counted: outcome != Outcome::Unknown,
    })
}

fn count_use(rec: &mut Record, outcome: Outcome, now_ms: i64) {
    rec.uses = rec.uses.saturating_add(1);
    rec.success_count = sane_count(rec.success_count) + success_credit(outcome);
    rec.outcome_history.push(OutcomeEntry {
        outcome,
        at: now_ms,
    });
    let excess = rec.outcome_history.len().saturating_sub(HISTORY_LEN);
    rec.outcome_history.drain(..excess);
    rec.last_outcome = Some(outcome);
    rec.last_used = Some(now_ms);
}

/// Failed outcomes since the memory last worked (partial and unknown neither count nor reset).
pub fn failures_since_success(rec: &Record) -> usize {
    rec.outcome_history
        .iter()
        .rev()
        .take_while(|e| e.outcome != Outcome::Worked)
        .filter(|e| e.outcome == Outcome::Failed)
        .count()
}

/// Failed `DISPUTE_FAILURES` times since it last worked: whatever its score or history, the
/// hooks do not inject it again until a success (or an edit) clears it.
pub fn disputed(rec: &Record) -> bool {
    failures_since_success(rec) >= DISPUTE_FAILURES
}

/// Wilson score interval lower bound at z = 1.96; 0.5 for an untested memory (`total` not
/// above 0). Both counts may be fractional (partial = 0.5); `successes` is clamped to
/// `[0, total]`.
pub fn wilson_lower(successes: f64, total: f64) -> f64 {
    if !(total.is_finite() && total > 0.0) {
        return WILSON_UNTESTED;
    }
    let n = total;
    let s = if successes.is_finite() {
        successes.clamp(0.0, n)
    } else {
        0.0
    };
    let p = s / n;
    let z2 = WILSON_Z * WILSON_Z;
    let centre = p + z2 / (2.0 * n);
    let spread = WILSON_Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - spread) / (1.0 + z2 / n)).max(0.0)
}

/// The displayed `wilson_score`: straight from `success_count` and `uses`.
pub fn wilson_score(rec: &Record) -> f64 {
    wilson_lower(rec.success_count, f64::from(rec.uses))
}

/// The learned score (anchor §5): raw while unused, a raw→Wilson blend over the first
/// three uses, Wilson afterwards. When a used memory has no successes on record, the
/// successes are estimated as `raw × uses` before Wilson (the original's fallback for
/// records without a counter), so a memory that only failed keeps a low, not zero, value.
/// memory_bank has no outcome score: its learned score is `memory_bank_quality`.
pub fn learned_score(rec: &Record) -> f64 {
    if rec.collection == Collection::MemoryBank {
        return memory_bank_quality(rec);
    }
    let raw = sane_score(rec.score);
    let uses = rec.uses;
    if uses == 0 {
        return raw;
    }
    let counted = sane_count(rec.success_count);
    let successes = if counted == 0.0 {
        raw * f64::from(uses)
    } else {
        counted
    };
    let wilson = wilson_lower(successes, f64::from(uses));
    if uses < LEARNED_BLEND_USES {
        let share = f64::from(uses) / f64::from(LEARNED_BLEND_USES);
        (1.0 - share) * raw + share * wilson
    } else {
        wilson
    }
}

/// memory_bank ranking quality: importance × confidence (0.7 each when absent), blended
/// 80/20 with Wilson once the fact has `BANK_WILSON_MIN_USES` recorded uses.
pub fn memory_bank_quality(rec: &Record) -> f64 {
    let importance = bank_factor(rec.importance);
    let confidence = bank_factor(rec.confidence);
    let quality = importance * confidence;
    if rec.uses >= BANK_WILSON_MIN_USES {
        (1.0 - BANK_WILSON_SHARE) * quality + BANK_WILSON_SHARE * wilson_score(rec)
    } else {
        quality
    }
}

fn bank_factor(value: Option<f64>) -> f64 {
    match value {
        Some(v) if v.is_finite() => v.clamp(0.0, 1.0),
        _ => DEFAULT_BANK_FACTOR,
    }
}

/// The original's (embedding, learned) weights by maturity, for reference rankings:
/// `final = we / (1 + distance) + wl × learned`. memd ranks with `apply_prior` instead.
pub fn dynamic_weights(uses: u32, learned: f64) -> (f64, f64) {
    if uses >= 5 && learned >= 0.8 {
        (0.2, 0.8)
    } else if uses >= 3 && learned >= 0.7 {
        (0.25, 0.75)
    } else if uses >= 2 && learned >= 0.5 {
        (0.35, 0.65)
    } else if uses >= 2 {
        (0.7, 0.3)
    } else {
        (0.8, 0.2)
    }
}

/// A ranking signal in [-1, 1]; 0 means "no opinion".
///
/// * books, and scored memories with no outcome ever recorded: 0;
/// * memory_bank: its quality centred on 0.5 (`2q − 1`);
/// * scored memories: `2e − 1` where `e` blends the raw score with a smoothed success rate
///   `(successes + 1) / (uses + 2)`, the rate's share growing as `uses / (uses + 3)`.
///
/// Not the Wilson lower bound: it is pessimistic on small samples (3 of 3 worked gives
/// 0.44), so centring it would push down memories that always helped. A promoted memory
/// has its counters reset but keeps its history, so its raw score speaks for it.
pub fn outcome_prior(rec: &Record) -> f64 {
    match rec.collection {
        Collection::Books => 0.0,
        Collection::MemoryBank => centred(memory_bank_quality(rec)),
        Collection::Working | Collection::History | Collection::Patterns => {
            if rec.uses == 0 && rec.outcome_history.is_empty() {
                return 0.0;
            }
            centred(outcome_estimate(rec))
        }
    }
}

fn outcome_estimate(rec: &Record) -> f64 {
    let raw = sane_score(rec.score);
    let uses = f64::from(rec.uses);
    let successes = sane_count(rec.success_count).min(uses);
    let rate = (successes + 1.0) / (uses + 2.0);
    let rate_share = uses / (uses + PRIOR_EVIDENCE_DAMPING);
    (1.0 - rate_share) * raw + rate_share * rate
}

fn centred(quality: f64) -> f64 {
    (2.0 * quality - 1.0).clamp(-1.0, 1.0)
}

/// Applies a prior to a ranking score. The change is at most `weight × |base|` either way
/// (weight clamped to [0, 1], prior to [-1, 1]); a positive prior always raises the score,
/// also when `base` is negative (e.g. a cross-encoder logit), and a zero base stays zero,
/// so the prior can never lift an irrelevant memory over a relevance floor.
pub fn apply_prior(base: f64, prior: f64, weight: f64) -> f64 {
    if !base.is_finite() {
        return base;
    }
    let weight = if weight.is_finite() {
        weight.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let prior = if prior.is_finite() {
        prior.clamp(-1.0, 1.0)
    } else {
        0.0
    };
    base + weight * prior * base.abs()
}

/// A stored score that somehow is not a number counts as neutral, never as 0 or 1.
fn sane_score(score: f64) -> f64 {
    if score.is_finite() {
        score.clamp(0.0, 1.0)
    } else {
        0.5
    }
}

fn sane_count(count: f64) -> f64 {
    if count.is_finite() {
        count.max(0.0)
    } else {
        0.0
    }
}

fn clamp01(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}

/// Keeps stored scores to `SCORE_DECIMALS` places so repeated deltas land exactly on the
/// thresholds: in binary, 1.0 − 0.3 − 0.3 is 0.39999999999999997, which would demote a
/// pattern sitting at 0.4.
fn quantize(x: f64) -> f64 {
    let scale = 10f64.powi(SCORE_DECIMALS);
    (x * scale).round() / scale
}

/// The score lifecycle decisions read: finite and within [0, 1].
pub(crate) fn effective_score(rec: &Record) -> f64 {
    sane_score(rec.score)
}
