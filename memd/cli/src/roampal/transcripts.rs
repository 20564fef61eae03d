//! `--with-transcripts`: Roampal's Claude Code transcripts (`mcp_sessions/*.jsonl`).
//!
//! Owns reading those files and storing them as reference material: one book per
//! conversation (`Roampal transcript <conversation>`), one chunk per exchange (longer ones cut
//! like any book), in the order they happened. They are transcripts, not memories: as books
//! they are searchable, never scored, never expired, and `memd remove <title>` drops one. Must
//! never import them unless asked, and never skip a line without counting it.

use super::map::memd_id;
use super::when;
use crate::client::Client;
use anyhow::{Context, Result};
use memd_engine::core::Core;
use memd_engine::ops::ingest::{CHUNK_CHARS, CHUNK_OVERLAP};
use memd_engine::record::Record;
use memd_engine::redact;
use proto::{Collection, Value};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What happened to the transcripts.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    pub files: usize,
    pub exchanges: usize,
    /// Chunks stored (with `--dry-run`: would be).
    pub imported: usize,
    pub existing: usize,
    pub duplicates: usize,
    /// Chunks the daemon refused (its reasons go to stderr with the collections').
    pub rejected: usize,
    /// Lines left out: not a user or assistant record, or a user line never answered.
    pub skipped_lines: usize,
}

/// The most read of one transcript file.
const TRANSCRIPT_MAX: u64 = 64 * 1024 * 1024;

/// The transcript files of a data directory, sorted by name.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir.join("mcp_sessions")) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
        .collect();
    out.sort();
    out
}

pub fn count_files(dir: &Path) -> usize {
    files(dir).len()
}

/// Imports (or counts, with `dry_run`) every transcript when `wanted`; `None` otherwise.
pub fn handle(
    dir: &Path,
    wanted: bool,
    dry_run: bool,
    client: &Client,
    project: Option<&str>,
) -> Result<Option<Summary>> {
    if !wanted {
        return Ok(None);
    }
    let mut summary = Summary::default();
    for file in files(dir) {
        let text = super::locate::read_bounded(&file, TRANSCRIPT_MAX)
            .and_then(|t| t.ok_or_else(|| anyhow::anyhow!("it is gone")))
            .with_context(|| format!("cannot read the transcript {}", file.display()))?;
        let conversation = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let written = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        let book = book_of(&conversation, &text, project, written);
        summary.files += 1;
        summary.exchanges += book.exchanges;
        summary.skipped_lines += book.skipped_lines;
        for part in book.records.chunks(super::RECORDS_PER_REQUEST) {
            let refs: Vec<&Record> = part.iter().collect();
            let r = super::post_records(client, &refs, dry_run)?;
            summary.imported += r.imported;
            summary.existing += r.existing;
            summary.duplicates += r.duplicates;
            summary.rejected += r.rejected;
        }
    }
    Ok(Some(summary))
}

/// One conversation as a book.
pub struct Book {
    pub records: Vec<Record>,
    pub exchanges: usize,
    pub skipped_lines: usize,
}

