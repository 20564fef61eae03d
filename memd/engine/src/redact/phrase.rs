//! Judging secrets recognised by the words around them rather than by their own shape: a
//! password glued to or after a command's `-p` flag (`mysql -pS3cret`, `sshpass -p …`,
//! `docker login -p …`) and a password given in a sentence (`the password is Tr0ub4dor&3`,
//! `my password: hunter2`).
//!
//! Must never: redact a flag or a word of the sentence around the value, or panic on any text
//! (every offset returned is a char boundary: values end at ASCII bytes). Deliberate choices,
//! to keep prose and commands readable:
//! - `-p` means a password only after the commands where it does: `-p 8080` (ports) elsewhere is
//!   kept, and so is `mysql -p` alone (it prompts) and `mysql -p dbname`, which the regex never
//!   matches because a space after `-p` means "ask me".
//! - In a sentence, an unquoted value must look like a password: 5+ characters with a digit, a
//!   symbol or an inner capital (`the password is required` and `… is 8+ chars` are kept,
//!   `the password is hunter2` is not); a quoted one (`the password is "swordfish"`) only must
//!   not be a placeholder or a keyword.

use super::assignment::{is_keyword, is_placeholder};
use super::{Hit, SecretKind, group};
use regex::CaptureLocations;
use std::ops::Range;

/// A command's password argument (group 1): quoted values lose their quotes.
pub(super) fn command_password(text: &str, locs: &CaptureLocations, kind: SecretKind) -> Hit {
    let (range, _) = unquoted(text, group(locs, 1)?);
    let value = &text[range.clone()];
    let rejected = value.chars().count() < 3
        || value.starts_with('-')
        || is_placeholder(value)
        || is_keyword(value);
    (!rejected).then_some((range, kind))
}

/// The value of a password sentence (group 1), trailing sentence punctuation left out.
pub(super) fn sentence_password(text: &str, locs: &CaptureLocations, kind: SecretKind) -> Hit {
    let (mut range, quoted) = unquoted(text, group(locs, 1)?);
    if !quoted {
        let raw = &text[range.clone()];
        range.end = range.start
            + raw
                .trim_end_matches(['.', ',', ';', ':', '!', '?', ')'])
                .len();
    }
    let value = &text[range.clone()];
    // Unquoted, short values are counts and sizes (`the password is 8+ chars`); a backtick span
    // with spaces is a command (`the password: `pass show db``).
    let min_chars = if quoted { 3 } else { 5 };
    let command = text[..range.start].ends_with('`') && value.contains(char::is_whitespace);
    let rejected = command
        || value.chars().count() < min_chars
        || is_placeholder(value)
        || is_keyword(value)
        || (!quoted && !looks_like_password(value));
    (!rejected).then_some((range, kind))
}

/// The body of a value in `"…"`, `'…'`, `` `…` `` or `“…”`, or the value itself; and whether it
/// was quoted.
fn unquoted(text: &str, range: Range<usize>) -> (Range<usize>, bool) {
    let value = &text[range.clone()];
    for (open, close) in [("\"", "\""), ("'", "'"), ("`", "`"), ("“", "”")] {
        if value.len() >= open.len() + close.len()
            && value.starts_with(open)
            && value.ends_with(close)
        {
            return (range.start + open.len()..range.end - close.len(), true);
        }
    }
    (range, false)
}

/// A word of prose has none of a digit, a symbol or a capital after the first letter; a
/// password usually has one. Hyphenated descriptions (`2FA-protected`, `sha256-hashed`),
/// abbreviations (`e.g`) and paths (where the password is kept) are prose too.
fn looks_like_password(value: &str) -> bool {
    let described = value
        .rsplit_once('-')
        .is_some_and(|(_, last)| last.len() >= 3 && last.bytes().all(|b| b.is_ascii_lowercase()));
    let has = |f: fn(&char) -> bool| value.chars().any(|c| f(&c));
    let symbol = |c: &char| c.is_ascii_punctuation() && !"_-'.".contains(*c);
    let inner_capital = value.chars().skip(1).any(|c| c.is_ascii_uppercase());
    !described
        && !value.contains(['/', '\\'])
        && (has(char::is_ascii_digit) || has(symbol) || inner_capital)
}
