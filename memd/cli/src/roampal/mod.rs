//! `memd import --from-roampal`: moving in from Roampal with what it learned.
//!
//! Owns the command: find the store (`locate`), read it (`chroma`), translate every memory
//! (`map`), then hand the records to the daemon's idempotent `/api/import` one collection at a
//! time (so the report is per collection), with a progress bar, and wait while memd embeds
//! them with its own model. `--dry-run` asks the same endpoint to count without writing.
//! Must never write to the Roampal store, and never import part of a store without saying so:
//! a memory it cannot read stops the import before anything is sent (unless `--skip-invalid`,
//! which names every memory left out).

mod chroma;
mod locate;
mod map;
mod transcripts;
mod when;

use crate::client::{self, Client};
use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use memd_engine::config::Config;
use memd_engine::export::ImportResponse;
use memd_engine::record::Record;
use proto::Collection;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Records per import request: small enough for a progress bar that moves, large enough that
/// a 10,000-memory store is a few dozen requests.
const RECORDS_PER_REQUEST: usize = 250;

/// What the user asked for.
#[derive(Debug, Default)]
pub struct Args {
    /// The Roampal data directory (the one holding `chromadb/`), if given.
    pub dir: Option<PathBuf>,
    /// A named Roampal profile instead of the default one.
    pub profile: Option<String>,
    pub dry_run: bool,
    /// Put project-bound memories in the project of the current directory.
    pub project: bool,
    pub with_transcripts: bool,
    pub skip_invalid: bool,
    /// Return once the memories are stored, without waiting for their embeddings.
    pub no_wait: bool,
    pub json: bool,
}

/// One collection's line of the report.
#[derive(Debug, Default, Serialize)]
pub struct CollectionReport {
    pub collection: String,
    /// Memories of this collection in the Roampal store.
    pub found: usize,
    pub archived: usize,
    /// Stored now (with `--dry-run`: would be).
    pub imported: usize,
    /// Already in memd (imported before).
    pub existing: usize,
    /// Same content already stored in that collection.
    pub duplicates: usize,
    pub rejected: usize,
}

