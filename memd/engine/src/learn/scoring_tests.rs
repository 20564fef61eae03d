use super::scoring::*;
use super::scoring_targets;
use super::test_support::*;
use crate::record::HISTORY_LEN;
use proto::{Collection, Outcome};

const OFF: bool = false;
const ON: bool = true;

fn after_one(outcome: Outcome, start: f64) -> f64 {
    let mut rec = scored(Collection::Working, start, 0, 0.0);
    apply_outcome(&mut rec, outcome, NOW, OFF).expect("working is scorable");
    rec.score
}

#[test]
fn deltas_match_seed() {
    assert!(approx(after_one(Outcome::Worked, 0.5), 0.7));
    assert!(approx(after_one(Outcome::Partial, 0.5), 0.55));
    assert!(approx(after_one(Outcome::Failed, 0.5), 0.2));
    assert!(approx(after_one(Outcome::Unknown, 0.5), 0.5));
}

#[test]
fn score_is_clamped_to_unit_interval() {
    assert!(approx(after_one(Outcome::Worked, 0.9), 1.0));
    assert!(approx(after_one(Outcome::Partial, 0.98), 1.0));
    assert!(approx(after_one(Outcome::Failed, 0.1), 0.0));
    // A corrupt stored score is treated as neutral, never propagated.
    assert!(approx(after_one(Outcome::Worked, f64::NAN), 0.7));
    assert!(approx(after_one(Outcome::Worked, 7.0), 1.0));
}

#[test]
fn repeated_deltas_land_exactly_on_thresholds() {
    let mut rec = scored(Collection::Patterns, 1.0, 0, 0.0);
    apply_outcome(&mut rec, Outcome::Failed, NOW, OFF).expect("scorable");
    apply_outcome(&mut rec, Outcome::Failed, NOW, OFF).expect("scorable");
    assert_eq!(rec.score, 0.4);
    let mut rec = scored(Collection::Working, 0.55, 0, 0.0);
    for _ in 0..3 {
        apply_outcome(&mut rec, Outcome::Partial, NOW, OFF).expect("scorable");
    }
    assert_eq!(rec.score, 0.7);
}

#[test]
fn counted_outcomes_update_every_counter() {
    let mut rec = record_in(Collection::History, NOW - DAY);
    apply_outcome(&mut rec, Outcome::Worked, NOW, OFF).expect("scorable");
    apply_outcome(&mut rec, Outcome::Partial, NOW + 1, OFF).expect("scorable");
    let effect = apply_outcome(&mut rec, Outcome::Failed, NOW + 2, OFF).expect("scorable");
    assert_eq!(rec.uses, 3);
    assert!(approx(rec.success_count, 1.5));
    assert_eq!(rec.last_outcome, Some(Outcome::Failed));
    assert_eq!(rec.last_used, Some(NOW + 2));
    let outcomes: Vec<Outcome> = rec.outcome_history.iter().map(|e| e.outcome).collect();
    assert_eq!(
        outcomes,
        [Outcome::Worked, Outcome::Partial, Outcome::Failed]
    );
    assert_eq!(rec.outcome_history[2].at, NOW + 2);
    assert!(effect.counted);
    assert!(approx(effect.score_before, 0.75));
    assert!(approx(effect.score_after, 0.45));
    assert_eq!(rec.updated_at, NOW - DAY, "scoring is not a content edit");
}

#[test]
fn unknown_only_records_last_used() {
    let mut rec = scored(Collection::Patterns, 0.8, 4, 3.0);
    let before = rec.clone();
    let effect = apply_outcome(&mut rec, Outcome::Unknown, NOW, ON).expect("scorable");
    assert!(!effect.counted);
    assert!(approx(effect.score_after, 0.8));
    assert_eq!(rec.last_used, Some(NOW));
    rec.last_used = before.last_used;
    assert_eq!(rec, before);
}

