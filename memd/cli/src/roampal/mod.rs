//! `memd import --from-roampal`: moving in from Roampal with what it learned.
//!
//! Owns the command: find the store (`locate`), read it (`chroma`), translate every memory
//! (`map`), then hand the records to the daemon's idempotent `/api/import` one collection at a
//! time (so the report is per collection), with a progress bar, and wait while memd embeds
//! them with its own model. `--dry-run` asks the same endpoint to count without writing.
//! Must never write to the Roampal store, and never import part of a store without saying so:
//! a memory it cannot read stops the import before anything is sent (unless `--skip-invalid`,
//! which names every memory left out).

mod books;
mod chroma;
mod locate;
mod map;
mod transcripts;
mod when;

use crate::client::{self, Client};
use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use memd_engine::config::Config;
use memd_engine::ops::export::ImportResponse;
use memd_engine::record::Record;
use memd_engine::state::scoped_hash;
use proto::Collection;
use serde::Serialize;
use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Records per import request: small enough for a progress bar that moves, large enough that
/// a 10,000-memory store is a few dozen requests.
pub(super) const RECORDS_PER_REQUEST: usize = 250;

/// What the user asked for: the `--from-roampal` flags of `memd import`.
#[derive(Debug, Default, clap::Args)]
pub struct Args {
    /// Import a Roampal store with what it learned: DIR holds `chromadb/` (default: where
    /// Roampal keeps its data, e.g. ~/.local/share/roampal/data).
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    pub from_roampal: Option<Option<PathBuf>>,
    /// With --from-roampal: a named Roampal profile instead of the active one.
    #[arg(long, value_name = "NAME", requires = "from_roampal")]
    pub profile: Option<String>,
    /// With --from-roampal: print what would be imported per collection; write nothing.
    #[arg(long, requires = "from_roampal")]
    pub dry_run: bool,
    /// With --from-roampal: put conversation memories and project facts in this
    /// directory's project (default: everything global, as it was in Roampal).
    #[arg(long, requires = "from_roampal")]
    pub project: bool,
    /// With --from-roampal: also import Claude Code transcripts (mcp_sessions/*.jsonl),
    /// one book per conversation.
    #[arg(long, requires = "from_roampal")]
    pub with_transcripts: bool,
    /// With --from-roampal: import what can be read and list the memories that cannot
    /// (default: refuse the whole import).
    #[arg(long, requires = "from_roampal")]
    pub skip_invalid: bool,
    /// With --from-roampal: do not wait for memd to embed the imported memories.
    #[arg(long, requires = "from_roampal")]
    pub no_wait: bool,
    /// `memd import --json` (shared with importing an export file).
    #[arg(skip)]
    pub json: bool,
}

impl Args {
    /// The first `--from-roampal` option given without `--from-roampal` (clap's `requires`
    /// does not catch a flag left at its default), so `memd import --dry-run FILE` is refused
    /// instead of importing for real.
    pub fn stray_option(&self) -> Option<&'static str> {
        [
            (self.profile.is_some(), "--profile"),
            (self.dry_run, "--dry-run"),
            (self.project, "--project"),
            (self.with_transcripts, "--with-transcripts"),
            (self.skip_invalid, "--skip-invalid"),
            (self.no_wait, "--no-wait"),
        ]
        .into_iter()
        .find(|(given, _)| *given && self.from_roampal.is_none())
        .map(|(_, name)| name)
    }
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

/// Memories translated for memd, by collection, in the order they are sent.
type Batches = Vec<(Collection, Vec<Record>)>;

