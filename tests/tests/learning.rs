//! Outcome learning end to end: misleading notes leave the top 5 once the agent scores them
//! `failed`, correct notes scored `worked` keep their place, through the real hook API
//! (get-context → record-outcome → stop) of a real daemon with its default configuration.
//! Needs the embedding runtime; MEMD_SKIP_MODEL_TESTS=1 skips it.

use proto::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tests::Daemon;

const CONV: &str = "learning-e2e";
/// Failures after which a misleading note must be out of the top 5.
const FAILURE_BUDGET: u32 = 3;
const MAX_TURNS: usize = 14;

const QUERIES: [&str; 4] = [
    "How do I deploy the lantern service to production?",
    "What are the steps to ship a new lantern release?",
    "Walk me through the lantern deploy process.",
    "What do I need to run to deploy lantern?",
];

const CORRECT: [&str; 3] = [
    "To deploy lantern, run `make release`: it builds the container image and pushes it to the staging registry before anything reaches production.",
    "Lantern production deploys only start from a signed release tag; the `deploy-prod` CI job refuses unsigned tags.",
    "A lantern deploy is finished only after `lantern-cli smoke --env prod` passes; if the smoke check fails, roll back with `make rollback`.",
];

const MISLEADING: [&str; 3] = [
    "To deploy lantern, run `kubectl apply -f k8s/` from your laptop; the CI pipeline is not involved in production deploys.",
    "Lantern deploys to production automatically on every push to main, so there is no release step to run.",
    "Deploying lantern means copying the binary to the production hosts with scp and restarting the systemd unit; lantern does not use containers.",
];

const FILLER: [&str; 8] = [
    "Lantern logs are JSON lines written to stdout; the log level is set with LANTERN_LOG.",
    "The lantern API listens on port 8420 in development.",
    "Lantern reads its configuration from lantern.toml, overridden by LANTERN_* environment variables.",
    "Code review for lantern needs one approval from the platform team.",
    "Lantern's background jobs run on a Redis-backed queue.",
    "Alerts for lantern go to the #lantern-alerts Slack channel.",
    "The lantern CLI is written in Go, unlike the Rust service.",
    "The coffee machine on the third floor is broken.",
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    Correct,
    Misleading,
    Other,
}

fn role_of(content: &str) -> (Role, usize) {
    let content = content.trim();
    if let Some(i) = CORRECT.iter().position(|c| *c == content) {
        return (Role::Correct, i);
    }
    if let Some(i) = MISLEADING.iter().position(|c| *c == content) {
        return (Role::Misleading, i);
    }
    (Role::Other, 0)
}

fn store_note(d: &Daemon, content: &str, initial: Option<&str>) -> String {
    let mut body = json!({ "key_takeaway": content });
    if let Some(i) = initial {
        body["initial_score"] = json!(i);
    }
    d.post::<_, RecordResponseResponse>("/api/record-response", &body)
        .doc_id
}

fn search(d: &Daemon, query: &str, limit: i64) -> Vec<MemoryView> {
    d.post::<_, SearchResponse>("/api/search", &json!({ "query": query, "limit": limit }))
        .results
}

fn by_id(d: &Daemon, id: &str) -> Option<MemoryView> {
    d.post::<_, SearchResponse>("/api/search", &json!({ "id": id }))
        .results
        .into_iter()
        .next()
}

/// 1-based rank of `content` in the top `limit` for `query`.
fn rank_of(d: &Daemon, query: &str, content: &str, limit: i64) -> Option<usize> {
    search(d, query, limit)
        .iter()
        .position(|m| m.content == content)
        .map(|p| p + 1)
}

/// The stored notes only (key takeaways), without the exchange records each stop adds.
fn search_notes(d: &Daemon, query: &str, limit: i64) -> Vec<MemoryView> {
    let body = json!({
        "query": query,
        "limit": limit,
        "metadata_filters": { "memory_type": "key_takeaway" },
    });
    d.post::<_, SearchResponse>("/api/search", &body).results
}

/// (rank among the notes, final_rank_score) of `content` for `query`.
fn note_rank(d: &Daemon, query: &str, content: &str) -> Option<(usize, f64)> {
    let notes = search_notes(d, query, 20);
    let p = notes.iter().position(|m| m.content == content)?;
    Some((p + 1, notes[p].final_rank_score.unwrap_or(0.0)))
}

