//! Interpreter one-liners (`python -c`, `perl -e`, `ruby -e`, `node -e`, `php -r`): the shell
//! commands they hand to `system()`-like calls, the directory trees they delete with
//! `shutil.rmtree`-like calls (as an equivalent `rm -rf`), and endless fork loops.
//!
//! Must never try to understand the language beyond string literals next to a few well-known
//! call names: anything cleverer (string building, variables) is out of reach by design.

use crate::shell::Command;

/// At most this many command strings are taken from one one-liner.
const MAX_STRINGS: usize = 16;

/// The program text of an interpreter one-liner, for each `-c`/`-e` given.
pub(crate) fn inline_code(cmd: &Command) -> Vec<String> {
    let p = cmd.program.as_str();
    let flags: &[char] = if p.starts_with("python") || p.starts_with("pypy") {
        &['c']
    } else if p.starts_with("perl") || p.starts_with("ruby") || p == "rscript" {
        &['e', 'E']
    } else if matches!(p, "node" | "nodejs" | "bun" | "deno") {
        &['e', 'p']
    } else if p.starts_with("php") {
        &['r']
    } else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut it = cmd.args.iter();
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix("--eval=").or(a.strip_prefix("--print=")) {
            out.push(v.to_string());
        } else if a == "--eval" || a == "--print" || (p == "deno" && a == "eval") {
            out.extend(it.next().cloned());
        } else if a.len() > 1 && a.starts_with('-') && !a.starts_with("--") {
            // `-le 'code'`, `-ne 'code'`, `-c'code'`: the code flag ends the cluster.
            if let Some(k) = a[1..].find(flags) {
                let rest = &a[2 + k..];
                if rest.is_empty() {
                    out.extend(it.next().cloned());
                } else if a[1..2 + k].bytes().all(|b| b.is_ascii_alphabetic()) {
                    out.push(rest.to_string());
                }
            }
        }
    }
    out
}

/// A fork in an endless loop: `fork while fork`, `while True: os.fork()`, `for(;;){fork()}`.
pub(crate) fn forks_forever(code: &str) -> bool {
    // String literals are data (`print "fork while 1"`): their text is left out.
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let outside = code.chars().filter(|&c| {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            return false;
        }
        if c == '"' || c == '\'' {
            quote = Some(c);
            return false;
        }
        true
    });
    let compact: String = outside
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect();
    [
        "forkwhilefork",
        "forkwhile1",
        "forkwhile(1)",
        "forkwhiletrue",
        "fork()while1",
        "fork()while(1)",
        "fork()whiletrue",
        "forkuntil0",
        "1whilefork",
        "loopdofork",
        "while1:os.fork()",
        "whiletrue:os.fork()",
        "while(1){fork",
        "while(true){fork",
        "for(;;){fork",
        "loop{fork",
        "while1{fork",
        "whiletrue{fork",
    ]
    .iter()
    .any(|p| compact.contains(p))
}

/// Calls that run a shell command given as a string (or an argument list).
const RUNS_COMMAND: &[&str] = &[
    "system",
    "popen",
    "exec",
    "execSync",
    "spawnSync",
    "check_output",
    "check_call",
    "call",
    "run",
    "Popen",
    "getoutput",
    "getstatusoutput",
    "shell_exec",
    "passthru",
    "proc_open",
];
/// Calls that delete a directory tree.
const DELETES_TREE: &[&str] = &[
    "rmtree",
    "rm_rf",
    "rm_r",
    "remove_tree",
    "rmSync",
    "rmdirSync",
    "rimraf",
];

/// Shell command lines found in `code`: literals passed to command-running calls, backticks
/// (Perl, Ruby, PHP), and `rm -rf 'x'` standing for a tree-deleting call on the literal `x`.
pub(crate) fn shell_strings(code: &str, program: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() && out.len() < MAX_STRINGS {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let name = &code[start..i];
            let runs = RUNS_COMMAND.contains(&name);
            let deletes = DELETES_TREE.contains(&name);
            if !runs && !deletes {
                continue;
            }
            let mut j = i;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            // Perl and Ruby also call `system "…"` without parentheses.
            let paren = b.get(j) == Some(&b'(');
            if !paren && !matches!(b.get(j), Some(b'"' | b'\'')) {
                continue;
            }
            let lits = literals(&code[j + usize::from(paren)..]);
            if runs && !lits.is_empty() {
                out.push(lits.join(" "));
            } else if deletes && let Some(first) = lits.first() {
                out.push(format!("rm -rf -- '{}'", first.replace('\'', "'\\''")));
            }
        } else if b[i] == b'`'
            && matches!(program, p if p.starts_with("perl") || p.starts_with("ruby") || p.starts_with("php"))
        {
            let end = code[i + 1..].find('`').map_or(code.len(), |e| i + 1 + e);
            out.push(code[i + 1..end].to_string());
            i = end + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// The string literals at the start of a call's arguments, up to the closing `)` (Python's
/// string prefixes and a list of literals included): `("rm", "-rf", "/")` → `rm -rf /`.
fn literals(args: &str) -> Vec<String> {
    let b = args.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let limit = b.len().min(4096);
    while i < limit {
        match b[i] {
            b')' | b';' => break,
            q @ (b'"' | b'\'' | b'`') => {
                let mut lit = Vec::new();
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        i += 1;
                    }
                    lit.push(b[i]);
                    i += 1;
                }
                out.push(String::from_utf8_lossy(&lit).into_owned());
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}
