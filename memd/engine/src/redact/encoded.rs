//! Secrets inside base64: `echo QVdTX1NFQ1JFVF9BQ0NFU1NfS0VZPXdK… | base64 -d`, a Kubernetes
//! secret's `data:`, an encoded `.env` pasted into a prompt.
//!
//! Owns finding base64 runs whose decoded text holds a secret; the whole run is then redacted
//! (a marker inside base64 would leave the rest decodable). Must never: panic on any text,
//! recurse (decoded text is searched by the plain rules only), or cost more than a bounded
//! decode per run. The heuristic, deliberately narrow:
//! - a run is 20+ characters of the standard alphabet starting with a letter or digit (base64 of
//!   text never starts with `+` or `/`), optionally wrapped over lines (`base64` wraps at 76,
//!   a multiple of 4, so joined lines still decode);
//! - only its first [`MAX_ENCODED`] characters are decoded, and only decoded text (UTF-8 without
//!   control characters other than tabs and line breaks) is searched: hashes, binary blobs and
//!   identifiers decode to bytes that fail that test at once.

use super::{SecretKind, compile, decode_base64_prefix, find_spans};
use regex::Regex;
use std::ops::Range;
use std::sync::LazyLock;

/// Characters of one run decoded at most: 6 KiB of text, a large `.env` file.
const MAX_ENCODED: usize = 8 * 1024;

/// Base64 runs of `text` whose decoded text holds a secret.
pub(super) fn encoded_secrets(text: &str) -> Vec<(Range<usize>, SecretKind)> {
    static RUN: LazyLock<Regex> = LazyLock::new(|| {
        compile(r"[A-Za-z0-9][A-Za-z0-9+/]{19,}(?:\r?\n[A-Za-z0-9+/]{4,})*={0,2}")
    });
    RUN.find_iter(text)
        .filter(|run| holds_secret(run.as_str()))
        .map(|run| (run.range(), SecretKind::EncodedSecret))
        .collect()
}

fn holds_secret(run: &str) -> bool {
    let joined: String = run
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .take(MAX_ENCODED)
        .map(char::from)
        .collect();
    let bytes = decode_base64_prefix(&joined);
    let decoded = match std::str::from_utf8(&bytes) {
        Ok(s) => s,
        // A cut run may end inside a character.
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return false,
    };
    let is_text = !decoded
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'));
    is_text && decoded.len() >= 8 && !find_spans(decoded, false).is_empty()
}
