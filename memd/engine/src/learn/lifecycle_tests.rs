use super::lifecycle::*;
use super::scoring::apply_outcome;
use super::test_support::*;
use proto::{Collection, Outcome, Value};

const PROMOTE_HISTORY: Option<Transition> = Some(Transition::Promote {
    to: Collection::History,
});
const PROMOTE_PATTERNS: Option<Transition> = Some(Transition::Promote {
    to: Collection::Patterns,
});
const DEMOTE: Option<Transition> = Some(Transition::Demote {
    to: Collection::History,
});
const DELETE_LOW: Option<Transition> = Some(Transition::Delete {
    reason: DeleteReason::LowScore,
});

fn next(collection: Collection, score: f64, uses: u32, successes: f64) -> Option<Transition> {
    next_transition(&scored(collection, score, uses, successes), NOW)
}

#[test]
fn working_to_history_thresholds() {
    assert_eq!(next(Collection::Working, 0.7, 2, 0.0), PROMOTE_HISTORY);
    assert_eq!(next(Collection::Working, 1.0, 9, 9.0), PROMOTE_HISTORY);
    assert_eq!(next(Collection::Working, 0.6999, 2, 2.0), None);
    assert_eq!(next(Collection::Working, 0.9, 1, 1.0), None);
}

#[test]
fn history_to_patterns_thresholds() {
    assert_eq!(next(Collection::History, 0.9, 3, 5.0), PROMOTE_PATTERNS);
    assert_eq!(next(Collection::History, 0.8999, 3, 5.0), None);
    assert_eq!(next(Collection::History, 0.95, 2, 5.0), None);
    assert_eq!(next(Collection::History, 0.95, 6, 4.5), None);
    assert_eq!(next(Collection::History, 0.95, 6, f64::NAN), None);
}

#[test]
fn patterns_demote_below_point_four() {
    assert_eq!(next(Collection::Patterns, 0.3999, 5, 5.0), DEMOTE);
    assert_eq!(next(Collection::Patterns, 0.4, 5, 5.0), None);
    assert_eq!(
        next(Collection::Patterns, 1.0, 50, 50.0),
        None,
        "patterns is the top"
    );
}

#[test]
fn deletion_at_or_below_point_two_for_established_memories() {
    for collection in [
        Collection::Working,
        Collection::History,
        Collection::Patterns,
    ] {
        assert_eq!(next(collection, 0.2, 3, 0.0), DELETE_LOW, "{collection:?}");
        assert_ne!(
            next(collection, 0.2001, 3, 0.0),
            DELETE_LOW,
            "{collection:?}"
        );
    }
    // A pattern that collapsed is deleted outright rather than demoted first.
    assert_eq!(next(Collection::Patterns, 0.0, 9, 1.0), DELETE_LOW);
}

#[test]
fn new_memories_get_the_lenient_threshold_for_seven_days() {
    let mut young = scored(Collection::Working, 0.15, 1, 0.0);
    young.created_at = NOW - NEW_ITEM_AGE_MS + 1;
    assert_eq!(next_transition(&young, NOW), None);
    // 0.5 → 0.7 (worked) → 0.4 → 0.1: three failures, and it goes (issue 12).
    young.score = 0.1;
    assert_eq!(next_transition(&young, NOW), DELETE_LOW);
    young.score = 0.1001;
    assert_eq!(next_transition(&young, NOW), None);
    let mut week_old = scored(Collection::Working, 0.15, 1, 0.0);
    week_old.created_at = NOW - NEW_ITEM_AGE_MS;
    assert_eq!(deletion_threshold(&week_old, NOW), DELETE_BELOW);
    assert_eq!(next_transition(&week_old, NOW), DELETE_LOW);
}

