//! Reranking end to end on a real daemon: late interaction (on by default) reorders the
//! prompt's candidates and search results once the model and the memories' token states are
//! ready; `rerank = false` and a spent budget keep the fused order; the cross-encoder loads and
//! reorders searches only when `cross_encoder_depth` asks for it.

use proto::*;
use serde_json::json;
use std::time::Duration;
use tests::{Daemon, Spec, eventually};

/// Fused ranking puts the Bazel note (two shared words) first; the Postgres note answers.
const NOTES: [&str; 3] = [
    "The staging cluster reads its config from Bazel.",
    "Staging Postgres accepts connections on 5433.",
    "Lint with cargo clippy before every commit.",
];
const QUERY: &str = "which port does the staging database listen on?";
const FUSED_FIRST: &str = NOTES[0];
const ANSWER: &str = NOTES[1];
/// The budget of the tests that assert the reranked order: the most the setting allows (about
/// 150x what the work takes on an idle machine), so the order does not depend on how busy the
/// machine running the suite is. What the default budget does under load is a benchmark
/// figure (memd-bench `mixed.rerank_fallback`), not a test.
const AMPLE_BUDGET: &str = "[search]\nprompt_budget_ms = 1000\n";

fn daemon(config: &str) -> Daemon {
    let d = Daemon::start(Spec {
        config_toml: Some(config.into()),
        ..Spec::new()
    })
    .expect("daemon");
    for note in NOTES {
        let _: MemoryBankResponse = d.post(
            "/api/memory-bank/add",
            &json!({"content": note, "scope": "global"}),
        );
    }
    d.wait_embedded(tests::EVENTUALLY_LIMIT);
    d
}

/// Waits until the late-interaction model is loaded and every memory has its token states.
fn wait_late(d: &Daemon) {
    eventually("the late-interaction model loads", || {
        d.get::<HealthResponse>("/api/health")
            .late_interaction_loaded
    });
    eventually("every memory has token states", || {
        d.get::<StatsResponse>("/api/stats")
            .index
            .pending_token_states
            == 0
    });
}

fn first_injected(d: &Daemon, conv: &str) -> String {
    let r: GetContextResponse = d.post(
        "/api/hooks/get-context",
        &json!({"query": QUERY, "conversation_id": conv}),
    );
    assert!(r.formatted_injection.contains(ANSWER), "{r:?}");
    r.relevant_memories[0].content.clone()
}

/// The prompt tally since start: (reranked, over budget, shed).
fn prompt_tally(d: &Daemon) -> (u64, u64, u64) {
    let t = d.get::<StatsResponse>("/api/stats").index.prompt_rerank;
    (t.reranked, t.over_budget, t.shed)
}

/// The first injected memory of a prompt that must have been reranked within its budget.
fn first_reranked(d: &Daemon, conv: &str) -> String {
    let before = prompt_tally(d);
    let first = first_injected(d, conv);
    let after = prompt_tally(d);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1, after.2 - before.2),
        (1, 0, 0),
        "the prompt was reranked in full"
    );
    first
}

fn first_found(d: &Daemon) -> SearchResponse {
    d.post("/api/search", &json!({"query": QUERY, "limit": 3}))
}

#[test]
fn late_interaction_reorders_prompts_and_searches_by_default() {
    // Late interaction is on by default; only the budget is the test's.
    let d = daemon(AMPLE_BUDGET);
    wait_late(&d);
    let stats: StatsResponse = d.get("/api/stats");
    assert_eq!(stats.index.token_states, NOTES.len());
    assert!(stats.index.token_state_bytes > NOTES.len() * 10 * 388);
    assert_eq!(first_reranked(&d, "late-on"), ANSWER);
    let found = first_found(&d);
    assert_eq!(found.results[0].content, ANSWER, "{found:?}");
    // The cross-encoder is opt-in: not loaded, no logits.
    assert!(!d.get::<HealthResponse>("/api/health").reranker_loaded);
    assert!(found.results.iter().all(|m| m.rerank_score.is_none()));
}

