//! Tool evidence `[experimental]`: what the agent's commands did in each conversation, and
//! what that says about the memories its turn was shown.
//!
//! Owns, per conversation and in process memory only: the last result of each command (by a
//! digest of its text), this turn's tally (a command that failed before and passes now is a
//! fix; one that fails again is a repeat), and the words in play (commands' signatures, edited
//! files' names) for the rank boost. A turn's verdict leaves with its exchange at the stop
//! (`Exchange::evidence`); `context::unscored` turns it into an outcome only for an exchange
//! nobody scored. Must never write a command or a path anywhere (a restart forgets the
//! in-flight tally, nothing else), never grow without bound, and never override an outcome the
//! agent or the sidecar gave.

use proto::{Outcome, ToolCall, ToolKind};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

/// Places a memory naming something in play moves up in a prompt's ranking. Small on purpose:
/// it reorders near-ties among memories already above the relevance floor, it never lets in one
/// that is not.
pub const BOOST_PLACES: usize = 2;
/// Conversations tracked at once (the least recently active one is forgotten first).
const MAX_CONVERSATIONS: usize = 256;
/// Commands remembered per conversation (the oldest result is forgotten first).
const MAX_COMMANDS: usize = 64;
/// Words in play kept per conversation (the oldest first out).
const MAX_TERMS: usize = 12;
/// File names too common to say which file is meant alone (`src/lib.rs` still counts).
const GENERIC_FILES: [&str; 12] = [
    "main", "mod", "lib", "index", "init", "__init__", "utils", "util", "test", "tests", "config",
    "readme",
];

/// Programs whose operands are paths and text, not subcommands: `cd src` names no command.
const FILE_UTILITIES: [&str; 18] = [
    "cd", "ls", "cat", "echo", "grep", "rg", "find", "rm", "cp", "mv", "sed", "head", "tail",
    "mkdir", "touch", "less", "wc", "sort",
];

#[derive(Default)]
pub struct Evidence {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    tick: u64,
    convs: HashMap<String, Conversation>,
}

#[derive(Default)]
struct Conversation {
    active: u64,
    /// Command digest → did its last run fail.
    last_failed: HashMap<u64, bool>,
    order: VecDeque<u64>,
    tally: Tally,
    terms: VecDeque<String>,
}

/// What this turn's commands did so far.
#[derive(Debug, Default, Clone, PartialEq)]
struct Tally {
    fixes: u32,
    /// Commands that failed again this turn and have not passed since.
    failing_again: BTreeSet<u64>,
}

impl Tally {
    fn verdict(&self) -> Option<Outcome> {
        match (self.fixes > 0, self.failing_again.is_empty()) {
            (true, true) => Some(Outcome::Worked),
            (false, false) => Some(Outcome::Failed),
            // Nothing fixed and nothing repeated, or both: no signal.
            _ => None,
        }
    }
}

impl Evidence {
    /// A prompt starts a new turn of `conv`: the tally restarts, the history stays.
    pub fn new_turn(&self, conv: &str) {
        self.with(conv, |c| c.tally = Tally::default());
    }

    /// A tool finished. Shell commands count toward the verdict; commands and edited files
    /// both join the words in play.
    pub fn tool_result(&self, conv: &str, tool: &ToolCall, failed: bool) {
        let terms = terms_of(tool);
        let command = tool
            .command
            .as_deref()
            .filter(|_| tool.kind == ToolKind::Shell)
            .map(digest);
        self.with(conv, |c| {
            for t in terms {
                c.terms.retain(|x| *x != t);
                c.terms.push_back(t);
                if c.terms.len() > MAX_TERMS {
                    c.terms.pop_front();
                }
            }
            if let Some(d) = command {
                c.record_run(d, failed);
            }
        });
    }

