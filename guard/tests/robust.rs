//! The guard runs inside a hook on every tool call: whatever the input, it must answer, quickly,
//! without panicking. These tests feed it garbage and hostile shapes.

use std::time::{Duration, Instant};

use memd_guard::{Action, Level, MAX_INPUT, Policy, RULES, assess, commands, words};

/// A small deterministic generator (xorshift64*), so failures reproduce without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn strict_policy() -> Policy {
    let mut p = Policy::default();
    for r in RULES {
        p.set(r.name, Level::Ask).unwrap();
    }
    p
}

fn exercise(input: &str, policies: &[Policy]) {
    for p in policies {
        let _ = assess(&Action::Shell { command: input }, p);
        let _ = assess(&Action::ReadFile { path: input }, p);
        let mut mid = input.len() / 2;
        while !input.is_char_boundary(mid) {
            mid -= 1;
        }
        let (server, tool) = input.split_at(mid);
        let _ = assess(&Action::Mcp { server, tool }, p);
    }
    let _ = words(input);
    let _ = commands(input);
}

#[test]
fn random_bytes_never_panic() {
    let policies = [Policy::default(), strict_policy()];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let len = rng.below(600);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        exercise(&String::from_utf8_lossy(&bytes), &policies);
    }
}

#[test]
fn random_shell_shaped_text_never_panics() {
    // Mostly the characters the tokenizer and the rules give meaning to.
    const PIECES: &[&str] = &[
        "'",
        "\"",
        "\\",
        "$",
        "(",
        ")",
        "`",
        "{",
        "}",
        "|",
        "&",
        ";",
        "<",
        ">",
        " ",
        "\n",
        "\t",
        "*",
        "~",
        "/",
        "-",
        "-rf",
        "rm",
        "sh",
        "-c",
        "$(",
        "<(",
        "<<",
        "EOF",
        "$'",
        "\\x",
        "${",
        "IFS",
        "xargs",
        "sudo",
        "env",
        "-S",
        "git",
        "push",
        "-f",
        "main",
        "psql",
        "DROP",
        "DATABASE",
        "curl",
        "bash",
        ".env",
        "@",
        "=",
        ":",
        "find",
        "-delete",
        "-exec",
        ";",
        "+",
        "chmod",
        "777",
        "dd",
        "of=/dev/sda",
        "for",
        "in",
        "do",
        "cd",
        "..",
        "é",
        "𝄞",
        "\u{0}",
        "function",
        "()",
        "[",
        "]",
        "?",
        "!",
        "#",
        "python",
        "-e",
        "system(",
        "rmtree(",
        "ssh",
        "eval",
        "watch",
        "flock",
    ];
    let policies = [Policy::default(), strict_policy()];
    let mut rng = Rng(42);
    for _ in 0..4000 {
        let n = rng.below(80);
        let s: String = (0..n).map(|_| PIECES[rng.below(PIECES.len())]).collect();
        exercise(&s, &policies);
    }
}

