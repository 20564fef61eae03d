//! Tool evidence on a real engine (store, WAL, session state; lexical ranking, no model): a
//! turn nobody scored learns from its commands once the next prompt moves past it, or when its
//! conversation expires; an agent's score always wins; with `[evidence]` off nothing changes.

use memd_engine::config::Config;
use memd_engine::core::Core;
use memd_engine::state::ops::Op;
use memd_engine::state::session::SessionOp;
use proto::{
    Collection, GetContextRequest, Outcome, PostToolRequest, RecordOutcomeRequest, StopRequest,
    ToolCall, ToolKind,
};
use std::sync::Arc;

fn engine(outcomes: bool) -> (tempfile::TempDir, Arc<Core>) {
    engine_with(outcomes, false)
}

fn engine_with(outcomes: bool, failures: bool) -> (tempfile::TempDir, Arc<Core>) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Config::for_dir(dir.path(), 0);
    cfg.evidence.outcomes = outcomes;
    cfg.evidence.failures = failures;
    let (core, _) = Core::open(cfg).unwrap();
    (dir, Arc::new(core))
}

async fn note(core: &Core, text: &str) -> String {
    let rec = Core::new_record(
        Collection::Working,
        text.into(),
        memd_engine::clock::now_ms(),
    );
    core.insert(rec).await.unwrap().0
}

async fn prompt(core: &Arc<Core>, conv: &str, query: &str) -> proto::GetContextResponse {
    let req = GetContextRequest {
        query: query.into(),
        conversation_id: conv.into(),
        cwd: None,
        project_dir: None,
        client: None,
        session_start: false,
        session_source: None,
    };
    let r = core.get_context(&req).await.unwrap();
    core.settle().await;
    r
}

async fn stop(core: &Arc<Core>, conv: &str, answer: &str) {
    let req = StopRequest {
        conversation_id: conv.into(),
        user_message: String::new(),
        assistant_response: answer.into(),
        client: None,
        project_dir: None,
        score_call_seen: Some(false),
    };
    core.stop(&req).await.unwrap();
}

async fn ran(core: &Arc<Core>, conv: &str, command: &str, failed: bool) {
    let req = PostToolRequest {
        conversation_id: conv.into(),
        client: proto::Client::ClaudeCode,
        tool: ToolCall {
            kind: ToolKind::Shell,
            name: "Bash".into(),
            command: Some(command.into()),
            ..ToolCall::default()
        },
        exit_code: None,
        failed,
        project_dir: None,
    };
    core.post_tool(&req).await.unwrap();
}

/// (uses, raw score) of a memory.
fn used(core: &Core, id: &str) -> (u32, f64) {
    core.db().read(|s| {
        let r = s.by_id(id).expect("the memory exists");
        (r.uses, r.score)
    })
}

const TESTS_NOTE: &str =
    "Lantern integration tests need docker compose up db running first, then make test passes";
const TESTS_QUESTION: &str = "how do I get the lantern integration tests to pass";

/// One turn about the tests whose `make test` runs fail once and then `then_fails` or pass.
async fn test_turn(core: &Arc<Core>, conv: &str, then_fails: bool) -> Vec<String> {
    let ctx = prompt(core, conv, TESTS_QUESTION).await;
    ran(core, conv, "make test", true).await;
    ran(core, conv, "docker compose up -d db", false).await;
    ran(core, conv, "make  test", then_fails).await;
    stop(core, conv, "Started the database and ran the tests.").await;
    ctx.relevant_memories.into_iter().map(|m| m.id).collect()
}

#[tokio::test]
async fn a_fixed_command_credits_the_memories_of_an_unscored_turn_once_it_is_left_behind() {
    let (_dir, core) = engine(true);
    let id = note(&core, TESTS_NOTE).await;
    let injected = test_turn(&core, "c", false).await;
    assert!(injected.contains(&id), "the note is injected: {injected:?}");
    // The next turn is asked to score the first one and does not: still nothing learned.
    let ctx = prompt(&core, "c", "and what about the linter").await;
    assert!(ctx.scoring_required);
    stop(&core, "c", "Ran the linter.").await;
    assert_eq!(used(&core, &id), (0, 0.5), "the agent may still score it");
    // The prompt after it moves the scoring target on: the evidence scores the first turn.
    prompt(&core, "c", "thanks, one more thing about the build").await;
    let (uses, score) = used(&core, &id);
    assert_eq!(uses, 1);
    assert!(score > 0.5, "worked raises the score: {score}");
    // Exactly once: later prompts do not score it again.
    stop(&core, "c", "Done.").await;
    prompt(&core, "c", "ok").await;
    assert_eq!(used(&core, &id).0, 1);
}

