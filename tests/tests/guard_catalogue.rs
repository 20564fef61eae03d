//! The guard's catalogue: `tests/data/guard-catalogue.tsv` lists what the static rules of
//! `memd-guard` must answer, one action per line: `expected<TAB>rule-or-dash<TAB>kind<TAB>input`.
//! `expected` is allow, ask or deny; the rule is the one that must decide (`-` for allow);
//! `kind` is shell (input: a command line), read (input: a path the agent reads) or mcp (input:
//! `server tool`, the server possibly empty); `⏎` in an input stands for a newline; lines
//! starting with `#` are comments. Every row is assessed with the default policy plus every
//! opt-in rule switched to `ask`, a confusion table is printed, and the test fails on any
//! mismatch, a false denial (expected allow/ask, got deny) or a missed catastrophe (expected
//! deny, got anything else), after printing every mismatch. The tally per rule (rows answered
//! at their expected level / rows) is printed too: run with `--nocapture` to read it.

use memd_guard::{Action, Level, Policy, RULES, assess};

const CATALOGUE: &str = include_str!("../data/guard-catalogue.tsv");

struct Row<'a> {
    line: usize,
    expected: Level,
    rule: Option<&'a str>,
    kind: &'a str,
    input: String,
}

fn rows() -> Vec<Row<'static>> {
    let mut out = Vec::new();
    for (i, line) in CATALOGUE.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.splitn(4, '\t').collect();
        let [expected, rule, kind, input] = fields[..] else {
            panic!("line {}: expected 4 tab-separated fields: {line}", i + 1);
        };
        let expected = Level::parse(expected)
            .unwrap_or_else(|| panic!("line {}: unknown level {expected:?}", i + 1));
        let rule = (rule != "-").then_some(rule);
        if let Some(r) = rule {
            assert!(
                RULES.iter().any(|k| k.name == r),
                "line {}: unknown rule {r}",
                i + 1
            );
        }
        assert_eq!(
            rule.is_none(),
            expected == Level::Allow,
            "line {}: allow rows name no rule",
            i + 1
        );
        assert!(
            matches!(kind, "shell" | "read" | "mcp"),
            "line {}: unknown kind {kind}",
            i + 1
        );
        out.push(Row {
            line: i + 1,
            expected,
            rule,
            kind,
            input: input.replace('⏎', "\n"),
        });
    }
    out
}

/// The policy the catalogue is written for: defaults, with the opt-in rules raised to `ask`.
fn catalogue_policy() -> Policy {
    let mut p = Policy::default();
    for r in RULES.iter().filter(|r| r.default == Level::Allow) {
        p.set(r.name, Level::Ask).unwrap();
    }
    p
}

fn index(l: Level) -> usize {
    match l {
        Level::Allow => 0,
        Level::Ask => 1,
        Level::Deny => 2,
    }
}

#[test]
fn catalogue_matches_the_static_rules() {
    let policy = catalogue_policy();
    let rows = rows();
    let mut table = [[0usize; 3]; 3];
    let mut mismatches = Vec::new();
    // Per rule that must decide: (rows, rows answered at the expected level).
    let mut families: Vec<(&str, usize, usize)> = Vec::new();
    let (mut false_denials, mut missed_catastrophes) = (0, 0);
    for row in &rows {
        let action = match row.kind {
            "shell" => Action::Shell {
                command: &row.input,
            },
            "read" => Action::ReadFile { path: &row.input },
            _ => {
                let (server, tool) = row
                    .input
                    .split_once(' ')
                    .unwrap_or((row.input.as_str(), ""));
                Action::Mcp { server, tool }
            }
        };
        let v = assess(&action, &policy);
        table[index(row.expected)][index(v.level)] += 1;
        if let Some(rule) = row.rule {
            let k = match families.iter().position(|f| f.0 == rule) {
                Some(k) => k,
                None => {
                    families.push((rule, 0, 0));
                    families.len() - 1
                }
            };
            families[k].1 += 1;
            families[k].2 += usize::from(v.level == row.expected);
        }
        if row.expected != Level::Deny && v.level == Level::Deny {
            false_denials += 1;
        }
        if row.expected == Level::Deny && v.level != Level::Deny {
            missed_catastrophes += 1;
        }
        if v.level != row.expected || v.rule != row.rule {
            mismatches.push(format!(
                "line {}: {} {:?}\n    expected {} {}, got {} {} ({})",
                row.line,
                row.kind,
                row.input,
                row.expected,
                row.rule.unwrap_or("-"),
                v.level,
                v.rule.unwrap_or("-"),
                v.reason
            ));
        }
    }

    println!("guard catalogue: {} rows", rows.len());
    println!(
        "{:>16} {:>7} {:>7} {:>7}",
        "expected \\ got", "allow", "ask", "deny"
    );
    for (name, counts) in ["allow", "ask", "deny"].iter().zip(table) {
        println!(
            "{name:>16} {:>7} {:>7} {:>7}",
            counts[0], counts[1], counts[2]
        );
    }
    println!("per rule, rows answered at their expected level:");
    for (rule, rows, hit) in &families {
        println!("{rule:>20} {hit:>4}/{rows:<4}");
    }
    println!("false denials: {false_denials}");
    println!("missed catastrophes: {missed_catastrophes}");
    for m in &mismatches {
        println!("{m}");
    }

    let shell_rows = rows.iter().filter(|r| r.kind == "shell").count();
    assert!(
        rows.len() >= 200 && shell_rows >= 200,
        "the catalogue needs at least 200 shell rows"
    );
    assert_eq!(false_denials, 0, "false denials");
    assert_eq!(missed_catastrophes, 0, "missed catastrophes");
    assert!(
        mismatches.is_empty(),
        "{} rows do not match",
        mismatches.len()
    );
}

