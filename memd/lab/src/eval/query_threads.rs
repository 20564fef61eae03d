//! `memd-eval query-threads`: how the prompt's two encodings (its embedding and its
//! late-interaction states) share the machine's cores under each split of ONNX Runtime
//! intra-op threads between the two sessions.
//!
//! Owns the timing: per split, one prompt at a time (the embedding alone, as a daemon without
//! reranking runs it, and both in parallel, as a reranking daemon does), then `sessions`
//! prompts at once in a closed loop through the models' own query batching (throughput and
//! latency), with the process's CPU time per prompt. Must never touch a store or a daemon; it
//! only loads the two models, the same way the daemon does.

use super::floor::OFF_TOPIC_QUERIES;
use anyhow::{Context, Result};
use memd_engine::models::embed::{
    Embed, LateInteraction, OnnxEmbedder, RuntimePaths, late_interaction_dir,
};
use std::time::{Duration, Instant};

/// One way of encoding a prompt (the embedding alone, or both encodings).
type Encode<'a> = &'a (dyn Fn(&str) -> Result<()> + Sync);

/// Untimed encodings before the timed ones (ONNX Runtime's first runs allocate).
const WARM_UP: usize = 10;

/// One split: intra-op threads of the embedder's and of the late-interaction session.
#[derive(Debug, Clone, Copy)]
pub struct Split {
    pub embed: usize,
    pub late: usize,
}

impl std::str::FromStr for Split {
    type Err = String;
    fn from_str(s: &str) -> Result<Split, String> {
        let (e, l) = s
            .split_once('/')
            .ok_or_else(|| format!("split `{s}`: expected EMBED/LATE threads, e.g. 2/1"))?;
        let n = |v: &str| {
            v.parse::<usize>()
                .map_err(|e| format!("split `{s}`: `{v}` is not a thread count ({e})"))
        };
        Ok(Split {
            embed: n(e)?,
            late: n(l)?,
        })
    }
}

/// The models of one split.
struct Models {
    embedder: OnnxEmbedder,
    late: LateInteraction,
}

impl Models {
    fn load(runtime: &RuntimePaths, split: Split) -> Result<Models> {
        let embedder = OnnxEmbedder::load(runtime, split.embed).context("loading the embedder")?;
        let late = LateInteraction::load(&runtime.ort_lib, &late_interaction_dir(), split.late)
            .context("loading the late-interaction model")?;
        Ok(Models { embedder, late })
    }

    /// The embedding alone (no reranking), through the query queue.
    fn plain(&self, text: &str) -> Result<()> {
        self.embedder.embed_query(text).map(drop)
    }

    /// Both encodings in parallel, as the prompt path runs them.
    fn both(&self, text: &str) -> Result<()> {
        std::thread::scope(|scope| -> Result<()> {
            let late = scope.spawn(|| self.late.encode_query(text).map(drop));
            self.embedder.embed_query(text)?;
            late.join()
                .map_err(|_| anyhow::anyhow!("late-interaction encoding panicked"))?
        })
    }
}

/// The `i`th prompt: a coding question, numbered so no two runs repeat a text.
fn prompt(i: usize) -> String {
    format!("{} ({i})", OFF_TOPIC_QUERIES[i % OFF_TOPIC_QUERIES.len()])
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

/// This process's CPU time (user + system, all threads).
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn load1() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().next().unwrap_or("?").to_string()
}

/// p50 of `runs` timed calls of `f`, one at a time.
fn one_at_a_time(runs: usize, from: usize, f: impl Fn(&str) -> Result<()>) -> Result<f64> {
    let mut ms = Vec::with_capacity(runs);
    for i in 0..runs {
        let text = prompt(from + i);
        let start = Instant::now();
        f(&text)?;
        ms.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(percentile(&mut ms, 0.5))
}

/// `sessions` callers each encoding `per_session` prompts back to back: prompts per second,
/// latency p50 / p99 (ms) and CPU ms per prompt.
fn concurrent(
    sessions: usize,
    per_session: usize,
    f: impl Fn(&str) -> Result<()> + Sync,
) -> Result<[f64; 4]> {
    let f = &f;
    let (cpu, start) = (cpu_time(), Instant::now());
    let mut ms: Vec<f64> = std::thread::scope(|scope| -> Result<Vec<f64>> {
        let callers: Vec<_> = (0..sessions)
            .map(|s| {
                scope.spawn(move || -> Result<Vec<f64>> {
                    (0..per_session)
                        .map(|i| {
                            let t = Instant::now();
                            f(&prompt(100_000 + s * per_session + i))?;
                            Ok(t.elapsed().as_secs_f64() * 1000.0)
                        })
                        .collect()
                })
            })
            .collect();
        let mut all = Vec::new();
        for c in callers {
            all.extend(
                c.join()
                    .map_err(|_| anyhow::anyhow!("a caller panicked"))??,
            );
        }
        Ok(all)
    })?;
    let (wall, cpu) = (start.elapsed(), cpu_time() - cpu);
    let n = ms.len() as f64;
    Ok([
        n / wall.as_secs_f64(),
        percentile(&mut ms, 0.5),
        percentile(&mut ms, 0.99),
        cpu.as_secs_f64() * 1000.0 / n,
    ])
}

/// Prints two rows per split (the embedding alone, both encodings; tab-separated), each measured after loading its models afresh.
pub fn run(runtime: &RuntimePaths, splits: &[Split], runs: usize, sessions: usize) -> Result<()> {
    println!(
        "split(embed/late)\tencodings\tone_p50_ms\t{sessions}x_prompts_per_s\t\
         {sessions}x_p50_ms\t{sessions}x_p99_ms\tcpu_ms_per_prompt\tload1"
    );
    let per_session = runs.div_ceil(sessions).max(4);
    for &split in splits {
        let m = Models::load(runtime, split)?;
        for i in 0..WARM_UP {
            m.both(&prompt(50_000 + i))?;
        }
        let rows: [(&str, Encode); 2] = [("embedding", &|t| m.plain(t)), ("both", &|t| m.both(t))];
        for (what, f) in rows {
            let one = one_at_a_time(runs, 0, f)?;
            let [rate, p50, p99, cpu] = concurrent(sessions, per_session, f)?;
            println!(
                "{}/{}\t{what}\t{one:.2}\t{rate:.1}\t{p50:.1}\t{p99:.1}\t{cpu:.2}\t{}",
                split.embed,
                split.late,
                load1()
            );
        }
    }
    Ok(())
}
