//! Book ingestion: text extraction, chunking and duplicate fingerprints.
//!
//! Owns turning an uploaded file (`.txt`, `.md`, `.pdf`) into plain text, cutting that text
//! into overlapping chunks for the `books` collection, and the fingerprint that lets a re-ingest
//! of the same book be skipped. Must never: accept more than [`MAX_BYTES`], panic on any input
//! (PDF parsing runs behind `catch_unwind`), cut inside a word unless one word is longer than a
//! whole chunk, or cut inside a multi-byte character.

use sha2::{Digest, Sha256};
use std::fmt;
use std::path::Path;

/// Largest file accepted for ingestion (the HTTP layer answers 413 above it).
pub const MAX_BYTES: usize = 10 * 1024 * 1024;
/// Chunk size, in characters, used for books.
pub const DEFAULT_TARGET_CHARS: usize = 1000;
/// Characters repeated from the end of one chunk at the start of the next.
pub const DEFAULT_OVERLAP_CHARS: usize = 200;
/// Text per ingest request (`memd ingest` and the dashboard's upload send a book in parts of
/// this size, cut by [`split_parts`], so both store the same chunks). Chunks dedupe by content,
/// so re-sending the same split is safe.
pub const PART_BYTES: usize = 1024 * 1024;

/// Why a file could not be ingested; `Display` is written for the person who uploaded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IngestError {
    TooLarge { bytes: usize, limit: usize },
    UnsupportedType(String),
    Pdf(String),
    NotUtf8,
    Empty,
}

impl fmt::Display for IngestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MB: f64 = 1024.0 * 1024.0;
        match self {
            Self::TooLarge { bytes, limit } => write!(
                f,
                "the file is {:.1} MB ({bytes} bytes); books can be at most {:.0} MB",
                *bytes as f64 / MB,
                *limit as f64 / MB
            ),
            Self::UnsupportedType(ext) if ext.is_empty() => {
                f.write_str("the file name has no extension; memd can ingest .txt, .md and .pdf files")
            }
            Self::UnsupportedType(ext) => write!(
                f,
                "unsupported file type \".{ext}\"; memd can ingest .txt, .md and .pdf files"
            ),
            Self::Pdf(reason) => write!(f, "could not read the PDF: {reason}"),
            Self::NotUtf8 => f.write_str("the file is not UTF-8 text; save it as UTF-8 and try again"),
            Self::Empty => f.write_str(
                "the file contains no text to ingest (a scanned PDF holds only images: run OCR first)",
            ),
        }
    }
}

impl std::error::Error for IngestError {}

/// Plain text of an uploaded file, chosen by the file name's extension (case-insensitive).
/// Line endings become `\n`; Markdown is kept as written (headings guide chunking).
pub fn extract_text(file_name: &str, bytes: &[u8]) -> Result<String, IngestError> {
    if bytes.len() > MAX_BYTES {
        return Err(IngestError::TooLarge {
            bytes: bytes.len(),
            limit: MAX_BYTES,
        });
    }
    let extension = Path::new(file_name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let text = match extension.as_str() {
        "txt" | "text" | "md" | "markdown" => decode_utf8(bytes)?,
        "pdf" => extract_pdf_text(bytes)?,
        _ => return Err(IngestError::UnsupportedType(extension)),
    };
    let text = normalise_line_endings(&text);
    if text.trim().is_empty() {
        return Err(IngestError::Empty);
    }
    Ok(text)
}

fn decode_utf8(bytes: &[u8]) -> Result<String, IngestError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| IngestError::NotUtf8)
}

fn normalise_line_endings(text: &str) -> String {
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .replace('\0', "")
}

