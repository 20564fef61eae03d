//! Roampal books and the secrets in them.
//!
//! Owns one check: memd redacts every chunk it stores, but a secret that Roampal's chunker cut
//! in two (a private key whose BEGIN line ends one chunk) matches no pattern in either half.
//! So each imported book is put back together (Roampal's chunks overlap: the overlap is found,
//! not assumed) and redacted whole; a book with a secret is cut again, from the redacted
//! text, with memd's own chunker. Books without one keep Roampal's chunks as they were. Must
//! never change a book that holds no secret.

use super::map::memd_id;
use memd_engine::ops::ingest::{CHUNK_CHARS, CHUNK_OVERLAP};
use memd_engine::record::Record;
use memd_engine::redact;
use proto::{Collection, Value};

/// The longest overlap looked for between two consecutive chunks (Roampal overlaps 200
/// characters, moved to a word boundary).
const MAX_OVERLAP_CHARS: usize = 2 * CHUNK_OVERLAP;

/// `books` in reading order (title, book, chunk): books holding a secret are replaced by
/// chunks of their redacted text. Returns how many books were re-cut.
pub fn redact_whole_books(books: &mut Vec<Record>) -> usize {
    let mut out: Vec<Record> = Vec::with_capacity(books.len());
    let mut recut = 0;
    let mut rest = std::mem::take(books).into_iter().peekable();
    while let Some(first) = rest.next() {
        let book = book_of(&first);
        let mut chunks = vec![first];
        while rest.peek().is_some_and(|r| book_of(r) == book) {
            chunks.extend(rest.next());
        }
        let whole = joined(&chunks);
        let scrubbed = redact::scrub(&whole);
        if scrubbed.found.is_empty() {
            out.extend(chunks);
        } else {
            out.extend(recut_from(&chunks[0], &book, &scrubbed.text));
            recut += 1;
        }
    }
    *books = out;
    recut
}

/// Which Roampal book a chunk belongs to: its id without `_chunk_<i>`, and its title.
fn book_of(r: &Record) -> (String, String) {
    let id = r
        .metadata
        .get("roampal_id")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let book = id.rsplit_once("_chunk_").map_or(id, |(b, _)| b);
    let title = r
        .metadata
        .get("title")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    (book.to_string(), title.to_string())
}

/// The text of consecutive chunks, each overlap kept once.
fn joined(chunks: &[Record]) -> String {
    let mut text = String::new();
    for c in chunks {
        let k = overlap(&text, &c.content);
        if k == 0 && !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&c.content[k..]);
    }
    text
}

/// Bytes of `next` that `text` already ends with (the longest such prefix, on a char boundary).
fn overlap(text: &str, next: &str) -> usize {
    let limit = next
        .char_indices()
        .nth(MAX_OVERLAP_CHARS)
        .map_or(next.len(), |(i, _)| i);
    (1..=limit)
        .rev()
        .filter(|k| next.is_char_boundary(*k))
        .find(|k| text.ends_with(&next[..*k]))
        .unwrap_or(0)
}

/// New chunks of a redacted book, each carrying the first chunk's fields (title, source,
/// times) and a new index; ids stay the same from one import to the next.
fn recut_from(template: &Record, book: &(String, String), text: &str) -> Vec<Record> {
    let pieces = memd_engine::ops::ingest::chunk(text, CHUNK_CHARS, CHUNK_OVERLAP);
    let total = pieces.len();
    pieces
        .into_iter()
        .map(|p| {
            let mut rec = template.clone();
            rec.id = memd_id(
                Collection::Books,
                &format!("{}\0redacted\0{}", book.0, p.index),
            );
            rec.content = p.text;
            rec.former_ids.clear();
            rec.metadata.remove("roampal_id");
            rec.metadata
                .insert("roampal_book".into(), Value::from(book.0.as_str()));
            rec.metadata
                .insert("chunk_index".into(), Value::Number(p.index as f64));
            rec.metadata
                .insert("chunk_count".into(), Value::Number(total as f64));
            rec
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use memd_engine::core::Core;

    fn chunk(book: &str, i: usize, text: &str) -> Record {
        let mut r = Core::new_record(Collection::Books, text.into(), 1);
        r.metadata.insert(
            "roampal_id".into(),
            Value::from(format!("{book}_chunk_{i}")),
        );
        r.metadata.insert("title".into(), Value::from("Notes"));
        r
    }

    #[test]
    fn overlaps_are_found_and_kept_once() {
        assert_eq!(overlap("abc def", "def ghi"), 3);
        assert_eq!(overlap("abc", "xyz"), 0);
        assert_eq!(overlap("café", "é!"), "é".len());
        let c = [chunk("b", 0, "one two three"), chunk("b", 1, "three four")];
        assert_eq!(joined(&c), "one two three four");
    }

    #[test]
    fn a_key_cut_in_two_is_redacted_and_clean_books_are_untouched() {
        let body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n".repeat(10);
        let first = format!("Deploy notes.\n-----BEGIN PRIVATE KEY-----\n{body}");
        let second = format!(
            "{}-----END PRIVATE KEY-----\nThe end.",
            &body[body.len() - 60..]
        );
        let clean = chunk("c", 0, "Nothing secret here.");
        let mut books = vec![chunk("k", 0, &first), chunk("k", 1, &second), clean.clone()];
        // Each half alone passes redaction: the split is the problem.
        assert!(redact::scrub(&second).found.is_empty());
        assert_eq!(redact_whole_books(&mut books), 1);
        assert!(books.iter().all(|b| !b.content.contains("MIIEvQIBADANBg")));
        assert!(books[0].content.starts_with("Deploy notes."));
        assert_eq!(books.last(), Some(&clean));
    }
}