    /// The verdict of `conv`'s current turn: worked (a failing command passed, none keeps
    /// failing), failed (a command failed again and nothing was fixed), or none.
    pub fn verdict(&self, conv: &str) -> Option<Outcome> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.convs.get(conv).and_then(|c| c.tally.verdict())
    }

    /// The words in play in `conv`, most recent last.
    pub fn terms(&self, conv: &str) -> Vec<String> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner
            .convs
            .get(conv)
            .map(|c| c.terms.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn with(&self, conv: &str, f: impl FnOnce(&mut Conversation)) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.tick += 1;
        let tick = inner.tick;
        if !inner.convs.contains_key(conv) && inner.convs.len() >= MAX_CONVERSATIONS {
            let oldest = inner
                .convs
                .iter()
                .min_by_key(|(_, c)| c.active)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                inner.convs.remove(&k);
            }
        }
        let c = inner.convs.entry(conv.to_string()).or_default();
        c.active = tick;
        f(c);
    }
}

impl Conversation {
    fn record_run(&mut self, command: u64, failed: bool) {
        let failed_before = self.last_failed.get(&command).copied();
        match (failed_before, failed) {
            (Some(true), true) => {
                self.tally.failing_again.insert(command);
            }
            (Some(true), false) => {
                self.tally.fixes += 1;
                self.tally.failing_again.remove(&command);
            }
            _ => {}
        }
        if self.last_failed.insert(command, failed).is_none() {
            self.order.push_back(command);
            if self.order.len() > MAX_COMMANDS
                && let Some(old) = self.order.pop_front()
            {
                self.last_failed.remove(&old);
            }
        }
    }
}

/// The same command whatever its spacing: `cargo  test` is `cargo test`.
fn digest(command: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for w in command.split_whitespace() {
        w.hash(&mut h);
    }
    h.finish()
}

