//! Verdict extraction from the shapes models really answer in.

use super::*;
use serde_json::json;

const IDS: [&str; 2] = ["patterns_a1", "history_b2"];

fn ok(text: &str) -> Verdict {
    parse_verdict(text, &IDS).unwrap_or_else(|e| panic!("{e:?} for {text}"))
}

#[test]
fn plain_json() {
    let v = ok(
        r#"{"exchange_outcome":"worked","memory_scores":{"patterns_a1":"worked","history_b2":"unknown"},"exchange_summary":"Restored bcrypt cost 12; login works."}"#,
    );
    assert_eq!(v.outcome, "worked");
    assert_eq!(v.memory_scores.len(), 2);
    assert_eq!(v.memory_scores["patterns_a1"], "worked");
    assert_eq!(v.summary, "Restored bcrypt cost 12; login works.");
}

#[test]
fn fenced_json() {
    let v = ok(
        "```json\n{\"exchange_outcome\": \"failed\", \"memory_scores\": {\"history_b2\": \"failed\"}, \"exchange_summary\": \"Wrong file edited.\"}\n```",
    );
    assert_eq!(v.outcome, "failed");
    assert_eq!(v.memory_scores["history_b2"], "failed");
}

#[test]
fn prose_around_json_with_braces_in_strings() {
    let text = "Sure! Here is my assessment of the exchange:\n\n{\"exchange_outcome\": \"partial\", \"memory_scores\": {}, \"exchange_summary\": \"Fixed {cart} rounding but not tax.\"}\n\nLet me know if you need more.";
    let v = ok(text);
    assert_eq!(v.outcome, "partial");
    assert!(v.memory_scores.is_empty());
    assert_eq!(v.summary, "Fixed {cart} rounding but not tax.");
}

#[test]
fn several_objects_the_last_verdict_wins() {
    let text = "Format: {\"exchange_outcome\": \"<worked|failed|partial|unknown>\"}\nAnswer: {\"exchange_outcome\": \"unknown\", \"exchange_summary\": \"No follow-up signal.\"}";
    let v = ok(text);
    assert_eq!(v.outcome, "unknown");
    assert_eq!(v.summary, "No follow-up signal.");
}

#[test]
fn unmatched_brace_in_prose_does_not_hide_the_answer() {
    let v = ok("I considered { but then: {\"exchange_outcome\":\"Worked\"}");
    assert_eq!(v.outcome, "worked", "outcomes are case-normalised");
}

#[test]
fn invalid_outcome_is_rejected() {
    assert_eq!(
        parse_verdict(r#"{"exchange_outcome":"success","memory_scores":{}}"#, &IDS),
        Err(VerdictError::InvalidOutcome)
    );
    assert_eq!(
        parse_verdict(r#"{"exchange_outcome":3}"#, &IDS),
        Err(VerdictError::InvalidOutcome)
    );
}

#[test]
fn no_json_is_unparseable() {
    for text in [
        "The user seemed happy.",
        "",
        "{not json}",
        r#"{"memory_scores":{"patterns_a1":"worked"}}"#,
    ] {
        assert_eq!(
            parse_verdict(text, &IDS),
            Err(VerdictError::Unparseable),
            "{text}"
        );
    }
}

#[test]
fn unknown_ids_and_invalid_scores_are_dropped() {
    let v = ok(
        r#"{"exchange_outcome":"worked","memory_scores":{"patterns_a1":"great","history_b2":"partial","made_up_9":"worked"}}"#,
    );
    assert_eq!(v.memory_scores.len(), 1);
    assert_eq!(v.memory_scores["history_b2"], "partial");
}

#[test]
fn summary_is_capped() {
    let long = "x".repeat(1000);
    let v = ok(&format!(
        r#"{{"exchange_outcome":"worked","exchange_summary":"{long}"}}"#
    ));
    assert_eq!(v.summary.chars().count(), MAX_SUMMARY_CHARS);
}

#[test]
fn answer_text_falls_back_to_reasoning_fields() {
    let content = json!({"choices":[{"message":{"role":"assistant","content":"A"}}]});
    assert_eq!(answer_text(&content).as_deref(), Some("A"));
    let reasoning =
        json!({"choices":[{"message":{"role":"assistant","content":"","reasoning_content":"B"}}]});
    assert_eq!(answer_text(&reasoning).as_deref(), Some("B"));
    let other =
        json!({"choices":[{"message":{"role":"assistant","content":null,"reasoning":"C"}}]});
    assert_eq!(answer_text(&other).as_deref(), Some("C"));
    assert_eq!(answer_text(&json!({"error":{"message":"x"}})), None);
}