/// One conversation's book. Chunk ids come from the exchange's position in the file, so a
/// transcript that grew since the last import adds only its new exchanges. An exchange whose
/// time cannot be read takes the one before it (`written`, the file's time, for the first).
pub fn book_of(conversation: &str, text: &str, project: Option<&str>, written: i64) -> Book {
    let title = format!("Roampal transcript {conversation}");
    let mut skipped = 0;
    let mut pending_user: Option<(String, String)> = None;
    let mut exchanges: Vec<(String, String, String)> = Vec::new(); // (time, user, assistant)
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            skipped += 1;
            continue;
        };
        let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
        match field("role").as_str() {
            "user" => {
                if pending_user.is_some() {
                    skipped += 1; // a question that was never answered
                }
                pending_user = Some((field("timestamp"), field("content")));
            }
            "assistant" => {
                let (time, user) = pending_user.take().unwrap_or_default();
                let time = if time.is_empty() {
                    field("timestamp")
                } else {
                    time
                };
                exchanges.push((time, user, field("content")));
            }
            _ => skipped += 1,
        }
    }
    skipped += usize::from(pending_user.is_some());
    let mut records = Vec::new();
    let mut at = written;
    for (n, (time, user, assistant)) in exchanges.iter().enumerate() {
        at = when::parse_text(time).unwrap_or(at);
        // Scrubbed whole before it is cut: a secret split across two chunks would escape
        // both halves' patterns.
        let body = redact::scrub(&format!(
            "User: {}\nAssistant: {}",
            user.trim(),
            assistant.trim()
        ))
        .text;
        for (part, c) in memd_engine::ops::ingest::chunk(&body, CHUNK_CHARS, CHUNK_OVERLAP)
            .into_iter()
            .enumerate()
        {
            let key = format!("transcript\0{conversation}\0{n}\0{part}");
            let mut rec = Core::new_record(Collection::Books, c.text, at);
            rec.id = memd_id(Collection::Books, &key);
            rec.project = project.map(str::to_string);
            rec.metadata
                .insert("title".into(), Value::from(title.as_str()));
            rec.metadata
                .insert("chunk_index".into(), Value::Number(records.len() as f64));
            rec.metadata
                .insert("conversation_id".into(), Value::from(conversation));
            rec.metadata
                .insert("memory_type".into(), Value::from("transcript"));
            records.push(rec);
        }
    }
    let total = records.len() as f64;
    for r in &mut records {
        r.metadata
            .insert("chunk_count".into(), Value::Number(total));
    }
    Book {
        records,
        exchanges: exchanges.len(),
        skipped_lines: skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchanges_become_ordered_chunks_and_junk_is_counted() {
        let text = concat!(
            r#"{"role":"user","content":"How do I run the tests?","timestamp":"2026-11-20T10:00:00"}"#,
            "\n",
            r#"{"role":"assistant","content":"Use just test.","doc_id":"","timestamp":"2026-11-20T10:00:00","scored":false}"#,
            "\nnot json\n",
            r#"{"role":"user","content":"And lint?","timestamp":"2026-11-20T10:05:00"}"#,
            "\n",
            r#"{"role":"assistant","content":"cargo clippy.","timestamp":"2026-11-20T10:05:00"}"#,
            "\n"
        );
        let book = book_of("abc-123", text, None, 0);
        let recs = &book.records;
        assert_eq!((recs.len(), book.exchanges, book.skipped_lines), (2, 2, 1));
        assert_eq!(
            recs[0].content,
            "User: How do I run the tests?\nAssistant: Use just test."
        );
        assert_eq!(recs[1].metadata["chunk_index"], Value::Number(1.0));
        assert_eq!(
            recs[0].metadata["title"],
            Value::from("Roampal transcript abc-123")
        );
        assert!(recs[0].created_at < recs[1].created_at);
        // The same file gives the same ids: a second import finds them.
        let again = book_of("abc-123", text, None, 0);
        assert_eq!(recs[0].id, again.records[0].id);
        // A grown file keeps the old exchanges' ids; an unanswered question is skipped.
        let grown = format!("{text}{}\n", r#"{"role":"user","content":"Still there?"}"#);
        let later = book_of("abc-123", &grown, None, 0);
        assert_eq!(later.records[1].id, recs[1].id);
        assert_eq!(later.skipped_lines, 2);
    }

    #[test]
    fn a_secret_split_by_chunking_is_redacted_whole() {
        let key = format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{}-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n".repeat(12)
        );
        // The key starts before the first chunk's end (1,000 characters) and ends after it.
        let answer = format!(
            "{}Here is the key:\n{key}\n{}",
            "Padding text. ".repeat(65),
            "More text after it. ".repeat(60)
        );
        assert!(
            answer.find("-----BEGIN").unwrap() < 1000 && answer.find("-----END").unwrap() > 1000
        );
        let line = serde_json::json!({"role": "assistant", "content": answer, "timestamp": ""});
        let book = book_of("k", &format!("{line}\n"), None, 5);
        assert!(book.records.len() >= 2, "{}", book.records.len());
        for r in &book.records {
            assert!(!r.content.contains("b3BlbnNzaC1rZXkt"), "{}", r.content);
        }
        assert_eq!(
            book.records[0].created_at, 5,
            "no readable time: the file's"
        );
    }
}
