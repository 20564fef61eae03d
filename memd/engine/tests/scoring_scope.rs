//! Which memories a score reaches, on a real engine (store, WAL; lexical ranking, no model):
//! only the ids the scoring request listed (issue 37: memories injected with the current
//! prompt and ids never shown to the conversation took scores too), and a memory promoted
//! since it was shown is referenced and scored by the id the conversation saw.

use memd_engine::clock::now_ms;
use memd_engine::config::Config;
use memd_engine::core::Core;
use memd_engine::state::new_id;
use memd_engine::state::ops::Op;
use proto::{Collection, GetContextRequest, RecordOutcomeRequest, StopRequest};
use std::collections::BTreeMap;
use std::sync::Arc;

const LANTERN: &str = "Lantern integration tests need docker compose up db running first";
const ZEPHYR: &str = "Zephyr consumers read the kafka topic orders.v2 with group zephyr-main";
const QUARTZ: &str = "Quartz nightly backups are written to the cold storage bucket";

fn engine() -> (tempfile::TempDir, Arc<Core>) {
    let dir = tempfile::tempdir().unwrap();
    let (core, _) = Core::open(Config::for_dir(dir.path(), 0)).unwrap();
    (dir, Arc::new(core))
}

async fn working(core: &Core, text: &str) -> String {
    let rec = Core::new_record(Collection::Working, text.into(), now_ms());
    core.insert(rec).await.unwrap().0
}

async fn prompt(core: &Core, conv: &str, query: &str) -> proto::GetContextResponse {
    let req = GetContextRequest {
        query: query.into(),
        conversation_id: conv.into(),
        ..GetContextRequest::default()
    };
    let r = core.get_context(&req).await.unwrap();
    core.settle().await;
    r
}

async fn stop(core: &Core, conv: &str) {
    let req = StopRequest {
        conversation_id: conv.into(),
        assistant_response: "done".into(),
        score_call_seen: Some(false),
        ..StopRequest::default()
    };
    core.stop(&req).await.unwrap();
}

fn uses(core: &Core, id: &str) -> u32 {
    core.db().read(|s| s.by_id(id).map(|r| r.uses).unwrap())
}

#[tokio::test]
async fn a_score_reaches_only_the_ids_the_scoring_request_listed() {
    let (_dir, core) = engine();
    let lantern = working(&core, LANTERN).await;
    let zephyr = working(&core, ZEPHYR).await;
    let quartz = working(&core, QUARTZ).await;
    let first = prompt(&core, "c", "how do I run the lantern integration tests").await;
    let injected: Vec<&str> = first
        .relevant_memories
        .iter()
        .map(|m| m.id.as_str())
        .collect();
    assert_eq!(injected, [lantern.as_str()]);
    stop(&core, "c").await;
    let second = prompt(&core, "c", "which kafka topic do the zephyr consumers read").await;
    assert!(second.scoring_required);
    assert!(second.relevant_memories.iter().any(|m| m.id == zephyr));
    let all = [&lantern, &zephyr, &quartz];
    let req = RecordOutcomeRequest {
        conversation_id: "c".into(),
        outcome: "worked".into(),
        memory_scores: Some(
            all.iter()
                .map(|id| (id.to_string(), "worked".into()))
                .collect(),
        ),
        ..RecordOutcomeRequest::default()
    };
    let r = core.record_outcome(&req).await.unwrap();
    assert_eq!(
        r.documents_scored, 2,
        "the exchange and the lantern note: {r:?}"
    );
    let ignored: BTreeMap<&str, &str> = r
        .ignored
        .iter()
        .map(|i| (i.id.as_str(), i.reason.as_str()))
        .collect();
    assert_eq!(ignored.len(), 2, "{ignored:?}");
    assert!(
        ignored[zephyr.as_str()].contains("current prompt"),
        "{ignored:?}"
    );
    assert!(
        ignored[quartz.as_str()].contains("not among"),
        "{ignored:?}"
    );
    assert_eq!(
        (
            uses(&core, &lantern),
            uses(&core, &zephyr),
            uses(&core, &quartz)
        ),
        (1, 0, 0)
    );
}

#[tokio::test]
async fn a_memory_promoted_since_it_was_shown_is_referenced_and_scored_by_its_old_id() {
    let (_dir, core) = engine();
    let old = working(&core, LANTERN).await;
    let query = "how do I run the lantern integration tests";
    let first = prompt(&core, "c", query).await;
    assert!(first.formatted_injection.contains(&format!("[id:{old}] (")));
    stop(&core, "c").await;
    let new = new_id(Collection::History);
    let op = Op::Move {
        id: old.clone(),
        to: Collection::History,
        new_id: new.clone(),
        at: now_ms(),
    };
    core.commit_one(op).await.unwrap();
    let second = prompt(&core, "c", query).await;
    let text = &second.formatted_injection;
    assert!(
        text.contains(&format!("• [id:{old}] shown earlier in this conversation")),
        "{text}"
    );
    assert!(text.contains(&format!("now [id:{new}]")), "{text}");
    // The scoring request names the id the agent saw; the new id is accepted as the same memory.
    assert!(
        second.scoring_prompt.contains(&old),
        "{}",
        second.scoring_prompt
    );
    let req = RecordOutcomeRequest {
        conversation_id: "c".into(),
        outcome: "worked".into(),
        related: Some(vec![new.clone(), old.clone()]),
        ..RecordOutcomeRequest::default()
    };
    let r = core.record_outcome(&req).await.unwrap();
    assert!(r.ignored.is_empty(), "{r:?}");
    assert_eq!(
        r.documents_scored, 2,
        "the exchange and the memory, once: {r:?}"
    );
    assert_eq!(uses(&core, &new), 1);
}