#[test]
fn history_keeps_the_last_ten() {
    let mut rec = record_in(Collection::Working, NOW);
    for i in 0..15 {
        apply_outcome(&mut rec, Outcome::Partial, NOW + i, OFF).expect("scorable");
    }
    assert_eq!(rec.outcome_history.len(), HISTORY_LEN);
    assert_eq!(rec.outcome_history[0].at, NOW + 5);
    assert_eq!(rec.outcome_history[HISTORY_LEN - 1].at, NOW + 14);
    assert_eq!(rec.uses, 15, "uses are not capped with the history");
    assert!(approx(rec.success_count, 7.5));
}

#[test]
fn books_and_memory_bank_are_refused_untouched() {
    for collection in [Collection::Books, Collection::MemoryBank] {
        let mut rec = record_in(collection, NOW);
        let before = rec.clone();
        let err = apply_outcome(&mut rec, Outcome::Failed, NOW, OFF).expect_err("not scorable");
        assert_eq!(err, NotScorable { collection });
        assert_eq!(rec, before);
        assert!(err.to_string().contains(collection.as_str()));
    }
}

#[test]
fn time_weighting_off_ignores_age() {
    let mut rec = scored(Collection::History, 0.5, 1, 1.0);
    rec.last_used = Some(NOW - 300 * DAY);
    let effect = apply_outcome(&mut rec, Outcome::Worked, NOW, OFF).expect("scorable");
    assert!(approx(effect.time_weight, 1.0));
    assert!(approx(rec.score, 0.7));
}

#[test]
fn time_weighting_on_damps_by_days_since_last_use() {
    let mut rec = scored(Collection::History, 0.5, 1, 1.0);
    rec.last_used = Some(NOW - 30 * DAY);
    let effect = apply_outcome(&mut rec, Outcome::Worked, NOW, ON).expect("scorable");
    assert!(approx(effect.time_weight, 0.5));
    assert!(approx(rec.score, 0.6));
    // The next outcome right after is at full weight: the age restarted at this use.
    let effect = apply_outcome(&mut rec, Outcome::Failed, NOW + HOUR, ON).expect("scorable");
    assert!(approx(effect.time_weight, 1.0));
    assert!(approx(rec.score, 0.3));
}

#[test]
fn time_weight_counts_whole_days() {
    assert!(approx(time_weight(None, NOW), 1.0));
    assert!(approx(time_weight(Some(NOW - DAY + 1), NOW), 1.0));
    assert!(approx(
        time_weight(Some(NOW - DAY), NOW),
        1.0 / (1.0 + 1.0 / 30.0)
    ));
    assert!(approx(time_weight(Some(NOW - 60 * DAY), NOW), 1.0 / 3.0));
    assert!(
        approx(time_weight(Some(NOW + DAY), NOW), 1.0),
        "clock went back"
    );
    assert!(time_weight(Some(i64::MIN), i64::MAX) > 0.0);
}

#[test]
fn initial_scores() {
    assert!(approx(initial_score(Some(Outcome::Worked)), 0.7));
    assert!(approx(initial_score(Some(Outcome::Failed)), 0.2));
    assert!(approx(initial_score(Some(Outcome::Partial)), 0.55));
    assert!(approx(initial_score(Some(Outcome::Unknown)), 0.5));
    assert!(approx(initial_score(None), 0.5));
}

#[test]
fn wilson_oracle_values() {
    assert_eq!(round4(wilson_lower(1.0, 1.0)), 0.2065);
    assert_eq!(round4(wilson_lower(90.0, 100.0)), 0.8256);
    assert_eq!(round4(wilson_lower(50.0, 100.0)), 0.4038);
    assert_eq!(round4(wilson_lower(0.0, 0.0)), 0.5);
}