#[test]
fn a_young_memory_with_a_track_record_gets_no_extra_chance() {
    for collection in [Collection::History, Collection::Patterns] {
        let mut proven = scored(collection, 0.1, 5, 5.0);
        proven.created_at = NOW - 1;
        assert_eq!(
            deletion_threshold(&proven, NOW),
            DELETE_BELOW,
            "{collection:?}"
        );
        assert_eq!(next_transition(&proven, NOW), DELETE_LOW, "{collection:?}");
    }
    // Demoted back to working: it was judged before, so the regular threshold applies.
    let mut demoted = scored(Collection::Working, 0.15, 4, 0.0);
    demoted.created_at = NOW - 1;
    demoted.former_ids = vec!["history_1".into()];
    assert_eq!(next_transition(&demoted, NOW), DELETE_LOW);
    // An imported memory's own old id (same collection) is no track record: still lenient.
    let mut imported = scored(Collection::Working, 0.15, 4, 0.0);
    imported.created_at = NOW - 1;
    imported.former_ids = vec!["working_1a2b3c4d".into()];
    assert_eq!(deletion_threshold(&imported, NOW), NEW_ITEM_DELETE_BELOW);
    // Three failures in a row take a proven note from 1.0 to 0.1: deleted, not kept.
    let mut note = scored(Collection::Patterns, 1.0, 7, 7.0);
    note.created_at = NOW - 1;
    for _ in 0..3 {
        apply_outcome(&mut note, Outcome::Failed, NOW, false).expect("scorable");
    }
    assert_eq!(
        next_transition(&note, NOW),
        DELETE_LOW,
        "score {}",
        note.score
    );
}

#[test]
fn books_and_memory_bank_never_transition() {
    for collection in [Collection::Books, Collection::MemoryBank] {
        for score in [0.0, 0.15, 0.39, 0.95, 1.0] {
            assert_eq!(
                next(collection, score, 10, 10.0),
                None,
                "{collection:?} {score}"
            );
        }
        let mut ancient = scored(collection, 0.0, 0, 0.0);
        ancient.created_at = NOW - 3650 * DAY;
        assert!(!expired(&ancient, NOW), "{collection:?}");
    }
}

#[test]
fn working_expires_after_24_hours() {
    let mut rec = record_in(Collection::Working, NOW - WORKING_MAX_AGE_MS);
    assert!(!expired(&rec, NOW));
    rec.created_at -= 1;
    assert!(expired(&rec, NOW));
    rec.created_at = NOW + HOUR;
    assert!(!expired(&rec, NOW), "a future timestamp is age 0");
}

#[test]
fn history_expires_30_days_after_entering_history() {
    let mut rec = record_in(Collection::History, NOW - HISTORY_MAX_AGE_MS);
    assert!(!expired(&rec, NOW));
    rec.created_at -= 1;
    assert!(expired(&rec, NOW));
    // Created 60 days ago, demoted into history 10 days ago: not expired.
    rec.created_at = NOW - 60 * DAY;
    let entered = NOW - 10 * DAY;
    rec.metadata
        .insert(PROMOTED_AT_KEY.into(), Value::Number(entered as f64));
    assert_eq!(entered_collection_at(&rec), entered);
    assert!(!expired(&rec, NOW));
    rec.metadata.insert(
        PROMOTED_AT_KEY.into(),
        Value::Number((NOW - HISTORY_MAX_AGE_MS - 1) as f64),
    );
    assert!(expired(&rec, NOW));
}

#[test]
fn unusable_promoted_at_falls_back_to_created_at() {
    let mut rec = record_in(Collection::History, NOW - 40 * DAY);
    for bad in [
        Value::from("yesterday"),
        Value::Number(f64::NAN),
        Value::Number(0.0),
    ] {
        rec.metadata.insert(PROMOTED_AT_KEY.into(), bad);
        assert_eq!(entered_collection_at(&rec), rec.created_at);
        assert!(expired(&rec, NOW));
    }
}

#[test]
fn patterns_never_expire() {
    let rec = record_in(Collection::Patterns, NOW - 3650 * DAY);
    assert!(!expired(&rec, NOW));
}

#[test]
fn promote_moves_and_keeps_former_ids() {
    let mut rec = scored(Collection::Working, 0.9, 2, 2.0);
    rec.id = "working_aaaaaaaaaaaa".into();
    let moved = promote(
        &rec,
        Collection::History,
        "history_bbbbbbbbbbbb".into(),
        NOW,
    )
    .expect("working → history");
    assert_eq!(moved.id, "history_bbbbbbbbbbbb");
    assert_eq!(moved.collection, Collection::History);
    assert_eq!(moved.former_ids, ["working_aaaaaaaaaaaa"]);
    assert_eq!(moved.created_at, rec.created_at, "age is inherited");
    assert_eq!(moved.content, rec.content);
    assert_eq!(moved.score, 0.9);
    assert_eq!(moved.updated_at, NOW);
    assert_eq!(entered_collection_at(&moved), NOW);
    assert_eq!(
        (moved.uses, moved.success_count),
        (0, 0.0),
        "counters restart"
    );

    let top = promote(
        &moved,
        Collection::Patterns,
        "patterns_cccccccccccc".into(),
        NOW + 1,
    )
    .expect("history → patterns");
    assert_eq!(
        top.former_ids,
        ["working_aaaaaaaaaaaa", "history_bbbbbbbbbbbb"]
    );
}

