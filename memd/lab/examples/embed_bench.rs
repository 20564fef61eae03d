//! Prints load time, single-sentence latency and throughput of the ONNX embedder.
//!
//! Run: `cargo run --release -p memd-lab --example embed_bench` (after install/fetch-runtime.sh). The numbers
//! are for reading, not asserting: they depend on the CPU and on what else the machine runs.

use std::time::{Duration, Instant};

use anyhow::Result;
use memd_engine::models::embed::{Embed, OnnxEmbedder, RuntimePaths};

const LATENCY_RUNS: usize = 200;
const ONE_SENTENCE: &str =
    "Always run cargo fmt and cargo clippy before committing to this repository.";

fn main() -> Result<()> {
    let paths = RuntimePaths::resolve();
    paths.check().map_err(anyhow::Error::msg)?;
    let corpus = corpus();
    let long_text = "The indexing service rebuilds its vector index every night. ".repeat(40);
    for threads in [1, 2] {
        let started = Instant::now();
        let model = OnnxEmbedder::load(&paths, threads)?;
        let load = started.elapsed();
        if let Some(rss) = resident_mib() {
            println!("threads={threads}: resident memory after load {rss:.0} MiB");
        }
        model.embed(&[ONE_SENTENCE])?; // first run allocates arenas
        let (p50, p99) = single_latency(&model)?;
        let long = time(|| model.embed(&[&long_text]).map(drop))?;
        println!(
            "threads={threads}: load {:.0} ms{}, one sentence p50 {:.2} ms p99 {:.2} ms, one 256-token text {:.1} ms",
            ms(load),
            if threads == 1 {
                " (includes dlopen)"
            } else {
                ""
            },
            ms(p50),
            ms(p99),
            ms(long)
        );
        let texts: Vec<&str> = corpus.iter().map(String::as_str).collect();
        let one_by_one = time(|| texts.iter().try_for_each(|t| model.embed(&[t]).map(drop)))?;
        let batched = time(|| model.embed(&texts).map(drop))?;
        println!(
            "threads={threads}: throughput over {} mixed sentences: {:.0}/s one at a time, {:.0}/s in one call (batched)",
            texts.len(),
            texts.len() as f64 / one_by_one.as_secs_f64(),
            texts.len() as f64 / batched.as_secs_f64()
        );
    }
    Ok(())
}

fn single_latency(model: &OnnxEmbedder) -> Result<(Duration, Duration)> {
    let mut samples = Vec::with_capacity(LATENCY_RUNS);
    for _ in 0..LATENCY_RUNS {
        samples.push(time(|| model.embed(&[ONE_SENTENCE]).map(drop))?);
    }
    samples.sort();
    Ok((samples[LATENCY_RUNS / 2], samples[LATENCY_RUNS * 99 / 100]))
}

fn time(f: impl FnOnce() -> Result<()>) -> Result<Duration> {
    let started = Instant::now();
    f()?;
    Ok(started.elapsed())
}

/// The process's resident set size (Linux only).
fn resident_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// 128 sentences of roughly 10 to 45 tokens, built from fixed parts.
fn corpus() -> Vec<String> {
    let subjects = [
        "The build",
        "Our flaky integration test",
        "The user",
        "A background job",
        "The parser for config files",
        "Memory recall",
        "The HTTP handler",
        "This repository's CI pipeline",
    ];
    let verbs = [
        "fails when",
        "slows down after",
        "keeps retrying because",
        "was fixed once",
    ];
    let objects = [
        "the cache directory is missing",
        "two requests arrive at the same time and both try to write the index file",
        "tabs and spaces are mixed",
        "the database connection drops during a long migration that nobody noticed until the next morning",
    ];
    let mut out = Vec::new();
    for s in subjects {
        for v in verbs {
            for o in objects {
                out.push(format!("{s} {v} {o}."));
            }
        }
    }
    out
}
