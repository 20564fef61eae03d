//! The benchmark phases: binaries, empty start and ingest here; the size ladder in `ladder`
//! and the workloads at each size in `workloads` (with the rerank/no-rerank pair in `pair`);
//! `million`, `shared`, `dashboard` and `tools` in their own files.
//!
//! Owns the order of measurements and which figure each one becomes (names, units, targets).
//! Each phase starts its own daemon(s) in its own directory and stops them before returning.
//! Must never measure while the daemon still has embedding work queued (except during ingest,
//! where that work is what is measured), and must say in the report what was synthetic.

use super::corpus::Corpus;
use super::daemon::{Instance, dir_bytes};
use super::load;
use super::report::{Figure, Report, Samples, Stat, Target};
use anyhow::{Result, bail};

#[path = "dashboard.rs"]
mod dashboard;
#[path = "ladder.rs"]
mod ladder;
#[path = "million.rs"]
mod million;
#[path = "pair.rs"]
mod pair;
#[path = "shared.rs"]
mod shared;
#[path = "tools.rs"]
mod tools;
#[path = "workloads.rs"]
mod workloads;
use std::path::{Path, PathBuf};

const MIB: f64 = 1024.0 * 1024.0;
/// Targets from the tracker (issues 1, 2, 7).
const INGEST_PER_S: f64 = 300.0;
const SEARCH_P99_MS: f64 = 25.0;
const READY_MS: f64 = 1000.0;
const RSS_MB: f64 = 150.0;
const DISK_MB_PER_10K: f64 = 30.0;
const HOOK_PROMPT_P50_MS: f64 = 10.0;
const HOOK_STOP_P50_MS: f64 = 5.0;
/// hook-prompt p50 over its floor (spawn + identity check + query encoding), issue 21.
const HOOK_PROMPT_VS_FLOOR: f64 = 1.5;
/// Search queries whose vectors are cached before the cached-search loop.
const CACHED_POOL: usize = 50;
/// Clients used when a size is filled through the API (not a figure).
const FILL_CLIENTS: usize = 8;
/// Memories stored just before the busy-search loop (their embedding runs during it).
const BACKLOG: usize = 500;
const BUSY_QUERIES: usize = 100;
/// Calls per status-endpoint figure.
const STATUS_CALLS: usize = 50;

/// Everything the phases need, resolved once.
pub struct Bench {
    pub memd: PathBuf,
    pub hook_dir: PathBuf,
    pub runtime_dir: PathBuf,
    pub work: PathBuf,
    pub report: Report,
    pub out: PathBuf,
    pub seed: u64,
    pub opts: Opts,
    /// The daemon's CPU time per get-context in the last single-session phase (ms), for the
    /// concurrent phase's floor (`saturation`).
    pub gc_cpu_ms: Option<f64>,
}

/// Workload sizes (after `--quick` defaults were applied).
#[derive(Debug, Clone)]
pub struct Opts {
    pub sizes: Vec<usize>,
    pub ingest: usize,
    pub clients: Vec<usize>,
    pub queries: usize,
    pub hook_runs: usize,
    pub sessions: usize,
    pub mixed_secs: u64,
    pub starts: usize,
    pub synthetic_bulk: bool,
    pub real_max: usize,
    pub real_pool: usize,
    /// `search.rerank` of every daemon (the default: on).
    pub rerank: bool,
    /// After the workloads at each size, hook-prompt and get-context with reranking on and
    /// off, alternated on copies of the store (`pair`).
    pub rerank_pair: bool,
}

impl Bench {
    pub(crate) fn instance(&self, name: &str) -> Result<Instance> {
        let root = self.work.join(name);
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        let mut inst = Instance::new(root, self.memd.clone(), self.runtime_dir.clone())?;
        if !self.opts.rerank {
            inst.config_toml = Some("[search]\nrerank = false\n".into());
        }
        Ok(inst)
    }

    fn save(&self) -> Result<()> {
        self.report.write(&self.out)
    }

    /// Sizes of the shipped binaries.
    pub fn binaries(&mut self) -> Result<()> {
        for (name, path) in [
            ("binary.memd", self.memd.clone()),
            ("binary.hook_prompt", self.hook_dir.join("hook-prompt")),
            ("binary.hook_stop", self.hook_dir.join("hook-stop")),
        ] {
            let bytes = std::fs::metadata(&path)?.len();
            self.report.add(
                Figure::value(name, "MB", bytes as f64 / 1e6)
                    .with_note(format!("{bytes} bytes, {}", file_name(&path))),
            );
        }
        self.save()
    }

    /// Start-to-healthy and model-loaded time and idle RSS on an empty data dir.
    pub fn empty(&mut self) -> Result<()> {
        let mut healthy = Samples::default();
        let mut model = Samples::default();
        let mut rss = 0;
        let mut open = None;
        for r in 0..self.opts.starts {
            let inst = self.instance(&format!("empty-{r}"))?;
            let d = inst.start(true)?;
            healthy.push(d.healthy_after);
            model.push(d.model_after.unwrap_or_default());
            rss = d.rss_kib()?.0;
            open = d.store_open_line();
            d.stop()?;
        }
        self.start_figures("0", &healthy, &model, open);
        self.report.add(
            Figure::value("rss.start.0", "MB", rss as f64 / 1024.0)
                .with_target(Target::at_most(Stat::Value, RSS_MB))
                .with_note("VmRSS right after the model loaded, empty store"),
        );
        self.save()
    }