#[test]
fn off_or_out_of_budget_keeps_the_fused_order() {
    let off = daemon("[search]\nrerank = false\n");
    assert_eq!(first_injected(&off, "off"), FUSED_FIRST);
    assert_eq!(first_found(&off).results[0].content, FUSED_FIRST);
    let health: HealthResponse = off.get("/api/health");
    assert!(!health.late_interaction_loaded && !health.reranker_loaded);

    // A zero budget: the model is there, the prompt path never waits for it; searches (no
    // budget) still rerank.
    let spent = daemon("[search]\nprompt_budget_ms = 0\n");
    wait_late(&spent);
    assert_eq!(first_injected(&spent, "spent"), FUSED_FIRST);
    assert_eq!(prompt_tally(&spent), (0, 1, 0), "counted as over budget");
    // Split by what ran out: the encoding (not waited for at all) or, when it was done before
    // the first stage was, MaxSim (stopped before its first memory).
    let t = spent.get::<StatsResponse>("/api/stats").index.prompt_rerank;
    assert_eq!(t.late_encoding_late + t.maxsim_cut_short, 1, "{t:?}");
    // And reported where a user looks: `memd status` and `memd stats`.
    for command in ["status", "stats"] {
        let out = tests::project::memd_in(&spent, spent.root())
            .arg(command)
            .output()
            .expect("run memd");
        let said = String::from_utf8_lossy(&out.stdout);
        let split = format!(
            "({} late encoding, {} MaxSim cut short)",
            t.late_encoding_late, t.maxsim_cut_short
        );
        let line =
            format!("0 reranked, 1 over budget {split}, 0 shed (100.0% kept the fused order)");
        assert!(said.contains(&line), "memd {command}: {said}");
    }
    assert_eq!(first_found(&spent).results[0].content, ANSWER);
}

/// A prompt whose first stage finds fewer than two candidates has nothing to reorder: it does
/// not wait for its query's token states (the one memory keeps its fused place), and is
/// counted apart from the reranked ones.
#[test]
fn a_prompt_with_nothing_to_rerank_does_not_wait_for_late_interaction() {
    let d = Daemon::start(Spec {
        config_toml: Some(AMPLE_BUDGET.into()),
        ..Spec::new()
    })
    .expect("daemon");
    let _: MemoryBankResponse = d.post(
        "/api/memory-bank/add",
        &json!({"content": ANSWER, "scope": "global"}),
    );
    d.wait_embedded(tests::EVENTUALLY_LIMIT);
    wait_late(&d);
    let r: GetContextResponse = d.post(
        "/api/hooks/get-context",
        &json!({"query": QUERY, "conversation_id": "one"}),
    );
    assert_eq!(r.relevant_memories.len(), 1, "{r:?}");
    assert_eq!(
        prompt_tally(&d),
        (0, 0, 0),
        "neither reranked nor over budget"
    );
    let stats: StatsResponse = d.get("/api/stats");
    assert_eq!(stats.index.prompt_rerank.nothing_to_rerank, 1);
}

/// Many prompts at once against a budget one encoding alone does not fit: the encodings those
/// already in flight would make late are not started (counted as shed in `/api/stats`), and
/// every prompt still gets its memories, in the fused order.
#[test]
fn prompts_arriving_together_shed_encodings_that_would_miss_the_budget() {
    const PROMPTS: usize = 16;
    let d = daemon("[search]\nprompt_budget_ms = 1\n");
    wait_late(&d);
    // One prompt alone measures what an encoding takes and how long a prompt may wait (its
    // encoding runs beside its embedding, so it may even be reranked).
    first_injected(&d, "alone");
    let before = prompt_tally(&d);
    let firsts: Vec<String> = std::thread::scope(|s| {
        let d = &d;
        let prompts: Vec<_> = (0..PROMPTS)
            .map(|i| s.spawn(move || first_injected(d, &format!("together-{i}"))))
            .collect();
        prompts
            .into_iter()
            .map(|p| p.join().expect("prompt"))
            .collect()
    });
    let after = prompt_tally(&d);
    let counted = (after.0 + after.1 + after.2) - (before.0 + before.1 + before.2);
    assert_eq!(counted, PROMPTS as u64, "every prompt counted once");
    // Every prompt not reranked in full kept the fused order.
    let fused = firsts.iter().filter(|f| *f == FUSED_FIRST).count() as u64;
    assert_eq!(fused, PROMPTS as u64 - (after.0 - before.0), "{firsts:?}");
    assert!(
        after.2 > before.2,
        "some were shed: {before:?} -> {after:?}"
    );
}

#[test]
fn the_cross_encoder_reorders_searches_when_asked() {
    let d = daemon("[search]\ncross_encoder_depth = 3\n");
    eventually("the reranker loads", || {
        d.get::<HealthResponse>("/api/health").reranker_loaded
    });
    let found = first_found(&d);
    assert_eq!(found.results[0].content, ANSWER, "{found:?}");
    let scores: Vec<f64> = found
        .results
        .iter()
        .map(|m| m.rerank_score.expect("every head result carries its logit"))
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // Recency order is the user's choice: no reranking there.
    let recent: SearchResponse = d.post(
        "/api/search",
        &json!({"query": QUERY, "limit": 3, "sort_by": "recency"}),
    );
    assert!(recent.results.iter().all(|m| m.rerank_score.is_none()));
}

