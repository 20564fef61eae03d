//! Whether two facts that read alike say different things: one is negated and the other not,
//! they name different numbers, or different identifiers.
//!
//! Owns the comparison the memory bank's near-duplicate check needs (issue 17: "Do not use
//! Python 3.11" came back as a duplicate of "Use Python 3.11", as did port 5432 of 6543). Embeddings
//! put such pairs above any usable duplicate threshold, so the words decide. Must never call
//! a restatement different (the same negations, numbers and identifiers in other words are the
//! same fact) and never look at anything but the two texts.

use std::collections::BTreeSet;

/// Words that turn a statement around. Counted by parity: "no X, never Y" and "X and Y" are
/// not compared word by word, only whether each side is negated overall.
const NEGATIONS: [&str; 18] = [
    "not",
    "no",
    "never",
    "none",
    "nothing",
    "nobody",
    "neither",
    "nor",
    "cannot",
    "can't",
    "don't",
    "doesn't",
    "didn't",
    "won't",
    "shouldn't",
    "mustn't",
    "isn't",
    "without",
];

/// Why `new` is not a restatement of `old`, if it is not.
pub fn differs(new: &str, old: &str) -> Option<&'static str> {
    let (a, b) = (words(new), words(old));
    if negated(&a) != negated(&b) {
        return Some("negation");
    }
    if numbers(&a) != numbers(&b) {
        return Some("number");
    }
    if identifiers(new) != identifiers(old) {
        return Some("identifier");
    }
    None
}

/// Lower-cased words with surrounding punctuation trimmed (`3.11,` → `3.11`).
fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '\''))
                .to_lowercase()
                .replace('\u{2019}', "'")
        })
        .filter(|w| !w.is_empty())
        .collect()
}

fn negated(words: &[String]) -> bool {
    words
        .iter()
        .filter(|w| NEGATIONS.contains(&w.as_str()) || w.ends_with("n't"))
        .count()
        % 2
        == 1
}

/// Every word with a digit in it (`3.11`, `5432`, `v2`, `16gb`).
fn numbers(words: &[String]) -> BTreeSet<&str> {
    words
        .iter()
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()))
        .map(|w| w.trim_start_matches('v'))
        .collect()
}

/// Code-shaped words, case kept: anything in backticks, and words with `_`, `/`, `:` or an
/// inner `.` or `-` between letters (`db/migrations`, `make_release`, `foo.rs`, `rate-limit`).
fn identifiers(text: &str) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    for w in text.split(|c: char| c.is_whitespace() || c == '`') {
        let w = w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
        let inner = w.char_indices().skip(1).any(|(i, c)| {
            matches!(c, '_' | '/' | ':')
                || (matches!(c, '.' | '-')
                    && w[i + 1..].starts_with(|n: char| n.is_alphabetic())
                    && w[..i].ends_with(|p: char| p.is_alphabetic()))
        });
        if inner {
            out.insert(w.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reported_contradictions_differ() {
        assert_eq!(
            differs("Do not use Python 3.11", "Use Python 3.11"),
            Some("negation")
        );
        assert_eq!(
            differs(
                "The database listens on port 6543",
                "The database listens on port 5432"
            ),
            Some("number")
        );
        assert_eq!(
            differs("You must never run make deploy", "You must run make deploy"),
            Some("negation")
        );
        assert_eq!(
            differs("Don't push to main", "Push to main"),
            Some("negation")
        );
        assert_eq!(
            differs(
                "Migrations live in db/migrations",
                "Migrations live in db/schema"
            ),
            Some("identifier")
        );
        assert_eq!(
            differs("Run `make release` to ship", "Run `make deploy` to ship"),
            Some("identifier")
        );
    }

    #[test]
    fn restatements_are_the_same_fact() {
        for (a, b) in [
            (
                "The user's name is Ada Lovelace",
                "The user is called Ada Lovelace",
            ),
            (
                "The project uses PostgreSQL 16 for storage",
                "The project stores its data in PostgreSQL 16",
            ),
            (
                "User wants concise answers without preamble",
                "The user wants concise answers, no preamble",
            ),
            ("Use Python 3.11.", "Python 3.11 is what we use"),
            (
                "Never commit to main; open a pull request",
                "Do not commit directly to main, open a pull request instead",
            ),
            ("Ship v2 by March", "Ship 2 by March"),
        ] {
            assert_eq!(differs(a, b), None, "{a} / {b}");
        }
    }
}
