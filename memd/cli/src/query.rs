//! `memd search`, `memd ingest`, `memd books`, `memd remove`: reading and reference documents.
//!
//! Owns the human display of search results (the MCP tool's one-line format), turning a file
//! into book text (extraction and the size limit are `memd_engine::ops::ingest`'s), sending it to the
//! daemon in parts of about 1 MB with progress on stderr, and the book list. Starts the daemon
//! when it is not running. Must never print anything but results on stdout.

use super::client::{self, Client};
use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use memd_engine::config::Config;
use proto::{
    BooksResponse, IngestRequest, IngestResponse, MemoryView, RemoveBookRequest,
    RemoveBookResponse, SearchRequest, SearchResponse,
};
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Content shown per search hit.
const SHOW_CHARS: usize = 400;
const INGEST_TIMEOUT: Duration = Duration::from_secs(600);

pub(crate) fn connect() -> Result<Client> {
    let cfg = Config::load(None)?;
    client::connect(&cfg, true)
}

pub fn run_search(
    query: &str,
    collections: &[String],
    limit: Option<i64>,
    project: &str,
    json: bool,
) -> Result<ExitCode> {
    for c in collections {
        if proto::Collection::parse(c).is_none() {
            bail!("unknown collection {c:?} (books, working, history, patterns, memory_bank)");
        }
    }
    let client = connect()?;
    let req = SearchRequest {
        query: Some(query.to_string()),
        collections: (!collections.is_empty()).then(|| collections.to_vec()),
        limit,
        project: Some(project.to_string()),
        cwd: here(),
        ..Default::default()
    };
    let resp: SearchResponse = client.post("/api/search", &req)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&resp)?);
        return Ok(ExitCode::SUCCESS);
    }
    if resp.results.is_empty() {
        println!("No memories match {query:?}.");
    }
    for (i, m) in resp.results.iter().enumerate() {
        println!("{}", format_hit(i + 1, m));
    }
    Ok(ExitCode::SUCCESS)
}

/// The directory the command runs in, for the daemon to resolve to a project.
fn here() -> Option<String> {
    std::env::current_dir()
        .ok()
        .and_then(|d| d.to_str().map(str::to_string))
}

/// `1. [patterns] (2d, s:0.72, w:0.68, 8 uses, [YY~N]) [id:…] content` on one line.
pub fn format_hit(n: usize, m: &MemoryView) -> String {
    let mut facts = vec![
        m.age.clone(),
        format!("s:{:.2}", m.score),
        format!("w:{:.2}", m.wilson_score),
    ];
    facts.push(if m.uses == 1 {
        "1 use".into()
    } else {
        format!("{} uses", m.uses)
    });
    if !m.outcome_history.is_empty() {
        facts.push(m.outcome_history.clone());
    }
    if m.disputed {
        facts.push("DISPUTED".into());
    }
    format!(
        "{n}. [{}] ({}) [id:{}] {}",
        m.collection,
        facts.join(", "),
        m.id,
        one_line(&m.content, SHOW_CHARS)
    )
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max).collect();
    format!("{cut}…")
}

fn bar_style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// Reads the file, with a byte progress bar when it is large.
/// The file `memd ingest` reads for `file`: where it leads, when that stays inside the
/// directory the user named (the file's parent as given, its own symlinks resolved). A link
/// out of it is refused: a folder others can write (a shared checkout, /tmp) could otherwise
/// point memd at a file only this user (or root) can read, and its text would become a memory
/// (issue 36: `/etc/shadow` as root). Naming the target itself ingests it.
fn confined(file: &Path) -> Result<PathBuf> {
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = std::fs::canonicalize(parent)
        .with_context(|| format!("cannot read the directory of {}", file.display()))?;
    let target =
        std::fs::canonicalize(file).with_context(|| format!("cannot read {}", file.display()))?;
    if !target.starts_with(&dir) {
        bail!(
            "{} leads to {}, outside {}: memd does not follow a link out of the directory you \
             named (name the file itself to ingest it)",
            file.display(),
            target.display(),
            dir.display()
        );
    }
    Ok(target)
}

fn read_with_progress(path: &Path, size: u64) -> Result<Vec<u8>> {
    // Not through a link (the path is resolved already: one swapped in since is refused), and
    // never blocking on a FIFO swapped in since the check.
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let f = options
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        bail!("{} is not a regular file", path.display());
    }
    let bar = if size > memd_engine::ops::ingest::PART_BYTES as u64 {
        ProgressBar::new(size).with_style(bar_style("reading   [{bar:30}] {bytes}/{total_bytes}"))
    } else {
        ProgressBar::hidden()
    };
    let mut out = Vec::with_capacity(size as usize);
    let mut buf = vec![0u8; 256 * 1024];
    // The file may grow after it was measured: never read past the limit (the extraction then
    // refuses the oversize bytes with its usual message).
    let mut f = f.take(memd_engine::ops::ingest::MAX_BYTES as u64 + 1);
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        bar.inc(n as u64);
    }
    bar.finish_and_clear();
    Ok(out)
}

#[derive(Serialize)]
struct IngestSummary {
    title: String,
    file: String,
    chunks: usize,
    already_present: usize,
    stored: usize,
    /// Absent: the book is global.
    #[serde(skip_serializing_if = "Option::is_none")]
    project: Option<String>,
}

