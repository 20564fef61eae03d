//! Measures where the memory-bank near-duplicate threshold must sit: restatements of one fact
//! must score above it, distinct facts about the same subject below it. Prints the cosines.

use memd_engine::core::BANK_DUPLICATE_COSINE;
use memd_engine::models::embed::{Embed, OnnxEmbedder, RuntimePaths};

const SAME: &[(&str, &str)] = &[
    (
        "The user's name is Ada Lovelace",
        "The user is called Ada Lovelace",
    ),
    (
        "User prefers tabs over spaces in Go code",
        "In Go code the user prefers tabs rather than spaces",
    ),
    (
        "The billing service deploys with Nomad",
        "Billing service deployments use Nomad",
    ),
    (
        "Ada works at Acme Corp as a backend engineer",
        "Ada is a backend engineer at Acme Corp",
    ),
    (
        "The project uses PostgreSQL 16 for storage",
        "The project stores its data in PostgreSQL 16",
    ),
    (
        "User wants concise answers without preamble",
        "The user wants concise answers, no preamble",
    ),
];

const DIFFERENT: &[(&str, &str)] = &[
    (
        "The user's name is Ada Lovelace",
        "The user's manager is Grace Hopper",
    ),
    (
        "User prefers tabs over spaces in Go code",
        "User prefers spaces over tabs in Python code",
    ),
    (
        "The billing service deploys with Nomad",
        "The search service deploys with Kubernetes",
    ),
    (
        "The project uses PostgreSQL 16 for storage",
        "The project uses Redis 7 for caching",
    ),
    (
        "Staging database listens on port 5433",
        "Production database listens on port 5432",
    ),
    (
        "User's goal is to ship v2 by March",
        "User's goal is to hire two engineers by March",
    ),
];

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn threshold_separates_restatements_from_distinct_facts() {
    if std::env::var("MEMD_SKIP_MODEL_TESTS").is_ok_and(|v| v == "1") {
        eprintln!("skipped: MEMD_SKIP_MODEL_TESTS=1");
        return;
    }
    let paths = RuntimePaths::resolve();
    paths.check().unwrap_or_else(|e| panic!("{e}"));
    let e = OnnxEmbedder::load(&paths, 2).expect("model");
    let score = |pairs: &[(&str, &str)]| -> Vec<f32> {
        pairs
            .iter()
            .map(|(a, b)| {
                let v = e.embed(&[a, b]).unwrap();
                cos(&v[0], &v[1])
            })
            .collect()
    };
    let same = score(SAME);
    let different = score(DIFFERENT);
    eprintln!("restatements: {same:.3?}\ndistinct:     {different:.3?}");
    let max_diff = different.iter().cloned().fold(f32::MIN, f32::max);
    assert!(
        max_diff < BANK_DUPLICATE_COSINE,
        "a distinct fact ({max_diff}) would be merged"
    );
    let caught = same.iter().filter(|c| **c >= BANK_DUPLICATE_COSINE).count();
    assert!(
        caught >= 5,
        "only {caught} of {} restatements recognised",
        same.len()
    );
}