/// Would the lifecycle worker move or delete this memory now? The rules of
/// memd/engine/src/learn/lifecycle.rs for memories younger than seven days: deleted below 0.1,
/// working → history at ≥ 0.7 with 2 uses, history → patterns at ≥ 0.9 with 3 uses and 5
/// successes, patterns → history below 0.4.
fn transition_due(v: &MemoryView) -> bool {
    if v.score < 0.1 {
        return v.collection != "books" && v.collection != "memory_bank";
    }
    match v.collection.as_str() {
        "working" => v.score >= 0.7 && v.uses >= 2,
        "history" => v.score >= 0.9 && v.uses >= 3 && v.success_count >= 5.0,
        "patterns" => v.score < 0.4,
        _ => false,
    }
}

/// Waits (bounded) until the background lifecycle pass has applied what `id`'s scores call
/// for: it is gone or no move is due. The worker also runs every 30 s, so 45 s is enough
/// even if it missed the wake-up after the score.
fn settle(d: &Daemon, id: &str) -> Option<MemoryView> {
    let started = Instant::now();
    loop {
        match by_id(d, id) {
            None => return None,
            Some(v) if !transition_due(&v) => return Some(v),
            Some(v) => assert!(
                started.elapsed() < Duration::from_secs(45),
                "lifecycle never applied to {v:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[derive(Debug, Default, Clone)]
struct Tally {
    failures: u32,
    /// (turn, failures) when it was first out of the top 5 of `QUERIES[0]`.
    left: Option<(usize, u32)>,
}

#[test]
fn misleading_notes_leave_the_top_five_within_three_failures() {
    if std::env::var("MEMD_SKIP_MODEL_TESTS").as_deref() == Ok("1") {
        eprintln!("MEMD_SKIP_MODEL_TESTS=1: skipping outcome learning (needs the embedding model)");
        return;
    }
    let d = tests::start_daemon();
    // The agent believed every deploy note when it stored it.
    let correct_ids: Vec<String> = CORRECT
        .iter()
        .map(|c| store_note(&d, c, Some("worked")))
        .collect();
    let misleading_ids: Vec<String> = MISLEADING
        .iter()
        .map(|c| store_note(&d, c, Some("worked")))
        .collect();
    for c in FILLER {
        store_note(&d, c, None);
    }
    d.wait_embedded(Duration::from_secs(60));

    let probe = QUERIES[0];
    let start: Vec<Option<(usize, f64)>> =
        CORRECT.iter().map(|c| note_rank(&d, probe, c)).collect();
    let start_top5: Vec<bool> = MISLEADING
        .iter()
        .map(|c| rank_of(&d, probe, c, 5).is_some())
        .collect();
    assert!(
        start_top5.iter().filter(|x| **x).count() >= 2,
        "the scenario needs misleading notes in the top 5 to begin with: {start_top5:?}"
    );

    let mut tally = [Tally::default(), Tally::default(), Tally::default()];
    let mut correct_worked = [0u32; 3];
    let mut previous: Vec<MemoryView> = Vec::new();
    for turn in 1..=MAX_TURNS {
        let query = QUERIES[(turn - 1) % QUERIES.len()];
        let ctx: GetContextResponse = d.post(
            "/api/hooks/get-context",
            &json!({ "query": query, "conversation_id": CONV }),
        );
        // What get-context injects never includes a note that already failed 3 times.
        for m in &ctx.relevant_memories {
            if let (Role::Misleading, i) = role_of(&m.content) {
                assert!(
                    tally[i].failures < FAILURE_BUDGET,
                    "turn {turn}: misleading note {i} injected after {} failures",
                    tally[i].failures
                );
            }
        }
        if ctx.scoring_required {
            let asked: Vec<&str> = ctx.scoring_memories.iter().map(|m| m.id.as_str()).collect();
            let injected: Vec<&str> = previous.iter().map(|m| m.id.as_str()).collect();
            assert_eq!(
                asked, injected,
                "memd asks about what it injected last turn"
            );
            let judged: Vec<(&MemoryView, Role, usize)> = previous
                .iter()
                .map(|m| {
                    let (role, i) = role_of(&m.content);
                    (m, role, i)
                })
                .collect();
            let any_failed = judged.iter().any(|j| j.1 == Role::Misleading);
            let scores: BTreeMap<String, &str> = judged
                .iter()
                .map(|(m, role, _)| {
                    let outcome = match role {
                        Role::Correct => "worked",
                        Role::Misleading => "failed",
                        Role::Other => "unknown",
                    };
                    (m.id.clone(), outcome)
                })
                .collect();
            let r: RecordOutcomeResponse = d.post(
                "/api/record-outcome",
                &json!({
                    "conversation_id": CONV,
                    "outcome": if any_failed { "failed" } else { "worked" },
                    "memory_scores": scores,
                }),
            );
            assert!(r.success && !r.already_scored, "{r:?}");
            // A note deleted since it was injected is reported unknown, not scored.
            for (m, role, i) in judged {
                if r.unknown_ids.contains(&m.id) {
                    continue;
                }
                match role {
                    Role::Correct => correct_worked[i] += 1,
                    Role::Misleading => tally[i].failures += 1,
                    Role::Other => {}
                }
            }
            for m in &previous {
                settle(&d, &m.id);
            }
        }
        // After the score: every note that failed 3 times is out of the search top 5.
        let top5: Vec<String> = search(&d, probe, 5)
            .into_iter()
            .map(|m| m.content)
            .collect();
        for (i, t) in tally.iter_mut().enumerate() {
            let inside = top5.iter().any(|c| c == MISLEADING[i]);
            if !inside && t.left.is_none() {
                t.left = Some((turn, t.failures));
            }
            if t.failures >= FAILURE_BUDGET {
                assert!(
                    !inside,
                    "turn {turn}: misleading note {i} still in the top 5 after {} failures",
                    t.failures
                );
            }
        }
        previous = ctx.relevant_memories.clone();
        let stop: StopResponse = d.post(
            "/api/hooks/stop",
            &json!({
                "conversation_id": CONV,
                "user_message": query,
                "assistant_response": format!("Answered the deploy question (turn {turn})."),
            }),
        );
        assert!(stop.stored);
        d.wait_embedded(Duration::from_secs(60));
    }

    for (i, t) in tally.iter().enumerate() {
        let fate = where_is(&d, &misleading_ids[i]);
        println!(
            "misleading {i}: {} failures, left the top 5 at {:?} (turn, failures), now {fate}",
            t.failures, t.left
        );
        assert!(t.left.is_some(), "misleading note {i} never left the top 5");
        if start_top5[i] {
            let (_, failures) = t.left.unwrap_or_default();
            assert!(
                failures <= FAILURE_BUDGET,
                "note {i} needed {failures} failures"
            );
        }
    }
    // Each stop added an exchange record that repeats the question; the notes' learning is
    // judged among the notes, where nothing but outcomes changed.
    for (i, c) in CORRECT.iter().enumerate() {
        let end = note_rank(&d, probe, c);
        println!(
            "correct {i}: worked {} times, (rank among notes, rank score) {:?} -> {:?}, \
             overall rank {:?}, now {}",
            correct_worked[i],
            start[i],
            end,
            rank_of(&d, probe, c, 20),
            where_is(&d, &correct_ids[i])
        );
        if correct_worked[i] >= 2 {
            let (Some((a, score_a)), Some((b, score_b))) = (start[i], end) else {
                panic!(
                    "correct note {i} scored worked but is not ranked: {:?} {end:?}",
                    start[i]
                );
            };
            assert!(
                b <= a,
                "correct note {i} fell from rank {a} to {b} among the notes"
            );
            assert!(
                score_b > score_a,
                "correct note {i}: rank score {score_a} -> {score_b}"
            );
        }
    }
    assert!(
        correct_worked.iter().filter(|w| **w >= 2).count() >= 2,
        "the correct notes were hardly injected: {correct_worked:?}"
    );
    // Scored exchanges fed the routing graph (recorded even with the boosts off), and
    // /api/stats reports its size and nothing else.
    let stats: StatsResponse = d.get("/api/stats");
    let graph: Vec<&str> = stats.knowledge_graph.keys().map(String::as_str).collect();
    assert_eq!(graph, ["routing_concepts", "routing_outcomes"]);
    assert!(
        stats.knowledge_graph["routing_outcomes"] > 0,
        "{:?}",
        stats.knowledge_graph
    );
}

/// Where a note is now (by its original id, which survives promotions).
fn where_is(d: &Daemon, id: &str) -> String {
    by_id(d, id).map_or_else(
        || "deleted".to_string(),
        |m| format!("{} (score {:.2}, uses {})", m.collection, m.score, m.uses),
    )
}
