//! `memd-eval state-scale`: what the token states of a large store cost, through the engine's
//! own `late::States` (its log on disk, its codes in memory): bytes in memory and on disk, the
//! resident-set growth, and the prompt path's price of rescoring the best `late::RESCORE` of a
//! code order from the log.
//!
//! Owns synthetic memories shaped like LoCoMo turns (35 tokens, 26 kept for the codes; random
//! unit vectors, which cost the same as a model's), stored in the daemon's batches (one fsync
//! per `late::ENCODE_BATCH`), and the timing of reorders over a 40-deep head. Must never write outside a temporary directory, and removes it when done.

use anyhow::{Context, Result};
use memd_engine::models::embed::{DIMS, QueryStates, TokenStates};
use memd_engine::models::late::{self, Full, States, Stored};
use std::time::Instant;

/// Tokens and kept tokens of a LoCoMo turn on average (bench/EVAL.md section 10: 35.2, 25.9).
const TOKENS: usize = 35;
const KEPT: usize = 26;
/// Query tokens of a typical prompt's opening.
const QUERY_TOKENS: usize = 12;
const HEAD: usize = 40;
/// The model the synthetic states stand for (any digest: they are made and read here only).
const MODEL: late::Digest = [0x5e; 32];
const QUERIES: usize = 300;

/// A deterministic stream of unit vectors.
struct Vectors(u64);

