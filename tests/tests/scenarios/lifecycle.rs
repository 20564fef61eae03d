//! Lifecycle: restarts, crashes, expiry, double fires, export and import.

use super::*;
use proto::*;
use serde_json::{Value, json};
use tests::run_hook;

#[test]
fn lifecycle_a_restart_keeps_everything() {
    let mut d = tests::start_daemon();
    let id = bank(&d, "The user's name is Ada");
    prompt(&d, "c", "hello");
    stop(&d, "c", "hi Ada");
    d.restart();
    assert!(lookup(&d, &id).is_some());
    assert!(
        prompt(&d, "c", "next").contains("<memd-score-required>"),
        "conversation state survived the restart"
    );
}

#[test]
fn lifecycle_kill_9_keeps_acknowledged_writes() {
    let mut d = tests::start_daemon();
    let ids: Vec<String> = (0..25)
        .map(|i| takeaway(&d, &format!("note {i}")))
        .collect();
    d.kill9();
    d.spawn(&[]);
    assert!(ids.iter().all(|id| lookup(&d, id).is_some()));
}

#[test]
fn lifecycle_session_state_expires() {
    let cfg = tempfile::tempdir().unwrap();
    std::fs::write(
        cfg.path().join("config.toml"),
        "[context]\nsession_ttl_hours = 0\n",
    )
    .unwrap();
    let mut d = tests::start_daemon();
    d.terminate();
    d.spawn(&[("MEMD_CONFIG_DIR", cfg.path().to_str().unwrap())]);
    prompt(&d, "old", "question");
    stop(&d, "old", "answer");
    // Any outcome wakes the background lifecycle, which forgets idle conversations.
    prompt(&d, "other", "q");
    stop(&d, "other", "a");
    prompt(&d, "other", "q2");
    let _: RecordOutcomeResponse = d.post(
        "/api/record-outcome",
        &json!({"conversation_id": "other", "outcome": "unknown"}),
    );
    eventually("session expiry", || {
        d.get::<StatsResponse>("/api/stats").conversations == 0
    });
    // "old" completed a turn; had its state survived, this prompt would ask for a score.
    assert!(!prompt(&d, "old", "again").contains("<memd-score-required>"));
}

#[test]
fn lifecycle_cursor_double_fire_is_ignored() {
    let d = tests::start_daemon();
    let mut env = d.env();
    env.push(("CURSOR_VERSION".into(), "1.7.2".into()));
    let stdin = json!({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "hi"});
    let (code, out, _, _) = run_hook("hook-prompt", &[], stdin.to_string().as_bytes(), &env);
    assert_eq!((code, out.as_str()), (0, ""));
    let s: StatsResponse = d.get("/api/stats");
    assert!(s.recent_hooks.is_empty(), "nothing reached memd");
}

#[test]
fn lifecycle_export_import_round_trip_is_lossless() {
    let d = tests::start_daemon();
    let id = bank(&d, "Ada deploys on Fridays");
    takeaway(&d, "a takeaway");
    let (s, jsonl) = d.get_raw("/api/export", true);
    assert_eq!(s, 200);
    assert_eq!(jsonl.lines().count(), 2);
    let e = tests::start_daemon();
    let (s, t) = e.post_raw("/api/import", jsonl.as_bytes(), true);
    assert_eq!(s, 200, "{t}");
    let again = e.post_raw("/api/import", jsonl.as_bytes(), true);
    assert_eq!(again.0, 200, "import is idempotent");
    let (_, exported_again) = e.get_raw("/api/export", true);
    let norm = |s: &str| {
        let mut v: Vec<Value> = s
            .lines()
            .map(|l| {
                let mut x: Value = serde_json::from_str(l).unwrap();
                x["key"] = json!(0);
                x
            })
            .collect();
        v.sort_by_key(|x| x["id"].as_str().unwrap_or("").to_string());
        v
    };
    assert_eq!(norm(&jsonl), norm(&exported_again));
    assert_eq!(lookup(&e, &id).unwrap().content, "Ada deploys on Fridays");
}