/// A repeat counts against the memories shown only with `failures` on (off by default: which
/// memory misled cannot be told from the failure).
#[tokio::test]
async fn the_same_failure_again_counts_against_the_memories_shown_only_with_failures_on() {
    for failures in [false, true] {
        let (_dir, core) = engine_with(true, failures);
        let id = note(&core, TESTS_NOTE).await;
        assert!(test_turn(&core, "c", true).await.contains(&id));
        prompt(&core, "c", "it still fails").await;
        stop(&core, "c", "Looked at the logs.").await;
        prompt(&core, "c", "try again").await;
        let (uses, score) = used(&core, &id);
        if failures {
            assert_eq!(uses, 1);
            assert!(score < 0.5, "failed lowers the score: {score}");
        } else {
            assert_eq!((uses, score), (0, 0.5));
        }
    }
}

#[tokio::test]
async fn the_agents_score_wins_over_the_evidence() {
    let (_dir, core) = engine(true);
    let id = note(&core, TESTS_NOTE).await;
    test_turn(&core, "c", false).await;
    prompt(&core, "c", "next question about the build").await;
    let req = RecordOutcomeRequest {
        conversation_id: "c".into(),
        outcome: "failed".into(),
        memory_scores: None,
        related: None,
        exchange_summary: None,
        source: Some("agent".into()),
    };
    core.record_outcome(&req).await.unwrap();
    stop(&core, "c", "Answered.").await;
    prompt(&core, "c", "one more").await;
    let (uses, score) = used(&core, &id);
    assert_eq!(uses, 1, "scored once, by the agent");
    assert!(score < 0.5, "the agent said failed: {score}");
}

#[tokio::test]
async fn with_evidence_off_an_unscored_turn_learns_nothing() {
    let (_dir, core) = engine(false);
    let id = note(&core, TESTS_NOTE).await;
    assert!(test_turn(&core, "c", false).await.contains(&id));
    prompt(&core, "c", "next").await;
    stop(&core, "c", "Answered.").await;
    prompt(&core, "c", "one more").await;
    assert_eq!(used(&core, &id), (0, 0.5));
}

/// A conversation's last turn has no next prompt: the expiry of the conversation scores it.
#[tokio::test]
async fn an_expiring_conversation_gives_its_last_turn_the_evidence() {
    let (_dir, core) = engine(true);
    let id = note(&core, TESTS_NOTE).await;
    let long_ago = memd_engine::clock::now_ms() - 30 * 24 * 3_600_000;
    let exchange = Core::new_record(
        Collection::Working,
        "User: q\nAssistant: a".into(),
        long_ago,
    );
    core.commit(vec![
        Op::Session(SessionOp::Prompt {
            conv: "old".into(),
            at: long_ago,
            client: None,
            prompt: TESTS_QUESTION.into(),
            injected: vec![id.clone()],
            shown: vec![id.clone()],
            concepts: vec![],
            session_start: false,
            project: None,
        }),
        Op::Exchange {
            record: Box::new(exchange),
            conv: "old".into(),
            at: long_ago,
            user: "q".into(),
            assistant: "a".into(),
            evidence: Some(Outcome::Worked),
        },
    ])
    .await
    .unwrap();
    core.run_lifecycle().await.unwrap();
    assert!(
        core.db().read(|s| s.sessions.get("old").is_none()),
        "expired"
    );
    assert_eq!(used(&core, &id).0, 1, "scored before it was forgotten");
}

/// `[evidence] boost`: a memory naming a command of the conversation's recent tool events moves
/// up; the same prompt in a conversation without tool events keeps the plain order.
#[tokio::test]
async fn a_memory_naming_a_command_in_play_moves_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Config::for_dir(dir.path(), 0);
    cfg.evidence.boost = true;
    let (core, _) = Core::open(cfg).unwrap();
    let core = Arc::new(core);
    // (note, the command it names)
    let notes = [
        (
            "When the lantern build breaks, run cargo clean and rebuild the lantern service",
            "cargo clean -p lantern",
        ),
        (
            "When the lantern build breaks after a bump, run cargo update on lantern-proto",
            "cargo update -p lantern-proto",
        ),
    ];
    let mut ids = Vec::new();
    for (text, _) in notes {
        ids.push(note(&core, text).await);
    }
    let question = "the lantern build breaks, what do I do";
    let shown = |r: proto::GetContextResponse| -> Vec<String> {
        r.relevant_memories.into_iter().map(|m| m.id).collect()
    };
    let plain = shown(prompt(&core, "plain", question).await);
    assert_eq!(plain.len(), 2, "both notes are shown: {plain:?}");
    let second = ids.iter().position(|id| *id == plain[1]).unwrap();
    ran(&core, "busy", notes[second].1, false).await;
    let boosted = shown(prompt(&core, "busy", question).await);
    assert_eq!(boosted, [plain[1].clone(), plain[0].clone()]);
    // A conversation without tool events still gets the plain order.
    assert_eq!(shown(prompt(&core, "other", question).await), plain);
}