/// What a tool event puts in play: a command's signatures (`make test`, `cargo clippy`; a
/// bare everyday program such as `ls` is too common to mean anything), an edited file's name
/// and its last two path components.
fn terms_of(tool: &ToolCall) -> Vec<String> {
    match tool.kind {
        ToolKind::Shell => tool
            .command
            .as_deref()
            .map(crate::command::signatures)
            .unwrap_or_default()
            .into_iter()
            .filter(|s| {
                let program = s.split(' ').next().unwrap_or_default();
                !FILE_UTILITIES.contains(&program)
                    && (s.contains(' ') || !crate::command::is_ubiquitous(s))
            })
            .collect(),
        ToolKind::Edit => tool.path.as_deref().map(file_terms).unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn file_terms(path: &str) -> Vec<String> {
    let parts: Vec<&str> = path
        .split(['/', '\\'])
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let Some(name) = parts.last() else {
        return Vec::new();
    };
    let stem = name.split('.').next().unwrap_or(name).to_lowercase();
    let mut out = Vec::new();
    if name.chars().count() >= 3 && !GENERIC_FILES.contains(&stem.as_str()) {
        out.push(name.to_string());
    }
    if let [.., dir, name] = parts.as_slice() {
        out.push(format!("{dir}/{name}"));
    }
    out
}

/// Whether `content` names one of `terms` as whole words (`make test` is not in `make tests`).
pub fn names_any(content: &str, terms: &[String]) -> bool {
    if terms.is_empty() {
        return false;
    }
    let words = crate::command::tokens(content);
    terms.iter().any(|t| {
        let t = crate::command::tokens(t);
        !t.is_empty() && words.windows(t.len()).any(|w| w == t.as_slice())
    })
}

/// `order` (best first) with each memory `boosted` says names something in play moved up
/// `BOOST_PLACES` places; the others keep their relative order.
pub fn boost<T>(order: Vec<T>, boosted: impl Fn(&T) -> bool) -> Vec<T> {
    let mut keyed: Vec<(f64, T)> = order
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let lift = if boosted(&t) {
                BOOST_PLACES as f64 + 0.5
            } else {
                0.0
            };
            (i as f64 - lift, t)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
    keyed.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(cmd: &str) -> ToolCall {
        ToolCall {
            kind: ToolKind::Shell,
            name: "Bash".into(),
            command: Some(cmd.into()),
            ..ToolCall::default()
        }
    }

    fn edit(path: &str) -> ToolCall {
        ToolCall {
            kind: ToolKind::Edit,
            name: "Edit".into(),
            path: Some(path.into()),
            ..ToolCall::default()
        }
    }

    #[test]
    fn a_failing_command_that_passes_is_a_fix_one_that_fails_again_a_repeat() {
        let e = Evidence::default();
        e.new_turn("c");
        e.tool_result("c", &shell("make test"), true);
        assert_eq!(e.verdict("c"), None, "a first failure says nothing yet");
        e.tool_result("c", &shell("make  test"), false);
        assert_eq!(e.verdict("c"), Some(Outcome::Worked));

        e.new_turn("c");
        assert_eq!(e.verdict("c"), None, "a new turn starts a new tally");
        e.tool_result("c", &shell("cargo build"), true);
        e.tool_result("c", &shell("cargo build"), true);
        assert_eq!(e.verdict("c"), Some(Outcome::Failed));
        e.tool_result("c", &shell("cargo build"), false);
        assert_eq!(e.verdict("c"), Some(Outcome::Worked), "fixed after all");
    }

    #[test]
    fn a_failure_from_an_earlier_turn_counts_and_mixed_turns_say_nothing() {
        let e = Evidence::default();
        e.new_turn("c");
        e.tool_result("c", &shell("make test"), true);
        e.tool_result("c", &shell("make lint"), true);
        e.new_turn("c");
        e.tool_result("c", &shell("make test"), false);
        e.tool_result("c", &shell("make lint"), true);
        assert_eq!(e.verdict("c"), None, "one fixed, one failing again");
        assert_eq!(e.verdict("other"), None);
    }

    #[test]
    fn terms_are_signatures_and_file_names_bounded() {
        let e = Evidence::default();
        e.tool_result("c", &shell("ls -la && cd src && make migrate"), false);
        e.tool_result(
            "c",
            &edit("/home/u/app/db/migrations/0042_users.sql"),
            false,
        );
        e.tool_result("c", &edit("/home/u/app/src/lib.rs"), false);
        assert_eq!(
            e.terms("c"),
            [
                "make migrate",
                "0042_users.sql",
                "migrations/0042_users.sql",
                "src/lib.rs"
            ]
        );
        for i in 0..40 {
            e.tool_result("c", &shell(&format!("tool{i} run")), false);
        }
        assert_eq!(e.terms("c").len(), MAX_TERMS);
        assert_eq!(e.terms("c").last().map(String::as_str), Some("tool39 run"));
    }

    #[test]
    fn memory_is_bounded() {
        let e = Evidence::default();
        for i in 0..(MAX_CONVERSATIONS + 10) {
            e.tool_result(&format!("c{i}"), &shell("make test"), true);
        }
        let inner = e.inner.lock().unwrap();
        assert_eq!(inner.convs.len(), MAX_CONVERSATIONS);
        assert!(!inner.convs.contains_key("c0"), "the oldest goes first");
        drop(inner);
        for i in 0..(MAX_COMMANDS + 5) {
            e.tool_result("x", &shell(&format!("step{i}")), true);
        }
        let inner = e.inner.lock().unwrap();
        assert_eq!(inner.convs["x"].last_failed.len(), MAX_COMMANDS);
    }

    #[test]
    fn names_any_matches_whole_words() {
        let terms = vec!["make test".to_string(), "0042_users.sql".to_string()];
        assert!(names_any("Run `make test` after docker compose up", &terms));
        assert!(names_any("see 0042_users.sql for the column", &terms));
        assert!(!names_any("run make tests", &terms));
        assert!(!names_any("anything", &[]));
    }

    #[test]
    fn boost_moves_a_named_memory_up_two_places_only() {
        let order = vec!["a", "b", "c", "d", "e", "f"];
        assert_eq!(
            boost(order.clone(), |x| *x == "e"),
            ["a", "b", "e", "c", "d", "f"]
        );
        assert_eq!(boost(order.clone(), |x| *x == "a"), order);
        assert_eq!(boost(order.clone(), |_| false), order);
        assert_eq!(
            boost(order, |x| *x == "b" || *x == "c"),
            ["b", "c", "a", "d", "e", "f"]
        );
    }
}
