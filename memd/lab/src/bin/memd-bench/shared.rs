//! The `shared` phase (issue 14): get-context on the same store, local only and then with the
//! shared PostgreSQL store configured, per size.
//!
//! Owns the throwaway PostgreSQL (memd-testkit), its schema and role (made by the real
//! `memd store` commands), and the three measurements per size: get-context local only,
//! get-context while the first send of every memory is under way, and after it (with the time
//! the first send took). Must never measure a daemon whose store was not filled the same way
//! for both runs: one instance serves both.

use super::{Bench, load};
use crate::corpus::Corpus;
use crate::daemon::Daemon;
use crate::prebuild;
use crate::report::{Figure, size_label};
use anyhow::{Context, Result, anyhow, bail};
use memd_testkit::postgres::Postgres;
use std::time::{Duration, Instant};

const DB: &str = "memd";
const ROLE: &str = "bench";
/// Prompts sent untimed before the local-only figure.
const WARM_UP: usize = 100;
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
            // The first start after the offline fill snapshots the store (20,000+ ops in the
            // log) and encodes token states: a settling run, stopped, so both measured runs
            // meet a snapshotted store with every embedding and token state in place.
            let d = inst.start(true)?;
            d.wait_embedded(SEND_LIMIT)?;
            d.stop()?;
            let d = inst.start(true)?;
            d.wait_embedded(SEND_LIMIT)?;
            // Untimed: the daemon's first prompts after a start are slower (cold query path),
            // and the shared-store figures below are not its first.
            let warm: Vec<String> = (0..WARM_UP).map(|_| corpus.prompt()).collect();
            load::get_context_fresh(&d, &warm, "warm-up")?;
            self.get_context_figure(&d, &mut corpus, &format!("local.{label}"), &at, n)?;
            d.stop()?;

            let local_toml = inst.config_toml.clone().unwrap_or_default();
            inst.config_toml = Some(format!("{local_toml}[store]\nurl = \"{url}\"\n"));
            let d = inst.start(true)?;
            let started = Instant::now();
            d.wait_embedded(SEND_LIMIT)?;
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
                &format!("pg-settling.{label}"),
                &format!("{at}, right after the first send (PostgreSQL may still be vacuuming)"),
                n,
            )?;
            let settled = settle(&pg)?;
            self.get_context_figure(
                &d,
                &mut corpus,
                &format!("pg.{label}"),
                &format!(
                    "{at}, shared store in step, once PostgreSQL's autovacuum was done \
                     (waited {:.0} s for it)",
                    settled.as_secs_f64()
                ),
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

/// Waits until no autovacuum worker has run for two seconds (PostgreSQL vacuums and analyzes
/// a freshly loaded table on the same two cores memd runs on); returns how long it waited.
fn settle(pg: &Postgres) -> Result<Duration> {
    let started = Instant::now();
    let mut quiet_since: Option<Instant> = None;
    while started.elapsed() < SEND_LIMIT {
        let busy = pg
            .psql(
                "postgres",
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'",
            )
            .map_err(|e| anyhow!("{e}"))?;
        match (busy.as_str(), quiet_since) {
            ("0", Some(t)) if t.elapsed() >= Duration::from_secs(2) => {
                return Ok(started.elapsed());
            }
            ("0", None) => quiet_since = Some(Instant::now()),
            ("0", Some(_)) => {}
            _ => quiet_since = None,
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("PostgreSQL kept vacuuming for {SEND_LIMIT:?}")
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