/// The whole report (`--json` prints it as is).
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub store: String,
    /// The newest ChromaDB migration the file records (for bug reports).
    pub chroma_schema: Option<String>,
    pub dry_run: bool,
    pub project: Option<String>,
    pub collections: Vec<CollectionReport>,
    /// Memories left out with `--skip-invalid`, each with its reason.
    pub skipped: Vec<String>,
    pub transcripts: Option<transcripts::Summary>,
    /// Things the user should know (what was not imported, and why).
    pub notes: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let dir = locate::data_dir(args.dir.as_deref(), args.profile.as_deref())?;
    let mut store = chroma::read(&dir.join("chromadb").join("chroma.sqlite3"))?;
    // Roampal removes a book by listing its chunks as ghosts; they stay in ChromaDB.
    let ghosts = locate::ghost_ids(&dir)?;
    let before = store.rows.len();
    store.rows.retain(|r| !ghosts.contains(&r.id));
    let removed_in_roampal = before - store.rows.len();
    let project = match args.project {
        true => Some(current_project()?),
        false => None,
    };
    let opts = map::Options {
        project: project.clone(),
        live_ids: store.rows.iter().map(|r| r.id.clone()).collect(),
        now_ms: memd_engine::clock::now_ms(),
    };
    let mut per_collection: Vec<(Collection, Vec<Record>)> = Vec::new();
    let mut skipped = Vec::new();
    for row in &store.rows {
        match map::to_record(row, &opts) {
            Ok(rec) => match per_collection
                .iter_mut()
                .find(|(c, _)| *c == rec.collection)
            {
                Some((_, list)) => list.push(rec),
                None => per_collection.push((rec.collection, vec![rec])),
            },
            Err(reason) => skipped.push(reason),
        }
    }
    if !skipped.is_empty() && !args.skip_invalid {
        let shown: Vec<&String> = skipped.iter().take(10).collect();
        bail!(
            "{} of {} memories in {} cannot be read, so nothing was imported:\n  {}{}\n\
             (`--skip-invalid` imports the others and lists these)",
            skipped.len(),
            store.rows.len(),
            store.file.display(),
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n  "),
            if skipped.len() > shown.len() {
                format!("\n  … and {} more", skipped.len() - shown.len())
            } else {
                String::new()
            }
        );
    }
    per_collection.sort_by_key(|(c, _)| collection_order(*c));
    for (c, list) in &mut per_collection {
        if *c == Collection::Books {
            sort_books(list);
        }
    }
    let cfg = Config::load(None)?;
    let client = client::connect(&cfg, true)?;
    let mut report = Report {
        store: store.file.display().to_string(),
        chroma_schema: store.schema.clone(),
        dry_run: args.dry_run,
        project,
        skipped,
        ..Report::default()
    };
    let total: usize = per_collection.iter().map(|(_, l)| l.len()).sum();
    let bar = progress(total, args.json, "importing");
    for (collection, records) in &per_collection {
        report
            .collections
            .push(send(&client, *collection, records, args.dry_run, &bar)?);
    }
    bar.finish_and_clear();
    report.transcripts = transcripts::handle(
        &dir,
        args.with_transcripts,
        args.dry_run,
        &client,
        report.project.as_deref(),
    )?;
    report.notes = notes(&store, &dir, &per_collection, &args);
    if removed_in_roampal > 0 {
        report.notes.push(format!(
            "{removed_in_roampal} book chunks that Roampal had removed (ghost_ids.json) were \
             left out"
        ));
    }
    let stored: usize = report.collections.iter().map(|c| c.imported).sum::<usize>()
        + report.transcripts.as_ref().map_or(0, |t| t.imported);
    if !args.dry_run && !args.no_wait && stored > 0 {
        wait_for_embeddings(&client, args.json)?;
    }
    print(&report, args.json)?;
    let rejected: usize = report.collections.iter().map(|c| c.rejected).sum::<usize>()
        + report.transcripts.as_ref().map_or(0, |t| t.rejected);
    Ok(match rejected {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// The project of the directory the command runs in (`--project`).
fn current_project() -> Result<String> {
    let cwd = std::env::current_dir()?;
    Ok(memd_engine::project::resolve(&cwd).id)
}

fn collection_order(c: Collection) -> usize {
    [
        Collection::MemoryBank,
        Collection::Patterns,
        Collection::History,
        Collection::Working,
        Collection::Books,
    ]
    .iter()
    .position(|x| *x == c)
    .unwrap_or(usize::MAX)
}

/// Book chunks go in by title, then chunk order, so memd's insertion order is the reading order.
fn sort_books(list: &mut [Record]) {
    let key = |r: &Record| {
        let title = r
            .metadata
            .get("title")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        let index = match r.metadata.get("chunk_index") {
            Some(proto::Value::Number(n)) => *n as i64,
            _ => i64::MAX,
        };
        (title, index)
    };
    list.sort_by_key(key);
}

/// Sends one collection's records in parts; the tally of what the daemon did.
fn send(
    client: &Client,
    collection: Collection,
    records: &[Record],
    dry_run: bool,
    bar: &ProgressBar,
) -> Result<CollectionReport> {
    let mut report = CollectionReport {
        collection: collection.as_str().to_string(),
        found: records.len(),
        archived: records.iter().filter(|r| r.archived).count(),
        ..CollectionReport::default()
    };
    for part in records.chunks(RECORDS_PER_REQUEST) {
        let r = post_records(client, part, dry_run)?;
        report.imported += r.imported;
        report.existing += r.existing;
        report.duplicates += r.duplicates;
        report.rejected += r.rejected;
        for e in r.errors {
            eprintln!("memd: rejected by the daemon: {}", e.reason);
        }
        bar.inc(part.len() as u64);
    }
    Ok(report)
}

/// One import request of these records (JSON Lines).
fn post_records(client: &Client, records: &[Record], dry_run: bool) -> Result<ImportResponse> {
    let mut body = Vec::with_capacity(records.len() * 512);
    for r in records {
        serde_json::to_writer(&mut body, r)?;
        body.push(b'\n');
    }
    Ok(crate::transfer::post_import(client, &body, dry_run)?)
}

fn progress(total: usize, quiet: bool, what: &str) -> ProgressBar {
    if quiet || total < 2 * RECORDS_PER_REQUEST {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(&format!("{what} [{{bar:30}}] {{pos}}/{{len}}"))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(total as u64).with_style(style)
}

/// Waits while the daemon embeds what was imported (search by meaning needs the vectors),
/// showing how many are left. Returns early if the queue stops moving for a minute.
fn wait_for_embeddings(client: &Client, quiet: bool) -> Result<()> {
    let pending = || -> Result<usize> {
        let s: proto::StatsResponse = client.get("/api/stats")?;
        Ok(s.index.pending_embeddings)
    };
    let first = pending()?;
    if first == 0 {
        return Ok(());
    }
    let bar = progress(first.max(2 * RECORDS_PER_REQUEST), quiet, "embedding");
    bar.set_length(first as u64);
    let mut last = first;
    let mut still_since = std::time::Instant::now();
    loop {
        let now = pending()?;
        bar.set_position((first.saturating_sub(now)) as u64);
        if now == 0 {
            break;
        }
        if now < last {
            last = now;
            still_since = std::time::Instant::now();
        } else if still_since.elapsed() > Duration::from_secs(60) {
            eprintln!(
                "memd: {now} memories still wait for their embeddings (is the model loaded? \
                 `memd doctor`); they are stored and will be embedded in the background"
            );
            break;
        }
        // A progress display polls; nothing here waits for an event another test could race.
        std::thread::sleep(Duration::from_millis(250));
    }
    bar.finish_and_clear();
    Ok(())
}

/// What the user should know beyond the counts.
fn notes(
    store: &chroma::Store,
    dir: &std::path::Path,
    per_collection: &[(Collection, Vec<Record>)],
    args: &Args,
) -> Vec<String> {
    let mut notes = vec![
        "Roampal's per-conversation scoring state (_completion_state.json) is not needed and \
         was not read: memd keeps its own, starting with the next prompt."
            .to_string(),
    ];
    if !store.foreign.is_empty() {
        notes.push(format!(
            "collections that are not Roampal's were left alone: {}",
            store.foreign.join(", ")
        ));
    }
    let day = memd_engine::learn::lifecycle::WORKING_MAX_AGE_MS;
    let now = memd_engine::clock::now_ms();
    let old_working = per_collection
        .iter()
        .filter(|(c, _)| *c == Collection::Working)
        .flat_map(|(_, l)| l)
        .filter(|r| now - r.created_at > day)
        .count();
    if old_working > 0 {
        notes.push(format!(
            "{old_working} working memories are more than 24 h old: memd's cleanup expires them \
             as Roampal's would have (kept archived for 7 days, then deleted), unless they \
             are promoted first"
        ));
    }
    if !args.with_transcripts && transcripts::count_files(dir) > 0 {
        notes.push(format!(
            "{} Claude Code transcripts in {} were not imported (they are raw exchanges, not \
             memories); `--with-transcripts` imports them",
            transcripts::count_files(dir),
            dir.join("mcp_sessions").display()
        ));
    }
    notes
}

fn print(report: &Report, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
        return Ok(());
    }
    let verb = if report.dry_run {
        "would import"
    } else {
        "imported"
    };
    match &report.chroma_schema {
        Some(v) => println!("Roampal store: {} (ChromaDB {v})", report.store),
        None => println!("Roampal store: {}", report.store),
    }
    if let Some(p) = &report.project {
        println!("project-bound memories go to project {p}");
    }
    println!(
        "  {:<12} {:>6} {:>9} {:>13} {:>9} {:>10}",
        "collection", "found", "archived", verb, "present", "duplicate"
    );
    for c in &report.collections {
        println!(
            "  {:<12} {:>6} {:>9} {:>13} {:>9} {:>10}",
            c.collection, c.found, c.archived, c.imported, c.existing, c.duplicates
        );
        if c.rejected > 0 {
            println!("  {:<12} {} rejected by the daemon", "", c.rejected);
        }
    }
    if let Some(t) = &report.transcripts {
        println!(
            "  transcripts: {} exchanges in {} files, {verb} {} ({} present, {} duplicate)",
            t.exchanges, t.files, t.imported, t.existing, t.duplicates
        );
    }
    if !report.skipped.is_empty() {
        println!(
            "left out ({}), because they cannot be read:",
            report.skipped.len()
        );
        for s in &report.skipped {
            println!("  {s}");
        }
    }
    for n in &report.notes {
        println!("note: {n}");
    }
    Ok(())
}
