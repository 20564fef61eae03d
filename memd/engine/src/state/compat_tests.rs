//! Data written before the action and content graphs were removed must still load.
//!
//! The fixtures in `testdata/` were written by the code that still had them: a WAL segment's
//! ops (`SessionOp::Prompt` with `context_type`, `ScoreBatch` with `context_type` and
//! `action`) and the snapshot those ops produce (`graph.actions`, `graph.content`,
//! `context_type` in session state). Both are named MessagePack maps, so the keys nothing
//! reads any more are skipped on decode; these tests keep it that way.

use super::*;
use crate::learn::extract_concepts;

const OLD_WAL_OPS: &[u8] =
    include_bytes!("testdata/wal_ops_with_action_and_content_graphs.msgpack");
const OLD_SNAPSHOT: &[u8] =
    include_bytes!("testdata/snapshot_with_action_and_content_graphs.msgpack");

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// What the fixture's ops leave behind, however the state was reached.
fn assert_fixture_state(s: &MemState) {
    assert_eq!(s.len(), 2);
    assert!(s.by_id("memory_bank_fixture1").is_some());
    let note = s.by_id("working_fixture1").expect("the scored note");
    assert_eq!(note.uses, 3);
    // Three `worked` outcomes for each of the three concepts, in working only.
    assert_eq!(
        s.graph.sizes(),
        BTreeMap::from([
            ("routing_concepts".to_string(), 3),
            ("routing_outcomes".to_string(), 9),
        ])
    );
    let concepts = extract_concepts("How do I deploy the lantern service?");
    assert_eq!(
        s.graph.routing.boost_for(&concepts, Collection::Working),
        1.1
    );
    let conv = &s.sessions.conversations["conv-1"];
    assert_eq!(conv.turns, 4);
    assert!(conv.awaiting_stop);
    assert_eq!(conv.current_concepts, ["rollback"]);
    let last = conv.last.as_ref().expect("the last exchange");
    assert!(last.scored);
    assert_eq!(last.concepts, ["deploy", "lantern", "service"]);
}

#[test]
fn old_wal_ops_with_context_type_and_action_still_replay() {
    assert!(contains(OLD_WAL_OPS, b"context_type") && contains(OLD_WAL_OPS, b"score_response"));
    let ops: Vec<Op> = rmp_serde::from_slice(OLD_WAL_OPS).expect("old WAL ops decode");
    assert_eq!(ops.len(), 12);
    let mut s = MemState::new(384).unwrap();
    for op in &ops {
        s.apply(op);
    }
    assert_fixture_state(&s);
}

#[test]
fn old_snapshot_with_action_and_content_graphs_still_decodes() {
    for key in [&b"actions"[..], b"entities", b"current_context_type"] {
        assert!(contains(OLD_SNAPSHOT, key), "the fixture lacks {key:?}");
    }
    let mut s = MemState::new(384).unwrap();
    s.decode(OLD_SNAPSHOT).expect("old snapshot decodes");
    assert_fixture_state(&s);
    // The next snapshot no longer carries the removed data.
    let again = s.encode().unwrap();
    for key in [&b"actions"[..], b"entities", b"context_type"] {
        assert!(!contains(&again, key), "{key:?} written again");
    }
    let mut reloaded = MemState::new(384).unwrap();
    reloaded.decode(&again).unwrap();
    assert_fixture_state(&reloaded);
}