impl Vectors {
    fn next(&mut self) -> Vec<f32> {
        let mut v: Vec<f32> = (0..DIMS)
            .map(|_| {
                self.0 = self
                    .0
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((self.0 >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect();
        let n = v.iter().map(|a| a * a).sum::<f32>().sqrt();
        v.iter_mut().for_each(|a| *a /= n);
        v
    }

    fn memory(&mut self) -> Full {
        let rows: Vec<Vec<f32>> = (0..TOKENS).map(|_| self.next()).collect();
        Full {
            states: TokenStates::quantize_rows(&rows),
            kept: (0..TOKENS).map(|t| (2..2 + KEPT).contains(&t)).collect(),
        }
    }
}

fn rss_bytes() -> u64 {
    memd_engine::heap::rss_bytes().unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Builds a store of each size in `sizes` and prints one row per size; then, per size, the
/// shipped reorder over each number of candidates in `candidates` (the fused 40 plus the
/// vector list's extra ones: late interaction as a candidate generator, bench/EVAL.md
/// section 12).
pub fn run(sizes: &[usize], candidates: &[usize]) -> Result<()> {
    println!(
        "| memories | build s | reopen s | in memory (codes + codebook) | bytes/memory | RSS growth | log on disk | shipped reorder of 40, ms p50 / p99 | of which: codes of 40 (table + MaxSim) | 20 reads | and their MaxSim | before: MaxSim of 40 i8 in memory |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut deeper = Vec::new();
    for &n in sizes {
        let dir = tempfile::tempdir().context("a directory for the log")?;
        let (row, rows) = measure(n, dir.path(), candidates)?;
        println!("{row}");
        deeper.extend(rows);
    }
    if !deeper.is_empty() {
        println!("\n| memories | candidates | shipped reorder, ms p50 / p99 |\n|---:|---:|---|");
        deeper.iter().for_each(|r| println!("{r}"));
    }
    Ok(())
}

/// The shipped reorder's time over heads of each size in `candidates`, spread over the store
/// as `measure`'s head of 40 is.
fn reorder_times(states: &States, n: usize, candidates: &[usize]) -> Result<Vec<String>> {
    let texts: Vec<String> = (0..n).map(|k| format!("memory {k}")).collect();
    let mut vectors = Vectors(n as u64 + 1);
    let mut rows = Vec::new();
    for &depth in candidates {
        let mut times = Vec::with_capacity(QUERIES);
        for q in 0..QUERIES {
            let query = QueryStates::from_rows((0..QUERY_TOKENS).map(|_| vectors.next()).collect());
            let head = spread(q, depth, &texts);
            let clock = Instant::now();
            let (_, finished) = late::reorder_within(states, &query, &head, depth, None);
            times.push(ms(clock));
            anyhow::ensure!(finished, "a reorder without a deadline finishes");
        }
        rows.push(format!("| {n} | {depth} | {} |", p50_p99(&mut times)));
    }
    Ok(rows)
}

fn measure(n: usize, dir: &std::path::Path, candidates: &[usize]) -> Result<(String, Vec<String>)> {
    let rss_before = rss_bytes();
    let started = Instant::now();
    let states = States::default();
    states.open(dir, &MODEL);
    let mut vectors = Vectors(n as u64);
    // In the daemon's batches: one fsync per `ENCODE_BATCH` memories.
    for start in (0..n).step_by(late::ENCODE_BATCH) {
        let keys = start..n.min(start + late::ENCODE_BATCH);
        let texts: Vec<String> = keys.clone().map(|k| format!("memory {k}")).collect();
        let batch = keys
            .zip(&texts)
            .map(|(k, text)| (k as u64, text.as_str(), vectors.memory()))
            .collect();
        states.insert_batch(batch)?;
        if states.due_for_codebook(false) {
            states.train_codebook();
        }
    }
    let build = started.elapsed().as_secs_f64();
    let (held, bytes) = states.size();
    let in_memory = bytes + states.codebook_bytes();
    // As the daemon does when idle: the encoding's transient buffers handed back first.
    memd_engine::heap::release_freed_memory();
    let rss = rss_bytes().saturating_sub(rss_before);
    let (_, log) = states.disk_size();
    // A restart: the codes and the log's index saved as at shutdown, then loaded (the log is
    // not scanned: nothing was appended after the save).
    let codes = dir.join(memd_engine::models::TOKEN_STATES_FILE);
    states.save(&codes)?;
    drop(states);
    let clock = Instant::now();
    let states = States::default();
    states.open(dir, &MODEL);
    let reopen = clock.elapsed().as_secs_f64();
    anyhow::ensure!(states.size().0 == held, "every memory back after a reopen");
    let texts: Vec<String> = (0..n).map(|k| format!("memory {k}")).collect();
    let mut t = Timings::default();
    for q in 0..QUERIES {
        let query = QueryStates::from_rows((0..QUERY_TOKENS).map(|_| vectors.next()).collect());
        // A head of 40 spread over the whole store (what a prompt's first stage returns).
        let head = spread(q, HEAD, &texts);
        let clock = Instant::now();
        let (_, finished) = late::reorder_within(&states, &query, &head, HEAD, None);
        t.reorder.push(ms(clock));
        anyhow::ensure!(finished, "a reorder without a deadline finishes");
        // The code order alone: the query's table, then MaxSim over the head's codes.
        let clock = Instant::now();
        let table = states.codebook().context("coded")?.table(query.rows());
        for (key, text, _) in &head {
            if let Some(Stored::Coded(c)) = states.get(*key, text).as_deref() {
                std::hint::black_box(table.maxsim(c));
            }
        }
        t.codes.push(ms(clock));
        let clock = Instant::now();
        let mut full = Vec::with_capacity(late::RESCORE);
        for (key, text, _) in head.iter().take(late::RESCORE) {
            full.push(
                states
                    .read_full(*key, text)?
                    .context("every memory on disk")?,
            );
        }
        t.reads.push(ms(clock));
        let clock = Instant::now();
        for (f, (_, _, cos)) in full.iter().zip(&head) {
            std::hint::black_box(late::score(&query, &f.states, *cos));
        }
        t.rescore.push(ms(clock));
        // Before the log: MaxSim over the whole head's i8 states held in memory.
        let held: Vec<Full> = head
            .iter()
            .map(|(k, text, _)| states.read_full(*k, text).ok().flatten())
            .collect::<Option<_>>()
            .context("every memory on disk")?;
        let clock = Instant::now();
        for (f, (_, _, cos)) in held.iter().zip(&head) {
            std::hint::black_box(late::score(&query, &f.states, *cos));
        }
        t.before.push(ms(clock));
    }
    let deeper = reorder_times(&states, n, candidates)?;
    let mb = |b: f64| b / (1024.0 * 1024.0);
    let row = format!(
        "| {n} | {build:.0} | {reopen:.2} | {:.1} MB ({held} memories) | {:.0} | {:.1} MB | {:.0} MB | {} | {} | {} | {} | {} |",
        mb(in_memory as f64),
        in_memory as f64 / held.max(1) as f64,
        mb(rss as f64),
        mb(log as f64),
        p50_p99(&mut t.reorder),
        p50_p99(&mut t.codes),
        p50_p99(&mut t.reads),
        p50_p99(&mut t.rescore),
        p50_p99(&mut t.before),
    );
    Ok((row, deeper))
}

/// Milliseconds per query of each step.
#[derive(Default)]
struct Timings {
    /// The shipped reorder of 40: codes, then the best 20 read back and rescored.
    reorder: Vec<f64>,
    /// The query's table against the codebook and MaxSim over the 40 codes.
    codes: Vec<f64>,
    /// Reading 20 memories' full states from the log (again: from the page cache).
    reads: Vec<f64>,
    /// MaxSim of the 20 read back.
    rescore: Vec<f64>,
    /// MaxSim of all 40 in i8 held in memory (the form before the log).
    before: Vec<f64>,
}

/// Query `q`'s head of `depth` memories spread over the whole store of `texts` (what a
/// prompt's first stage returns), each at cosine 0.5.
fn spread(q: usize, depth: usize, texts: &[String]) -> Vec<late::Candidate<'_>> {
    (0..depth)
        .map(|i| {
            let key = (q * 7_919 + i * 104_729) % texts.len();
            (key as u64, texts[key].as_str(), 0.5)
        })
        .collect()
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn p50_p99(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    format!("{:.2} / {:.2}", percentile(v, 0.5), percentile(v, 0.99))
}
