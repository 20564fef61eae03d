//! Prints what project resolution costs a prompt: `project::resolve` reading `.git` (what the
//! daemon does once per directory every 30 s) and a cached lookup (every other prompt).
//!
//! Run: `cargo run --release -p memd-lab --example project_resolve`. The figures are for
//! reading, not asserting: they depend on the disk cache and the machine.

use anyhow::Result;
use memd_engine::project;
use memd_engine::scope::ProjectCache;
use std::path::Path;
use std::time::{Duration, Instant};

const RUNS: usize = 20_000;

fn main() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let repo = tmp.path().join("shop");
    std::fs::create_dir_all(repo.join(".git"))?;
    std::fs::create_dir_all(repo.join("crates/api/src"))?;
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n")?;
    std::fs::write(
        repo.join(".git/config"),
        "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = git@github.com:acme/shop.git\n",
    )?;
    let plain = tmp.path().join("scratch/notes");
    std::fs::create_dir_all(&plain)?;
    for (name, dir) in [
        ("repository root", repo.clone()),
        ("3 levels below the root", repo.join("crates/api/src")),
        ("no repository", plain),
    ] {
        let (p50, p99) = percentiles(|| {
            std::hint::black_box(project::resolve(&dir));
        });
        println!("resolve, {name}: p50 {p50:.1} µs, p99 {p99:.1} µs");
    }
    let cache = ProjectCache::default();
    let dir = repo.join("crates/api/src");
    let dir = dir.to_str().unwrap_or_default().to_string();
    cache
        .resolve("cwd", Some(&dir))
        .map_err(|e| anyhow::anyhow!(e.message))?;
    let (p50, p99) = percentiles(|| {
        std::hint::black_box(cache.resolve("cwd", Some(&dir)).ok());
    });
    println!("cached lookup: p50 {p50:.2} µs, p99 {p99:.2} µs");
    println!("(project id: {})", project::resolve(Path::new(&dir)).id);
    Ok(())
}

fn percentiles(mut f: impl FnMut()) -> (f64, f64) {
    let mut samples: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(samples[RUNS / 2]), us(samples[RUNS * 99 / 100]))
}
