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
