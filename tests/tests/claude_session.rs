//! Claude Code's session events through the real hooks and a real daemon, with hand-made hook
//! JSON: the SessionStart brief (facts and proven patterns) and the digest `PreCompact` stores
//! before the context is cut. The real client runs the same paths in client_claude.rs.

use proto::*;
use serde_json::{Value, json};
use std::path::Path;
use tests::{Daemon, digests, run_hook};

const SECRET: &str = "ghp_R8mT2xKq9ZwV4nLs7YbP1cJd6FhG3uAe5oWi";

fn hook(d: &Daemon, bin: &str, input: Value) -> String {
    let (code, out, err, _) = run_hook(bin, &[], input.to_string().as_bytes(), &d.env());
    assert_eq!(code, 0, "{bin} failed: {err}");
    out
}

/// One Claude Code turn: the prompt hook, the agent's score of the previous exchange with
/// `summary` (when asked for and given), the transcript lines, the stop hook.
fn turn(
    d: &Daemon,
    session: &str,
    transcript: &Path,
    (prompt, answer): (&str, &str),
    summary: Option<&str>,
) {
    let out = hook(
        d,
        "hook-prompt",
        json!({"session_id": session, "transcript_path": transcript, "cwd": "/tmp",
               "hook_event_name": "UserPromptSubmit", "prompt": prompt}),
    );
    if let Some(summary) = summary {
        assert!(out.contains("<memd-score-required>"), "{out}");
        let r: RecordOutcomeResponse = d.post(
            "/api/record-outcome",
            &json!({"conversation_id": session, "outcome": "worked",
                    "exchange_summary": summary}),
        );
        assert!(r.summary_stored, "{r:?}");
    }
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(transcript)
        .unwrap();
    writeln!(f, "{}", json!({"type": "user", "message": {"role": "user", "content": prompt}, "isSidechain": false})).unwrap();
    writeln!(f, "{}", json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": answer}]}})).unwrap();
    let stop = hook(
        d,
        "hook-stop",
        json!({"session_id": session, "transcript_path": transcript, "cwd": "/tmp",
               "hook_event_name": "Stop", "stop_hook_active": false,
               "last_assistant_message": answer}),
    );
    assert_eq!(stop, "", "the stop hook prints nothing");
}

fn pre_compact(d: &Daemon, session: &str, trigger: &str, instructions: Option<&str>) {
    let out = hook(
        d,
        "hook-stop",
        json!({"session_id": session, "transcript_path": "/nonexistent.jsonl", "cwd": "/tmp",
               "hook_event_name": "PreCompact", "trigger": trigger,
               "custom_instructions": instructions}),
    );
    assert_eq!(
        out, "",
        "PreCompact gets no output: memd never steers the compaction"
    );
}

#[test]
fn pre_compact_stores_a_digest_of_the_exchanges_since_the_last_one() {
    let d = tests::start_daemon();
    let session = "sess-compact";
    let t = d.data_dir().join("compact.jsonl");
    let deploy = format!("Run `make ship-billing` with token {SECRET}.");
    turn(
        &d,
        session,
        &t,
        ("How do I deploy the billing service?", &deploy),
        None,
    );
    // The agent scores turn 1 with a summary: the digest uses it in place of the exchange.
    turn(
        &d,
        session,
        &t,
        (
            "Thanks, that worked. Where are its logs?",
            "They go to /var/log/billing/api.log.",
        ),
        Some("Billing deploys with make ship-billing."),
    );

    pre_compact(&d, session, "manual", Some("keep the deploy steps"));
    let found = digests(&d, session);
    assert_eq!(found.len(), 1, "{found:?}");
    let text = found[0]["content"].as_str().unwrap();
    assert_eq!(
        text,
        "Conversation digest before /compact (2 exchanges):\n\
         - Billing deploys with make ship-billing.\n\
         - Asked: Thanks, that worked. Where are its logs? → They go to /var/log/billing/api.log.\n\
         Asked to keep: keep the deploy steps"
    );
    assert_eq!(found[0]["metadata"]["trigger"], "manual");
    assert_eq!(found[0]["collection"], "working");
    assert!(!found.iter().any(|r| r.to_string().contains(SECRET)));

    // Nothing new since: no second digest.
    pre_compact(&d, session, "manual", None);
    assert_eq!(digests(&d, session).len(), 1);

    // The next compaction covers only what came after the first.
    turn(
        &d,
        session,
        &t,
        ("Rotate the billing log weekly.", "Added a logrotate rule."),
        None,
    );
    pre_compact(&d, session, "auto", None);
    let found = digests(&d, session);
    assert_eq!(found.len(), 2, "{found:?}");
    let newest = found
        .iter()
        .find(|r| r["metadata"]["trigger"] == "auto")
        .expect("the automatic compaction's digest");
    assert_eq!(
        newest["content"],
        "Conversation digest before automatic compaction (1 exchange):\n\
         - Asked: Rotate the billing log weekly. → Added a logrotate rule."
    );
}

#[test]
fn an_automatic_compaction_mid_turn_keeps_the_prompt_in_progress() {
    let d = tests::start_daemon();
    let session = "sess-mid-turn";
    let t = d.data_dir().join("mid.jsonl");
    turn(
        &d,
        session,
        &t,
        ("Which port does billing use?", "Port 8420."),
        None,
    );
    // The next prompt starts a long turn; the context fills up before its stop.
    hook(
        &d,
        "hook-prompt",
        json!({"session_id": session, "transcript_path": t, "cwd": "/tmp",
               "hook_event_name": "UserPromptSubmit",
               "prompt": "Migrate the billing schema to v2"}),
    );
    pre_compact(&d, session, "auto", None);
    let found = digests(&d, session);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0]["content"],
        "Conversation digest before automatic compaction (1 exchange):\n\
         - Asked: Which port does billing use? → Port 8420.\n\
         In progress: Migrate the billing schema to v2"
    );
}

