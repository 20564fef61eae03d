//! The learned guardrails through the engine: a memory that forbids one command line asks for
//! it and names itself and the way to stop it; a teammate's memory from the shared store
//! guards another user's machine only when that user set `[guards] learned_from_teammates`;
//! the user's own memory from another machine guards as any of theirs.

use memd_engine::clock::now_ms;
use memd_engine::config::Config;
use memd_engine::core::Core;
use memd_engine::record::Record;
use memd_engine::shared_sync::SharedSync;
use memd_engine::state::SharedRow;
use proto::{Collection, PreToolRequest, PreToolResponse, ToolCall, ToolKind};
use std::path::Path;
use std::sync::Arc;

const OWN: &str = "Never run make deploy from a laptop: it failed every time because of the VPN.";
const TEAMMATES: &str = "Never run cargo publish from a workstation: releases go through CI.";
const OWN_ELSEWHERE: &str = "Never run npm publish by hand: the release job signs the package.";

async fn ask(core: &Core, command: &str) -> PreToolResponse {
    let req = PreToolRequest {
        conversation_id: "learned-conv".into(),
        client: proto::Client::ClaudeCode,
        tool: ToolCall {
            kind: ToolKind::Shell,
            name: "Bash".into(),
            command: Some(command.into()),
            ..ToolCall::default()
        },
        project_dir: None,
    };
    core.pre_tool(&req).await.unwrap()
}

fn row(uid: &str, owner: &str, content: &str) -> SharedRow {
    SharedRow {
        uid: uid.into(),
        owner: owner.into(),
        deleted: false,
        record: Record::new(Collection::MemoryBank, content.into(), now_ms()),
        vector: None,
        counts_only: false,
    }
}

async fn open(dir: &Path, teammates: bool) -> Arc<Core> {
    let mut cfg = Config::for_dir(dir, 0);
    cfg.guards.learned_from_teammates = teammates;
    Arc::new(Core::open(cfg).unwrap().0)
}

fn close(core: Arc<Core>) {
    let Ok(core) = Arc::try_unwrap(core) else {
        panic!("the engine is still shared");
    };
    core.close().unwrap();
}

#[tokio::test]
async fn a_teammates_memory_guards_only_when_the_user_opted_in() {
    let dir = tempfile::tempdir().unwrap();
    let core = open(dir.path(), false).await;
    let (own_id, _) = core
        .insert(Core::new_record(
            Collection::MemoryBank,
            OWN.into(),
            now_ms(),
        ))
        .await
        .unwrap();
    let sync = SharedSync::new(core.clone());
    sync.enable("store-a", "db-1").await.unwrap();
    sync.set_role("alice").await.unwrap();
    sync.received(
        vec![
            row("store-b:7", "bob", TEAMMATES),
            row("store-c:9", "alice", OWN_ELSEWHERE),
        ],
        2,
        true,
    )
    .await
    .unwrap();
    core.settle().await;
    drop(sync);

    let own = ask(&core, "make deploy").await;
    assert_eq!(own.decision, "ask");
    assert_eq!(own.memory_id.as_deref(), Some(own_id.as_str()));
    let reason = own.reason.unwrap();
    assert!(reason.contains(&own_id), "names the memory: {reason}");
    assert!(
        reason.contains("archive") && reason.contains("learned = \"off\""),
        "says how to stop it: {reason}"
    );
    assert_eq!(ask(&core, "make test").await.decision, "allow");
    assert_eq!(
        ask(&core, "npm publish").await.decision,
        "ask",
        "the user's own memory from another machine guards"
    );
    assert_eq!(
        ask(&core, "cargo publish").await.decision,
        "allow",
        "a teammate's memory does not guard this machine by default"
    );
    close(core);

    let core = open(dir.path(), true).await;
    let theirs = ask(&core, "cargo publish --dry-run").await;
    assert_eq!(theirs.decision, "ask", "opted in: {theirs:?}");
    assert!(
        theirs.reason.as_deref().unwrap().contains("shared by bob"),
        "{theirs:?}"
    );
    close(core);
}