#[test]
fn wilson_is_guarded() {
    assert_eq!(wilson_lower(0.0, 5.0), 0.0);
    assert_eq!(wilson_lower(9.0, 3.0), wilson_lower(3.0, 3.0));
    assert_eq!(wilson_lower(-2.0, 3.0), 0.0);
    assert_eq!(wilson_lower(f64::NAN, 3.0), 0.0);
    for total in [-1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(wilson_lower(1.0, total), WILSON_UNTESTED);
    }
    assert!(wilson_lower(2.5, 3.0) > wilson_lower(2.0, 3.0));
    assert!(wilson_lower(30.0, 30.0) > wilson_lower(3.0, 3.0));
}

#[test]
fn learned_score_is_raw_before_any_use() {
    assert!(approx(
        learned_score(&scored(Collection::Working, 0.63, 0, 0.0)),
        0.63
    ));
}

#[test]
fn learned_score_blends_over_first_three_uses() {
    let one = scored(Collection::Working, 0.7, 1, 1.0);
    let w1 = wilson_lower(1.0, 1.0);
    assert!(approx(learned_score(&one), 0.7 * 2.0 / 3.0 + w1 / 3.0));
    let two = scored(Collection::Working, 0.9, 2, 2.0);
    let w2 = wilson_lower(2.0, 2.0);
    assert!(approx(learned_score(&two), 0.9 / 3.0 + w2 * 2.0 / 3.0));
    let three = scored(Collection::Working, 1.0, 3, 2.5);
    assert!(approx(learned_score(&three), wilson_lower(2.5, 3.0)));
}

#[test]
fn learned_score_estimates_successes_when_none_counted() {
    let failed_only = scored(Collection::Working, 0.2, 1, 0.0);
    let w = wilson_lower(0.2, 1.0);
    assert!(approx(
        learned_score(&failed_only),
        0.2 * 2.0 / 3.0 + w / 3.0
    ));
    let many = scored(Collection::History, 0.4, 4, 0.0);
    assert!(approx(learned_score(&many), wilson_lower(1.6, 4.0)));
    assert!(learned_score(&many) <= 1.0);
}

#[test]
fn memory_bank_quality_is_importance_times_confidence() {
    let mut fact = record_in(Collection::MemoryBank, NOW);
    assert!(
        approx(memory_bank_quality(&fact), 0.49),
        "defaults 0.7 × 0.7"
    );
    fact.importance = Some(0.9);
    fact.confidence = Some(0.8);
    assert!(approx(memory_bank_quality(&fact), 0.72));
    fact.confidence = Some(3.0);
    assert!(approx(memory_bank_quality(&fact), 0.9), "clamped to 1");
    fact.confidence = Some(f64::NAN);
    assert!(
        approx(memory_bank_quality(&fact), 0.63),
        "unusable value → default"
    );
}

#[test]
fn memory_bank_quality_blends_wilson_from_three_uses() {
    let mut fact = record_in(Collection::MemoryBank, NOW);
    fact.importance = Some(1.0);
    fact.confidence = Some(1.0);
    fact.uses = 2;
    fact.success_count = 0.0;
    assert!(approx(memory_bank_quality(&fact), 1.0));
    fact.uses = 3;
    assert!(approx(memory_bank_quality(&fact), 0.8));
    fact.success_count = 3.0;
    let w = wilson_lower(3.0, 3.0);
    assert!(approx(memory_bank_quality(&fact), 0.8 + 0.2 * w));
}

#[test]
fn learned_score_of_memory_bank_is_its_quality() {
    let mut fact = record_in(Collection::MemoryBank, NOW);
    fact.score = MEMORY_BANK_SCORE;
    fact.importance = Some(0.5);
    fact.confidence = Some(0.5);
    assert!(approx(learned_score(&fact), 0.25));
}

