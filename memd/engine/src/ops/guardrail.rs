//! What a memory forbids, for the learned guardrails: the command lines it names as the object
//! of an explicit prohibition ("Never run `cargo clean` here", "Do not run make deploy from a
//! laptop"), one per sentence, at most [`MAX_GUARDED`] per memory.
//!
//! Owns reading prohibitions out of a memory's text and matching a command line against them.
//! Pure. Must never turn a mention into a rule: a sentence that only names a command, says it
//! failed or broke something ("We lost an hour because pytest …"), lists several commands
//! ("never run git status, git commit, cargo test … without asking") or names a bare ubiquitous
//! program (`git`, `cd`) guards nothing, and a memory that forbids more than [`MAX_GUARDED`]
//! commands reads as a blanket policy, not a lesson, and guards none.

use crate::command::{is_ubiquitous, tokens};

/// Commands one memory may guard at most.
pub const MAX_GUARDED: usize = 3;
/// Command words a prohibition's object may have before it reads as prose.
const MAX_WORDS: usize = 5;

/// Phrases that forbid running what follows them.
const PROHIBITIONS: &[&str] = &[
    "never run",
    "never ever run",
    "must never run",
    "should never run",
    "don't run",
    "do not run",
    "must not run",
    "should not run",
    "shouldn't run",
    "avoid running",
    "never use",
    "don't use",
    "do not use",
    "never execute",
    "do not execute",
    "don't execute",
    "never invoke",
];

/// Words that end a prohibition's object: what follows is its circumstance, not the command.
const STOP: &[&str] = &[
    "here",
    "there",
    "in",
    "on",
    "outside",
    "inside",
    "without",
    "with",
    "unless",
    "before",
    "after",
    "again",
    "because",
    "since",
    "from",
    "as",
    "when",
    "while",
    "if",
    "it",
    "this",
    "that",
    "for",
    "anywhere",
    "directly",
    "locally",
    "manually",
    "against",
    "during",
    "until",
    "to",
    "the",
    "a",
    "an",
    "at",
    "by",
    "unattended",
    "anymore",
    "ever",
    "any",
    "all",
];
/// Words that join a list of commands.
const JOINERS: [&str; 4] = ["or", "and", "nor", "&"];

/// One forbidden command line: its words (`git`, `clean`) and the options it names (`-fdx`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    pub words: Vec<String>,
    pub flags: Vec<String>,
}

impl Forbidden {
    /// The command as the memory named it, for the reason shown to the user.
    pub fn shown(&self) -> String {
        self.words
            .iter()
            .chain(self.flags.iter())
            .cloned()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether `command` (whose signature tokens are `sig`) is the forbidden command line: the
    /// same program and subcommand, and every further word and option the memory named.
    pub fn matches(&self, sig: &[String], command: &str) -> bool {
        let n = sig.len().min(self.words.len());
        if n == 0 || sig[..n] != self.words[..n] {
            return false;
        }
        let line = tokens(command);
        let lower = command.to_lowercase();
        let raw: Vec<&str> = lower.split_whitespace().collect();
        self.words[n..].iter().all(|w| line.contains(w))
            && self.flags.iter().all(|f| raw.contains(&f.as_str()))
    }
}

/// The commands `content` forbids, or none when it forbids more than [`MAX_GUARDED`].
pub fn forbidden(content: &str) -> Vec<Forbidden> {
    let text = content.replace(['\u{2019}', '\u{2018}'], "'");
    let mut out: Vec<Forbidden> = Vec::new();
    for sentence in sentences(&text) {
        if let Some(f) = prohibition(&sentence.to_lowercase())
            && !out.contains(&f)
        {
            out.push(f);
        }
    }
    if out.len() > MAX_GUARDED {
        return Vec::new();
    }
    out
}

/// Sentences: split at `!`, `?`, `;`, new lines and a `.` that ends a word (not the one in
/// `build.prod` or `./x`).
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let end = matches!(c, '!' | '?' | ';' | '\n')
            || (c == '.' && chars.peek().is_none_or(|n| n.is_whitespace()));
        if end {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

/// The command one sentence forbids: the words right after a prohibition phrase, up to the
/// first word of circumstance, when they are one command and not a list.
fn prohibition(sentence: &str) -> Option<Forbidden> {
    let start = PROHIBITIONS
        .iter()
        .filter_map(|p| {
            sentence.match_indices(p).find_map(|(at, _)| {
                let before = sentence[..at].chars().next_back();
                before
                    .is_none_or(|b| !b.is_alphanumeric())
                    .then_some(at + p.len())
            })
        })
        .min()?;
    let object = sentence[start..].trim_start();
    // A quoted command (`cargo clean`) is exactly what is between the backticks.
    if let Some(rest) = object.strip_prefix('`') {
        let end = rest.find('`')?;
        let after = rest[end + 1..].trim_start();
        if after.starts_with([',', '/']) && lists_more(&after[1..]) || joins_more(after) {
            return None;
        }
        return command_of(rest[..end].split_whitespace());
    }
    let mut words = Vec::new();
    let mut tail = "";
    let mut rest = object;
    while let Some(w) = rest.split_whitespace().next() {
        let at = rest.find(w).unwrap_or(0);
        rest = &rest[at + w.len()..];
        let bare = w.trim_matches(|c: char| "\"'()".contains(c));
        let clean = bare.trim_end_matches([',', ':']);
        if STOP.contains(&clean) || JOINERS.contains(&clean) {
            tail = if JOINERS.contains(&clean) { w } else { "" };
            break;
        }
        words.push(clean.to_string());
        if clean.len() != bare.len() {
            // `cargo clean, it …` ends the object; `git status, git commit, …` is a list.
            if bare.ends_with(',') && lists_more(rest) {
                return None;
            }
            break;
        }
    }
    if !tail.is_empty() && lists_more(rest) {
        return None;
    }
    command_of(words.iter().map(String::as_str))
}

/// After a `,` or a joiner: another command follows (not a clause about the first one).
fn lists_more(rest: &str) -> bool {
    rest.split_whitespace()
        .next()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .is_some_and(|w| !w.is_empty() && !STOP.contains(&w) && !PRONOUNS.contains(&w))
}

fn joins_more(after: &str) -> bool {
    let mut it = after.split_whitespace();
    it.next().is_some_and(|w| JOINERS.contains(&w))
        && lists_more(&after[after.find(' ').unwrap_or(0)..])
}

/// Words that start a clause about the command rather than another command.
const PRONOUNS: [&str; 8] = ["it", "this", "that", "they", "we", "which", "its", "you"];

/// The command named by `words`: at least one command word, options kept apart.
fn command_of<'a>(words: impl Iterator<Item = &'a str>) -> Option<Forbidden> {
    let mut f = Forbidden {
        words: Vec::new(),
        flags: Vec::new(),
    };
    for w in words {
        if w.starts_with('-') && w.len() > 1 {
            f.flags.push(w.to_string());
        } else {
            f.words.extend(tokens(w));
        }
    }
    let specific = match f.words.as_slice() {
        [] => false,
        [one] => !is_ubiquitous(one),
        more => more.len() <= MAX_WORDS,
    };
    specific.then_some(f)
}

#[cfg(test)]
#[path = "guardrail_tests.rs"]
mod tests;
