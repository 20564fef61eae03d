//! `--rerank-pair`: the cost of reranking on the prompt path, measured in one sitting. After
//! the workloads at a size, the ladder's daemon is stopped, its data directory copied to a
//! second instance with `search.rerank` the other way, and both daemons run side by side on
//! the same store: hook-prompt turns, then get-context calls, alternated between them with the
//! same prompt for both (the order flipped every turn), so load changes hit both sides alike.
//!
//! Owns the copy, the alternation and the `pair.*` figures (each side's p50 / p99 and the
//! ratio with reranking over without it, beside the target 1.15). Must never leave the copy's
//! daemon running and must hand back the ladder's daemon running on its own store.

use super::Bench;
use crate::corpus::Corpus;
use crate::daemon::{Daemon, Instance};
use crate::hooks::{HookRuns, User};
use crate::load;
use crate::report::{Figure, Samples, Stat, Target};
use anyhow::{Context, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// hook-prompt p50 with reranking over p50 without it (issue 21).
const RERANK_RATIO: f64 = 1.15;

/// One side of the pair: its daemon, its instance and its hook user.
struct Side {
    d: Daemon,
    inst: Instance,
    user: User,
    hooks: HookRuns,
    get_context: Samples,
    cpu: Duration,
}

impl Bench {
    /// Runs the pair on a copy of the ladder's store next to `d` (stopped and restarted);
    /// returns the ladder's daemon, running.
    pub(super) fn rerank_pair(
        &mut self,
        d: Daemon,
        inst: &Instance,
        size: usize,
        label: &str,
    ) -> Result<Daemon> {
        d.stop()?;
        let mut copy = self.instance(&format!("pair-{label}"))?;
        copy.config_toml = match self.opts.rerank {
            true => Some("[search]\nrerank = false\n".into()),
            false => None,
        };
        copy_dir(&inst.data_dir(), &copy.data_dir())?;
        let ladder = self.side(inst.clone(), self.opts.rerank)?;
        let other = self.side(copy, !self.opts.rerank)?;
        let (mut on, mut off) = match self.opts.rerank {
            true => (ladder, other),
            false => (other, ladder),
        };
        let tally = on.d.stats()?.index.prompt_rerank;
        let mut corpus = Corpus::new(self.seed + 300 + size as u64);
        self.pair_hooks(&mut on, &mut off, &mut corpus)?;
        let reranked = super::workloads::rerank_tally(tally, on.d.stats()?.index.prompt_rerank);
        self.pair_get_context(&mut on, &mut off, &mut corpus, label)?;
        let at = format!("{} memories", on.d.memory_count()?);
        self.pair_figures(&on, &off, label, &at, &reranked);
        let (ladder, other) = match self.opts.rerank {
            true => (on, off),
            false => (off, on),
        };
        other.d.stop()?;
        std::fs::remove_dir_all(&other.inst.root).ok();
        self.save()?;
        Ok(ladder.d)
    }

    /// Starts `inst` (reranking when `rerank`) and waits until it has nothing queued (token
    /// states included).
    fn side(&self, inst: Instance, rerank: bool) -> Result<Side> {
        let d = inst.start(true)?;
        if rerank {
            d.wait_late_interaction(Duration::from_secs(120))?;
        }
        d.wait_embedded(Duration::from_secs(3600))?;
        let user = User::new(&d, &inst, &self.hook_dir)?;
        Ok(Side {
            d,
            inst,
            user,
            hooks: HookRuns::default(),
            get_context: Samples::default(),
            cpu: Duration::ZERO,
        })
    }

    /// `--hook-runs` turns on each side, the same prompt for both, the first side alternating.
    fn pair_hooks(&mut self, on: &mut Side, off: &mut Side, corpus: &mut Corpus) -> Result<()> {
        let runs = self.opts.hook_runs;
        for i in 0..runs {
            let prompt = corpus.prompt();
            let answer = corpus.answer(&prompt);
            for first in [i % 2 == 0, i % 2 != 0] {
                // The other side's stop may still be encoding its exchange: a user's prompt
                // meets an idle machine.
                on_idle(&on.d, &off.d)?;
                let side = if first { &mut *on } else { &mut *off };
                let conv = format!("bench-pair-{i:05}");
                side.user
                    .turn(&side.d, &conv, &prompt, &answer, &mut side.hooks)?;
            }
        }
        for side in [&mut *on, &mut *off] {
            let out = std::mem::take(&mut side.hooks);
            side.hooks = side.user.check(&side.d, runs, out)?;
        }
        Ok(())
    }

    /// `--queries` get-context calls on each side, alternated like the hook turns, with the
    /// daemons' CPU time over them.
    fn pair_get_context(
        &mut self,
        on: &mut Side,
        off: &mut Side,
        corpus: &mut Corpus,
        label: &str,
    ) -> Result<()> {
        on_idle(&on.d, &off.d)?;
        for i in 0..self.opts.queries {
            let prompt = corpus.prompt();
            for first in [i % 2 == 0, i % 2 != 0] {
                let side = if first { &mut *on } else { &mut *off };
                let cpu = side.d.cpu_time()?;
                let start = Instant::now();
                let conv = format!("bench-pair-gc-{label}-{i}");
                load::get_context_once(&side.d.client, &prompt, &conv)?;
                side.get_context.push(start.elapsed());
                side.cpu += side.d.cpu_time()? - cpu;
            }
        }
        Ok(())
    }

    /// `reranked`: what the reranking side's hook prompts got.
    fn pair_figures(&mut self, on: &Side, off: &Side, label: &str, at: &str, reranked: &str) {
        let how = "copies of one store, alternated call by call, same prompts";
        for (step, a, b) in [
            ("hook_prompt", &on.hooks.prompt, &off.hooks.prompt),
            ("get_context", &on.get_context, &off.get_context),
        ] {
            for (side, s) in [("rerank", a), ("no_rerank", b)] {
                let mut note = format!("{at}; {how}");
                if step == "hook_prompt" && side == "rerank" {
                    note = format!("{note}; {reranked}");
                }
                self.report.add(
                    Figure::latency(&format!("pair.{step}.{side}.{label}"), s).with_note(note),
                );
            }
            let (p50a, p50b) = (a.percentile(0.5), b.percentile(0.5));
            let mut ratio = Figure::value(
                &format!("pair.{step}.ratio.{label}"),
                "x",
                p50a / p50b.max(f64::EPSILON),
            )
            .with_note(format!(
                "p50 with reranking {p50a:.1} ms / without {p50b:.1} ms, same sitting"
            ));
            if step == "hook_prompt" {
                ratio = ratio.with_target(Target::at_most(Stat::Value, RERANK_RATIO));
            }
            self.report.add(ratio);
        }
        for (side, s) in [("rerank", on), ("no_rerank", off)] {
            let per = s.cpu.as_secs_f64() * 1000.0 / s.get_context.len().max(1) as f64;
            self.report.add(
                Figure::value(&format!("pair.get_context.cpu.{side}.{label}"), "ms", per)
                    .with_note("the daemon's CPU time (all threads) per get-context"),
            );
        }
    }
}

/// Waits until neither daemon has embedding or token-state work queued.
fn on_idle(a: &Daemon, b: &Daemon) -> Result<()> {
    for d in [a, b] {
        d.wait_embedded(Duration::from_secs(600))?;
    }
    Ok(())
}

/// Copies the stopped daemon's data directory (files and subdirectories) to `to`.
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}