/// Real shell history: which lines the default policy would question. Not a gate (a history
/// can hold a real catastrophe) but the false-positive measurement: point
/// `MEMD_GUARD_HISTORY` at a bash or zsh history file, or a directory of them, and run with
/// `--ignored --nocapture`. Prints the distinct commands read, the count per rule at its
/// default level and every flagged line, to be judged by eye.
#[test]
#[ignore = "a measurement on history files the user provides: set MEMD_GUARD_HISTORY"]
fn shell_history_decisions_at_the_default_policy() {
    let Some(path) = std::env::var_os("MEMD_GUARD_HISTORY") else {
        panic!("set MEMD_GUARD_HISTORY to a history file or a directory of them");
    };
    let path = std::path::PathBuf::from(path);
    let files: Vec<std::path::PathBuf> = if path.is_dir() {
        let mut v: Vec<_> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    } else {
        vec![path.clone()]
    };
    let mut commands: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        for c in history_commands(&String::from_utf8_lossy(&bytes)) {
            if seen.insert(c.clone()) {
                commands.push(c);
            }
        }
    }
    assert!(!commands.is_empty(), "no commands in {}", path.display());
    let policy = Policy::default();
    let mut per_rule: Vec<(&str, Level, usize)> = Vec::new();
    let mut flagged = Vec::new();
    for c in &commands {
        let v = assess(&Action::Shell { command: c }, &policy);
        let Some(rule) = v.rule.filter(|_| v.level != Level::Allow) else {
            continue;
        };
        match per_rule.iter_mut().find(|r| r.0 == rule) {
            Some(r) => r.2 += 1,
            None => per_rule.push((rule, v.level, 1)),
        }
        flagged.push(format!("{} {rule}: {c}", v.level));
    }
    println!(
        "{} files, {} distinct commands, {} questioned ({:.2} %)",
        files.len(),
        commands.len(),
        flagged.len(),
        100.0 * flagged.len() as f64 / commands.len() as f64
    );
    for (rule, level, n) in &per_rule {
        println!("{rule:>20} {level:>5} {n}");
    }
    for f in &flagged {
        println!("  {f}");
    }
}

/// The commands of a bash or zsh history: zsh's `: <time>:<secs>;` prefixes and bash's `#<time>`
/// lines removed, lines ending in `\` joined with the next.
fn history_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let line = if cur.is_empty() {
            match line.strip_prefix(": ").and_then(|l| l.split_once(';')) {
                Some((stamp, cmd)) if stamp.bytes().all(|b| b.is_ascii_digit() || b == b':') => cmd,
                _ => line,
            }
        } else {
            line
        };
        if cur.is_empty() && line.starts_with('#') && line[1..].bytes().all(|b| b.is_ascii_digit())
        {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            cur.push_str(head);
            cur.push('\n');
            continue;
        }
        cur.push_str(line);
        let c = std::mem::take(&mut cur);
        if !c.trim().is_empty() {
            out.push(c.trim().to_string());
        }
    }
    out
}