#[test]
fn pre_compact_refuses_an_unknown_trigger_by_name() {
    let d = tests::start_daemon();
    let (status, body) = d.post_raw(
        "/api/hooks/pre-compact",
        br#"{"conversation_id": "c", "trigger": "sometimes"}"#,
        true,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("trigger"), "{body}");
    let r: PreCompactResponse = d.post(
        "/api/hooks/pre-compact",
        &json!({"conversation_id": "never-seen", "trigger": "auto"}),
    );
    assert!(!r.stored, "nothing to digest: {r:?}");
}

/// A memory promoted to patterns for its outcomes, as an export line memd imports.
fn proven_pattern(d: &Daemon, content: &str, score: f64) -> String {
    let stored: RecordResponseResponse = d.post(
        "/api/record-response",
        &json!({"key_takeaway": format!("seed for {content}")}),
    );
    let (status, lines) = d.get_raw("/api/export?collection=working", true);
    assert_eq!(status, 200, "{lines}");
    let mut rec: Value = lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["id"] == stored.doc_id.as_str())
        .expect("the seed record");
    let id = format!("patterns_{}", &stored.doc_id["working_".len()..]);
    rec["id"] = json!(id);
    rec["former_ids"] = json!([]);
    rec["collection"] = json!("patterns");
    rec["content"] = json!(content);
    rec["score"] = json!(score);
    rec["uses"] = json!(6);
    rec["success_count"] = json!(6.0);
    rec["outcome_history"] = json!([]);
    let (status, body) = d.post_raw("/api/import", format!("{rec}\n").as_bytes(), true);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"imported\":1"), "{body}");
    id
}

#[test]
fn session_start_brief_holds_facts_and_proven_patterns() {
    let d = tests::start_daemon();
    let fact = "The billing API listens on port 8420 in development.";
    let _: MemoryBankResponse = d.post("/api/memory-bank/add", &json!({"content": fact}));
    let proven = proven_pattern(
        &d,
        "Before a billing release, run `make contract-tests`: it caught every broken client.",
        0.95,
    );
    let slipped = proven_pattern(&d, "Billing releases go out on Mondays.", 0.5);
    let _: RecordResponseResponse = d.post(
        "/api/record-response",
        &json!({"key_takeaway": "A fresh working note, not proven yet."}),
    );
    let out = hook(
        &d,
        "hook-prompt",
        json!({"session_id": "sess-brief", "transcript_path": "/nonexistent.jsonl",
               "cwd": "/tmp", "hook_event_name": "SessionStart", "source": "startup"}),
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let brief = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(brief.contains(fact), "{brief}");
    assert!(brief.contains("make contract-tests"), "{brief}");
    assert!(
        brief.contains(&proven),
        "the pattern's id is cited: {brief}"
    );
    assert!(
        !brief.contains(&slipped),
        "a pattern below 0.7 is not proven: {brief}"
    );
    assert!(
        !brief.contains("not proven yet"),
        "working notes stay out: {brief}"
    );
    // Fact first, then the pattern (the two kinds alternate).
    assert!(
        brief.find(fact) < brief.find("make contract-tests"),
        "{brief}"
    );
}
