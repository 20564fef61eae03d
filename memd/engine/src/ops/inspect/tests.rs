//! Turns, injections and hit rates rebuilt from ledger lines written in the hooks' real order.

use super::conversations::turns_of;
use super::health::HealthSeries;
use super::injections_of;
use crate::learn::test_support::record_in;
use crate::trace::{TraceEntry, TraceEvent};
use proto::Collection;

fn line(event: TraceEvent, conv: &str, ts: &str) -> TraceEntry {
    TraceEntry {
        ts: ts.to_string(),
        ..TraceEntry::new(event, conv)
    }
}

fn prompt(conv: &str, ts: &str, injected: &[&str]) -> TraceEntry {
    TraceEntry {
        injected: injected.iter().map(|s| s.to_string()).collect(),
        ..line(TraceEvent::GetContext, conv, ts)
    }
}

fn stop(conv: &str, ts: &str, doc: &str) -> TraceEntry {
    TraceEntry {
        doc_id: Some(doc.into()),
        ..line(TraceEvent::Stop, conv, ts)
    }
}

fn outcome(conv: &str, ts: &str, word: &str, scored: &[&str]) -> TraceEntry {
    TraceEntry {
        outcome: Some(word.into()),
        scored: scored.iter().map(|s| s.to_string()).collect(),
        note: Some("agent".into()),
        ..line(TraceEvent::RecordOutcome, conv, ts)
    }
}

fn session_start(conv: &str, ts: &str, injected: &[&str]) -> TraceEntry {
    TraceEntry {
        note: Some(crate::trace::SESSION_START.into()),
        ..prompt(conv, ts, injected)
    }
}

/// The order the hooks write: a session start injects the profile; the agent scores turn 1
/// during turn 2 (after turn 2's prompt, before its stop); turn 2 is scored by the sidecar
/// after turn 3's stop; turn 3 is never scored; another conversation's lines interleave. Each
/// outcome line names the exchange it scored first.
fn ledger() -> Vec<TraceEntry> {
    vec![
        session_start("a", "2026-11-20T09:59:59Z", &["memory_bank_aaaaaaaaaaaa"]),
        prompt("a", "2026-11-20T10:00:00Z", &["memory_bank_aaaaaaaaaaaa"]),
        stop("a", "2026-11-20T10:00:05Z", "working_000000000001"),
        prompt("b", "2026-11-20T10:00:06Z", &["memory_bank_aaaaaaaaaaaa"]),
        prompt("a", "2026-11-20T10:01:00Z", &["patterns_bbbbbbbbbbbb"]),
        outcome(
            "a",
            "2026-11-20T10:01:01Z",
            "worked",
            &["working_000000000001", "memory_bank_aaaaaaaaaaaa"],
        ),
        stop("a", "2026-11-20T10:01:05Z", "working_000000000002"),
        prompt("a", "2026-11-21T09:00:00Z", &["memory_bank_aaaaaaaaaaaa"]),
        stop("a", "2026-11-21T09:00:05Z", "working_000000000003"),
        TraceEntry {
            note: Some("sidecar".into()),
            ..outcome(
                "a",
                "2026-11-21T09:00:09Z",
                "failed",
                &["working_000000000002", "patterns_bbbbbbbbbbbb"],
            )
        },
    ]
}

fn turns(conv: &str) -> Vec<super::conversations::Turn> {
    let all = ledger();
    let lines: Vec<&TraceEntry> = all.iter().filter(|e| e.conversation_id == conv).collect();
    turns_of(&lines)
}

#[test]
fn each_outcome_lands_on_the_turn_whose_exchange_it_names() {
    let turns = turns("a");
    assert_eq!(turns.len(), 3, "a session start is not a turn");
    let words: Vec<_> = turns.iter().map(|t| t.outcome.as_deref()).collect();
    assert_eq!(words, [Some("worked"), Some("failed"), None]);
    let stored: Vec<_> = turns.iter().map(|t| t.stored.as_deref()).collect();
    assert_eq!(
        stored,
        [
            Some("working_000000000001"),
            Some("working_000000000002"),
            Some("working_000000000003")
        ]
    );
    assert!(
        turns[0].injected[0].scored,
        "the fact was scored with turn 1"
    );
    assert!(
        turns[1].injected[0].scored,
        "the pattern with turn 2, by the sidecar"
    );
    assert!(
        !turns[2].injected[0].scored,
        "turn 3 was never scored, though the fact had been scored before"
    );
    let by: Vec<_> = turns.iter().map(|t| t.scored_by.as_deref()).collect();
    assert_eq!(by, [Some("agent"), Some("sidecar"), None]);
}

#[test]
fn a_memory_lists_every_turn_it_was_injected_into_under_any_of_its_ids() {
    let mut fact = record_in(Collection::MemoryBank, 0);
    fact.id = "memory_bank_cccccccccccc".into();
    fact.former_ids = vec!["memory_bank_aaaaaaaaaaaa".into()];
    let seen = injections_of(&fact, &ledger());
    let summary: Vec<_> = seen
        .iter()
        .map(|i| {
            (
                i.conversation_id.as_str(),
                i.outcome.as_deref(),
                i.session_start,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("a", None, false),
            ("b", None, false),
            ("a", Some("worked"), false),
            ("a", None, true)
        ],
        "newest first; conversation b never scored its turn"
    );
    fact.former_ids.clear();
    assert!(injections_of(&fact, &ledger()).is_empty());
}

#[test]
fn hit_rate_counts_partial_as_half() {
    let mut h = HealthSeries::default();
    assert_eq!(h.hit_rate(), None);
    h.outcomes.insert("worked".into(), 2);
    h.outcomes.insert("partial".into(), 2);
    h.outcomes.insert("failed".into(), 4);
    h.outcomes.insert("unknown".into(), 9);
    assert_eq!(h.hit_rate(), Some(3.0 / 8.0));
}
