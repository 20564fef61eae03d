//! The `shared` phase (issue 14): get-context on the same store, local only and then with the
//! shared PostgreSQL store configured, per size.
//!
//! Owns the throwaway PostgreSQL (memd-testkit), its schema and role (made by the real
//! `memd store` commands), and the three measurements per size: get-context local only,
//! get-context while the first send of every memory is under way, and after it (with the time
//! the first send took). Must never measure a daemon whose store was not filled the same way
//! for both runs: one instance serves both.

use super::{Bench, prebuild};
use crate::corpus::Corpus;
use crate::daemon::Daemon;
use crate::report::{Figure, size_label};
use anyhow::{Context, Result, anyhow, bail};
use memd_testkit::postgres::Postgres;
use std::time::{Duration, Instant};

const DB: &str = "memd";
const ROLE: &str = "bench";
/// The longest the first send of a size may take before the phase gives up.
const SEND_LIMIT: Duration = Duration::from_secs(1800);

impl Bench {
    pub fn shared(&mut self) -> Result<()> {
        let pg = Postgres::start().map_err(|e| anyhow!("{e}"))?;
        pg.psql("postgres", &format!("CREATE DATABASE {DB}"))
            .map_err(|e| anyhow!("{e}"))?;
        let admin = format!("{}?sslmode=disable", pg.url(DB));
        self.memd_cli(&["store", "migrate", "--url", &admin])?;
        self.memd_cli(&["store", "add-user", ROLE, "--url", &admin])?;
        let url = format!(
            "postgres://{ROLE}@127.0.0.1:{}/{DB}?sslmode=disable",
            pg.port
        );
        let mut sizes = self.opts.sizes.clone();
        sizes.sort_unstable();
        sizes.dedup();
        for size in sizes {
            let label = format!("{}-syn", size_label(size));
            println!("--- shared store, {label} ---");
            let mut inst = self.instance(&format!("shared-{label}"))?;
            let mut corpus = Corpus::new(self.seed + 7000 + size as u64);
            prebuild::append(
                &inst.data_dir(),
                &self.runtime_dir,
                size,
                self.opts.real_pool,
                &mut corpus,
                self.seed + 7001,
            )?;
            let at = format!("{size} memories (built offline)");
            let n = self.opts.queries;
            let d = inst.start(true)?;
            self.get_context_figure(&d, &mut corpus, &format!("local.{label}"), &at, n)?;
            d.stop()?;

            let local_toml = inst.config_toml.clone().unwrap_or_default();
            inst.config_toml = Some(format!("{local_toml}[store]\nurl = \"{url}\"\n"));
            let d = inst.start(true)?;
            let started = Instant::now();
            let backlog = backlog(&d)?;
            self.get_context_figure(
                &d,
                &mut corpus,
                &format!("pg-first-send.{label}"),
                &format!("{at}, while the first send of {backlog} changes runs"),
                n,
            )?;
            wait_sent(&d, started)?;
            let took = started.elapsed();
            self.report.add(
                Figure::value(
                    &format!("shared.first_send.{label}"),
                    "s",
                    took.as_secs_f64(),
                )
                .with_note(format!(
                    "{size} memories sent to PostgreSQL 16 (pgvector HNSW + GIN) on this \
                         machine: {:.0} memories/s",
                    size as f64 / took.as_secs_f64()
                )),
            );
            self.get_context_figure(
                &d,
                &mut corpus,
                &format!("pg.{label}"),
                &format!("{at}, shared store configured and in step"),
                n,
            )?;
            d.stop()?;
            self.save()?;
        }
        Ok(())
    }

    fn memd_cli(&self, args: &[&str]) -> Result<()> {
        let out = std::process::Command::new(&self.memd)
            .args(args)
            .output()
            .with_context(|| format!("running memd {args:?}"))?;
        if !out.status.success() {
            bail!(
                "memd {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

/// What the daemon has to send, once its sync worker has started (and counted it).
fn backlog(d: &Daemon) -> Result<usize> {
    let started = Instant::now();
    loop {
        if let Some(s) = d.stats()?.shared_store {
            return Ok(s.backlog);
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("the shared store worker did not start");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls until the daemon reports nothing left to send (a background send no request waits for).
fn wait_sent(d: &Daemon, started: Instant) -> Result<()> {
    loop {
        let s = d.stats()?.shared_store;
        if let Some(s) = &s
            && s.connected
            && s.backlog == 0
        {
            return Ok(());
        }
        if started.elapsed() > SEND_LIMIT {
            bail!("the first send did not finish in {SEND_LIMIT:?}: {s:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
