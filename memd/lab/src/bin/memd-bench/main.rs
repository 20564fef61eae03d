//! `memd-bench`: measures memd as users run it: real `memd serve` processes from the same target
//! directory, the real embedding runtime, the real static hook binaries.
//!
//! Owns the command line, locating the binaries and the runtime, the work directory, and running
//! the phases in order (see `phases.rs`). Prints one line per figure (`name unit p50 p99 n`
//! or `name unit value`, with the load average and PASS/MISS against the target) and writes the
//! JSON report. Must never reach into a daemon's internals while it runs: everything timed goes
//! through the HTTP API or the hook binaries; the only offline path is `--synthetic-bulk`, which
//! fills a stopped daemon's directory with the memd library and is reported as such.

mod corpus;
mod daemon;
mod floor;
mod hooks;
mod load;
mod phases;
mod prebuild;
mod report;
mod saturation;

use anyhow::{Context, Result, bail};
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, ValueEnum};
use phases::{Bench, Opts};
use std::path::{Path, PathBuf};

/// Benchmarks a release build of memd end to end and compares the figures with the targets.
///
/// Build first: `cargo build --release -p memd -p hook-prompt -p hook-stop` and
/// `install/build-hooks.sh` (static hooks in target/hook/). The embedding runtime must be in
/// `${XDG_CACHE_HOME:-~/.cache}/memd/runtime` (install/fetch-runtime.sh) or `--runtime-dir`.
#[derive(Parser, Debug)]
#[command(name = "memd-bench", version)]
struct Args {
    /// Store sizes for the search, get-context, hook, start, RSS, disk and mixed-load figures.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
    sizes: Vec<usize>,
    /// CI mode (~1 min): sizes 1000, ingest 1000, 100 queries, 100 hook runs, 5 s mixed load,
    /// 2 starts. Options given explicitly still win.
    #[arg(long)]
    quick: bool,
    /// Where the JSON report goes.
    #[arg(long, default_value = "bench/results.json")]
    out: PathBuf,
    /// Keep the figures of an existing `--out` file that this run does not measure again
    /// (re-running a noisy phase with `--only`).
    #[arg(long)]
    merge: bool,
    /// Fill store sizes above `--real-max` offline with the memd library (real records written
    /// through memd_engine::store; vectors real for `--real-pool` texts, synthetic for the rest) instead
    /// of embedding every memory through the daemon. Reported in the JSON notes.
    #[arg(long)]
    synthetic_bulk: bool,
    /// With `--synthetic-bulk`: memories up to this count are still stored through the API.
    #[arg(long, default_value_t = 10_000)]
    real_max: usize,
    /// With `--synthetic-bulk`: texts embedded for real, whose vectors the bulk is derived from.
    #[arg(long, default_value_t = 2_000)]
    real_pool: usize,
    /// Memories stored per ingest run.
    #[arg(long, default_value_t = 10_000)]
    ingest: usize,
    /// Concurrent clients of each ingest run.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    clients: Vec<usize>,
    /// Requests per latency figure (search, get-context).
    #[arg(long, default_value_t = 300)]
    queries: usize,
    /// Runs of each hook binary per size.
    #[arg(long, default_value_t = 300)]
    hook_runs: usize,
    /// Concurrent sessions of the mixed load.
    #[arg(long, default_value_t = 8)]
    sessions: usize,
    /// Duration of the mixed load per size, seconds (0: skip).
    #[arg(long, default_value_t = 30)]
    mixed_secs: u64,
    /// Daemon starts per start-time figure.
    #[arg(long, default_value_t = 3)]
    starts: usize,
    /// Run the daemons with `[search] rerank = false` (no late interaction, fused order), to
    /// compare against the default in one sitting.
    #[arg(long)]
    no_rerank: bool,
    /// After the workloads at each size, measure hook-prompt (`--hook-runs`) and get-context
    /// (`--queries`) with reranking on and off in one sitting: the store copied to a second
    /// daemon reranking the other way, calls alternated between the two, the p50 ratio printed
    /// beside its target (1.15).
    #[arg(long)]
    rerank_pair: bool,
    /// Only these phases (default: binaries, empty, ingest, sizes; `million`, `shared`,
    /// `dashboard` and `tools` only when named).
    #[arg(long, value_delimiter = ',', value_enum)]
    only: Vec<Phase>,
    /// Directory holding `memd` (default: the directory of this executable).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Directory holding the static `hook-prompt` and `hook-stop` (default: <target>/hook).
    #[arg(long)]
    hook_dir: Option<PathBuf>,
    /// Embedding runtime (default: $MEMD_RUNTIME_DIR, else ${XDG_CACHE_HOME:-~/.cache}/memd/runtime).
    #[arg(long)]
    runtime_dir: Option<PathBuf>,
    /// Scratch directory for the data dirs (default: a new directory under the system temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Keep the scratch directory afterwards.
    #[arg(long)]
    keep: bool,
    /// Seed of the generated texts.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print the figures of the `--out` file as a Markdown table and exit (measures nothing).
    #[arg(long)]
    table: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Binary sizes.
    Binaries,
    /// Start time and RSS with an empty store.
    Empty,
    /// Ingest rate (durable, embedded) per client count.
    Ingest,
    /// Everything per store size (search, get-context, hooks, start, RSS, disk, mixed load).
    Sizes,
    /// 1M memories built offline: start time, RSS, disk, search, get-context.
    Million,
    /// get-context per size, local only and with the shared PostgreSQL store (only when named).
    Shared,
    /// Render time of the dashboard's pages per size, full trace ledger (only when named).
    Dashboard,
    /// Tool-event hooks per size: PreToolUse (guard) and PostToolUse (evidence) through the
    /// static hooks, answers checked (only when named).
    Tools,
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(0) => std::process::ExitCode::SUCCESS,
        Ok(_) => std::process::ExitCode::from(1),
        Err(e) => {
            eprintln!("memd-bench: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

/// Runs the phases; returns how many failed.
fn run() -> Result<usize> {
    let matches = Args::command().get_matches();
    let args = Args::from_arg_matches(&matches)?;
    if args.table {
        print!("{}", report::markdown_table(&args.out)?);
        return Ok(0);
    }
    let opts = options(&args, &matches);
    let exe_dir = std::env::current_exe()?
        .parent()
        .map(Path::to_path_buf)
        .context("executable has no directory")?;
    let bin_dir = args.bin_dir.clone().unwrap_or_else(|| exe_dir.clone());
    let memd = existing(bin_dir.join("memd"), "cargo build --release -p memd")?;
    let hook_dir = args
        .hook_dir
        .clone()
        .unwrap_or_else(|| bin_dir.join("..").join("hook"));
    for h in ["hook-prompt", "hook-stop"] {
        existing(hook_dir.join(h), "install/build-hooks.sh")?;
    }
    let runtime_dir = args
        .runtime_dir
        .clone()
        .unwrap_or_else(memd_testkit::runtime_dir);
    memd_engine::models::embed::RuntimePaths::in_runtime_dir(&runtime_dir)
        .check()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let work = match &args.work_dir {
        Some(w) => w.clone(),
        None => std::env::temp_dir().join(format!("memd-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work)?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut report = report::Report::new(command);
    if args.merge {
        report.merge_previous(&args.out)?;
    }
    println!("{}", report.machine.line());
    println!("memd: {}  hooks: {}", memd.display(), hook_dir.display());
    let mut bench = Bench {
        gc_cpu_ms: None,
        memd,
        hook_dir,
        runtime_dir,
        work: work.clone(),
        report,
        out: args.out.clone(),
        seed: args.seed,
        opts,
    };
    let mut failed = 0;
    for phase in phases(&args.only) {
        println!("=== {phase:?} ===");
        let result = match phase {
            Phase::Binaries => bench.binaries(),
            Phase::Empty => bench.empty(),
            Phase::Ingest => bench.ingest(),
            Phase::Sizes => bench.sizes(),
            Phase::Million => bench.million(),
            Phase::Shared => bench.shared(),
            Phase::Dashboard => bench.dashboard(),
            Phase::Tools => bench.tools(),
        };
        if let Err(e) = result {
            failed += 1;
            eprintln!("memd-bench: phase {phase:?} failed: {e:#}");
            bench.report.note(format!("phase {phase:?} failed: {e:#}"));
        }
        bench.report.write(&bench.out)?;
    }
    let misses = bench
        .report
        .figures
        .iter()
        .filter(|f| f.pass == Some(false))
        .count();
    println!(
        "{} figures, {misses} MISS; JSON in {}",
        bench.report.figures.len(),
        bench.out.display()
    );
    if args.keep {
        println!("scratch kept in {}", work.display());
    } else {
        std::fs::remove_dir_all(&work).ok();
    }
    Ok(failed)
}

/// `--quick` defaults, overridden by anything given on the command line.
fn options(args: &Args, m: &ArgMatches) -> Opts {
    let given = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    let quick = |id: &str, full, fast| if args.quick && !given(id) { fast } else { full };
    Opts {
        sizes: if args.quick && !given("sizes") {
            vec![1000]
        } else {
            args.sizes.clone()
        },
        ingest: quick("ingest", args.ingest, 1000),
        clients: args.clients.clone(),
        queries: quick("queries", args.queries, 100),
        hook_runs: quick("hook_runs", args.hook_runs, 100),
        sessions: args.sessions,
        mixed_secs: quick("mixed_secs", args.mixed_secs as usize, 5) as u64,
        starts: quick("starts", args.starts, 2),
        synthetic_bulk: args.synthetic_bulk,
        real_max: args.real_max,
        real_pool: args.real_pool,
        rerank: !args.no_rerank,
        rerank_pair: args.rerank_pair,
    }
}

fn phases(only: &[Phase]) -> Vec<Phase> {
    if only.is_empty() {
        vec![Phase::Binaries, Phase::Empty, Phase::Ingest, Phase::Sizes]
    } else {
        let order = [
            Phase::Binaries,
            Phase::Empty,
            Phase::Ingest,
            Phase::Sizes,
            Phase::Million,
            Phase::Shared,
            Phase::Dashboard,
            Phase::Tools,
        ];
        order.into_iter().filter(|p| only.contains(p)).collect()
    }
}

fn existing(p: PathBuf, build: &str) -> Result<PathBuf> {
    if !p.is_file() {
        bail!("{} not found: build it with `{build}`", p.display());
    }
    Ok(p)
}