/// Hostile shapes that stress nesting, backtracking and quadratic corners, each far beyond
/// [`MAX_INPUT`]. Each must finish well within a hook's budget even in a debug build.
#[test]
fn hostile_inputs_stay_fast() {
    let big = MAX_INPUT + 1000;
    let repeat = |unit: &str| unit.repeat(big / unit.len() + 1);
    let mut nested_sh = String::from("rm -rf /");
    for _ in 0..40 {
        nested_sh = format!("sh -c {}", shell_quote(&nested_sh));
        if nested_sh.len() > big {
            break;
        }
    }
    let cases: Vec<(&str, String)> = vec![
        ("open substitutions", repeat("$(")),
        ("open parens", repeat("(")),
        ("open braces", repeat("{")),
        ("brace word", format!("rm -rf {}", repeat("{a,"))),
        ("quotes", repeat("'\"")),
        ("backticks", repeat("`")),
        ("pipes", repeat("a|")),
        ("xargs pipeline", repeat("echo / | xargs rm -r | ")),
        (
            "echo into shells",
            format!(
                "echo '{}' {}",
                "rm -rf /tmp/x; ".repeat(400),
                "| sh ".repeat(2000)
            ),
        ),
        ("heredocs", repeat("cat <<EOF\n")),
        ("fork bomb shapes", repeat(":(){ ")),
        ("function shapes", repeat("f() (")),
        (
            "assignments",
            (0..5000).map(|i| format!("v{i}=/; ")).collect::<String>() + "rm -rf $v1",
        ),
        (
            "for loops",
            repeat("for d in / ~ /usr; do rm -rf $d; done; "),
        ),
        ("deep sh -c", nested_sh),
        ("dollar quotes", repeat("$'\\x")),
        ("globs", format!("rm -rf /{}", repeat("*?["))),
        ("long word", "a".repeat(big)),
        ("redirections", repeat("> /dev/null ")),
        ("many commands", repeat("rm -rf ./a; ")),
        (
            "interpreter code",
            format!("python -c \"{}\"", repeat("system('x') ")),
        ),
        ("sql", format!("psql -c \"{}\"", repeat("DROP SCHEMA x "))),
        ("evals", repeat("eval ")),
        ("find exec", format!("find / {}", repeat("-exec rm {} ; "))),
    ];
    let policy = strict_policy();
    for (name, input) in &cases {
        let start = Instant::now();
        let v = assess(&Action::Shell { command: input }, &policy);
        let _ = commands(input);
        let took = start.elapsed();
        println!(
            "{name:20} {:>8} bytes {:>10.2?} {:?}",
            input.len(),
            took,
            v.rule
        );
        assert!(took < Duration::from_secs(3), "{name} took {took:?}");
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `a=$a$a` doubles a value per step: 24 steps would be 134 MB of text. The guard keeps short
/// values only, so the line is cheap, and the `rm -rf /` before it is still seen.
#[test]
fn doubling_a_variable_does_not_blow_up() {
    let mut line = String::from("rm -rf / ; a=xxxxxxxx; ");
    for _ in 0..24 {
        line.push_str("a=$a$a$a$a; ");
    }
    line.push_str("echo $a");
    let started = Instant::now();
    let v = assess(&Action::Shell { command: &line }, &Policy::default());
    assert_eq!(v.level, Level::Deny, "{v:?}");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn only_the_first_64_kib_are_assessed() {
    let p = Policy::default();
    let pad = "echo padding; ".repeat(MAX_INPUT / 14 + 10);
    let early = format!("rm -rf /; {pad}");
    let late = format!("{pad}rm -rf /");
    assert_eq!(
        assess(&Action::Shell { command: &early }, &p).level,
        Level::Deny
    );
    assert_eq!(
        assess(&Action::Shell { command: &late }, &p).level,
        Level::Allow
    );
    // A multi-byte character straddling the cut must not panic.
    let straddle = format!("{}{}", "a".repeat(MAX_INPUT - 1), "é".repeat(10));
    assert_eq!(
        assess(&Action::Shell { command: &straddle }, &p).level,
        Level::Allow
    );
}

#[test]
fn nesting_is_followed_to_the_depth_limit_and_asked_about_past_it() {
    let p = Policy::default();
    let mut cmd = String::from("rm -rf /");
    for depth in 1..=12 {
        cmd = format!("sh -c {}", shell_quote(&cmd));
        let v = assess(&Action::Shell { command: &cmd }, &p);
        // Past the limit the guard cannot vouch for the command: it asks, as for one longer
        // than it reads.
        let expected = if depth <= memd_guard::MAX_DEPTH {
            (Level::Deny, Some("rm_root"))
        } else {
            (Level::Ask, Some("too_nested"))
        };
        assert_eq!((v.level, v.rule), expected, "depth {depth}: {cmd}");
    }
}
