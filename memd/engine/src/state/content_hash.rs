//! The duplicate lookup's hash: of a memory's project and its whitespace-normalised content.
//!
//! Owns `scoped_hash`. Its values live in memory only (the duplicate lookup is rebuilt at every
//! open, exports and imports compare them within one run), yet must never change for a given
//! text: two spellings that differ only in whitespace are one memory.

use sha2::{Digest, Sha256};

/// Hash of the project and the whitespace-normalised content (exact-duplicate detection).
pub fn scoped_hash(project: Option<&str>, content: &str) -> u64 {
    let mut h = Sha256::new();
    if let Some(p) = project {
        // Global memories hash as before projects existed; a project prefix cannot collide
        // with content because of the NUL.
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    if is_normalised(content) {
        // Already words joined by single spaces: what the walk below would feed, in one go.
        // Feeding word by word cost an open more than SHA-256 itself (at 1M memories on one
        // core 0.88-1.05 s against 0.61-0.66 s in one go; bench/EVAL.md section 23).
        h.update(content.as_bytes());
    } else {
        for (i, word) in content.split_whitespace().enumerate() {
            if i > 0 {
                h.update(b" ");
            }
            h.update(word.as_bytes());
        }
    }
    let d = h.finalize();
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// Whether `text` is its own whitespace normal form: ASCII (so no Unicode spaces), no
/// whitespace but single spaces between words, none at either end.
fn is_normalised(text: &str) -> bool {
    let b = text.as_bytes();
    if b.first() == Some(&b' ') || b.last() == Some(&b' ') {
        return false;
    }
    let mut after_space = false;
    for &c in b {
        // `char::is_whitespace` on ASCII: space, \t, \n, \x0b, \x0c, \r.
        if !c.is_ascii() || matches!(c, b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
            return false;
        }
        let space = c == b' ';
        if space && after_space {
            return false;
        }
        after_space = space;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_hashes_are_the_word_walks_whatever_the_spacing() {
        // What every hash was before the one-go path for text already normalised.
        let walk = |project: Option<&str>, text: &str| {
            let mut h = Sha256::new();
            if let Some(p) = project {
                h.update(p.as_bytes());
                h.update([0u8]);
            }
            let words: Vec<&str> = text.split_whitespace().collect();
            h.update(words.join(" ").as_bytes());
            u64::from_le_bytes(h.finalize()[..8].try_into().unwrap())
        };
        let texts = [
            "plain words here",
            "",
            " ",
            "one",
            " leading",
            "trailing ",
            "two  spaces",
            "tab\there",
            "new\nline",
            "cr\r\nlf",
            "form\x0cfeed",
            "vertical\x0btab",
            "no\u{a0}break",
            "ideographic\u{3000}space",
            "caf\u{e9} au lait",
        ];
        for text in texts {
            for project in [None, Some("p1")] {
                assert_eq!(scoped_hash(project, text), walk(project, text), "{text:?}");
            }
        }
        assert_eq!(scoped_hash(None, "a  b\n"), scoped_hash(None, "a b"));
    }
}