#[test]
fn bank_use_counts_without_scoring() {
    let mut fact = record_in(Collection::MemoryBank, NOW);
    fact.score = MEMORY_BANK_SCORE;
    for outcome in [
        Outcome::Worked,
        Outcome::Failed,
        Outcome::Partial,
        Outcome::Unknown,
    ] {
        track_use(&mut fact, outcome, NOW).expect("memory_bank");
    }
    assert!(approx(fact.score, 1.0));
    assert_eq!(fact.uses, 3);
    assert!(approx(fact.success_count, 1.5));
    assert_eq!(fact.outcome_history.len(), 3);
    assert_eq!(fact.last_outcome, Some(Outcome::Partial));
    let mut working = record_in(Collection::Working, NOW);
    let err = track_use(&mut working, Outcome::Worked, NOW).expect_err("not memory_bank");
    assert_eq!(err.collection, Collection::Working);
    assert_eq!(working.uses, 0);
}

#[test]
fn dynamic_weights_by_maturity() {
    assert_eq!(dynamic_weights(5, 0.8), (0.2, 0.8));
    assert_eq!(dynamic_weights(4, 0.8), (0.25, 0.75));
    assert_eq!(dynamic_weights(5, 0.79), (0.25, 0.75));
    assert_eq!(dynamic_weights(3, 0.7), (0.25, 0.75));
    assert_eq!(dynamic_weights(3, 0.69), (0.35, 0.65));
    assert_eq!(dynamic_weights(2, 0.5), (0.35, 0.65));
    assert_eq!(dynamic_weights(2, 0.49), (0.7, 0.3));
    assert_eq!(dynamic_weights(1, 0.99), (0.8, 0.2));
    assert_eq!(dynamic_weights(0, 0.5), (0.8, 0.2));
}

#[test]
fn prior_is_neutral_without_evidence() {
    assert_eq!(outcome_prior(&record_in(Collection::Books, NOW)), 0.0);
    let mut takeaway = record_in(Collection::Working, NOW);
    takeaway.score = initial_score(Some(Outcome::Worked));
    assert_eq!(
        outcome_prior(&takeaway),
        0.0,
        "an initial score is not evidence"
    );
}

#[test]
fn prior_follows_outcomes() {
    let mut good = record_in(Collection::Working, NOW);
    let mut bad = record_in(Collection::Working, NOW);
    for i in 0..3 {
        apply_outcome(&mut good, Outcome::Worked, NOW + i, OFF).expect("scorable");
        apply_outcome(&mut bad, Outcome::Failed, NOW + i, OFF).expect("scorable");
    }
    let (g, b) = (outcome_prior(&good), outcome_prior(&bad));
    assert!(g > 0.5 && g <= 1.0, "3 of 3 worked: {g}");
    assert!((-1.0..-0.5).contains(&b), "3 of 3 failed: {b}");
    // Wilson alone would have put 3/3 below neutral; the prior must not.
    assert!(wilson_score(&good) < 0.5);
}

#[test]
fn prior_of_promoted_memory_uses_raw_score() {
    let mut promoted = scored(Collection::Patterns, 0.9, 0, 0.0);
    promoted.outcome_history.push(crate::record::OutcomeEntry {
        outcome: Outcome::Worked,
        at: NOW,
    });
    assert!(approx(outcome_prior(&promoted), 0.8));
}

#[test]
fn prior_of_memory_bank_is_centred_quality() {
    let mut fact = record_in(Collection::MemoryBank, NOW);
    fact.importance = Some(0.9);
    fact.confidence = Some(0.9);
    assert!(approx(outcome_prior(&fact), 2.0 * 0.81 - 1.0));
    fact.importance = Some(0.0);
    assert!(approx(outcome_prior(&fact), -1.0));
}

#[test]
fn prior_stays_in_range() {
    for score in [0.0, 0.3, 1.0, 5.0, f64::NAN] {
        for (uses, successes) in [
            (1, 0.0),
            (1, 1.0),
            (40, 40.0),
            (40, 80.0),
            (3, f64::INFINITY),
        ] {
            let rec = scored(Collection::History, score, uses, successes);
            let prior = outcome_prior(&rec);
            assert!(
                (-1.0..=1.0).contains(&prior),
                "{score} {uses} {successes}: {prior}"
            );
        }
    }
}

