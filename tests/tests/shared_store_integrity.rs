//! Issue 36, the team store: what a teammate with a login role of their own could do to the
//! shared store and to another user's daemon, as the attack round did it (SQL straight to the
//! database as that role, `SET SESSION AUTHORIZATION`), against the schema `memd store
//! migrate` makes and real daemons. Needs PostgreSQL 16 with pgvector
//! (install/fetch-postgres.sh).

use memd_testkit::postgres::Postgres;
use serde_json::json;
use std::time::Duration;
use tests::project::prompt_in;
use tests::shared_store::{DB, daemon_as, drained, repo_for, search, team_database};

/// `sql` run as `role` itself (session user and current user), the way its daemon connects.
fn as_role(pg: &Postgres, role: &str, sql: &str) -> Result<String, String> {
    pg.psql(DB, &format!("SET SESSION AUTHORIZATION {role}; {sql}"))
}

fn admin(pg: &Postgres, sql: &str) -> String {
    pg.psql(DB, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Alice shares a memory-bank fact; its row's uid.
fn shared_fact(d: &tests::Daemon, content: &str) -> (String, String) {
    let r: proto::MemoryBankResponse = d.post(
        "/api/memory-bank/add",
        &json!({"content": content, "share": true}),
    );
    drained(d);
    let pg_uid = format!("SELECT uid FROM memd_memories WHERE id = '{}'", r.doc_id);
    (r.doc_id, pg_uid)
}

/// Item 4: a teammate took another user's next row ids, and that user's sync stopped for good.
#[test]
fn a_teammate_cannot_take_another_users_row_ids() {
    let pg = team_database(&["alice", "bob"]);
    let a = daemon_as(&pg, "alice");
    let (_, uid_query) = shared_fact(&a, "Staging deploys need the vpn-7 profile");
    let uid = admin(&pg, &uid_query);
    let (store, key) = uid.split_once(':').expect("uid <store>:<key>");
    let key: u64 = key.parse().expect("a numeric key");
    // Bob writes rows at alice's next twenty ids, under his own role.
    let squat = format!(
        "INSERT INTO memd_memories (uid, id, collection, content, record, score, uses, \
           success_count, last_writer, content_writer) \
         SELECT '{store}:' || k, 'memory_bank_squat' || k, 'memory_bank', 'squatted', '{{}}', \
           0.5, 0, 0, '{store}', '{store}' FROM generate_series({}, {}) k",
        key + 1,
        key + 20
    );
    let refused = as_role(&pg, "bob", &squat);
    assert!(refused.is_err(), "bob took alice's next ids: {refused:?}");
    assert_eq!(
        admin(
            &pg,
            "SELECT count(*) FROM memd_memories WHERE content = 'squatted'"
        ),
        "0"
    );
    // Alice's next memories are shared as usual.
    for i in 0..5 {
        a.post::<_, proto::MemoryBankResponse>(
            "/api/memory-bank/add",
            &json!({"content": format!("Fact number {i} about the vpn-7 profile"), "share": true}),
        );
    }
    drained(&a);
    let count = admin(
        &pg,
        &format!(
            "SELECT count(*) FROM memd_memories WHERE uid LIKE '{store}:%' AND owner = 'alice'"
        ),
    );
    assert_eq!(count, "6", "every fact of alice's reached the store");
}

/// Items 5 and 6: outcomes straight through `memd_record_outcome`, beyond what memd's rules
/// allow, with a writer that is not the caller's, and with labels memd does not know.
#[test]
fn outcomes_follow_memds_rules_in_the_database() {
    let pg = team_database(&["alice", "bob"]);
    let a = daemon_as(&pg, "alice");
    let (_, uid_query) = shared_fact(&a, "The billing service deploys with Nomad");
    let uid = admin(&pg, &uid_query);
    let alice_store = uid.split_once(':').unwrap().0.to_string();
    let bobs_store = "b0b0b0b0b0b0b0b0";
    // A store of bob's own (what his daemon claims at connect; absent before issue 36).
    let _ = as_role(
        &pg,
        "bob",
        &format!("SELECT memd_claim_store('{bobs_store}')"),
    );
    // `label` is SQL (a quoted label, or an expression making one).
    let outcome = |event: &str, label: &str, score: f64, conf: f64, writer: &str| {
        as_role(
            &pg,
            "bob",
            &format!(
                "SELECT memd_record_outcome('{event}', '{uid}', {label}, 1700000000000, \
                 {score}, true, 100, {conf}, '{writer}')"
            ),
        )
    };
    let row = || {
        admin(
            &pg,
            &format!(
                "SELECT score || ' ' || coalesce(confidence, -1) || ' ' || uses || ' ' || \
                 last_writer FROM memd_memories WHERE uid = '{uid}'"
            ),
        )
    };
    let before: Vec<String> = row().split(' ').map(str::to_string).collect();
    assert_eq!(before[2], "0", "{before:?}");
    // Eight failures with fresh event ids: a fact's score does not move; confidence stops at
    // its floor.
    for i in 0..8 {
        outcome(
            &format!("{bobs_store}:f{i}"),
            "'failed'",
            -1.0,
            -1.0,
            bobs_store,
        )
        .unwrap();
    }
    let after: Vec<String> = row().split(' ').map(str::to_string).collect();
    assert_eq!(
        after[0], before[0],
        "a memory-bank fact's score moved: {after:?}"
    );
    assert_eq!(after[1], "0.1", "confidence below its floor: {after:?}");
    assert_eq!(after[2], "8");
    assert_eq!(after[3], bobs_store, "the writer is the caller's store");
    // 120 more: at most 120 outcomes per sender and memory an hour are applied, each adding
    // what one outcome adds.
    let worked: Vec<String> = (0..120)
        .map(|i| {
            format!(
                "SELECT memd_record_outcome('{bobs_store}:w{i}', '{uid}', 'worked', \
                 1700000000000, 5, true, 100, 5, '{bobs_store}');"
            )
        })
        .collect();
    let _ = as_role(&pg, "bob", &worked.concat());
    let after: Vec<String> = row().split(' ').map(str::to_string).collect();
    assert_eq!(after[2], "120", "uses beyond the rate: {after:?}");
    assert_eq!(after[1], "1", "confidence above 1: {after:?}");
    let success = admin(
        &pg,
        &format!("SELECT success_count FROM memd_memories WHERE uid = '{uid}'"),
    );
    assert_eq!(success, "112", "112 worked outcomes at one success each");
    // A writer that is not one of the caller's stores is refused.
    let forged = outcome(
        &format!("{bobs_store}:x1"),
        "'unknown'",
        0.0,
        0.0,
        &alice_store,
    );
    assert!(forged.is_err(), "writer set to alice's store: {forged:?}");
    // Labels memd does not know never reach a row or the outcomes table.
    let meh = outcome(&format!("{bobs_store}:m1"), "'meh'", 0.0, 0.0, bobs_store);
    assert!(
        meh.as_ref().is_err_and(|e| e.contains("outcome must be")),
        "{meh:?}"
    );
    let huge = outcome(
        &format!("{bobs_store}:m2"),
        "repeat('x', 200000)",
        0.0,
        0.0,
        bobs_store,
    );
    assert!(
        huge.as_ref().is_err_and(|e| e.contains("outcome must be")),
        "{huge:?}"
    );
    assert_eq!(
        admin(
            &pg,
            "SELECT count(*) FROM memd_outcomes WHERE outcome NOT IN \
             ('worked', 'partial', 'failed', 'unknown')"
        ),
        "0"
    );
}

/// Items 6 and 7 at a teammate's daemon: a row with an unreadable outcome label (one written
/// before the database checked labels) still brings its owner's later edits, the log quotes
/// none of the label, and the fact enters bob's prompt marked as alice's.
#[test]
fn a_teammates_fact_is_marked_and_a_bad_label_stops_nothing() {
    let pg = team_database(&["alice", "bob"]);
    let a = daemon_as(&pg, "alice");
    let b = daemon_as(&pg, "bob");
    b.wait_embedded(Duration::from_secs(120));
    let (doc_id, uid_query) = shared_fact(&a, "Invoices are generated by the ledger-9 cron job");
    let uid = admin(&pg, &uid_query);
    tests::eventually("bob has alice's fact", || {
        search(&b, "who generates invoices")
            .iter()
            .any(|m| m.content.contains("ledger-9"))
    });
    let repo = repo_for(&b);
    let ctx = prompt_in(&b, &repo, "bob-1", "Who generates the invoices?");
    assert!(ctx.contains("ledger-9"), "{ctx}");
    let line = ctx.lines().find(|l| l.contains("ledger-9")).unwrap();
    assert!(
        line.contains("shared by alice"),
        "a teammate's fact reads like bob's own: {line}"
    );

    // A 200 KB label in the row, as the table owner could still find one from before.
    admin(
        &pg,
        &format!(
            "UPDATE memd_memories SET outcome_history = outcome_history || \
             jsonb_build_array(jsonb_build_object('outcome', repeat('meh', 70000), 'at', 1)) \
             WHERE uid = '{uid}'"
        ),
    );
    let log_before = std::fs::metadata(&b.log).map_or(0, |m| m.len());
    a.post::<_, serde_json::Value>(
        "/api/memory-bank/update",
        &json!({"doc_id": doc_id,
                "new_content": "Invoices are generated by the ledger-10 cron job since May"}),
    );
    drained(&a);
    tests::eventually("alice's edit reaches bob", || {
        search(&b, "who generates invoices")
            .iter()
            .any(|m| m.content.contains("ledger-10"))
    });
    let log = std::fs::read_to_string(&b.log).unwrap_or_default();
    let grown = log.len() as u64 - log_before.min(log.len() as u64);
    assert!(grown < 20_000, "bob's log grew {grown} bytes");
    assert!(!log.contains(&"meh".repeat(100)), "the label was logged");
}
