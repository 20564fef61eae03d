//! Unit tests of `map`: every field form Roampal writes, and every refusal named.

use super::*;

fn row(collection: &str, id: &str, fields: &[(&str, Field)]) -> Row {
    Row {
        collection: collection.into(),
        id: id.into(),
        document: Some("The billing service deploys with Nomad".into()),
        fields: fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        stored_at: None,
        oversized: Vec::new(),
    }
}

fn s(v: &str) -> Field {
    Field::One(Scalar::Str(v.into()))
}

#[test]
fn inexact_floats_and_every_tag_form() {
    let r = row(
        "roampal_working",
        "working_0badcafe",
        &[
            ("score", Field::One(Scalar::Float(0.8999999999999999))),
            ("uses", Field::One(Scalar::Int(2))),
            ("tags", s(r#"["a", "b"]"#)),
            (
                "noun_tags",
                Field::Many(vec![Scalar::Str("b".into()), Scalar::Str("nomad".into())]),
            ),
            ("created_at", s("2026-11-20T10:00:00+00:00")),
        ],
    );
    let rec = to_record(&r, &Options::default()).unwrap();
    assert_eq!(rec.score, 0.9);
    assert_eq!(rec.uses, 2);
    assert_eq!(rec.tags, vec!["a", "b", "nomad"]);
    assert_eq!(rec.former_ids, vec!["working_0badcafe"]);
    assert_eq!(rec.id, memd_id(Collection::Working, "working_0badcafe"));
    assert_eq!(string_list(Some(&s("x, y,"))).unwrap(), vec!["x", "y"]);
}

#[test]
fn unreadable_fields_are_named() {
    let cases = [
        ("score", s("high"), "score"),
        ("score", Field::One(Scalar::Float(1.5)), "outside 0-1"),
        ("uses", Field::One(Scalar::Float(2.5)), "whole number"),
        ("status", s("deleted"), "status"),
        ("last_outcome", s("great"), "last_outcome"),
        (
            "outcome_history",
            s(r#"[{"outcome":"worked"}]"#),
            "timestamp",
        ),
        (
            "promotion_history",
            s(r#"[{"from":"attic","to":"history","timestamp":"2026-01-01T00:00:00"}]"#),
            "attic",
        ),
        ("created_at", s("last tuesday"), "created_at"),
    ];
    for (key, value, needle) in cases {
        let r = row("roampal_history", "history_0badcafe", &[(key, value)]);
        let e = to_record(&r, &Options::default()).unwrap_err();
        assert!(
            e.contains("history_0badcafe") && e.contains(needle),
            "{key}: {e}"
        );
    }
}

#[test]
fn promotions_give_moves_and_the_ids_an_agent_may_quote() {
    let r = row(
        "roampal_patterns",
        "patterns_1a2b3c4d",
        &[
            ("original_id", s("history_1a2b3c4d")),
            ("promoted_from", s("history")),
            (
                "promotion_history",
                s(
                    r#"[{"from":"working","to":"history","timestamp":"2026-11-20T10:00:00+00:00","score":0.8999999999999999},
                      {"from":"history","to":"patterns","timestamp":"2026-11-21T10:00:00+00:00"}]"#,
                ),
            ),
        ],
    );
    let rec = to_record(&r, &Options::default()).unwrap();
    assert_eq!(
        rec.former_ids,
        vec!["working_1a2b3c4d", "history_1a2b3c4d", "patterns_1a2b3c4d"]
    );
    assert_eq!(rec.moves.len(), 2);
    assert_eq!(rec.moves[1].to, Collection::Patterns);
    // An id that is still another row's own stays with that row.
    let opts = Options {
        live_ids: ["working_1a2b3c4d".to_string()].into(),
        ..Options::default()
    };
    let rec = to_record(&r, &opts).unwrap();
    assert_eq!(
        rec.former_ids,
        vec!["history_1a2b3c4d", "patterns_1a2b3c4d"]
    );
}

/// Roampal's hourly batch promotion writes only `promoted_from` and `promotion_time`.
#[test]
fn a_batch_promotion_keeps_the_working_id_and_the_time_it_entered_history() {
    let r = row(
        "roampal_history",
        "history_5e6f7a8b",
        &[
            ("promoted_from", s("working")),
            ("promotion_time", s("2026-11-20T10:00:00+00:00")),
            ("created_at", s("2026-10-01T10:00:00+00:00")),
        ],
    );
    let rec = to_record(&r, &Options::default()).unwrap();
    assert_eq!(rec.former_ids, vec!["working_5e6f7a8b", "history_5e6f7a8b"]);
    let entered = memd_engine::learn::lifecycle::entered_collection_at(&rec);
    assert_eq!(entered, when::parse_text("2026-11-20T10:00:00Z").unwrap());
    assert!(
        entered > rec.created_at,
        "aged from the promotion, not the creation"
    );
    assert_eq!(id_suffix("memory_bank_0a1b2c3d"), Some("0a1b2c3d"));
}

#[test]
fn project_goes_only_to_project_bound_memories() {
    let opts = Options {
        project: Some("github.com/acme/shop".into()),
        ..Options::default()
    };
    let bound = |c: &str, tags: &str| {
        let r = row(c, "x_1", &[("tags", s(tags))]);
        to_record(&r, &opts).unwrap().project.is_some()
    };
    assert!(bound("roampal_working", "[]"));
    assert!(bound("roampal_memory_bank", r#"["project"]"#));
    assert!(!bound("roampal_memory_bank", r#"["identity"]"#));
    assert!(!bound("roampal_books", "[]"));
}