#[test]
fn out_of_range_settings_are_refused_with_their_limits() {
    for (config, message) in [
        ("rerank_depth = 0", "search.rerank_depth must be 1-100"),
        (
            "cross_encoder_depth = 101",
            "search.cross_encoder_depth must be 0-100",
        ),
        (
            "prompt_budget_ms = 1001",
            "search.prompt_budget_ms must be 0-1000",
        ),
        (
            "token_states_mb = 0",
            "search.token_states_mb must be 1-4096",
        ),
    ] {
        let err = Daemon::start(Spec {
            config_toml: Some(format!("[search]\n{config}\n")),
            ..Spec::new()
        })
        .map(|_| String::new())
        .unwrap_or_else(|e| format!("{e:#}"));
        assert!(err.contains(message), "{config}: {err}");
    }
}

/// Damages `file` in place: its middle byte inverted.
fn flip_middle_byte(file: &std::path::Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(file, &bytes).unwrap();
}

#[test]
fn token_states_survive_a_restart_and_corrupt_files_are_rebuilt() {
    let mut d = daemon(AMPLE_BUDGET);
    wait_late(&d);
    assert!(d.terminate(), "clean exit");
    let file = d.data_dir().join("store/token-states.bin");
    assert!(file.is_file(), "saved at shutdown");
    d.spawn(&[]);
    wait_late(&d);
    assert!(
        d.log_text()
            .contains(&format!("token states of {} memories loaded", NOTES.len())),
        "{}",
        d.log_tail()
    );
    // The log's index came with the codes saved at shutdown: the log was not scanned.
    assert!(
        d.log_text()
            .contains("token-state log opened from its saved index and 0 records"),
        "{}",
        d.log_tail()
    );
    assert_eq!(first_reranked(&d, "after-restart"), ANSWER);

    // A damaged file is derived data: ignored with a warning, the states encoded again.
    assert!(d.terminate(), "clean exit");
    flip_middle_byte(&file);
    d.spawn(&[]);
    wait_late(&d);
    assert!(
        d.log_text().contains("token states not loaded"),
        "{}",
        d.log_tail()
    );
    assert_eq!(
        d.get::<StatsResponse>("/api/stats").index.token_states,
        NOTES.len()
    );
    assert_eq!(first_reranked(&d, "after-damage"), ANSWER);

    // A damaged log of full states, without the saved file (and the log's index in it): the
    // log is scanned, cut at the damaged record, and what it held encoded again.
    assert!(d.terminate(), "clean exit");
    let log_file = d.data_dir().join("store/token-states.log");
    flip_middle_byte(&log_file);
    std::fs::remove_file(&file).unwrap();
    d.spawn(&[]);
    wait_late(&d);
    assert!(
        d.log_text().contains("damaged or torn bytes cut"),
        "{}",
        d.log_tail()
    );
    let ix = d.get::<StatsResponse>("/api/stats").index;
    assert_eq!(
        (ix.token_states, ix.token_states_on_disk),
        (NOTES.len(), NOTES.len())
    );
    assert_eq!(first_reranked(&d, "after-log-damage"), ANSWER);
}

/// `/api/stats` accounts for the daemon's memory: the models (measured at load), the records,
/// the indexes, the token states and the file-backed pages, within the resident set; the
/// counted parts grow with the store.
#[test]
fn stats_account_for_the_daemons_memory() {
    let d = daemon(AMPLE_BUDGET);
    wait_late(&d);
    let before: StatsResponse = d.get("/api/stats");
    let m = &before.memory;
    for model in ["model.embedder", "model.late_interaction"] {
        // The int8 weights alone are 23 and 34 MB.
        assert!(m.components[model] > 10 << 20, "{model}: {m:?}");
        assert!(m.measured_at_load.iter().any(|n| n == model), "{m:?}");
    }
    assert_eq!(
        m.components["token_states"],
        before.index.token_state_bytes as u64
    );
    for part in ["records", "vector_index", "lexical_index"] {
        assert!(m.components[part] > 0, "{part}: {m:?}");
    }
    // File-backed pages: the binary and the libraries, ONNX Runtime's (29 MB file) touched
    // by two loaded models.
    assert!(m.components["code"] > 10 << 20, "code: {m:?}");
    assert!(!m.measured_at_load.iter().any(|n| n == "code"), "{m:?}");
    let sum: u64 = m.components.values().sum();
    assert!(
        sum <= m.rss_bytes,
        "components {sum} > resident {}",
        m.rss_bytes
    );
    assert_eq!(m.unattributed_bytes, m.rss_bytes - sum);

    for i in 0..30 {
        let _: MemoryBankResponse = d.post(
            "/api/memory-bank/add",
            &json!({"content": format!("Service {i} of the billing fleet listens on port {}.", 7000 + i), "scope": "global"}),
        );
    }
    d.wait_embedded(tests::EVENTUALLY_LIMIT);
    wait_late(&d);
    let after = d.get::<StatsResponse>("/api/stats").memory;
    for part in ["records", "lexical_index", "token_states"] {
        assert!(
            after.components[part] > m.components[part],
            "{part} did not grow: {} → {}",
            m.components[part],
            after.components[part]
        );
    }
    assert!(after.components["vector_index"] >= m.components["vector_index"]);
}

