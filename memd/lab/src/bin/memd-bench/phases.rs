//! The benchmark phases: binaries, empty start, ingest and the size ladder (`million`, `shared`,
//! `dashboard` and `tools` are in their own files).
//!
//! Owns the order of measurements and which figure each one becomes (names, units, targets).
//! Each phase starts its own daemon(s) in its own directory and stops them before returning.
//! Must never measure while the daemon still has embedding work queued (except during ingest,
//! where that work is what is measured), and must say in the report what was synthetic.

use super::corpus::Corpus;
use super::daemon::{Daemon, Instance, dir_bytes};
use super::floor;
use super::hooks;
use super::load;
use super::prebuild;
use super::report::{Figure, Report, Samples, Stat, Target, size_label};
use super::saturation;
use anyhow::{Result, bail};

#[path = "dashboard.rs"]
mod dashboard;
#[path = "million.rs"]
mod million;
#[path = "shared.rs"]
mod shared;
#[path = "tools.rs"]
mod tools;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

    /// Every figure that depends on the store size, for each size in ascending order.
    pub fn sizes(&mut self) -> Result<()> {
        let inst = self.instance("ladder")?;
        let mut sizes = self.opts.sizes.clone();
        sizes.sort_unstable();
        sizes.dedup();
        let mut fill_corpus = Corpus::new(self.seed + 100);
        let mut daemon: Option<Daemon> = None;
        let mut count = 0usize;
        let mut synthetic = false;
        let mut last_label = String::new();
        for size in sizes {
            let label = size_label(size);
            println!("--- size {label} ---");
            let filled = self.fill(&inst, &mut daemon, &mut fill_corpus, count, size)?;
            count = filled.0;
            synthetic |= filled.1;
            // Sizes holding synthetic vectors are named apart from fully real ones.
            let label = if synthetic {
                format!("{label}-syn")
            } else {
                label
            };
            if let Some(d) = daemon.take() {
                self.disk_live(&inst, &label, count);
                let took = d.stop()?;
                self.report.add(Figure::value(
                    &format!("shutdown.{label}"),
                    "ms",
                    took.as_secs_f64() * 1000.0,
                ));
            }
            self.disk_clean(&inst, &label, count);
            let d = self.restarts(&inst, &label)?;
            self.workloads(&d, &inst, size, &label)?;
            count = d.memory_count()?;
            daemon = Some(d);
            last_label = label;
            self.save()?;
        }
        if let Some(d) = daemon {
            let n = d.memory_count()?;
            let label = format!("{last_label}.end");
            self.disk_live(&inst, &label, n);
            let took = d.stop()?;
            self.report.add(
                Figure::value(
                    &format!("shutdown.{label}"),
                    "ms",
                    took.as_secs_f64() * 1000.0,
                )
                .with_note(format!(
                    "{n} memories, after the workloads (final snapshot)"
                )),
            );
            self.disk_clean(&inst, &label, n);
            self.save()?;
        }
        Ok(())
    }

    /// Brings the ladder store from `count` to `size` memories; returns the new count and
    /// whether memories were added offline.
    fn fill(
        &mut self,
        inst: &Instance,
        daemon: &mut Option<Daemon>,
        corpus: &mut Corpus,
        count: usize,
        size: usize,
    ) -> Result<(usize, bool)> {
        let api_target = if self.opts.synthetic_bulk {
            size.min(self.opts.real_max.max(count))
        } else {
            size
        };
        let mut count = count;
        if count < api_target {
            if daemon.is_none() {
                *daemon = Some(inst.start(true)?);
            }
            let Some(d) = daemon.as_ref() else {
                bail!("no daemon");
            };
            let texts: Vec<String> = (count..api_target).map(|_| corpus.takeaway()).collect();
            println!(
                "filling {} memories through POST /api/record-response ({FILL_CLIENTS} clients, real embeddings)",
                texts.len()
            );
            let r = load::ingest(d, &texts, FILL_CLIENTS)?;
            if r.errors > 0 {
                bail!("fill failed: {:?}", r.first_error);
            }
            count = d.memory_count()?;
        }
        if count < size {
            if let Some(d) = daemon.take() {
                d.stop()?;
            }
            let add = size - count;
            println!("filling {add} memories offline with the memd library (--synthetic-bulk)");
            let b = prebuild::append(
                &inst.data_dir(),
                &self.runtime_dir,
                add,
                self.opts.real_pool,
                corpus,
                self.seed + size as u64,
            )?;
            let label = format!("{}-syn", size_label(size));
            self.report.add(
                Figure::value(
                    &format!("fill.offline.{label}"),
                    "s",
                    b.total_time.as_secs_f64(),
                )
                .with_note(format!(
                    "{} records added offline: {} with real embeddings ({:.0} s), {} with synthetic vectors",
                    b.added,
                    b.real,
                    b.embed_time.as_secs_f64(),
                    b.synthetic
                )),
            );
            self.report.note(format!(
                "size {label}: {count} memories stored through the API with real embeddings, then \
                 {} added offline through memd_engine::store (Op::Insert + Op::QuantizedVector): {} embedded for \
                 real, {} with synthetic vectors (a real pool embedding + Gaussian noise, cos ~0.86)",
                b.added, b.real, b.synthetic
            ));
            return Ok((count + add, true));
        }
        Ok((count, false))
    }

    /// Restarts the daemon `starts` times on the stopped store; returns the last one running.
    fn restarts(&mut self, inst: &Instance, label: &str) -> Result<Daemon> {
        let mut healthy = Samples::default();
        let mut model = Samples::default();
        let mut last: Option<Daemon> = None;
        for r in 0..self.opts.starts.max(1) {
            if let Some(d) = last.take() {
                Daemon::stop(d)?;
            }
            let d = inst.start(true)?;
            healthy.push(d.healthy_after);
            model.push(d.model_after.unwrap_or_default());
            if r + 1 == self.opts.starts.max(1) {
                let (rss, _) = d.rss_kib()?;
                self.report.add(
                    Figure::value(&format!("rss.start.{label}"), "MB", rss as f64 / 1024.0)
                        .with_target(Target::at_most(Stat::Value, RSS_MB))
                        .with_note("VmRSS right after the model loaded"),
                );
            }
            last = Some(d);
        }
        let open = last.as_ref().and_then(Daemon::store_open_line);
        self.start_figures(label, &healthy, &model, open);
        last.ok_or_else(|| anyhow::anyhow!("no daemon started"))
    }

    /// Search, get-context, hooks, mixed load and idle RSS on a warm daemon.
    fn workloads(&mut self, d: &Daemon, inst: &Instance, size: usize, label: &str) -> Result<()> {
        if self.opts.rerank {
            d.wait_late_interaction(Duration::from_secs(120))?;
        }
        d.wait_embedded(Duration::from_secs(3600))?;
        let n = d.memory_count()?;
        let at = format!("{n} memories");
        let mut corpus = Corpus::new(self.seed + 200 + size as u64);
        self.search_figures(d, &mut corpus, label, &at, self.opts.queries)?;
        for (name, path) in [("health", "/api/health"), ("stats", "/api/stats")] {
            let s = load::get_repeated(d, path, STATUS_CALLS)?;
            self.report.add(
                Figure::latency(&format!("api.{name}.{label}"), &s)
                    .with_note(format!("{at}; GET {path}")),
            );
        }
        let backlog: Vec<String> = (0..BACKLOG).map(|_| corpus.takeaway()).collect();
        let busy: Vec<String> = (0..BUSY_QUERIES.min(self.opts.queries))
            .map(|_| corpus.query())
            .collect();
        let (s, pending) = load::search_during_backlog(d, &busy, &backlog)?;
        self.report.add(
            Figure::latency(&format!("search.embed_busy.{label}"), &s).with_note(format!(
                "{at}; new queries right after {BACKLOG} new memories were stored, while the \
                 background worker embeds them (one model shared); {pending} still queued after \
                 the last query"
            )),
        );
        self.get_context_figure(d, &mut corpus, label, &at, self.opts.queries)?;
        self.save()?;
        let tally_before = d.stats()?.index.prompt_rerank;
        let h = hooks::run(
            d,
            inst,
            &self.hook_dir,
            self.opts.hook_runs,
            &mut corpus,
            label,
        )?;
        let reranked = match self.opts.rerank {
            true => rerank_tally(tally_before, d.stats()?.index.prompt_rerank),
            false => String::from("reranking off"),
        };
        self.report.add(
            Figure::latency(&format!("hook_prompt.{label}"), &h.prompt)
                .with_target(Target::at_most(Stat::P50, HOOK_PROMPT_P50_MS))
                .with_note(format!(
                    "{at}; static binary, spawn → exit; {}/{} printed context; {reranked}",
                    h.with_context,
                    h.prompt.len()
                )),
        );
        self.report.add(
            Figure::latency(&format!("hook_stop.{label}"), &h.stop)
                .with_target(Target::at_most(Stat::P50, HOOK_STOP_P50_MS))
                .with_note(format!(
                    "{at}; static binary, spawn → exit; new conversation: no scoring, no sidecar"
                )),
        );
        let floor = floor::measure(
            d,
            inst,
            &self.hook_dir,
            self.opts.hook_runs,
            &mut corpus,
            self.opts.rerank,
        )?;
        self.floor_figures(&floor, h.prompt.percentile(0.5), label, &at);
        self.save()?;
        self.mixed(d, size, label)?;
        d.wait_embedded(Duration::from_secs(3600))?;
        let (rss, hwm) = d.rss_kib()?;
        let index = d.stats()?.index;
        self.report.add(
            Figure::value(&format!("rss.idle.{label}"), "MB", rss as f64 / 1024.0)
                .with_target(Target::at_most(Stat::Value, RSS_MB))
                .with_note(format!(
                    "VmRSS after the workloads, queue empty; peak (VmHWM) {:.0} MB; token \
                     states of {} memories {:.1} MB",
                    hwm as f64 / 1024.0,
                    index.token_states,
                    index.token_state_bytes as f64 / (1024.0 * 1024.0)
                )),
        );
        Ok(())
    }

    /// The prompt path's floor beside `hook_prompt` (p50 `prompt_p50`), and the ratio.
    fn floor_figures(&mut self, floor: &floor::Floor, prompt_p50: f64, label: &str, at: &str) {
        let encodings = match self.opts.rerank {
            true => "embedding beside their late-interaction states",
            false => "embedding",
        };
        self.report.add(
            Figure::latency(&format!("hook_prompt.floor_spawn.{label}"), &floor.spawn).with_note(
                format!("{at}; hook-prompt PreToolUse Read: spawn, identity check, one small call"),
            ),
        );
        self.report.add(
            Figure::latency(&format!("hook_prompt.floor_encode.{label}"), &floor.encode)
                .with_note(format!("the prompts' {encodings}, in the bench process")),
        );
        self.report.add(
            Figure::value(&format!("hook_prompt.floor.{label}"), "ms", floor.p50())
                .with_note("p50 of floor_spawn + p50 of floor_encode"),
        );
        self.report.add(
            Figure::value(
                &format!("hook_prompt.vs_floor.{label}"),
                "x",
                prompt_p50 / floor.p50().max(f64::EPSILON),
            )
            .with_target(Target::at_most(Stat::Value, HOOK_PROMPT_VS_FLOOR))
            .with_note("hook_prompt p50 / floor, same run"),
        );
    }

    fn mixed(&mut self, d: &Daemon, size: usize, label: &str) -> Result<()> {
        let secs = self.opts.mixed_secs;
        if secs == 0 {
            return Ok(());
        }
        let before = d.stats()?.index.prompt_rerank;
        let cpu_before = d.cpu_time()?;
        let m = load::mixed(
            d,
            self.opts.sessions,
            Duration::from_secs(secs),
            self.seed + 1000 + size as u64,
        )?;
        let after = d.stats()?.index.prompt_rerank;
        let cpu = d.cpu_time()? - cpu_before;
        let per_s = m.turns as f64 / m.elapsed.as_secs_f64();
        self.report.add(
            Figure::value(&format!("mixed.turns.{label}"), "turns/s", per_s).with_note(format!(
                "{} sessions × (get-context → stop → record-outcome) for {secs} s: {} turns, {} sidecar requests",
                m.sessions, m.turns, m.sidecar_requests
            )),
        );
        for (step, s) in [
            ("get_context", &m.get_context),
            ("stop", &m.stop),
            ("record_outcome", &m.record_outcome),
        ] {
            self.report
                .add(Figure::latency(&format!("mixed.{step}.{label}"), s));
        }
        let mut errors = Figure::value(&format!("mixed.errors.{label}"), "count", m.errors as f64)
            .with_target(Target::at_most(Stat::Value, 0.0));
        if let Some(e) = &m.first_error {
            errors = errors.with_note(format!("first: {e}"));
        }
        self.report.add(errors);
        for f in saturation::figures(label, &m, cpu, self.gc_cpu_ms) {
            self.report.add(f);
        }
        if self.opts.rerank {
            self.report
                .add(fallback_figure(label, before, after, m.sessions));
        }
        self.save()
    }

    /// `search.embed.<label>` (a new query each call) and `search.cached.<label>`.
    fn search_figures(
        &mut self,
        d: &Daemon,
        corpus: &mut Corpus,
        label: &str,
        at: &str,
        n: usize,
    ) -> Result<()> {
        let fresh: Vec<String> = (0..n).map(|_| corpus.query()).collect();
        let s = load::search_fresh(d, &fresh)?;
        self.report.add(
            Figure::latency(&format!("search.embed.{label}"), &s)
                .with_target(Target::at_most(Stat::P99, SEARCH_P99_MS))
                .with_note(format!(
                    "{at}; new query each call: embedding on the request path"
                )),
        );
        let pool: Vec<String> = (0..CACHED_POOL).map(|_| corpus.query()).collect();
        let s = load::search_cached(d, &pool, n)?;
        self.report.add(
            Figure::latency(&format!("search.cached.{label}"), &s)
                .with_target(Target::at_most(Stat::P99, SEARCH_P99_MS))
                .with_note(format!(
                    "{at}; {CACHED_POOL} queries repeated: query vector from memd's cache"
                )),
        );
        Ok(())
    }

    /// `get_context.<label>`: a new prompt in a new conversation each call.
    pub(crate) fn get_context_figure(
        &mut self,
        d: &Daemon,
        corpus: &mut Corpus,
        label: &str,
        at: &str,
        n: usize,
    ) -> Result<()> {
        let prompts: Vec<String> = (0..n).map(|_| corpus.prompt()).collect();
        let cpu_before = d.cpu_time()?;
        let (s, injected) = load::get_context_fresh(d, &prompts, label)?;
        let cpu_ms = (d.cpu_time()? - cpu_before).as_secs_f64() * 1000.0 / s.len().max(1) as f64;
        self.gc_cpu_ms = Some(cpu_ms);
        self.report.add(
            Figure::value(&format!("get_context.cpu.{label}"), "ms", cpu_ms)
                .with_note("the daemon's CPU time (all threads) per get-context, one at a time"),
        );
        self.report.add(
            Figure::latency(&format!("get_context.{label}"), &s).with_note(format!(
                "{at}; new prompt + new conversation each call; {injected}/{} injected context",
                s.len()
            )),
        );
        Ok(())
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

/// What the prompts between two tallies got: on a busy machine the query encoding misses the
/// budget and the prompt keeps the fused order, so a reranked/plain ratio means little
/// without it.
fn rerank_tally(before: proto::PromptRerankStats, after: proto::PromptRerankStats) -> String {
    format!(
        "prompts reranked {}, over the budget {}, shed {}",
        after.reranked - before.reranked,
        after.over_budget - before.over_budget,
        after.shed - before.shed
    )
}

/// `mixed.rerank_fallback.<label>`: the share of the concurrent phase's prompts that kept the
/// fused order because the reranking budget ran out or another prompt's query was encoding.
fn fallback_figure(
    label: &str,
    before: proto::PromptRerankStats,
    after: proto::PromptRerankStats,
    sessions: usize,
) -> Figure {
    let reranked = after.reranked - before.reranked;
    let over = after.over_budget - before.over_budget;
    let shed = after.shed - before.shed;
    let asked = (reranked + over + shed).max(1);
    Figure::value(
        &format!("mixed.rerank_fallback.{label}"),
        "%",
        (over + shed) as f64 * 100.0 / asked as f64,
    )
    .with_note(format!(
        "{sessions} concurrent sessions: of {} prompts asking for late interaction, {reranked} \
         reranked, {over} over the budget, {shed} shed (fused order kept)",
        reranked + over + shed
    ))
}