fn extract_pdf_text(bytes: &[u8]) -> Result<String, IngestError> {
    // The header may follow a little junk (the format allows up to 1 KiB of it).
    let head = &bytes[..bytes.len().min(1024)];
    if !head.windows(5).any(|w| w == b"%PDF-") {
        return Err(IngestError::Pdf(
            "this is not a PDF file (no %PDF header)".into(),
        ));
    }
    // The parser indexes into untrusted structures and can panic on malformed files.
    let parsed = std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem(bytes));
    match parsed {
        Ok(Ok(text)) => Ok(tidy_pdf_text(&text)),
        Ok(Err(e)) => Err(IngestError::Pdf(e.to_string())),
        Err(_) => Err(IngestError::Pdf(
            "the file is damaged or uses an unsupported feature".into(),
        )),
    }
}

/// Drops trailing spaces on each line and runs of blank lines left by page layout.
fn tidy_pdf_text(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut blank_lines = 0;
    for line in raw.lines().map(str::trim_end) {
        if line.is_empty() {
            blank_lines += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank_lines > 0 { "\n\n" } else { "\n" });
        }
        out.push_str(line);
        blank_lines = 0;
    }
    out
}

/// sha256 (hex) of the text with surrounding whitespace trimmed and every whitespace run
/// collapsed to one space, so a re-upload that only differs in layout is recognised.
pub fn content_fingerprint(text: &str) -> String {
    let mut hasher = Sha256::new();
    for (i, word) in text.split_whitespace().enumerate() {
        if i > 0 {
            hasher.update(b" ");
        }
        hasher.update(word.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Characters per book chunk, and how many the next chunk repeats (as Roampal chunked).
pub const CHUNK_CHARS: usize = 1_000;
pub const CHUNK_OVERLAP: usize = 200;

/// One piece of a book. `start_char` counts characters (not bytes) from the start of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub index: usize,
    pub text: String,
    pub start_char: usize,
}

/// Cuts `text` into chunks of at most `target_chars` characters that repeat at most
/// `overlap_chars` characters of the previous chunk. Cuts fall on a paragraph break when one is
/// in the second half of the window, else on a sentence break there, else on the last word
/// break; a word is cut only when it alone exceeds `target_chars`. A Markdown heading (outside
/// code fences) starts a new chunk, without overlap, unless the chunk so far holds only
/// headings. Chunks carry no leading or trailing whitespace. Deterministic. `target_chars` is
/// at least 1 and the overlap at most half of it.
pub fn chunk(text: &str, target_chars: usize, overlap_chars: usize) -> Vec<Chunk> {
    let target = target_chars.max(1);
    let overlap = overlap_chars.min(target / 2);
    let headings = heading_starts(text);
    let mut chunks = Vec::new();
    let mut chars = CharCounter::default();
    let mut previous: Option<(usize, usize)> = None; // (start, end) bytes of the last chunk
    let mut next_core = 0;
    let mut overlap_allowed = false;
    loop {
        let core = skip_whitespace(text, next_core);
        if core >= text.len() {
            break;
        }
        let start = match previous {
            Some((prev_start, prev_end)) if overlap_allowed && overlap > 0 => {
                overlap_start(text, prev_start, prev_end, core, overlap)
            }
            _ => core,
        };
        let (start, cut) = cut_after(text, start, core, target, &headings);
        let end = start + text[start..cut.at].trim_end().len();
        chunks.push(Chunk {
            index: chunks.len(),
            text: text[start..end].to_owned(),
            start_char: chars.chars_before(text, start),
        });
        previous = Some((start, end));
        next_core = cut.at;
        overlap_allowed = !cut.at_heading;
    }
    chunks
}

/// Where a chunk ends (exclusive, in bytes) and whether a heading forced it.
struct Cut {
    at: usize,
    at_heading: bool,
}

impl Cut {
    fn plain(at: usize) -> Self {
        Cut {
            at,
            at_heading: false,
        }
    }

    fn heading(at: usize) -> Self {
        Cut {
            at,
            at_heading: true,
        }
    }
}

/// Chooses the end of the chunk that starts at `start` and whose new content starts at `core`.
/// Returns the start actually used: the overlap is dropped when keeping it would force a cut
/// inside a word that fits in a chunk by itself.
fn cut_after(
    text: &str,
    start: usize,
    core: usize,
    target: usize,
    headings: &[usize],
) -> (usize, Cut) {
    let window = scan_window(text, start, core, target);
    if let Some(at) = forced_heading_cut(text, core, window.limit, headings) {
        return (start, Cut::heading(at));
    }
    if window.reaches_end {
        return (start, Cut::plain(text.len()));
    }
    let in_second_half = |p: &usize| *p > window.half;
    let soft = window
        .paragraph
        .filter(in_second_half)
        .or(window.sentence.filter(in_second_half));
    match soft.or(window.word) {
        Some(at) => (start, Cut::plain(at)),
        None if start < core => cut_after(text, core, core, target, headings),
        None => (start, Cut::plain(window.limit)),
    }
}

/// The latest break of each strength after `core` within `target` characters of `start`.
struct Window {
    /// Byte position `target` characters after `start` (or the end of the text).
    limit: usize,
    reaches_end: bool,
    /// Byte position half a window after `start`.
    half: usize,
    paragraph: Option<usize>,
    sentence: Option<usize>,
    word: Option<usize>,
}

fn scan_window(text: &str, start: usize, core: usize, target: usize) -> Window {
    let mut window = Window {
        limit: text.len(),
        reaches_end: true,
        half: text.len(),
        paragraph: None,
        sentence: None,
        word: None,
    };
    let mut prev = text[..start].chars().next_back();
    for (count, (offset, c)) in text[start..].char_indices().enumerate() {
        let pos = start + offset;
        if count == target / 2 {
            window.half = pos;
        }
        // Only a word start can be a break; checking that first keeps the scan cheap.
        let may_break = prev.is_none_or(|p| p.is_whitespace() || is_cjk(p)) || is_cjk(c);
        if pos > core && may_break {
            let boundary = boundary_at(text, pos);
            let record = |slot: &mut Option<usize>, needed| {
                if boundary >= needed {
                    *slot = Some(pos);
                }
            };
            record(&mut window.word, Boundary::Word);
            record(&mut window.sentence, Boundary::Sentence);
            record(&mut window.paragraph, Boundary::Paragraph);
        }
        if count == target {
            window.limit = pos;
            window.reaches_end = false;
            break;
        }
        prev = Some(c);
    }
    window
}

/// The first heading after `core` and within the window, provided the text from `core` up to
/// it holds more than headings (a title directly followed by a chapter heading stays together).
fn forced_heading_cut(text: &str, core: usize, limit: usize, headings: &[usize]) -> Option<usize> {
    let first = headings.partition_point(|&h| h <= core);
    headings[first..]
        .iter()
        .take_while(|&&h| h < limit || (h == limit && limit < text.len()))
        .copied()
        .find(|&h| {
            text[core..h]
                .lines()
                .map(str::trim)
                .any(|line| !line.is_empty() && !is_heading_line(line))
        })
}

/// Where the next chunk starts so it repeats at most `overlap` characters ending at
/// `prev_end`: the earliest sentence start in that range, else the earliest word start, else
/// no overlap at all.
fn overlap_start(
    text: &str,
    prev_start: usize,
    prev_end: usize,
    core: usize,
    overlap: usize,
) -> usize {
    let from = text[..prev_end]
        .char_indices()
        .rev()
        .nth(overlap - 1)
        .map_or(0, |(i, _)| i)
        .max(prev_start + text[prev_start..].chars().next().map_or(1, char::len_utf8));
    let mut first_word = None;
    for (offset, _) in text.get(from..core).unwrap_or("").char_indices() {
        let pos = from + offset;
        match boundary_at(text, pos) {
            b if b >= Boundary::Sentence => return pos,
            Boundary::Word if first_word.is_none() => first_word = Some(pos),
            _ => {}
        }
    }
    first_word.unwrap_or(core)
}

/// How strongly the text may be cut just before byte `pos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Boundary {
    None,
    Word,
    Sentence,
    Paragraph,
}

fn boundary_at(text: &str, pos: usize) -> Boundary {
    let (before, after) = text.split_at(pos);
    let Some(next) = after.chars().next().filter(|c| !c.is_whitespace()) else {
        return Boundary::None;
    };
    let Some(prev) = before.chars().next_back() else {
        return Boundary::Paragraph;
    };
    if !prev.is_whitespace() {
        return match (is_cjk(prev) || is_cjk(next), is_sentence_end(prev)) {
            (true, true) => Boundary::Sentence,
            (true, false) => Boundary::Word,
            (false, _) => Boundary::None,
        };
    }
    let content = before.trim_end();
    let gap = &before[content.len()..];
    if content.is_empty() || gap.matches('\n').count() >= 2 {
        return Boundary::Paragraph;
    }
    let last = content
        .trim_end_matches(is_closing_mark)
        .chars()
        .next_back();
    if last.is_some_and(is_sentence_end) {
        Boundary::Sentence
    } else {
        Boundary::Word
    }
}

fn is_sentence_end(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…' | '。' | '！' | '？')
}

fn is_closing_mark(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | ')' | ']' | '”' | '’' | '»' | '」' | '』' | '*' | '_'
    )
}

