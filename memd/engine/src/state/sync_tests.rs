//! The shared store's bookkeeping in the state machine: what is due, what a send clears, what
//! a received row becomes, and that it all survives a snapshot.

use super::MemState;
use super::ops::{Op, Output, ScoreBatch, SharedRow, SyncOp};
use super::sync::uid;
use crate::core::Core;
use crate::record::Record;
use crate::store::Machine;
use proto::{Collection, Outcome};

fn state() -> MemState {
    MemState::new(384).unwrap()
}

fn insert(s: &mut MemState, c: Collection, text: &str) -> (String, u64) {
    match s.apply(&Op::Insert(Box::new(Core::new_record(c, text.into(), 1)))) {
        Output::Inserted { id, key } => (id, key),
        other => panic!("insert: {other:?}"),
    }
}

fn enable(s: &mut MemState) {
    s.apply(&Op::Sync(SyncOp::Enable {
        store_id: "here".into(),
        database: Some("db-1".into()),
    }));
}

fn score(s: &mut MemState, id: &str, o: Outcome, at: i64) {
    s.apply(&Op::ScoreExchange(Box::new(ScoreBatch {
        exchange: None,
        exchange_outcome: o,
        scores: vec![(id.to_string(), o)],
        concepts: Vec::new(),
        at,
        time_weighting: false,
    })));
}

fn row_from_elsewhere(uid: &str, text: &str) -> SharedRow {
    let mut record: Record = Core::new_record(Collection::MemoryBank, text.into(), 5);
    record.team = true;
    SharedRow {
        uid: uid.into(),
        owner: "alice".into(),
        deleted: false,
        record,
        vector: None,
        counts_only: false,
    }
}

/// Marks every due memory sent, as after a send the database committed.
fn send_all(s: &mut MemState) {
    let memories = s
        .outbox(100, 0)
        .memories
        .iter()
        .map(|m| (m.key, m.revision))
        .collect();
    s.apply(&Op::Sync(SyncOp::Sent {
        memories,
        deleted: Vec::new(),
        events: Vec::new(),
    }));
}

fn receive(s: &mut MemState, rows: Vec<SharedRow>, cursor: i64) {
    s.apply(&Op::Sync(SyncOp::Received {
        rows,
        cursor,
        complete: true,
    }));
}

#[test]
fn nothing_is_tracked_without_a_shared_store() {
    let mut s = state();
    let (id, _) = insert(&mut s, Collection::Working, "a takeaway");
    score(&mut s, &id, Outcome::Worked, 2);
    assert_eq!(s.backlog(), 0);
    assert!(s.outbox(10, 10).is_empty());
}

#[test]
fn a_send_clears_only_the_changes_it_carried() {
    let mut s = state();
    let (first, k1) = insert(&mut s, Collection::MemoryBank, "deploys use make ship");
    let (_, k2) = insert(&mut s, Collection::MemoryBank, "tests need port 9090");
    enable(&mut s);
    assert_eq!(s.backlog(), 2, "every memory made before is due");
    let sent = s.outbox(10, 10);
    assert_eq!(sent.memories.len(), 2);
    // Changed again while the send was on its way: still due afterwards.
    s.apply(&Op::Update {
        id: first,
        content: Some("deploys use make ship, then make verify".into()),
        tags: None,
        importance: None,
        confidence: None,
        at: 3,
    });
    s.apply(&Op::Sync(SyncOp::Sent {
        memories: sent.memories.iter().map(|m| (m.key, m.revision)).collect(),
        deleted: Vec::new(),
        events: Vec::new(),
    }));
    let due: Vec<u64> = s.outbox(10, 10).memories.iter().map(|m| m.key).collect();
    assert_eq!(due, vec![k1]);
    assert!(!due.contains(&k2));
}

