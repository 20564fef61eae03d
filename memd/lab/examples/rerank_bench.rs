//! Prints what the cross-encoder costs: pairs per query at several depths, p50 over runs.
//!
//! Run: `cargo run --release -p memd-lab --example rerank_bench` (after install/fetch-runtime.sh).
//! For reading, not asserting: the figures depend on the CPU and what else runs.

use anyhow::Result;
use memd_engine::models::embed::{CrossEncoder, RuntimePaths, reranker_dir};
use std::time::Instant;

fn main() -> Result<()> {
    let paths = RuntimePaths::resolve();
    let ce = CrossEncoder::load(&paths.ort_lib, &reranker_dir(), 2)?;
    let query = "how do we ship the payments backend to the production cluster?";
    let passages: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "Note {i}: the billing service deploys with helm from the release branch; \
                 {} the staging database listens on port 5433 and migrations run first.",
                "rollbacks use the previous chart; ".repeat(i % 4)
            )
        })
        .collect();
    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
    ce.score(query, &refs[..5])?;
    for depth in [5, 10, 20, 40] {
        let mut ms: Vec<f64> = (0..7)
            .map(|_| {
                let t = Instant::now();
                ce.score(query, &refs[..depth])
                    .map(|_| t.elapsed().as_secs_f64() * 1000.0)
            })
            .collect::<Result<_>>()?;
        ms.sort_by(f64::total_cmp);
        println!(
            "depth {depth}: p50 {:.1} ms ({:.1} ms a pair)",
            ms[3],
            ms[3] / depth as f64
        );
    }
    Ok(())
}