#[test]
fn demotion_keeps_counters() {
    let mut rec = scored(Collection::Patterns, 0.35, 8, 6.0);
    rec.id = "patterns_cccccccccccc".into();
    rec.former_ids = vec!["working_aaaaaaaaaaaa".into(), "history_bbbbbbbbbbbb".into()];
    let down = promote(
        &rec,
        Collection::History,
        "history_bbbbbbbbbbbb".into(),
        NOW,
    )
    .expect("patterns → history");
    assert_eq!((down.uses, down.success_count), (8, 6.0));
    // The reused id is current again and no longer listed as former.
    assert_eq!(
        down.former_ids,
        ["working_aaaaaaaaaaaa", "patterns_cccccccccccc"]
    );
    assert_eq!(entered_collection_at(&down), NOW);
}

#[test]
fn promote_refuses_other_moves() {
    let cases = [
        (Collection::Working, Collection::Patterns),
        (Collection::History, Collection::Working),
        (Collection::Working, Collection::Working),
        (Collection::MemoryBank, Collection::History),
        (Collection::Books, Collection::History),
        (Collection::History, Collection::MemoryBank),
    ];
    for (from, to) in cases {
        let rec = record_in(from, NOW);
        let id = format!("{}_dddddddddddd", to.as_str());
        assert_eq!(
            promote(&rec, to, id, NOW),
            Err(MoveError::NotAllowed { from, to })
        );
    }
    let rec = record_in(Collection::Working, NOW);
    let err = promote(
        &rec,
        Collection::History,
        "patterns_eeeeeeeeeeee".into(),
        NOW,
    );
    assert!(matches!(err, Err(MoveError::IdMismatch { .. })));
}

/// The whole path under the documented counter reset: two `worked` lift a new exchange
/// into history, and patterns then take five further successes scored in history.
#[test]
fn promotion_flow_end_to_end() {
    let mut rec = record_in(Collection::Working, NOW);
    let mut now = NOW;
    let mut step = |rec: &mut crate::record::Record, outcome| {
        now += HOUR;
        apply_outcome(rec, outcome, now, false).expect("scorable");
        next_transition(rec, now)
    };
    assert_eq!(step(&mut rec, Outcome::Worked), None);
    assert_eq!(step(&mut rec, Outcome::Worked), PROMOTE_HISTORY);
    rec = promote(
        &rec,
        Collection::History,
        "history_000000000001".into(),
        NOW,
    )
    .expect("up");
    for _ in 0..4 {
        assert_eq!(step(&mut rec, Outcome::Worked), None, "success_count < 5");
    }
    assert_eq!(step(&mut rec, Outcome::Worked), PROMOTE_PATTERNS);
    rec = promote(
        &rec,
        Collection::Patterns,
        "patterns_000000000001".into(),
        NOW,
    )
    .expect("up");
    let path: Vec<_> = rec.moves.iter().map(|m| (m.from, m.to, m.at)).collect();
    assert_eq!(
        path,
        [
            (Collection::Working, Collection::History, NOW),
            (Collection::History, Collection::Patterns, NOW)
        ],
        "every move is kept with its date, for the dashboard's timeline"
    );
    assert_eq!(step(&mut rec, Outcome::Failed), None, "1.0 → 0.7");
    assert_eq!(
        step(&mut rec, Outcome::Failed),
        None,
        "0.4 exactly is not below 0.4"
    );
    assert_eq!(rec.score, 0.4);
    // 0.1 is under 0.2. Young as it is, the memory has a track record, so the new-memory
    // grace does not apply: deleted after its third failure in a row.
    assert_eq!(step(&mut rec, Outcome::Failed), DELETE_LOW);
}
