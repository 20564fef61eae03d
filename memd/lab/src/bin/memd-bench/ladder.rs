//! The `sizes` phase's ladder: one store grown size by size (through the API, then offline with
//! `--synthetic-bulk`), restarted `--starts` times at each size, then measured (`workloads`).
//!
//! Owns filling, the restarts and the order of sizes. Must never measure a size before its
//! fill is complete, and must name a size holding synthetic vectors apart (`<size>-syn`).

use super::{Bench, FILL_CLIENTS, RSS_MB};
use crate::corpus::Corpus;
use crate::daemon::{Daemon, Instance};
use crate::load;
use crate::prebuild;
use crate::report::{Figure, Samples, Stat, Target, size_label};
use anyhow::{Result, bail};

impl Bench {
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
            let d = match self.opts.rerank_pair {
                true => self.rerank_pair(d, &inst, size, &label)?,
                false => d,
            };
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
    pub(super) fn restarts(&mut self, inst: &Instance, label: &str) -> Result<Daemon> {
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
}