/// Scripts written without spaces between words: any point between two of their characters
/// is a word break.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3000..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF
        | 0xF900..=0xFAFF | 0xFF00..=0xFFEF | 0x20000..=0x2FA1F)
}

fn skip_whitespace(text: &str, from: usize) -> usize {
    text.len() - text[from..].trim_start().len()
}

fn is_heading_line(line: &str) -> bool {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes)
        && line[hashes..]
            .chars()
            .next()
            .is_none_or(char::is_whitespace)
}

/// Byte offsets of the `#` of every Markdown ATX heading outside fenced code blocks.
fn heading_starts(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut in_fence = false;
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let body = line.trim();
        if body.starts_with("```") || body.starts_with("~~~") {
            in_fence = !in_fence;
        } else if !in_fence && indent <= 3 && is_heading_line(body) {
            starts.push(line_start + indent);
        }
        line_start += line.len();
    }
    starts
}

/// Converts byte offsets to character offsets for positions visited in increasing order.
#[derive(Default)]
struct CharCounter {
    byte: usize,
    chars: usize,
}

impl CharCounter {
    fn chars_before(&mut self, text: &str, byte: usize) -> usize {
        if byte < self.byte {
            *self = Self::default();
        }
        self.chars += text[self.byte..byte].chars().count();
        self.byte = byte;
        self.chars
    }
}

