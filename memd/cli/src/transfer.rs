//! `memd export` and `memd import`: memories as JSON Lines, losslessly.
//!
//! Owns the client side of `/api/export` (streamed to stdout or a file) and `/api/import`
//! (the file sent in requests of at most a few MB, cut at line ends; the daemon skips records
//! it already has, so a re-run or a resumed import is safe). Starts the daemon when needed.
//! An export file holds every memory, so it is created 0600; must never leave one readable by
//! other users.

use super::client;
use anyhow::{Context, Result, bail};
use memd_engine::config::Config;
use memd_engine::ops::export::ImportResponse;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Bytes per import request (the daemon accepts up to 16 MiB).
pub const IMPORT_PART_BYTES: usize = 4 * 1024 * 1024;

/// Counts lines while passing bytes through.
struct LineCounter<W: Write> {
    inner: W,
    lines: u64,
}

impl<W: Write> Write for LineCounter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Creates (or truncates) `path` readable by this user only. The mode is set again after
/// opening: a leftover file from an interrupted export keeps the mode it was created with.
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let file = options.open(path)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(file)
    }
    #[cfg(not(unix))]
    options.open(path)
}

pub fn run_export(collection: Option<&str>, output: Option<&Path>) -> Result<ExitCode> {
    if let Some(c) = collection
        && proto::Collection::parse(c).is_none()
    {
        bail!("unknown collection {c:?} (books, working, history, patterns, memory_bank)");
    }
    let cfg = Config::load(None)?;
    let client = client::connect(&cfg, true)?;
    let path = match collection {
        Some(c) => format!("/api/export?collection={c}"),
        None => "/api/export".to_string(),
    };
    let lines = match output {
        Some(file) => {
            let tmp = file.with_extension("memd-export-tmp");
            let f =
                create_private(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
            let mut w = LineCounter {
                inner: std::io::BufWriter::new(f),
                lines: 0,
            };
            let result = client.get_to(&path, &mut w);
            let flushed = w.flush();
            if let Err(e) = result
                .map_err(anyhow::Error::from)
                .and(flushed.map_err(anyhow::Error::from))
            {
                std::fs::remove_file(&tmp).ok();
                return Err(e);
            }
            std::fs::rename(&tmp, file)
                .with_context(|| format!("cannot write {}", file.display()))?;
            w.lines
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = LineCounter {
                inner: stdout.lock(),
                lines: 0,
            };
            client.get_to(&path, &mut w)?;
            w.flush()?;
            w.lines
        }
    };
    eprintln!("exported {lines} memories");
    Ok(ExitCode::SUCCESS)
}

/// Cuts JSON Lines into parts of at most `max` bytes at line ends (a longer line is a part
/// of its own).
pub fn line_parts(data: &[u8], max: usize) -> Vec<(usize, &[u8])> {
    let mut parts = Vec::new();
    let (mut start, mut first_line, mut line_no) = (0usize, 1usize, 1usize);
    let mut pos = 0;
    while pos < data.len() {
        let end = data[pos..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(data.len(), |i| pos + i + 1);
        if end - start > max && pos > start {
            parts.push((first_line, &data[start..pos]));
            start = pos;
            first_line = line_no;
        }
        pos = end;
        line_no += 1;
    }
    if start < data.len() {
        parts.push((first_line, &data[start..]));
    }
    parts
}

pub fn run_import(file: &Path, json: bool) -> Result<ExitCode> {
    let mut data = Vec::new();
    if file == Path::new("-") {
        std::io::stdin().read_to_end(&mut data)?;
    } else {
        data = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    }
    import_lines(&data, json)
}

/// Sends one part of JSON Lines to `/api/import`; with `dry_run` the daemon only counts what it
/// would store.
pub fn post_import(
    client: &client::Client,
    part: &[u8],
    dry_run: bool,
) -> Result<ImportResponse, client::ClientError> {
    let path = match dry_run {
        true => "/api/import?dry_run=true",
        false => "/api/import",
    };
    client.post_bytes(path, "application/x-ndjson", part, Duration::from_secs(600))
}

/// Sends JSON Lines of records to the running daemon's import, in parts; prints the tally.
pub fn import_lines(data: &[u8], json: bool) -> Result<ExitCode> {
    let cfg = Config::load(None)?;
    let client = client::connect(&cfg, true)?;
    let mut total = ImportResponse::default();
    for (first_line, part) in line_parts(data, IMPORT_PART_BYTES) {
        let r = post_import(&client, part, false)?;
        total.imported += r.imported;
        total.existing += r.existing;
        total.duplicates += r.duplicates;
        total.rejected += r.rejected;
        total.errors.extend(r.errors.into_iter().map(|mut e| {
            e.line += first_line - 1;
            e
        }));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&total)?);
    } else {
        println!(
            "imported {} memories ({} already present by id, {} duplicate content, {} rejected)",
            total.imported, total.existing, total.duplicates, total.rejected
        );
        for e in &total.errors {
            println!("  line {}: {}", e.line, e.reason);
        }
    }
    Ok(if total.rejected > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_end_at_line_ends_and_keep_line_numbers() {
        let data = b"aaaa\nbbbb\ncccc\ndddd\n";
        let parts = line_parts(data, 10);
        assert_eq!(
            parts,
            vec![(1, &b"aaaa\nbbbb\n"[..]), (3, &b"cccc\ndddd\n"[..])]
        );
        let long = b"x\nyyyyyyyyyyyyyyyy\nz";
        let parts = line_parts(long, 4);
        assert_eq!(
            parts,
            vec![
                (1, &b"x\n"[..]),
                (2, &b"yyyyyyyyyyyyyyyy\n"[..]),
                (3, &b"z"[..])
            ]
        );
        assert!(line_parts(b"", 4).is_empty());
    }
}