#[test]
fn a_first_send_leaves_pending_outcomes_to_their_events() {
    let mut s = state();
    enable(&mut s);
    let (id, key) = insert(
        &mut s,
        Collection::Working,
        "restart the worker after a deploy",
    );
    score(&mut s, &id, Outcome::Worked, 10);
    score(&mut s, &id, Outcome::Failed, 11);
    let now = s.by_key(key).unwrap().clone();
    assert_eq!(now.uses, 2);
    let out = s.outbox(10, 10);
    let row = &out.memories[0].record;
    assert_eq!(row.uses, 0, "the row goes out without the pending outcomes");
    assert!((row.score - 0.5).abs() < 1e-9, "{}", row.score);
    assert!(row.outcome_history.is_empty());
    assert_eq!(out.events.len(), 2);
    let delta: f64 = out.events.iter().map(|(_, e)| e.score_delta).sum();
    assert!((row.score + delta - now.score).abs() < 1e-9);
    assert!(
        out.events
            .iter()
            .all(|(_, e)| e.uid == uid("here", key) && e.counted)
    );
    // Event ids are unique even for outcomes in the same millisecond.
    score(&mut s, &id, Outcome::Worked, 11);
    assert_eq!(s.outbox(10, 10).events.len(), 3);
}

#[test]
fn a_received_memory_is_mirrored_scored_here_and_edited_only_by_its_owner() {
    let mut s = state();
    enable(&mut s);
    receive(
        &mut s,
        vec![row_from_elsewhere(
            "there:7",
            "the on-call rota lives in the ops wiki",
        )],
        4,
    );
    assert_eq!(s.sync().cursor, 4);
    assert_eq!(s.mirrored_len(), 1);
    let r = s.records().next().unwrap().clone();
    assert_eq!(r.origin.as_ref().unwrap().owner, "alice");
    assert_eq!(s.backlog(), 0, "a mirrored memory is not sent back");
    for op in [
        Op::Update {
            id: r.id.clone(),
            content: Some("changed".into()),
            tags: None,
            importance: None,
            confidence: None,
            at: 5,
        },
        Op::Delete {
            id: r.id.clone(),
            reason: "user".into(),
        },
        Op::Share {
            id: r.id.clone(),
            team: false,
            at: 5,
        },
    ] {
        match s.apply(&op) {
            Output::Rejected(why) => assert!(why.contains("alice"), "{why}"),
            other => panic!("{op:?}: {other:?}"),
        }
    }
    score(&mut s, &r.id, Outcome::Worked, 6);
    let out = s.outbox(10, 10);
    assert_eq!(out.events.len(), 1);
    assert_eq!(out.events[0].1.uid, "there:7");
    // A newer version replaces it in place; a deletion removes it.
    receive(
        &mut s,
        vec![row_from_elsewhere(
            "there:7",
            "the rota moved to the handbook",
        )],
        9,
    );
    assert_eq!(s.len(), 1);
    assert_eq!(
        s.by_key(r.key).unwrap().content,
        "the rota moved to the handbook"
    );
    assert_eq!(s.by_key(r.key).unwrap().uses, 1, "pending outcome kept");
    let mut gone = row_from_elsewhere("there:7", "");
    gone.deleted = true;
    receive(&mut s, vec![gone], 12);
    assert!(s.is_empty());
    assert_eq!(s.mirrored_len(), 0);
}

#[test]
fn own_rows_coming_back_bring_other_machines_outcomes() {
    let mut s = state();
    enable(&mut s);
    let (id, key) = insert(
        &mut s,
        Collection::MemoryBank,
        "use the fake gateway on 9090",
    );
    let mut back = row_from_elsewhere(&uid("here", key), "");
    back.counts_only = true;
    back.record.uses = 7;
    back.record.success_count = 6.0;
    score(&mut s, &id, Outcome::Worked, 3);
    receive(&mut s, vec![back.clone()], 20);
    let r = s.by_key(key).unwrap();
    assert_eq!(
        (r.uses, r.success_count),
        (8, 7.0),
        "theirs from the store, ours (still pending) on top"
    );
    let events = s
        .outbox(10, 10)
        .events
        .iter()
        .map(|e| e.0.clone())
        .collect();
    s.apply(&Op::Sync(SyncOp::Sent {
        memories: Vec::new(),
        deleted: Vec::new(),
        events,
    }));
    // Once ours has landed, the store's counts hold everything.
    back.record.uses = 8;
    back.record.success_count = 7.0;
    receive(&mut s, vec![back], 21);
    let r = s.by_key(key).unwrap();
    assert_eq!((r.uses, r.success_count), (8, 7.0));
    assert_eq!(
        r.content, "use the fake gateway on 9090",
        "text is never taken back"
    );
}