/// Splits text into parts of at most `max` bytes, at a paragraph, line or word break when
/// one is in the second half of the window.
pub fn split_parts(text: &str, max: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut end = max;
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let window = &rest[..end];
        let half = end / 2;
        let cut = [
            window.rfind("\n\n"),
            window.rfind('\n'),
            window.rfind(char::is_whitespace),
        ]
        .into_iter()
        .flatten()
        .find(|&p| p >= half)
        .map_or(end, |p| p + 1);
        let (head, tail) = rest.split_at(cut);
        parts.push(head);
        rest = tail;
    }
    if !rest.trim().is_empty() {
        parts.push(rest);
    }
    parts
}

#[cfg(test)]
mod split_tests {
    use super::split_parts;

    #[test]
    fn parts_break_at_paragraphs_and_cover_everything() {
        let para = "word ".repeat(50) + "\n\n";
        let text = para.repeat(100);
        let parts = split_parts(&text, 1000);
        assert!(parts.len() > 1);
        assert_eq!(parts.concat(), text);
        for p in &parts[..parts.len() - 1] {
            assert!(p.len() <= 1000);
            assert!(p.ends_with('\n'), "{p:?}");
        }
        let multibyte = "ü".repeat(3000);
        let parts = split_parts(&multibyte, 1001);
        assert_eq!(parts.concat(), multibyte);
        assert_eq!(split_parts("short", 1000), vec!["short"]);
    }
}
