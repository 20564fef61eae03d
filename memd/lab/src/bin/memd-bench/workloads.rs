//! The workloads run at each size of the ladder on a warm daemon: search, get-context, the
//! hooks and their floor, the concurrent mixed load, idle RSS.
//!
//! Owns which figure each workload becomes (names, units, targets, notes), including what the
//! prompts got from reranking (`/api/stats` `index.prompt_rerank`). Must never start measuring
//! while the daemon still has embedding or token-state work queued.

use super::{BACKLOG, BUSY_QUERIES, Bench, CACHED_POOL, HOOK_PROMPT_P50_MS, HOOK_PROMPT_VS_FLOOR};
use super::{HOOK_STOP_P50_MS, RSS_MB, SEARCH_P99_MS, STATUS_CALLS};
use crate::corpus::Corpus;
use crate::daemon::{Daemon, Instance};
use crate::report::{Figure, Stat, Target};
use crate::{floor, hooks, load, saturation};
use anyhow::Result;
use std::time::Duration;

impl Bench {
    /// Search, get-context, hooks, mixed load and idle RSS on a warm daemon.
    pub(super) fn workloads(
        &mut self,
        d: &Daemon,
        inst: &Instance,
        size: usize,
        label: &str,
    ) -> Result<()> {
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
    pub(super) fn search_figures(
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

/// What the prompts between two tallies got: on a busy machine the query encoding misses the
/// budget and the prompt keeps the fused order, and a prompt with nothing to reorder never
/// waits for it, so a reranked/plain ratio means little without it.
pub(super) fn rerank_tally(
    before: proto::PromptRerankStats,
    after: proto::PromptRerankStats,
) -> String {
    format!(
        "prompts reranked {}, over the budget {} (late encoding late {}, MaxSim cut short {}), \
         shed {}, nothing to rerank {}",
        after.reranked - before.reranked,
        after.over_budget - before.over_budget,
        after.late_encoding_late - before.late_encoding_late,
        after.maxsim_cut_short - before.maxsim_cut_short,
        after.shed - before.shed,
        after.nothing_to_rerank - before.nothing_to_rerank
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
    let late = after.late_encoding_late - before.late_encoding_late;
    let shed = after.shed - before.shed;
    let nothing = after.nothing_to_rerank - before.nothing_to_rerank;
    let asked = (reranked + over + shed).max(1);
    Figure::value(
        &format!("mixed.rerank_fallback.{label}"),
        "%",
        (over + shed) as f64 * 100.0 / asked as f64,
    )
    .with_note(format!(
        "{sessions} concurrent sessions: of {} prompts asking for late interaction, {reranked} \
         reranked, {over} over the budget ({late} with the late encoding late, the rest with MaxSim \
         cut short), {shed} shed (fused order kept); {nothing} more had \
         nothing to rerank",
        reranked + over + shed
    ))
}