    fn start_figures(
        &mut self,
        label: &str,
        healthy: &Samples,
        model: &Samples,
        store_open: Option<String>,
    ) {
        let note = match store_open {
            Some(line) => format!("spawn → /api/health 200; last start's log: {line}"),
            None => "spawn → /api/health 200".to_string(),
        };
        self.report.add(
            Figure::latency(&format!("start.healthy.{label}"), healthy)
                .with_target(Target::at_most(Stat::P50, READY_MS))
                .with_note(note),
        );
        self.report.add(
            Figure::latency(&format!("start.model.{label}"), model)
                .with_note("spawn → health.model_loaded (model loads in the background)"),
        );
    }

    /// Ingest rate with each client count, from an empty store, model loaded.
    pub fn ingest(&mut self) -> Result<()> {
        let n = self.opts.ingest;
        for c in self.opts.clients.clone() {
            let inst = self.instance(&format!("ingest-c{c}"))?;
            let d = inst.start(true)?;
            let mut corpus = Corpus::new(self.seed + c as u64);
            let texts: Vec<String> = (0..n).map(|_| corpus.takeaway()).collect();
            let r = load::ingest(&d, &texts, c)?;
            let stored = d.memory_count()?;
            let note = format!(
                "{n} POST /api/record-response, {c} client(s); stored {stored}, errors {}{}",
                r.errors,
                r.first_error
                    .as_deref()
                    .map(|e| format!(" (first: {e})"))
                    .unwrap_or_default()
            );
            self.report.add(
                Figure::value(
                    &format!("ingest.durable.c{c}"),
                    "memories/s",
                    n as f64 / r.durable.as_secs_f64(),
                )
                .with_target(Target::at_least(Stat::Value, INGEST_PER_S))
                .with_note(note.clone()),
            );
            self.report.add(
                Figure::value(
                    &format!("ingest.embedded.c{c}"),
                    "memories/s",
                    n as f64 / r.embedded.as_secs_f64(),
                )
                .with_target(Target::at_least(Stat::Value, INGEST_PER_S))
                .with_note("until /api/stats index.pending_embeddings == 0"),
            );
            self.report
                .add(Figure::latency(&format!("ingest.request.c{c}"), &r.request));
            self.report.add(
                Figure::value(&format!("ingest.errors.c{c}"), "count", r.errors as f64)
                    .with_target(Target::at_most(Stat::Value, 0.0)),
            );
            if stored != n {
                bail!("ingest stored {stored} memories, expected {n}");
            }
            if c == *self.opts.clients.iter().max().unwrap_or(&c) {
                self.disk_live(&inst, &format!("ingest.c{c}"), stored);
                let took = d.stop()?;
                self.report.add(Figure::value(
                    &format!("shutdown.ingest.c{c}"),
                    "ms",
                    took.as_secs_f64() * 1000.0,
                ));
                self.disk_clean(&inst, &format!("ingest.c{c}"), stored);
            } else {
                d.stop()?;
            }
            self.save()?;
        }
        Ok(())
    }

    fn disk_live(&mut self, inst: &Instance, label: &str, n: usize) {
        self.disk_figure(
            inst,
            &format!("disk.live.{label}"),
            n,
            "daemon running (WAL)",
        );
    }

    fn disk_clean(&mut self, inst: &Instance, label: &str, n: usize) {
        self.disk_figure(
            inst,
            &format!("disk.clean.{label}"),
            n,
            "after SIGTERM (final snapshot)",
        );
    }

    fn disk_figure(&mut self, inst: &Instance, name: &str, n: usize, when: &str) {
        let total = dir_bytes(&inst.data_dir());
        let per10k = total as f64 / MIB * 10_000.0 / n.max(1) as f64;
        self.report.add(
            Figure::value(&format!("{name}.per10k"), "MiB", per10k)
                .with_target(Target::at_most(Stat::Value, DISK_MB_PER_10K))
                .with_note(format!(
                    "{when}: data dir {total} bytes for {n} memories; {}",
                    store_breakdown(&inst.store_dir())
                )),
        );
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `snapshot 1.2 MiB, wal 3.4 MiB, vectors 5.6 MiB, lexical 0.9 MiB` for the store directory.
fn store_breakdown(store: &Path) -> String {
    let mut parts: Vec<(&str, u64, usize)> = vec![
        ("snapshot", 0, 0),
        ("wal", 0, 0),
        ("vectors", 0, 0),
        ("lexical", 0, 0),
        ("other", 0, 0),
    ];
    for e in std::fs::read_dir(store).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let len = e.metadata().map(|m| m.len()).unwrap_or(0);
        let slot = if name.starts_with("snapshot.") {
            0
        } else if name.starts_with("wal.") {
            1
        } else if name.starts_with("vectors.") {
            2
        } else if name.starts_with("lexical.") {
            3
        } else {
            4
        };
        parts[slot].1 += len;
        parts[slot].2 += 1;
    }
    parts
        .iter()
        .filter(|(_, _, files)| *files > 0)
        .map(|(k, b, files)| format!("{k} ×{files} {:.1} MiB", *b as f64 / MIB))
        .collect::<Vec<_>>()
        .join(", ")
}