#[test]
fn only_facts_and_patterns_are_shared_and_sharing_is_a_change_to_send() {
    let mut s = state();
    enable(&mut s);
    let (ex, _) = insert(&mut s, Collection::Working, "User: hi Assistant: hello");
    let (fact, key) = insert(
        &mut s,
        Collection::MemoryBank,
        "tabs, not spaces, in Makefiles",
    );
    send_all(&mut s);
    assert!(matches!(
        s.apply(&Op::Share {
            id: ex,
            team: true,
            at: 2
        }),
        Output::Rejected(_)
    ));
    assert!(matches!(
        s.apply(&Op::Share {
            id: fact.clone(),
            team: true,
            at: 2
        }),
        Output::Updated { .. }
    ));
    assert!(s.by_key(key).unwrap().team);
    assert_eq!(s.backlog(), 1);
    s.apply(&Op::Delete {
        id: fact,
        reason: "user".into(),
    });
    let out = s.outbox(10, 10);
    assert!(out.memories.is_empty());
    assert_eq!(out.deleted, vec![uid("here", key)]);
}

#[test]
fn the_bookkeeping_survives_a_snapshot() {
    let mut s = state();
    enable(&mut s);
    let (id, _) = insert(&mut s, Collection::Working, "a takeaway");
    score(&mut s, &id, Outcome::Partial, 2);
    receive(
        &mut s,
        vec![row_from_elsewhere("there:1", "a team fact")],
        30,
    );
    let bytes = s.encode().unwrap();
    let mut back = state();
    back.decode(&bytes).unwrap();
    assert_eq!(back.sync(), s.sync());
    assert_eq!(back.backlog(), s.backlog());
    assert_eq!(back.mirrored_len(), 1, "the uid map is rebuilt");
}

