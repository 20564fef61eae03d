//! A conversation id that holds a secret (a token pasted where an id belongs) on a real engine
//! (store, WAL, snapshot, trace ledger; lexical ranking, no model): every hook step of that
//! conversation still meets the others, its exchange is scored, and no byte of the token is
//! left in any file of the data dir.

use memd_engine::config::Config;
use memd_engine::core::Core;
use memd_testkit::files_under;
use proto::{
    Collection, GetContextRequest, PostToolRequest, PreToolRequest, RecordOutcomeRequest,
    RecordResponseRequest, SidecarAttempt, SidecarReport, StopRequest, ToolCall, ToolKind,
};
use std::sync::Arc;

const TOKEN: &str = "ghp_R8mT2xKq9ZwV4nLs7YbP1cJd6FhG3uAe5oWi";
const NOTE: &str =
    "Lantern integration tests need docker compose up db running first, then make test passes";

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn prompt_request(conv: &str, query: &str) -> GetContextRequest {
    GetContextRequest {
        query: query.into(),
        conversation_id: conv.into(),
        cwd: None,
        project_dir: None,
        client: None,
        session_start: false,
        session_source: None,
    }
}

fn stop_request(conv: &str, answer: &str) -> StopRequest {
    StopRequest {
        conversation_id: conv.into(),
        user_message: String::new(),
        assistant_response: answer.into(),
        client: None,
        project_dir: None,
        score_call_seen: Some(false),
    }
}

fn shell(command: &str) -> ToolCall {
    ToolCall {
        kind: ToolKind::Shell,
        name: "Bash".into(),
        command: Some(command.into()),
        ..ToolCall::default()
    }
}

/// Every hook and API step that takes a conversation id, with the token (padded, as a sloppy
/// client might send it) as the id.
async fn one_conversation(core: &Arc<Core>, conv: &str) -> String {
    let id = core
        .insert(Core::new_record(
            Collection::Working,
            NOTE.into(),
            memd_engine::clock::now_ms(),
        ))
        .await
        .unwrap()
        .0;
    let ctx = core
        .get_context(&prompt_request(
            conv,
            "how do I get the lantern integration tests to pass",
        ))
        .await
        .unwrap();
    core.settle().await;
    assert!(
        ctx.relevant_memories.iter().any(|m| m.id == id),
        "the note is injected"
    );
    let pre = PreToolRequest {
        conversation_id: conv.into(),
        client: proto::Client::ClaudeCode,
        tool: shell("make test"),
        project_dir: None,
    };
    core.pre_tool(&pre).await.unwrap();
    let post = PostToolRequest {
        conversation_id: conv.into(),
        client: proto::Client::ClaudeCode,
        tool: shell("make test"),
        exit_code: Some(0),
        failed: false,
        project_dir: None,
    };
    core.post_tool(&post).await.unwrap();
    core.stop(&stop_request(conv, "Started the database first."))
        .await
        .unwrap();
    // The next prompt of the same conversation is asked to score the previous exchange: the
    // hooks still meet under the stored id.
    let next = core
        .get_context(&prompt_request(conv, "and the linter?"))
        .await
        .unwrap();
    core.settle().await;
    assert!(
        next.scoring_required,
        "the same conversation asks for a score"
    );
    let outcome = RecordOutcomeRequest {
        conversation_id: conv.into(),
        outcome: "worked".into(),
        memory_scores: None,
        related: None,
        exchange_summary: Some("started the db, then the tests passed".into()),
        source: Some("agent".into()),
    };
    let r = core.record_outcome(&outcome).await.unwrap();
    assert!(!r.already_scored && r.documents_scored >= 1, "{r:?}");
    assert!(r.summary_stored);
    let report = SidecarReport {
        conversation_id: conv.into(),
        attempts: vec![SidecarAttempt {
            at: String::new(),
            target: "local".into(),
            model: "m".into(),
            status: 200,
            latency_ms: 3,
            result: "ok:worked".into(),
        }],
        scored: true,
    };
    core.sidecar_report(&report).await.unwrap();
    let takeaway = RecordResponseRequest {
        key_takeaway: "start the db before the integration tests".into(),
        initial_score: None,
        conversation_id: Some(conv.into()),
    };
    core.record_response(&takeaway, None).await.unwrap();
    id
}

#[tokio::test]
async fn a_token_sent_as_conversation_id_is_stored_nowhere_and_the_conversation_still_scores() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Config::for_dir(dir.path(), 0);
    cfg.evidence.outcomes = true;
    let (core, _) = Core::open(cfg).unwrap();
    let core = Arc::new(core);
    let conv = format!(" {TOKEN} ");
    let id = one_conversation(&core, &conv).await;
    let (uses, score) = core.db().read(|s| {
        let r = s.by_id(&id).expect("the note exists");
        (r.uses, r.score)
    });
    assert_eq!(uses, 1, "the note was scored once");
    assert!(score > 0.5, "worked raises its score: {score}");
    let Ok(core) = Arc::try_unwrap(core) else {
        panic!("the engine is still shared");
    };
    core.close().unwrap();

    let files = files_under(dir.path());
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    assert!(
        names.iter().any(|n| n.contains("snapshot")),
        "a snapshot: {names:?}"
    );
    let trace = dir.path().join("logs").join(memd_engine::trace::TRACE_FILE);
    let ledger = std::fs::read_to_string(&trace).expect("a trace ledger");
    // The token's random part, so a partly kept token is caught too.
    let tail = &TOKEN[8..];
    for f in &files {
        let bytes = std::fs::read(f).unwrap_or_default();
        assert!(
            !contains(&bytes, tail.as_bytes()),
            "{} holds the token",
            f.display()
        );
    }
    // One conversation, under one stored id, through every step.
    let lines: Vec<serde_json::Value> = ledger
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let convs: std::collections::BTreeSet<&str> = lines
        .iter()
        .filter_map(|l| l["conversation_id"].as_str())
        .collect();
    assert_eq!(convs.len(), 1, "{ledger}");
    let events: Vec<&str> = lines.iter().filter_map(|l| l["event"].as_str()).collect();
    for event in [
        "get-context",
        "pre-tool",
        "post-tool",
        "stop",
        "record-outcome",
        "sidecar",
    ] {
        assert!(events.contains(&event), "{event} missing: {ledger}");
    }
}

#[test]
fn an_id_without_a_secret_is_kept_and_one_with_a_secret_is_replaced_consistently() {
    use memd_engine::redact::safe_id;
    for plain in [
        "c",
        "3f2a9c1e-8b7d-4f5a-9c3b-2a1f0e9d8c7b",
        "mcp-abc123",
        "secrets-7",
    ] {
        assert_eq!(safe_id(plain), plain);
    }
    let a = safe_id(TOKEN);
    assert!(a.starts_with("redacted-"), "{a}");
    assert!(!a.contains(&TOKEN[4..12]));
    assert_eq!(safe_id(TOKEN), a, "the same id each time");
    assert_eq!(safe_id(&a), a, "a replaced id stays as it is");
    assert_ne!(safe_id(&format!("conv {TOKEN}")), a);
}
