//! Team and multi-machine memory on a shared PostgreSQL store (issue 14), end to end: a real
//! PostgreSQL 16 with pgvector (install/fetch-postgres.sh), the schema and roles made by the
//! real `memd store` commands, two real daemons as two users, the real hooks and MCP bridge.
//!
//! `MEMD_SOAK_SECS` sets how long the concurrent-outcome test runs (default 5 s; the issue's
//! figure is 60).

use serde_json::json;
use std::time::{Duration, Instant};
use tests::Daemon;
use tests::project::{Bridge, memd_in, prompt_in, stop_in};
use tests::shared_store::*;

#[test]
fn a_shared_fact_reaches_a_teammate_and_private_memory_stays_private() {
    let pg = team_database(&["alice", "bob"]);
    let a = daemon_as(&pg, "alice");
    let b = daemon_as(&pg, "bob");
    a.wait_embedded(Duration::from_secs(120));
    let (repo_a, repo_b) = (repo_for(&a), repo_for(&b));

    // Alice's agent stores one fact for the team and one for herself, through MCP.
    let mut mcp = Bridge::start_in(&a, &repo_a);
    let shared_text = mcp.tool(
        "add_to_memory_bank",
        json!({"content": "Deploys of the app go through `make ship`; never push to the prod branch by hand.",
               "share": true}),
    );
    assert!(shared_text.contains("id:"), "{shared_text}");
    mcp.tool(
        "add_to_memory_bank",
        json!({"content": "Alice keeps her scratch notes for the billing rewrite in ~/notes/quokka.md"}),
    );
    drop(mcp);
    drained(&a);

    tests::eventually("bob's daemon has alice's shared fact", || {
        search(&b, "how do we deploy the app")
            .iter()
            .any(|m| m.content.contains("make ship"))
    });
    let got = search(&b, "how do we deploy the app");
    let fact = got
        .iter()
        .find(|m| m.content.contains("make ship"))
        .unwrap();
    assert!(fact.shared, "{fact:?}");
    assert_eq!(fact.owner.as_deref(), Some("alice"));
    b.wait_embedded(Duration::from_secs(60));

    // Bob's prompt hook injects it.
    let ctx = prompt_in(
        &b,
        &repo_b,
        "bob-1",
        "How do I deploy the app to production?",
    );
    assert!(ctx.contains("make ship"), "bob's context: {ctx}");
    assert!(
        !ctx.contains("quokka"),
        "alice's private fact reached bob: {ctx}"
    );
    assert!(
        search(&b, "where are the billing rewrite notes")
            .iter()
            .all(|m| !m.content.contains("quokka")),
        "alice's private fact is searchable by bob"
    );

    // Bob's exchange is private; then a shared marker, so once alice has the marker she has
    // read past everything bob wrote before it.
    stop_in(
        &b,
        &repo_b,
        "bob-1",
        "The zebra-7 canary host is the one to deploy to first.",
    );
    let marker: proto::MemoryBankResponse = b.post(
        "/api/memory-bank/add",
        &json!({"content": "The on-call rota for the app lives in the ops wiki", "share": true}),
    );
    drained(&b);
    tests::eventually("alice has bob's shared marker", || {
        tests::lookup(&a, &marker.doc_id).is_some()
    });
    assert!(
        search(&a, "which canary host to deploy to first")
            .iter()
            .all(|m| !m.content.contains("zebra-7")),
        "bob's private exchange reached alice"
    );
    let ctx = prompt_in(
        &a,
        &repo_a,
        "alice-1",
        "Which canary host do we deploy to first?",
    );
    assert!(!ctx.contains("zebra-7"), "alice's context: {ctx}");

    // The database itself refuses: as alice's role, bob's private rows do not exist.
    let bobs = "SELECT count(*) FROM memd_memories WHERE owner = 'bob' AND visibility = 'private'";
    assert_eq!(psql_as(&pg, "alice", bobs), "0");
    let as_admin: i64 = pg.psql(DB, bobs).unwrap().parse().unwrap();
    assert!(as_admin >= 1, "bob's exchange is in the store");
    assert_eq!(
        psql_as(
            &pg,
            "alice",
            "SELECT count(*) FROM memd_memories WHERE content LIKE '%zebra-7%'"
        ),
        "0"
    );
    // ... and alice's role cannot change bob's shared fact.
    let edited = psql_as(
        &pg,
        "alice",
        &format!(
            "WITH e AS (UPDATE memd_memories SET content = 'edited' WHERE id = '{}' RETURNING 1) \
             SELECT count(*) FROM e",
            marker.doc_id
        ),
    );
    assert_eq!(edited.lines().last(), Some("0"));
    // ... nor revoke it (which would make bob's and everyone's copies go away) ...
    let uid = pg
        .psql(
            DB,
            &format!(
                "SELECT uid FROM memd_memories WHERE id = '{}'",
                marker.doc_id
            ),
        )
        .unwrap();
    let forged = pg.psql(
        DB,
        &format!("SET ROLE alice; INSERT INTO memd_revoked (uid, owner) VALUES ('{uid}', 'alice')"),
    );
    assert!(
        forged.is_err_and(|e| e.contains("row-level security")),
        "a forged revocation is refused"
    );
    // ... nor block bob's outcomes by recording his next event ids first.
    let bob_store = uid.split(':').next().unwrap();
    pg.psql(
        DB,
        &format!(
            "SET SESSION AUTHORIZATION alice; SELECT memd_claim_store('a11ce0000000a11c'); \
             SELECT memd_record_outcome('{bob_store}:e999999', '{uid}', 'failed', 1, -5, true, \
             0, 0, 'a11ce0000000a11c')"
        ),
    )
    .unwrap();
    assert_eq!(
        pg.psql(
            DB,
            &format!("SELECT count(*) FROM memd_outcomes WHERE event_id = '{bob_store}:e999999'")
        )
        .unwrap(),
        "1",
        "recorded as alice's event, not bob's"
    );
    let score: f64 = pg
        .psql(
            DB,
            &format!("SELECT score FROM memd_memories WHERE uid = '{uid}'"),
        )
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        score >= 0.69,
        "one outcome moves a score by at most 0.3 ({score})"
    );

    // Bob cannot edit alice's fact through memd either; making it private takes it away.
    let (status, body) = b.post_raw(
        "/api/memory-bank/update",
        json!({"id": fact.id, "content": "Deploy however you like"})
            .to_string()
            .as_bytes(),
        true,
    );
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("alice"), "{body}");
    let out = memd_in(&a, &repo_a)
        .args(["share", &fact.id, "--private"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    tests::eventually("bob drops a fact alice made private", || {
        tests::lookup(&b, &fact.id).is_none()
    });
}

#[test]
fn postgres_down_mid_session_hooks_answer_and_every_exchange_lands_once() {
    let mut pg = team_database(&["bob"]);
    let mut b = daemon_as(&pg, "bob");
    let repo = repo_for(&b);
    // Returns how long the prompt hook took.
    let turn = |b: &Daemon, i: usize| {
        let started = Instant::now();
        prompt_in(
            b,
            &repo,
            "outage",
            &format!("Question {i} about the deploy pipeline"),
        );
        let prompt = started.elapsed();
        stop_in(
            b,
            &repo,
            "outage",
            &format!("Answer number {i}: spooled-exchange-{i}"),
        );
        prompt
    };
    for i in 0..3 {
        turn(&b, i);
    }
    drained(&b);

    pg.kill9();
    let mut slowest = Duration::ZERO;
    for i in 3..6 {
        slowest = slowest.max(turn(&b, i));
    }
    tests::eventually("memd notices the store is down", || {
        shared(&b).is_some_and(|s| !s.connected && s.last_error.is_some())
    });
    // A crash of memd while the store is down loses nothing that was acknowledged.
    b.kill9();
    b.spawn(&[]);
    for i in 6..8 {
        slowest = slowest.max(turn(&b, i));
    }
    let backlog = shared(&b).map(|s| s.backlog).unwrap_or(0);
    assert!(
        backlog >= 5,
        "5 exchanges wait in the local log ({backlog})"
    );
    eprintln!("slowest prompt hook while the store was down: {slowest:?}");

    pg.restart().unwrap_or_else(|e| panic!("{e}"));
    drained(&b);
    // Which exchanges are there, and how often (psql prints one line per row: the markers).
    let rows = pg
        .psql(
            DB,
            "SELECT substring(content from 'spooled-exchange-[0-9]+') FROM memd_memories \
             WHERE owner = 'bob' AND NOT deleted AND content LIKE '%spooled-exchange-%' ORDER BY 1",
        )
        .unwrap();
    let expected: Vec<String> = (0..8).map(|i| format!("spooled-exchange-{i}")).collect();
    assert_eq!(
        rows.lines().collect::<Vec<_>>(),
        expected,
        "every exchange once"
    );

    // `memd store copy` brings bob's memories into a new machine's local store, once.
    let fresh = tests::start_daemon();
    let url = format!("postgres://bob@127.0.0.1:{}/{DB}?sslmode=disable", pg.port);
    for round in 0..2 {
        let out = memd_in(&fresh, fresh.root())
            .args(["store", "copy", "--from", &url, "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let tally: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let imported = tally["imported"].as_u64().unwrap();
        match round {
            0 => assert!(imported >= 8, "{tally}"),
            _ => assert_eq!(imported, 0, "a second copy adds nothing: {tally}"),
        }
    }
    let copied = search(&fresh, "spooled-exchange-7");
    assert!(
        copied
            .iter()
            .any(|m| m.content.contains("spooled-exchange-7") && m.owner.is_none()),
        "{copied:?}"
    );
}

#[test]
fn concurrent_outcomes_from_two_daemons_are_all_counted() {
    let secs: u64 = std::env::var("MEMD_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let pg = team_database(&["alice", "bob"]);
    let a = daemon_as(&pg, "alice");
    let b = daemon_as(&pg, "bob");
    let fact: proto::MemoryBankResponse = a.post(
        "/api/memory-bank/add",
        &json!({"content": "Integration tests need the fake payment gateway on port 9090",
                "share": true, "scope": "global"}),
    );
    drained(&a);
    tests::eventually("bob has the shared fact", || {
        tests::lookup(&b, &fact.doc_id).is_some()
    });

    let until = Instant::now() + Duration::from_secs(secs);
    let per_daemon: [usize; 2] = std::thread::scope(|s| {
        let sessions: Vec<_> = (0..8)
            .map(|i| {
                let d = if i % 2 == 0 { &a } else { &b };
                let id = fact.doc_id.clone();
                s.spawn(move || session(d, &format!("soak-{i}"), &id, until))
            })
            .collect();
        let mut sums = [0, 0];
        for (i, h) in sessions.into_iter().enumerate() {
            sums[i % 2] += h.join().unwrap();
        }
        sums
    });
    let sent: usize = per_daemon.iter().sum();
    assert!(sent >= 8, "every session scored ({sent})");
    // The store applies at most OUTCOMES_PER_HOUR per sender and memory (schema version 2).
    let capped = per_daemon.iter().any(|n| *n > OUTCOMES_PER_HOUR);
    let scored: usize = per_daemon.iter().map(|n| (*n).min(OUTCOMES_PER_HOUR)).sum();
    drained(&a);
    drained(&b);

    let in_db = |sql: &str| pg.psql(DB, sql).unwrap();
    let uid = in_db(&format!(
        "SELECT uid FROM memd_memories WHERE id = '{}'",
        fact.doc_id
    ));
    assert_eq!(
        in_db(&format!(
            "SELECT uses FROM memd_memories WHERE uid = '{uid}'"
        )),
        scored.to_string(),
        "uses in the shared store"
    );
    assert_eq!(
        in_db(&format!(
            "SELECT count(*) FROM memd_outcomes WHERE uid = '{uid}' AND applied"
        )),
        scored.to_string(),
        "outcome rows"
    );
    // Both machines come to the same count (when the cap left some outcomes out, a machine
    // keeps the count it made until the next change from the other one).
    for d in [&a, &b].into_iter().filter(|_| !capped) {
        tests::eventually("the local copy has every outcome", || {
            tests::lookup(d, &fact.doc_id).is_some_and(|m| m.uses as usize == scored)
        });
    }
    eprintln!(
        "{sent} outcomes from 8 sessions on 2 daemons in {secs} s, {scored} applied, none lost"
    );
}

/// Outcomes the shared store applies per sender and memory an hour.
const OUTCOMES_PER_HOUR: usize = 120;

/// One conversation scoring `fact` every turn until `until`; how many times it was scored.
fn session(d: &Daemon, conv: &str, fact: &str, until: Instant) -> usize {
    let mut scored = 0;
    let mut turn = 0;
    while Instant::now() < until {
        d.post::<_, proto::GetContextResponse>(
            "/api/hooks/get-context",
            &json!({"conversation_id": conv, "query": format!("turn {turn}: run the integration tests")}),
        );
        d.post::<_, proto::StopResponse>(
            "/api/hooks/stop",
            &json!({"conversation_id": conv, "user_message": format!("turn {turn}"),
                    "assistant_response": format!("ran them, turn {turn}")}),
        );
        let r: proto::RecordOutcomeResponse = d.post(
            "/api/record-outcome",
            &json!({"conversation_id": conv, "outcome": "worked", "related": [fact]}),
        );
        if !r.already_scored && !r.unknown_ids.iter().any(|u| u == fact) {
            scored += 1;
        }
        turn += 1;
    }
    scored
}

#[test]
fn one_user_on_two_machines_has_one_memory() {
    let pg = team_database(&["alice"]);
    let laptop = daemon_as(&pg, "alice");
    let desktop = daemon_as(&pg, "alice");
    let add = |d: &Daemon, text: &str| -> String {
        let r: proto::MemoryBankResponse = d.post(
            "/api/memory-bank/add",
            &json!({"content": text, "scope": "global"}),
        );
        r.doc_id
    };
    // Private facts: the same user's other machine sees them all the same.
    let vpn = add(&laptop, "The office VPN profile lives in ~/vpn/office.ovpn");
    let old = add(&laptop, "Builds run on the build-1.internal server");
    drained(&laptop);
    tests::eventually("the desktop has the laptop's facts", || {
        tests::lookup(&desktop, &vpn).is_some() && tests::lookup(&desktop, &old).is_some()
    });
    assert_eq!(
        tests::lookup(&desktop, &vpn).unwrap().owner.as_deref(),
        Some("alice")
    );

    // The desktop corrects one and archives the other; the laptop, where they were made, follows.
    let (status, body) = desktop.post_raw(
        "/api/memory-bank/update",
        json!({"id": vpn, "content": "The office VPN profile moved to ~/.config/vpn/office.ovpn"})
            .to_string()
            .as_bytes(),
        true,
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = desktop.post_raw(
        "/api/memory-bank/archive",
        json!({"id": old}).to_string().as_bytes(),
        true,
    );
    assert_eq!(status, 200, "{body}");
    drained(&desktop);
    tests::eventually("the laptop takes the correction", || {
        tests::lookup(&laptop, &vpn).is_some_and(|m| m.content.contains(".config/vpn"))
    });
    tests::eventually("the laptop takes the archive", || {
        search(&laptop, "which server do builds run on")
            .iter()
            .all(|m| !m.content.contains("build-1"))
    });
    // Re-embedded for its new text: found by what it now says.
    laptop.wait_embedded(Duration::from_secs(60));
    assert!(
        search(&laptop, "where is the VPN profile now")
            .first()
            .is_some_and(|m| m.id == vpn),
        "{:?}",
        search(&laptop, "where is the VPN profile now")
    );
}
