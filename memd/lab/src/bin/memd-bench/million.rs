//! The `million` phase: a 1M-memory store built offline, then measured like the other sizes.
//!
//! Owns building that store (all of it through `memd_engine::store`, 2,000 real embeddings and synthetic
//! vectors for the rest) and the figures taken on it. Must never present its figures as if the
//! store had been filled through the API: the JSON notes say how it was made.

use super::{Bench, RSS_MB, Stat, Target};
use crate::corpus::Corpus;
use crate::prebuild;
use crate::report::Figure;
use anyhow::Result;

impl Bench {
    /// A 1M-memory store built offline (synthetic vectors): start time, RSS, disk, search,
    /// get-context.
    pub fn million(&mut self) -> Result<()> {
        let size = 1_000_000;
        let inst = self.instance("million")?;
        let mut corpus = Corpus::new(self.seed + 5000);
        let b = prebuild::append(
            &inst.data_dir(),
            &self.runtime_dir,
            size,
            self.opts.real_pool,
            &mut corpus,
            self.seed + 5001,
        )?;
        self.report.add(
            Figure::value("fill.offline.1M", "s", b.total_time.as_secs_f64()).with_note(format!(
                "{} real embeddings, {} synthetic vectors",
                b.real, b.synthetic
            )),
        );
        self.report.note(format!(
            "size 1M: built entirely offline through memd_engine::store: {} records embedded for real, {} with synthetic vectors",
            b.real, b.synthetic
        ));
        self.disk_clean(&inst, "1M", size);
        let d = self.restarts(&inst, "1M")?;
        let at = format!("{size} memories");
        let n = self.opts.queries.min(100);
        self.search_figures(&d, &mut corpus, "1M", &at, n)?;
        self.get_context_figure(&d, &mut corpus, "1M", &at, n)?;
        let (rss, _) = d.rss_kib()?;
        self.report.add(
            Figure::value("rss.idle.1M", "MB", rss as f64 / 1024.0)
                .with_target(Target::at_most(Stat::Value, RSS_MB)),
        );
        d.stop()?;
        self.save()
    }
}