pub fn run_ingest(
    file: &Path,
    title: Option<String>,
    project: bool,
    json: bool,
) -> Result<ExitCode> {
    let meta =
        std::fs::metadata(file).with_context(|| format!("cannot read {}", file.display()))?;
    // A FIFO would block the read forever and a device (/dev/zero, even through a symlink)
    // never ends: only regular files are books.
    if !meta.is_file() {
        bail!(
            "{} is not a regular file (a directory, FIFO, socket or device); memd ingests files only",
            file.display()
        );
    }
    let file = &confined(file)?;
    if meta.len() > memd_engine::ops::ingest::MAX_BYTES as u64 {
        bail!(
            "{} is {:.1} MB; books are limited to {} MB (split the file)",
            file.display(),
            meta.len() as f64 / 1_048_576.0,
            memd_engine::ops::ingest::MAX_BYTES / (1024 * 1024)
        );
    }
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let title = title.filter(|t| !t.trim().is_empty()).unwrap_or_else(|| {
        file.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| name.clone())
    });
    let bytes = read_with_progress(file, meta.len())?;
    let spinner = ProgressBar::new_spinner().with_message(format!("extracting text from {name}"));
    spinner.enable_steady_tick(Duration::from_millis(120));
    let text = memd_engine::ops::confine::extract_text(&name, &bytes);
    spinner.finish_and_clear();
    let text = text.map_err(|e| anyhow::anyhow!("cannot ingest {}: {e}", file.display()))?;
    if text.trim().is_empty() {
        bail!("{} has no text to store", file.display());
    }
    let client = connect()?;
    let source = std::fs::canonicalize(file)
        .unwrap_or_else(|_| file.to_path_buf())
        .display()
        .to_string();
    let parts = memd_engine::ops::ingest::split_parts(&text, memd_engine::ops::ingest::PART_BYTES);
    let bar = if parts.len() > 1 {
        ProgressBar::new(text.len() as u64).with_style(bar_style(
            "storing   [{bar:30}] {bytes}/{total_bytes} {msg}",
        ))
    } else {
        ProgressBar::new_spinner().with_message("chunking and storing")
    };
    bar.enable_steady_tick(Duration::from_millis(120));
    let mut total = IngestResponse {
        title: title.clone(),
        ..Default::default()
    };
    for part in parts {
        let req = IngestRequest {
            title: title.clone(),
            content: part.to_string(),
            source: Some(source.clone()),
            scope: Some(if project {
                proto::Scope::Project
            } else {
                proto::Scope::Global
            }),
            cwd: if project { here() } else { None },
        };
        let resp: IngestResponse =
            match client.post_with_timeout("/api/ingest", &req, INGEST_TIMEOUT) {
                Ok(r) => r,
                Err(e) => {
                    bar.finish_and_clear();
                    return Err(e.into());
                }
            };
        total.project = resp.project;
        total.chunks += resp.chunks;
        total.already_present += resp.already_present;
        bar.inc(part.len() as u64);
    }
    bar.finish_and_clear();
    let summary = IngestSummary {
        title: title.clone(),
        file: source,
        chunks: total.chunks,
        already_present: total.already_present,
        stored: total.chunks - total.already_present.min(total.chunks),
        project: total.project.clone(),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else if summary.stored == 0 {
        println!(
            "already present: {title:?} ({} chunks); nothing new stored",
            summary.chunks
        );
    } else if summary.already_present > 0 {
        println!(
            "stored {} new chunks of {title:?} ({} were already present)",
            summary.stored, summary.already_present
        );
    } else {
        println!("stored {title:?}: {} chunks", summary.chunks);
    }
    if !json && let Some(p) = &summary.project {
        println!("(only for project {p})");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_books(json: bool) -> Result<ExitCode> {
    let client = connect()?;
    let resp: BooksResponse = client.get("/api/books")?;
    if json {
        println!("{}", serde_json::to_string_pretty(&resp)?);
        return Ok(ExitCode::SUCCESS);
    }
    if resp.books.is_empty() {
        println!("No books yet (`memd ingest <file>` adds one).");
    }
    for b in &resp.books {
        let source = b
            .source
            .as_deref()
            .map(|s| format!("  {s}"))
            .unwrap_or_default();
        println!(
            "{:>6} chunks  {}  {}{source}",
            b.chunks, b.created_at, b.title
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_remove(title: &str, json: bool) -> Result<ExitCode> {
    let client = connect()?;
    let resp: RemoveBookResponse = client.post(
        "/api/remove-book",
        &RemoveBookRequest {
            title: title.to_string(),
        },
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&resp)?);
    } else {
        println!("removed {title:?} ({} chunks)", resp.removed_chunks);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> MemoryView {
        MemoryView {
            id: "patterns_0123456789ab".into(),
            collection: "patterns".into(),
            content: "Use  cargo nextest\nfor speed".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            age: "2d".into(),
            score: 0.724,
            wilson_score: 0.681,
            uses: 8,
            success_count: 6.0,
            learned_score: 0.7,
            last_outcome: "worked".into(),
            outcome_history: "[YY~N]".into(),
            tags: vec![],
            disputed: false,
            archived: false,
            project: None,
            importance: None,
            confidence: None,
            embedding_similarity: None,
            final_rank_score: None,
            rerank_score: None,
            shared: false,
            owner: None,
            metadata: Default::default(),
        }
    }

    #[test]
    fn hit_line_matches_the_mcp_display() {
        assert_eq!(
            format_hit(1, &view()),
            "1. [patterns] (2d, s:0.72, w:0.68, 8 uses, [YY~N]) [id:patterns_0123456789ab] Use cargo nextest for speed"
        );
        let mut fresh = view();
        fresh.outcome_history.clear();
        fresh.uses = 1;
        assert!(
            format_hit(2, &fresh).starts_with("2. [patterns] (2d, s:0.72, w:0.68, 1 use) [id:")
        );
    }

    #[test]
    fn long_content_is_cut_on_a_char_boundary() {
        let s = "é".repeat(500);
        let out = one_line(&s, 10);
        assert_eq!(out.chars().count(), 11);
        assert!(out.ends_with('…'));
    }
}