#[test]
fn apply_prior_effect_is_bounded_by_weight() {
    for base in [-2.0, -0.3, 0.0, 0.02, 0.5, 0.91, 12.0] {
        for prior in [-1.5, -1.0, -0.4, 0.0, 0.7, 1.0, 3.0] {
            for weight in [0.0, 0.05, 0.3, 1.0] {
                let ranked = apply_prior(base, prior, weight);
                let bound = weight * f64::abs(base) + 1e-12;
                assert!((ranked - base).abs() <= bound, "{base} {prior} {weight}");
            }
        }
    }
    assert!(approx(apply_prior(0.5, 1.0, 0.2), 0.6));
    assert!(approx(apply_prior(0.5, -1.0, 0.2), 0.4));
    assert!(
        approx(apply_prior(0.5, 0.5, 5.0), 0.75),
        "weight clamped to 1"
    );
}

#[test]
fn apply_prior_direction_and_guards() {
    assert!(
        apply_prior(-1.0, 1.0, 0.1) > -1.0,
        "positive prior raises a negative logit"
    );
    assert!(apply_prior(-1.0, -1.0, 0.1) < -1.0);
    assert_eq!(apply_prior(0.0, 1.0, 1.0), 0.0);
    assert_eq!(apply_prior(0.5, f64::NAN, 0.5), 0.5);
    assert_eq!(apply_prior(0.5, 1.0, f64::NAN), 0.5);
    assert!(apply_prior(f64::NAN, 1.0, 0.5).is_nan());
}

#[test]
fn scoring_targets_follow_related_semantics() {
    let cached: Vec<String> = ["a", "b", "a", "c"].map(String::from).to_vec();
    assert_eq!(scoring_targets(&cached, None), ["a", "b", "c"]);
    assert!(scoring_targets(&cached, Some(&[])).is_empty());
    let related: Vec<String> = ["z", "b", "z", ""].map(String::from).to_vec();
    assert_eq!(scoring_targets(&cached, Some(&related)), ["z", "b"]);
}

/// Issue 12: a wrong memory_bank fact scored failed three times was injected forever. Now each
/// failure lowers its confidence, the third without a success in between disputes it, and a
/// success clears the dispute.
#[test]
fn memory_bank_failures_lower_confidence_and_three_dispute_the_fact() {
    let mut fact = record_in(Collection::MemoryBank, NOW);
    fact.score = MEMORY_BANK_SCORE;
    let quality_before = memory_bank_quality(&fact);
    for n in 1..=3 {
        assert!(!disputed(&fact), "not yet after {} failures", n - 1);
        track_use(&mut fact, Outcome::Failed, NOW + n).unwrap();
    }
    assert_eq!(
        fact.score, MEMORY_BANK_SCORE,
        "memory_bank scores never move"
    );
    assert!((fact.confidence.unwrap() - BANK_CONFIDENCE_FLOOR).abs() < 1e-9);
    assert!(memory_bank_quality(&fact) < quality_before / 3.0);
    assert!(disputed(&fact));
    track_use(&mut fact, Outcome::Partial, NOW + 10).unwrap();
    assert!(disputed(&fact), "partial neither counts nor clears");
    track_use(&mut fact, Outcome::Worked, NOW + 11).unwrap();
    assert!(!disputed(&fact), "a success clears the dispute");
    assert_eq!(failures_since_success(&fact), 0);
}

#[test]
fn three_failures_dispute_any_memory_whatever_its_history() {
    let mut rec = scored(Collection::Patterns, 0.95, 9, 8.0);
    for o in [
        Outcome::Worked,
        Outcome::Failed,
        Outcome::Unknown,
        Outcome::Failed,
    ] {
        apply_outcome(&mut rec, o, NOW, false).unwrap();
    }
    assert!(!disputed(&rec));
    apply_outcome(&mut rec, Outcome::Failed, NOW, false).unwrap();
    assert!(disputed(&rec));
}
