//! Whether two facts that read alike say different things: one is negated and the other not,
//! one uses a word the other has its opposite of (enable/disable, before/after, works/fails),
//! the two things around an ordering word are swapped ("X is faster than Y" / "Y is faster
//! than X"), they name different numbers, or different identifiers.
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

/// Opposite words, each side with its forms (none of them a negation word: `never` and `no`
/// already count there). A fact using one side and its near duplicate the
/// other says the opposite (issue 37: six of nine such pairs were merged as duplicates).
const OPPOSITES: &[(&[&str], &[&str])] = &[
    (
        &["enable", "enables", "enabled", "enabling"],
        &["disable", "disables", "disabled", "disabling"],
    ),
    (&["true"], &["false"]),
    (&["before"], &["after"]),
    (
        &["work", "works", "worked", "working"],
        &["fail", "fails", "failed", "failing", "broken", "breaks"],
    ),
    (&["safe"], &["unsafe"]),
    (
        &["allow", "allows", "allowed"],
        &["deny", "denies", "denied", "forbid", "forbids", "forbidden"],
    ),
    (
        &["pass", "passes", "passed", "passing"],
        &["fail", "fails", "failed", "failing"],
    ),
    (&["on"], &["off"]),
    (
        &["include", "includes", "included"],
        &["exclude", "excludes", "excluded"],
    ),
    (
        &["increase", "increases", "increased"],
        &["decrease", "decreases", "decreased"],
    ),
    (&["faster", "quicker"], &["slower"]),
    (
        &["more", "higher", "larger", "bigger", "better"],
        &["less", "fewer", "lower", "smaller", "worse"],
    ),
    (&["required", "mandatory"], &["optional"]),
    (&["sync", "synchronous"], &["async", "asynchronous"]),
    (&["valid"], &["invalid"]),
    (&["supported"], &["unsupported"]),
    (&["secure"], &["insecure"]),
    (&["stable"], &["unstable"]),
];

/// Words that order two things: the words on each side of the first one are compared.
/// `before` and `after` are one class, so "A before B" and "B after A" compare as swapped
/// (and their opposite words undo the swap: the same fact).
const ORDERING: &[&[&str]] = &[
    &["before", "after"],
    &["than"],
    &["over"],
    &["instead"],
    &["rather"],
];

/// Words too common to tell which thing stands on which side of an ordering word.
const FILLER: &[&str] = &[
    "a", "an", "the", "is", "are", "was", "be", "to", "of", "for", "in", "on", "and", "or", "it",
    "its", "we", "you", "should", "must", "always", "do", "does", "use", "than", "much",
];

/// Why `new` is not a restatement of `old`, if it is not. Turnarounds count by parity, so
/// two that cancel ("not safe" / "unsafe", "A before B" / "B after A") are the same fact.
pub fn differs(new: &str, old: &str) -> Option<&'static str> {
    let (a, b) = (words(new), words(old));
    let flips = [
        (negated(&a) != negated(&b), "negation"),
        (swapped(&a, &b), "order"),
    ]
    .into_iter()
    .chain(
        OPPOSITES
            .iter()
            .map(|pair| (opposite(pair, &a, &b), "opposite")),
    );
    let (mut odd, mut first) = (false, None);
    for (_, why) in flips.filter(|(f, _)| *f) {
        odd = !odd;
        first = first.or(Some(why));
    }
    if odd {
        return first;
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

/// Which side of `pair` the words use: `Some(false)` the first, `Some(true)` the second,
/// `None` neither or both.
fn side(pair: &(&[&str], &[&str]), words: &[String]) -> Option<bool> {
    let has = |forms: &[&str]| words.iter().any(|w| forms.contains(&w.as_str()));
    match (has(pair.0), has(pair.1)) {
        (true, false) => Some(false),
        (false, true) => Some(true),
        _ => None,
    }
}

fn opposite(pair: &(&[&str], &[&str]), a: &[String], b: &[String]) -> bool {
    matches!((side(pair, a), side(pair, b)), (Some(x), Some(y)) if x != y)
}

/// The content words before and after the first word of `class` in `words`.
fn sides<'a>(class: &[&str], words: &'a [String]) -> Option<(Vec<&'a str>, Vec<&'a str>)> {
    let at = words.iter().position(|w| class.contains(&w.as_str()))?;
    let content = |ws: &'a [String]| -> Vec<&'a str> {
        ws.iter()
            .map(String::as_str)
            .filter(|w| !FILLER.contains(w))
            .collect()
    };
    Some((content(&words[..at]), content(&words[at + 1..])))
}