pub fn run(args: Args) -> Result<ExitCode> {
    let dir = locate::data_dir(
        args.from_roampal.clone().flatten().as_deref(),
        args.profile.as_deref(),
    )?;
    let (mut store, removed_in_roampal) = read_store(&dir)?;
    let project = match args.project {
        true => Some(current_project()?),
        false => None,
    };
    let (mut batches, skipped, total) = translate(&mut store, project.clone());
    refuse_unreadable(&store, &skipped, total, args.skip_invalid)?;
    let recut_books = prepare(&mut batches);
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
    send_all(&client, &batches, &args, &mut report)?;
    report.transcripts = transcripts::handle(
        &dir,
        args.with_transcripts,
        args.dry_run,
        &client,
        report.project.as_deref(),
    )
    .map_err(|e| stopped(&report, e))?;
    report.notes = notes(&store, &dir, &batches, &args);
    if recut_books > 0 {
        report.notes.push(format!(
            "{recut_books} books held a secret that Roampal's chunking had cut in two: they \
             were redacted whole and cut again into memd's chunks"
        ));
    }
    if removed_in_roampal > 0 {
        report.notes.push(format!(
            "{removed_in_roampal} book chunks that Roampal had removed (ghost_ids.json) were \
             left out"
        ));
    }
    let stored: usize = report.collections.iter().map(|c| c.imported).sum::<usize>()
        + report.transcripts.as_ref().map_or(0, |t| t.imported);
    if !args.dry_run && !args.no_wait && stored > 0 {
        wait_for_embeddings(&client, args.json).context(
            "every memory is stored; only the wait for their embeddings failed (memd embeds \
             them in the background)",
        )?;
    }
    print(&report, args.json)?;
    let rejected: usize = report.collections.iter().map(|c| c.rejected).sum::<usize>()
        + report.transcripts.as_ref().map_or(0, |t| t.rejected);
    Ok(match rejected {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// The store's rows without the ones Roampal removed (a removed book's chunks stay in
/// ChromaDB, listed in `ghost_ids.json`), and how many those were.
fn read_store(dir: &std::path::Path) -> Result<(chroma::Store, usize)> {
    let mut store = chroma::read(&dir.join("chromadb").join("chroma.sqlite3"))?;
    let ghosts = locate::ghost_ids(dir)?;
    let before = store.rows.len();
    store.rows.retain(|r| !ghosts.contains(&r.id));
    let removed = before - store.rows.len();
    Ok((store, removed))
}

/// Every row as a memd record, grouped by collection; the rows that cannot be read, each
/// with its reason; how many rows there were. The rows are taken out of `store` and each is
/// dropped once translated, so a large store is not held twice (issue 36: a million rows
/// peaked at 2.5 GB).
fn translate(store: &mut chroma::Store, project: Option<String>) -> (Batches, Vec<String>, usize) {
    let rows = std::mem::take(&mut store.rows);
    let total = rows.len();
    let opts = map::Options {
        project,
        live_ids: rows.iter().map(|r| r.id.clone()).collect(),
        now_ms: memd_engine::clock::now_ms(),
    };
    let mut batches: Batches = Vec::new();
    let mut skipped = Vec::new();
    for row in rows {
        let row = &row;
        match map::to_record(row, &opts) {
            Ok(rec) => match batches.iter_mut().find(|(c, _)| *c == rec.collection) {
                Some((_, list)) => list.push(rec),
                None => batches.push((rec.collection, vec![rec])),
            },
            Err(reason) => skipped.push(reason),
        }
    }
    (batches, skipped, total)
}

/// Stops before anything is sent when a memory cannot be read, unless `--skip-invalid`.
fn refuse_unreadable(
    store: &chroma::Store,
    skipped: &[String],
    total: usize,
    skip_invalid: bool,
) -> Result<()> {
    if skipped.is_empty() || skip_invalid {
        return Ok(());
    }
    let shown = skipped
        .iter()
        .take(10)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n  ");
    let more = match skipped.len().saturating_sub(10) {
        0 => String::new(),
        n => format!("\n  … and {n} more"),
    };
    bail!(
        "{} of {} memories in {} cannot be read, so nothing was imported:\n  {shown}{more}\n\
         (`--skip-invalid` imports the others and lists these)",
        skipped.len(),
        total,
        store.file.display(),
    )
}

/// Final touches before sending: contested old ids dropped, collections in sending order,
/// books in reading order and redacted whole. Returns how many books were re-cut.
fn prepare(batches: &mut Batches) -> usize {
    drop_contested_former_ids(batches);
    batches.sort_by_key(|(c, _)| collection_order(*c));
    let mut recut_books = 0;
    for (c, list) in batches.iter_mut() {
        if *c == Collection::Books {
            sort_books(list);
            recut_books = books::redact_whole_books(list);
        }
    }
    recut_books
}

/// Sends every collection, a report line each; stops at the first failure, saying what was
/// already stored.
fn send_all(client: &Client, batches: &Batches, args: &Args, report: &mut Report) -> Result<()> {
    let total: usize = batches.iter().map(|(_, l)| l.len()).sum();
    let bar = progress(total, args.json, "importing");
    for (collection, records) in batches {
        let mut line = CollectionReport {
            collection: collection.as_str().to_string(),
            found: records.len(),
            archived: records.iter().filter(|r| r.archived).count(),
            ..CollectionReport::default()
        };
        let sent = send(client, records, args.dry_run, &bar, &mut line);
        report.collections.push(line);
        if let Err(e) = sent {
            bar.finish_and_clear();
            return Err(stopped(report, e));
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// The error of an import that stopped part-way, saying what was already stored: nothing
/// is undone, and the same command again picks up where this one stopped.
fn stopped(report: &Report, cause: anyhow::Error) -> anyhow::Error {
    let stored: Vec<String> = report
        .collections
        .iter()
        .filter(|c| c.imported > 0)
        .map(|c| format!("{} {}", c.imported, c.collection))
        .collect();
    let done = match (report.dry_run, stored.is_empty()) {
        (true, _) => "nothing was stored (dry run)".to_string(),
        (false, true) => "nothing was stored".to_string(),
        (false, false) => format!(
            "already stored: {}; running the same command again continues where it stopped",
            stored.join(", ")
        ),
    };
    cause.context(format!("the import stopped part-way ({done})"))
}

/// An old Roampal id two memories claim (Roampal copies `original_id` into every archived
/// version of an updated fact) names neither: memd would give it to whichever came first and
/// then skip the other as already imported.
fn drop_contested_former_ids(per_collection: &mut Batches) {
    let mut claims: std::collections::HashMap<String, usize> = Default::default();
    for rec in per_collection.iter().flat_map(|(_, l)| l) {
        // The last former id is the memory's own Roampal id: never contested.
        let (_, older) = rec.former_ids.split_last().unwrap_or((&rec.id, &[]));
        for id in older {
            *claims.entry(id.clone()).or_default() += 1;
        }
    }
    for rec in per_collection.iter_mut().flat_map(|(_, l)| l.iter_mut()) {
        let own = rec.former_ids.pop();
        rec.former_ids
            .retain(|id| claims.get(id).is_none_or(|n| *n == 1));
        rec.former_ids.extend(own);
    }
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

/// Book chunks go in by title, book, then chunk order, so memd's insertion order is the
/// reading order (two Roampal books may share a title).
fn sort_books(list: &mut [Record]) {
    let key = |r: &Record| {
        let text = |k: &str| {
            r.metadata
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        let roampal_id = text("roampal_id");
        let book = roampal_id
            .rsplit_once("_chunk_")
            .map_or(roampal_id.as_str(), |(b, _)| b)
            .to_string();
        let index = match r.metadata.get("chunk_index") {
            Some(proto::Value::Number(n)) => *n as i64,
            _ => i64::MAX,
        };
        (text("title"), book, index)
    };
    list.sort_by_key(key);
}

/// Sends one collection's records in parts, adding what the daemon did to `report` as it
/// goes (so a failure part-way leaves the count of what was stored).
fn send(
    client: &Client,
    records: &[Record],
    dry_run: bool,
    bar: &ProgressBar,
    report: &mut CollectionReport,
) -> Result<()> {
    // A dry run stores nothing, so the daemon cannot see a content repeated in an earlier
    // part: those are counted here, as the real import's store would count them.
    let mut sent: HashSet<u64> = HashSet::new();
    for part in records.chunks(RECORDS_PER_REQUEST) {
        let mut part: Vec<&Record> = part.iter().collect();
        let size = part.len();
        if dry_run {
            part.retain(|r| sent.insert(scoped_hash(r.project.as_deref(), &r.content)));
            report.duplicates += size - part.len();
        }
        let r = post_records(client, &part, dry_run)?;
        report.imported += r.imported;
        report.existing += r.existing;
        report.duplicates += r.duplicates;
        report.rejected += r.rejected;
        for e in r.errors {
            let which = e
                .line
                .checked_sub(1)
                .and_then(|i| part.get(i))
                .and_then(|rec| rec.metadata.get("roampal_id"))
                .and_then(|v| v.as_str())
                .unwrap_or("?");
            eprintln!("memd: {which} rejected by the daemon: {}", e.reason);
        }
        bar.inc(size as u64);
    }
    Ok(())
}

/// One import request of these records (JSON Lines).
fn post_records(client: &Client, records: &[&Record], dry_run: bool) -> Result<ImportResponse> {
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
    per_collection: &Batches,
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
            "  transcripts: {} exchanges in {} files, {verb} {} chunks ({} present, {} duplicate)",
            t.exchanges, t.files, t.imported, t.existing, t.duplicates
        );
        if t.skipped_lines > 0 {
            println!(
                "  transcripts: {} lines left out (not a question with its answer)",
                t.skipped_lines
            );
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use memd_engine::core::Core;

    #[test]
    fn an_old_id_two_memories_claim_is_dropped_from_both() {
        let fact = |own: &str, older: &[&str]| {
            let mut r = Core::new_record(Collection::MemoryBank, own.into(), 1);
            r.former_ids = older.iter().map(|s| s.to_string()).collect();
            r.former_ids.push(own.into());
            r
        };
        let mut lists = vec![(
            Collection::MemoryBank,
            vec![
                fact("memory_bank_2", &["memory_bank_1"]),
                fact("memory_bank_3", &["memory_bank_1", "memory_bank_0"]),
            ],
        )];
        drop_contested_former_ids(&mut lists);
        let ids: Vec<&Vec<String>> = lists[0].1.iter().map(|r| &r.former_ids).collect();
        assert_eq!(ids[0], &vec!["memory_bank_2".to_string()]);
        assert_eq!(
            ids[1],
            &vec!["memory_bank_0".to_string(), "memory_bank_3".to_string()]
        );
    }
}
