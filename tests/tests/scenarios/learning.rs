//! Learning: outcomes promote, demote and delete; scoring happens once.

use super::*;
use proto::*;
use serde_json::json;

#[test]
fn learning_worked_promotes_working_to_history() {
    let d = tests::start_daemon();
    let id = takeaway(
        &d,
        "Run database migrations with `make migrate` before starting the API",
    );
    embedded(&d);
    for _ in 0..3 {
        scored_turn(&d, "l", "how do I run the database migrations?", "worked");
    }
    eventually("promotion to history", || {
        lookup(&d, &id).is_some_and(|m| m.collection == "history")
    });
    let m = lookup(&d, &id).unwrap();
    assert_ne!(m.id, id, "a new id, and the old one still finds it");
}

#[test]
fn learning_failed_demotes_and_deletes() {
    let d = tests::start_daemon();
    let id = takeaway(&d, "The deploy script lives in scripts/old_deploy.sh");
    embedded(&d);
    for _ in 0..3 {
        scored_turn(&d, "l", "where is the deploy script?", "failed");
    }
    eventually("deletion of the misleading memory", || {
        lookup(&d, &id).is_none()
    });
    let s: StatsResponse = d.get("/api/stats");
    assert!(
        s.lifecycle
            .keys()
            .any(|k| k.starts_with("deleted_low_score")),
        "{:?}",
        s.lifecycle
    );
}

#[test]
fn learning_related_empty_scores_nothing() {
    let d = tests::start_daemon();
    let id = bank(&d, "The staging cluster is called kestrel");
    embedded(&d);
    prompt(&d, "l", "what is the staging cluster called?");
    stop(&d, "l", "kestrel");
    assert!(prompt(&d, "l", "thanks").contains("<memd-score-required>"));
    let r: RecordOutcomeResponse = d.post(
        "/api/record-outcome",
        &json!({"conversation_id": "l", "outcome": "worked", "related": []}),
    );
    assert_eq!(r.documents_scored, 1, "only the exchange itself");
    assert_eq!(lookup(&d, &id).unwrap().uses, 0);
}

#[test]
fn learning_the_sidecar_scores_when_the_agent_did_not() {
    // Covered in depth by tests/sidecar.rs; here: the default local-only chain is offered.
    let d = tests::start_daemon();
    prompt(&d, "l", "first");
    stop(&d, "l", "first answer");
    prompt(&d, "l", "second");
    let r: StopResponse = d.post(
        "/api/hooks/stop",
        &json!({"conversation_id": "l", "user_message": "second", "assistant_response": "x"}),
    );
    assert!(r.needs_sidecar && !r.scoring_complete);
    let data = r.sidecar_data.expect("sidecar data");
    assert_eq!(data.exchange.user, "first");
    assert_eq!(data.current_user_message, "second");
    assert!(
        data.targets.iter().all(|t| t.kind == TargetKind::Local),
        "remote targets need opt-in"
    );
}

#[test]
fn learning_no_double_scoring() {
    let d = tests::start_daemon();
    let id = bank(&d, "Ada's editor is Helix");
    embedded(&d);
    prompt(&d, "l", "what editor does Ada use?");
    stop(&d, "l", "Helix");
    prompt(&d, "l", "right");
    let a: RecordOutcomeResponse = d.post(
        "/api/record-outcome",
        &json!({"conversation_id": "l", "outcome": "worked"}),
    );
    let b: RecordOutcomeResponse = d.post(
        "/api/record-outcome",
        &json!({"conversation_id": "l", "outcome": "worked"}),
    );
    assert!(!a.already_scored && b.already_scored);
    assert_eq!(lookup(&d, &id).unwrap().uses, 1);
    let r: StopResponse = d.post(
        "/api/hooks/stop",
        &json!({"conversation_id": "l", "user_message": "right", "assistant_response": "ok"}),
    );
    assert!(
        !r.needs_sidecar && r.scoring_complete,
        "scored by the agent: no sidecar"
    );
}