#[test]
fn the_same_role_edits_its_memories_from_any_machine() {
    let mut s = state();
    enable(&mut s);
    // One of this role's memories made on another machine: editable here once the role is known.
    let mut mine = row_from_elsewhere("laptop:3", "the VPN config lives in ~/vpn");
    mine.owner = "alice".into();
    receive(&mut s, vec![mine], 1);
    let id = s.records().next().unwrap().id.clone();
    let edit = |content: &str| Op::Update {
        id: id.clone(),
        content: Some(content.into()),
        tags: None,
        importance: None,
        confidence: None,
        at: 2,
    };
    assert!(
        matches!(s.apply(&edit("x")), Output::Rejected(_)),
        "role unknown"
    );
    s.apply(&Op::Sync(SyncOp::Role {
        role: "alice".into(),
    }));
    assert!(matches!(
        s.apply(&edit("the VPN config moved to ~/.config/vpn")),
        Output::Updated { .. }
    ));
    let out = s.outbox(10, 10);
    assert_eq!(out.memories.len(), 1);
    assert_eq!(
        out.memories[0].uid, "laptop:3",
        "written back under its own uid"
    );
    // Another user's memory stays read-only.
    let mut theirs = row_from_elsewhere("bobs:1", "bob's team fact");
    theirs.owner = "bob".into();
    receive(&mut s, vec![theirs], 2);
    let bobs = s
        .records()
        .find(|r| r.content == "bob's team fact")
        .unwrap()
        .id
        .clone();
    match s.apply(&Op::Delete {
        id: bobs,
        reason: "user".into(),
    }) {
        Output::Rejected(why) => assert!(why.contains("bob"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn edits_and_deletions_from_the_roles_other_machines_reach_the_memory_here() {
    let mut s = state();
    enable(&mut s);
    let (_, key) = insert(&mut s, Collection::MemoryBank, "build with make all");
    let (_, gone) = insert(
        &mut s,
        Collection::MemoryBank,
        "the old staging host is stage-1",
    );
    s.apply(&Op::vector(key, &[0.1; 384]));
    // Both already in the store (nothing of ours on its way there).
    send_all(&mut s);
    let mut edited = s.by_key(key).unwrap().clone();
    edited.content = "build with make release".into();
    edited.tags = vec!["build".into()];
    let mut row = row_from_elsewhere(&uid("here", key), "");
    row.record = edited;
    let mut deleted = row_from_elsewhere(&uid("here", gone), "");
    deleted.deleted = true;
    receive(&mut s, vec![row, deleted], 40);
    let r = s.by_key(key).unwrap();
    assert_eq!(r.content, "build with make release");
    assert_eq!(r.tags, vec!["build".to_string()]);
    assert!(
        s.pending_keys(10).contains(&key),
        "the new text is embedded again"
    );
    assert!(s.by_key(gone).is_none());
}

#[test]
fn another_database_starts_over_without_the_old_ones_memories() {
    let mut s = state();
    enable(&mut s);
    insert(&mut s, Collection::MemoryBank, "ours, made here");
    receive(
        &mut s,
        vec![row_from_elsewhere("there:1", "theirs, from db-1")],
        50,
    );
    send_all(&mut s);
    assert_eq!((s.len(), s.backlog()), (2, 0));
    s.apply(&Op::Sync(SyncOp::Enable {
        store_id: "here-2".into(),
        database: Some("db-2".into()),
    }));
    assert_eq!(s.len(), 1, "the mirrored memory of db-1 is gone");
    assert_eq!(s.backlog(), 1, "ours is due for db-2");
    assert_eq!(s.sync().cursor, 0);
}

#[test]
fn rows_from_another_role_do_not_speak_for_memories_it_does_not_own() {
    let mut s = state();
    enable(&mut s);
    s.apply(&Op::Sync(SyncOp::Role {
        role: "alice".into(),
    }));
    let (_, key) = insert(&mut s, Collection::MemoryBank, "alice's own fact");
    let mut bobs = row_from_elsewhere("bobstore:1", "bob's team fact");
    bobs.owner = "bob".into();
    receive(&mut s, vec![bobs], 3);
    // Mallory forges deletions of both (e.g. revocation rows naming their uids).
    let forged = |uid: String| {
        let mut r = row_from_elsewhere(&uid, "");
        r.owner = "mallory".into();
        r.deleted = true;
        r
    };
    receive(
        &mut s,
        vec![forged(uid("here", key)), forged("bobstore:1".into())],
        4,
    );
    assert!(s.by_key(key).is_some(), "alice's memory stays");
    assert_eq!(s.mirrored_len(), 1, "bob's memory stays");
}

#[test]
fn an_unsent_edit_survives_an_older_version_from_the_store() {
    let mut s = state();
    enable(&mut s);
    s.apply(&Op::Sync(SyncOp::Role {
        role: "alice".into(),
    }));
    let mut laptop = row_from_elsewhere("laptop:9", "the build cache is in /tmp/cache");
    laptop.owner = "alice".into();
    receive(&mut s, vec![laptop.clone()], 5);
    let id = s.records().next().unwrap().id.clone();
    s.apply(&Op::Update {
        id,
        content: Some("the build cache moved to ~/.cache/build".into()),
        tags: None,
        importance: None,
        confidence: None,
        at: 6,
    });
    laptop.record.uses = 4;
    receive(&mut s, vec![laptop], 7);
    let r = s.records().next().unwrap();
    assert_eq!(r.content, "the build cache moved to ~/.cache/build");
    assert_eq!(r.uses, 4, "the counts are still taken");
}

#[test]
fn a_catch_up_over_several_pages_keeps_where_it_started() {
    let mut s = state();
    enable(&mut s);
    receive(&mut s, Vec::new(), 6);
    assert_eq!(s.sync().news_after(), 6);
    for (cursor, complete) in [(9, false), (11, false)] {
        s.apply(&Op::Sync(SyncOp::Received {
            rows: Vec::new(),
            cursor,
            complete,
        }));
        assert_eq!(
            (s.sync().cursor, s.sync().news_after()),
            (cursor, 6),
            "own memories changed by others after 6 are still news"
        );
    }
    receive(&mut s, Vec::new(), 12);
    assert_eq!(s.sync().news_after(), 12);
}