/// Distinct notes on other subjects than `NOTES`, about 30 tokens each.
fn filler(i: usize) -> String {
    const SERVICES: [&str; 6] = [
        "billing",
        "mailer",
        "thumbnails",
        "ledger",
        "search",
        "audit",
    ];
    const ACTIONS: [&str; 4] = ["rotates", "compresses", "uploads", "prunes"];
    let service = SERVICES[i % SERVICES.len()];
    let action = ACTIONS[(i / SERVICES.len()) % ACTIONS.len()];
    format!(
        "Note {i}: the {service} worker {action} its logs under /var/log/{service}-{i} \
         every {} hours and pages the on-call after {} failed health checks.",
        i % 23 + 1,
        i % 7 + 2
    )
}

#[test]
fn a_store_over_the_cap_codes_every_memory_and_stats_show_the_coverage() {
    // About 5,000 token vectors: 1.9 MB in i8, over a 1 MiB cap; coded they fit.
    const FILLERS: usize = 120;
    let mut d = daemon(&format!("{AMPLE_BUDGET}token_states_mb = 1\n"));
    // Imported, since the memory bank would merge notes this alike.
    let lines: String = (0..FILLERS)
        .map(|i| {
            let at = 1_700_000_000_000i64 + i as i64 * 1_000;
            let line = json!({"key": 10_000 + i, "id": format!("patterns_{:012x}", 0xabc000 + i),
                "collection": "patterns", "content": filler(i), "created_at": at,
                "updated_at": at, "score": 0.5, "uses": 0, "success_count": 0.0,
                "outcome_history": [], "last_outcome": null, "last_used": null, "tags": [],
                "importance": null, "confidence": null, "archived": false, "former_ids": [],
                "metadata": {}});
            format!("{line}\n")
        })
        .collect();
    let (status, body) = d.post_raw("/api/import", lines.as_bytes(), true);
    assert!(
        status == 200 && body.contains(&format!("\"imported\":{FILLERS}")),
        "{status} {body}"
    );
    d.wait_embedded(Duration::from_secs(120));
    let total = NOTES.len() + FILLERS;
    let coded = |d: &Daemon| {
        let ix = d.get::<StatsResponse>("/api/stats").index;
        ix.token_states_coded && ix.token_states == total && ix.pending_token_states == 0
    };
    let mut last = None;
    let all_coded = |d: &Daemon, last: &mut Option<IndexStats>| {
        let ix = d.get::<StatsResponse>("/api/stats").index;
        let done = coded(d);
        *last = Some(ix);
        done
    };
    let start = std::time::Instant::now();
    while !all_coded(&d, &mut last) {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "never coded: {last:?}\n{}",
            d.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let ix = d.get::<StatsResponse>("/api/stats").index;
    assert_eq!((ix.token_states, ix.token_states_total), (total, total));
    // Every memory's full states in the log on disk (the rescoring reads them), ~14 KB each.
    assert_eq!(ix.token_states_on_disk, total);
    assert!(
        ix.token_state_disk_bytes > total as u64 * 5_000,
        "{} bytes on disk",
        ix.token_state_disk_bytes
    );
    // Every memory within the cap (i8 would need 1.9 MB): 16 bytes a kept token and the
    // codebook.
    assert!(
        ix.token_state_bytes <= 1024 * 1024,
        "{} bytes",
        ix.token_state_bytes
    );
    assert!(
        d.log_text().contains("token states coded"),
        "{}",
        d.log_tail()
    );
    // Reranked from codes (which of these three notes leads is a quality question for
    // `memd-eval states`: a codebook trained on a few dozen log lines is a poor one).
    first_reranked(&d, "coded");

    // Saved coded with its codebook: a restart loads them, nothing is encoded or trained again.
    assert!(d.terminate(), "clean exit");
    d.spawn(&[]);
    wait_late(&d);
    assert!(coded(&d), "loaded coded");
    let log = d.log_text();
    assert!(
        log.contains(&format!("token states of {total} memories loaded")),
        "{}",
        d.log_tail()
    );
    assert_eq!(log.matches("token states coded").count(), 1, "trained once");
    first_reranked(&d, "coded-after-restart");
}