/// Some thing moved from before an ordering word to after it, and another the other way.
fn swapped(a: &[String], b: &[String]) -> bool {
    ORDERING.iter().any(|class| {
        let (Some((la, ra)), Some((lb, rb))) = (sides(class, a), sides(class, b)) else {
            return false;
        };
        let only = |w: &&str, here: &[&str], there: &[&str]| here.contains(w) && !there.contains(w);
        let right = la.iter().any(|w| !ra.contains(w) && only(w, &rb, &lb));
        let left = ra.iter().any(|w| !la.contains(w) && only(w, &lb, &rb));
        right && left
    })
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

    /// Issue 37's families beside the earlier ones: each pair reads alike and says the
    /// opposite, so it must never be merged as a duplicate.
    #[test]
    fn contradicting_pairs_of_every_family_differ() {
        for (new, old, why) in [
            (
                "Enable caching in staging",
                "Disable caching in staging",
                "opposite",
            ),
            (
                "The retry flag is disabled by default",
                "The retry flag is enabled by default",
                "opposite",
            ),
            (
                "strict_mode is true in production",
                "strict_mode is false in production",
                "opposite",
            ),
            (
                "Run migrations before deploy",
                "Run migrations after deploy",
                "opposite",
            ),
            (
                "The build works on ARM runners",
                "The build fails on ARM runners",
                "opposite",
            ),
            (
                "The integration tests pass on Windows",
                "The integration tests fail on Windows",
                "opposite",
            ),
            (
                "This endpoint is safe to call twice",
                "This endpoint is unsafe to call twice",
                "opposite",
            ),
            (
                "Postgres is faster than MySQL for our reads",
                "MySQL is faster than Postgres for our reads",
                "order",
            ),
            (
                "Deploy the API before the worker",
                "Deploy the worker before the API",
                "order",
            ),
            (
                "Prefer tabs over spaces in Makefiles",
                "Prefer spaces over tabs in Makefiles",
                "order",
            ),
            (
                "Use yarn instead of npm here",
                "Use npm instead of yarn here",
                "order",
            ),
            (
                "Caching is on in staging",
                "Caching is off in staging",
                "opposite",
            ),
            (
                "Logging is synchronous in the worker",
                "Logging is asynchronous in the worker",
                "opposite",
            ),
            ("Do not use Python 3.11", "Use Python 3.11", "negation"),
            (
                "The database listens on port 6543",
                "The database listens on port 5432",
                "number",
            ),
            (
                "Migrations live in db/migrations",
                "Migrations live in db/schema",
                "identifier",
            ),
        ] {
            assert_eq!(differs(new, old), Some(why), "{new} / {old}");
            assert_eq!(differs(old, new), Some(why), "{old} / {new}");
        }
    }

    /// Two turnarounds cancel: these say the same thing and must still merge.
    #[test]
    fn turnarounds_that_cancel_and_true_near_duplicates_are_the_same_fact() {
        for (a, b) in [
            (
                "Run migrations before deploy",
                "Deploy after running migrations",
            ),
            (
                "Postgres is faster than MySQL",
                "MySQL is slower than Postgres",
            ),
            (
                "This endpoint is not safe to retry",
                "This endpoint is unsafe to retry",
            ),
            (
                "Don't disable caching in staging",
                "Enable caching in staging",
            ),
            (
                "Caching is enabled in staging",
                "Staging has caching enabled",
            ),
            (
                "The build works on ARM runners",
                "On ARM runners the build works",
            ),
            (
                "Set strict_mode to true in production",
                "strict_mode must be true in production",
            ),
            (
                "Postgres is faster than MySQL for reads",
                "For reads, Postgres is faster than MySQL",
            ),
            (
                "Run the linter before every commit",
                "Before every commit, run the linter",
            ),
            (
                "Use yarn instead of npm in this repo",
                "In this repo use yarn instead of npm",
            ),
        ] {
            assert_eq!(differs(a, b), None, "{a} / {b}");
            assert_eq!(differs(b, a), None, "{b} / {a}");
        }
    }
}
