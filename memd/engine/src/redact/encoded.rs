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
//! - base64url runs (`-` and `_` in place of `+` and `/`: JWT segments, URL-safe tokens) are
//!   found separately, must contain a `-` or `_`, and are decoded with their own alphabet;
//! - a run is decoded in [`CHUNK`]-character pieces that overlap by [`OVERLAP`], so a secret
//!   deep inside a large encoded file is found (issue 37: decoding stopped at 8 KiB) while no
//!   decode holds more than one piece; only decoded text (UTF-8 without control characters
//!   other than tabs and line breaks) is searched: hashes, binary blobs and identifiers decode
//!   to bytes that fail that test at once, and the first piece that fails ends the run's scan.

use super::{Alphabet, SecretKind, compile, decode_base64_prefix, find_spans};
use regex::Regex;
use std::ops::Range;
use std::sync::LazyLock;

/// Characters decoded at once: 6 KiB of text (a multiple of 4, so every piece starts on a
/// whole base64 quantum).
const CHUNK: usize = 8 * 1024;
/// Characters each piece shares with the next (a multiple of 4): longer than any secret the
/// rules know, so one cut in two at a piece boundary is whole in the next piece.
const OVERLAP: usize = 1024;

/// Base64 runs of `text` whose decoded text holds a secret.
pub(super) fn encoded_secrets(text: &str) -> Vec<(Range<usize>, SecretKind)> {
    static RUN: LazyLock<Regex> = LazyLock::new(|| {
        compile(r"[A-Za-z0-9][A-Za-z0-9+/]{19,}(?:\r?\n[A-Za-z0-9+/]{4,})*={0,2}")
    });
    static URL_RUN: LazyLock<Regex> = LazyLock::new(|| {
        compile(r"[A-Za-z0-9][A-Za-z0-9_\-]{19,}(?:\r?\n[A-Za-z0-9_\-]{4,})*={0,2}")
    });
    let standard = RUN
        .find_iter(text)
        .filter(|run| holds_secret(run.as_str(), Alphabet::Standard));
    let url_safe = URL_RUN
        .find_iter(text)
        .filter(|run| run.as_str().contains(['-', '_']))
        .filter(|run| holds_secret(run.as_str(), Alphabet::UrlSafe));
    standard
        .chain(url_safe)
        .map(|run| (run.range(), SecretKind::EncodedSecret))
        .collect()
}

fn holds_secret(run: &str, alphabet: Alphabet) -> bool {
    let joined: Vec<u8> = run.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let mut start = 0;
    loop {
        let end = (start + CHUNK).min(joined.len());
        match piece_holds_secret(&decode_base64_prefix(&joined[start..end], alphabet)) {
            Some(true) => return true,
            // Not text: a binary blob or a hash, not an encoded file.
            None => return false,
            Some(false) if end == joined.len() => return false,
            Some(false) => start = end - OVERLAP,
        }
    }
}

/// `Some(found)` for decoded text, `None` for bytes that are not text.
fn piece_holds_secret(bytes: &[u8]) -> Option<bool> {
    // A piece may start and end inside a character.
    let lead = bytes
        .iter()
        .take(3)
        .take_while(|b| (0x80..0xC0).contains(*b))
        .count();
    let bytes = &bytes[lead..];
    let decoded = match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return None,
    };
    let is_text = !decoded
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'));
    is_text.then(|| decoded.len() >= 8 && !find_spans(decoded, false).is_empty())
}
