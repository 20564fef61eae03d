//! Shell syntax as far as the guard needs it: splitting words ([`words`]), finding the program a
//! simple command really runs once wrappers such as `sudo`, `env`, `timeout` or `xargs` are
//! peeled off ([`Command`]), and the command text a program runs in turn (`sh -c`, `eval`,
//! `ssh host …`). The tokenizer itself lives in `lex`.
//!
//! Must never execute, expand variables, or look at the file system, and must bound every
//! loop: input is cut at [`MAX_INPUT`] bytes and wrapper peeling stops after a fixed count.

pub(crate) mod lex;
mod nested;
mod opts;
pub(crate) mod scan;

/// Longest command line analysed; the rest is ignored. 64 KiB is far beyond a real command and
/// keeps the worst case of every rule in the millisecond range.
pub const MAX_INPUT: usize = 64 * 1024;

/// How many levels of `sh -c`, `eval`, `$(…)` and the like are followed.
pub const MAX_DEPTH: usize = 8;

use opts::*;

/// Wrappers stacked deeper than this are not a real command (`sudo sudo sudo …`).
const MAX_WRAPPERS: usize = 16;

/// The first [`MAX_INPUT`] bytes of `s`, cut at a character boundary.
pub(crate) fn bounded(s: &str) -> &str {
    if s.len() <= MAX_INPUT {
        return s;
    }
    let mut end = MAX_INPUT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Splits one simple command the way the shell would: quotes and backslashes are removed,
/// `$'…'` escapes decoded, `$(…)` and backticks kept whole. Operators such as `|` or `;` are
/// ordinary characters here; use [`commands`] for a whole command line.
pub fn words(command: &str) -> Vec<String> {
    lex::split_plain(bounded(command))
}

/// A simple command as it will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The program's base name, lower-cased, without `.exe` (`/usr/bin/git` → `git`).
    pub program: String,
    pub args: Vec<String>,
    /// The wrappers that were removed, outermost first (`sudo`, `xargs`, …).
    pub wrappers: Vec<String>,
}

/// The base name of a program word, lower-cased (case-insensitive file systems run `RM` as
/// `rm`) and without `.exe`.
pub fn program_name(word: &str) -> String {
    let base = word.rsplit(['/', '\\']).next().unwrap_or(word);
    let lower = base.to_ascii_lowercase();
    match lower.strip_suffix(".exe") {
        Some(stem) if !stem.is_empty() => stem.to_string(),
        _ => lower,
    }
}

/// `NAME=value` (or `NAME+=value`) before a command sets its environment; it is not the program.
pub fn is_assignment(word: &str) -> bool {
    let Some(eq) = word.find('=') else {
        return false;
    };
    let name = word[..eq].strip_suffix('+').unwrap_or(&word[..eq]);
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

pub(crate) const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish", "csh", "tcsh",
    "rbash", "ksh93", "pdksh", "oksh",
];

pub(crate) fn is_shell(program: &str) -> bool {
    SHELLS.contains(&program)
}

impl Command {
    /// The command `words` will run, with assignments, shell keywords (`then`, `!`, `{`) and
    /// wrappers removed. `None` when nothing runs (only assignments, `command -v x`, `for …`).
    pub fn from_words(words: &[String]) -> Option<Command> {
        let mut words: Vec<String> = match words.first().map(|w| expand_braces(w, 64)) {
            // `{rm,-rf,/}` is brace-expanded by the shell into a whole command.
            Some(first) if first.len() > 1 => first
                .into_iter()
                .chain(words[1..].iter().cloned())
                .collect(),
            _ => words.to_vec(),
        };
        let mut wrappers: Vec<String> = Vec::new();
        let mut i = 0;
        for _ in 0..MAX_WRAPPERS {
            while words.get(i).is_some_and(|w| is_assignment(w)) {
                i += 1;
            }
            let name = program_name(lookup_substitution(words.get(i)?));
            let after = i + 1;
            let opts = match name.as_str() {
                "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "!" | "{" | "}"
                | "fi" | "done" | "esac" | "coproc" => {
                    i = after;
                    continue;
                }
                "for" | "case" | "select" | "function" | "in" | "[[" | "((" | "]]" => return None,
                "sudo" => &SUDO,
                "doas" => &DOAS,
                "pkexec" => &PKEXEC,
                "nohup" | "setsid" | "unbuffer" | "builtin" | "busybox" | "catchsegv" => &NONE,
                "command" => &NONE,
                "exec" => &EXEC,
                "nice" => &NICE,
                "time" => &TIME,
                "timeout" => &TIMEOUT,
                "stdbuf" => &STDBUF,
                "ionice" => &IONICE,
                "caffeinate" => &CAFFEINATE,
                "taskset" => &NONE,
                "flock" => &FLOCK,
                "watch" => &WATCH,
                "xargs" => &XARGS,
                "env" => &ENV,
                "runuser" if nested::runuser_wraps(&words[after..]) => &RUNUSER,
                "chroot" => &CHROOT,
                "strace" | "ltrace" => &STRACE,
                "unshare" => &UNSHARE,
                "systemd-run" => &SYSTEMD_RUN,
                "screen" => &SCREEN,
                "parallel" => {
                    if let Some(text) = nested::parallel(&words[after..]) {
                        return Some(shell_c(name, text, wrappers));
                    }
                    &PARALLEL
                }
                _ => {
                    return Some(Command {
                        program: name,
                        args: words.split_off(after.min(words.len())),
                        wrappers,
                    });
                }
            };
            let sk = skip_opts(&words, after, opts);
            i = sk.next;
            match name.as_str() {
                "command" if sk.has(b'v') || sk.has(b'V') => return None,
                "sudo" | "doas"
                    if i >= words.len()
                        && (sk.has(b's')
                            || sk.has(b'i')
                            || sk.has_long("shell")
                            || sk.has_long("login")) =>
                {
                    // A bare `sudo -s` runs a shell that reads its commands from stdin.
                    wrappers.push(name);
                    return Some(Command {
                        program: "sh".into(),
                        args: Vec::new(),
                        wrappers,
                    });
                }
                "sudo" if sk.has(b'e') || sk.has_long("edit") => return None,
                "env" => {
                    if let Some(split) = env_split_string(&words[after..i]) {
                        let rest = words.split_off(i);
                        words = split.into_iter().chain(rest).collect();
                        i = 0;
                    }
                }
                // The duration, the CPU list, the new root directory.
                "timeout" | "taskset" | "chroot" => i += 1,
                "flock" => {
                    // `flock FILE -c TEXT` runs TEXT with `sh -c`; `flock FILE cmd…` runs cmd.
                    if matches!(
                        words.get(i + 1).map(String::as_str),
                        Some("-c" | "--command")
                    ) {
                        let text = words.get(i + 2)?.clone();
                        return Some(shell_c(name, text, wrappers));
                    }
                    i += 1;
                }
                "watch" if !(sk.has(b'x') || sk.has_long("exec")) => {
                    // watch hands its arguments to `sh -c` as one string.
                    let joined = words.get(i..).unwrap_or_default().join(" ");
                    return (!joined.is_empty()).then(|| shell_c(name, joined, wrappers));
                }
                "xargs" | "parallel" if i >= words.len() => {
                    wrappers.push(name);
                    return Some(Command {
                        program: "echo".into(),
                        args: Vec::new(),
                        wrappers,
                    });
                }
                _ => {}
            }
            wrappers.push(name);
        }
        None
    }

    /// The text this command runs as a further command line, and whether that happens on
    /// another machine: `sh -c TEXT`, `eval ARGS…`, `su -c TEXT`, `ssh HOST ARGS…`.
    pub(crate) fn nested(&self) -> Option<(String, bool)> {
        let a = &self.args;
        let text = match self.program.as_str() {
            p if is_shell(p) => shell_c_text(a)?,
            "eval" => a.join(" "),
            "su" | "runuser" | "script" => option_value(a, "-c", "--command")?,
            "tmux" => nested::tmux(a)?,
            // `screen -X stuff TEXT` types TEXT into a session's shell.
            "stuff" => a.join(" ").replace("^M", "\n"),
            "ssh" => return ssh_remote(a).map(|t| (t, true)),
            _ => return None,
        };
        (!text.trim().is_empty()).then_some((text, false))
    }
}

/// `$(which rm)`, `$(command -v rm)`, `` `which rm` ``: the program found on the PATH.
fn lookup_substitution(word: &str) -> &str {
    let inner = word
        .strip_prefix("$(")
        .and_then(|w| w.strip_suffix(')'))
        .or_else(|| word.strip_prefix('`').and_then(|w| w.strip_suffix('`')));
    let Some(inner) = inner else { return word };
    let inner = inner.trim();
    let name = inner
        .strip_prefix("which ")
        .or_else(|| inner.strip_prefix("command -v "))
        .or_else(|| inner.strip_prefix("type -P "))
        .or_else(|| inner.strip_prefix("type -p "));
    match name.map(str::trim) {
        Some(n) if !n.is_empty() && !n.contains(char::is_whitespace) => n,
        _ => word,
    }
}

/// `at` and `batch` read the commands they schedule from standard input (unless they only
/// list, remove or show jobs, or read a file).
pub(crate) fn runs_stdin_as_commands(cmd: &Command) -> bool {
    matches!(cmd.program.as_str(), "at" | "batch")
        && !cmd
            .args
            .iter()
            .any(|a| a.starts_with('-') && a.len() == 2 && "lrdcf".contains(&a[1..]) || a == "-V")
}

fn shell_c(wrapper: String, text: String, mut wrappers: Vec<String>) -> Command {
    wrappers.push(wrapper);
    Command {
        program: "sh".into(),
        args: vec!["-c".into(), text],
        wrappers,
    }
}

/// `env -S 'a b'` splits its value into words placed before the command.
fn env_split_string(opts: &[String]) -> Option<Vec<String>> {
    option_value(opts, "-S", "--split-string").map(|v| words(&v))
}

/// The value of `-x VALUE`, `-xVALUE`, `--long=VALUE` or `--long VALUE` among `args`.
pub(crate) fn option_value(args: &[String], short: &str, long: &str) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == short || a == long {
            return it.next().cloned();
        }
        if let Some(v) = a.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            return Some(v.to_string());
        }
        if let Some(v) = a
            .strip_prefix(short)
            .filter(|v| !v.is_empty() && !a.starts_with("--"))
        {
            return Some(v.to_string());
        }
    }
    None
}

/// A shell's `-c` text: the first operand after the options when `c` is among them
/// (`bash -lc "…"`, `sh -e -c "…"`, `bash -o pipefail -c "…"`).
fn shell_c_text(args: &[String]) -> Option<String> {
    let mut has_c = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            if let Some(v) = long.strip_prefix("command=") {
                return Some(v.to_string());
            }
            if long == "command" {
                return args.get(i + 1).cloned();
            }
            i += if matches!(long, "rcfile" | "init-file") {
                2
            } else {
                1
            };
            continue;
        }
        if a.len() > 1 && (a.starts_with('-') || a.starts_with('+')) {
            let letters = &a[1..];
            has_c |= a.starts_with('-') && letters.contains('c');
            i += if letters.ends_with(['o', 'O']) { 2 } else { 1 };
            continue;
        }
        break;
    }
    if has_c { args.get(i).cloned() } else { None }
}

/// What `ssh [options] host [command…]` runs remotely.
fn ssh_remote(args: &[String]) -> Option<String> {
    let o = Opts {
        short_value: b"bBcDEeFIiJLlmOoPpQRSWw",
        long_value: &[],
    };
    let sk = skip_opts(args, 0, &o);
    let rest = args.get(sk.next + 1..)?;
    let text = rest.join(" ");
    (!text.trim().is_empty()).then_some(text)
}

/// Brace expansion of one word (`{a,b}c` → `ac bc`), at most `limit` results. Only the forms
/// with a comma are expanded; sequences (`{1..3}`) are left as they are.
pub fn expand_braces(word: &str, limit: usize) -> Vec<String> {
    if !word.contains('{') || word.len() > 4096 {
        return vec![word.to_string()];
    }
    let mut done = Vec::new();
    let mut work = vec![word.to_string()];
    let mut steps = 0;
    while let Some(w) = work.pop() {
        steps += 1;
        let split = if steps > limit || done.len() + work.len() >= limit {
            None
        } else {
            first_brace(&w)
        };
        match split {
            Some((open, close, alts)) => {
                for alt in alts.iter().rev() {
                    work.push(format!("{}{}{}", &w[..open], alt, &w[close + 1..]));
                }
            }
            None => done.push(w),
        }
    }
    done
}

/// The first outermost `{…,…}` group: its byte range and its alternatives. One pass with a
/// stack, so a hostile word full of braces costs linear time.
fn first_brace(w: &str) -> Option<(usize, usize, Vec<String>)> {
    let b = w.as_bytes();
    // (position of `{`, commas at its level, whether it is a `${…}` parameter)
    let mut stack: Vec<(usize, Vec<usize>, bool)> = Vec::new();
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'{' => stack.push((i, Vec::new(), i > 0 && b[i - 1] == b'$')),
            b',' => {
                if let Some(top) = stack.last_mut().filter(|t| !t.2) {
                    top.1.push(i);
                }
            }
            b'}' => {
                let Some((open, commas, param)) = stack.pop() else {
                    continue;
                };
                if stack.is_empty() && !param && !commas.is_empty() {
                    let mut parts = Vec::with_capacity(commas.len() + 1);
                    let mut start = open + 1;
                    for c in commas {
                        parts.push(w[start..c].to_string());
                        start = c + 1;
                    }
                    parts.push(w[start..i].to_string());
                    return Some((open, i, parts));
                }
            }
            _ => {}
        }
    }
    None
}

/// Every simple command of a command line, wrappers removed, including those inside
/// substitutions and the command text of `sh -c`, `eval` and the like (to [`MAX_DEPTH`]).
pub fn commands(line: &str) -> Vec<Command> {
    let mut out = Vec::new();
    collect(bounded(line), 0, &mut out);
    out
}

fn collect(line: &str, depth: usize, out: &mut Vec<Command>) {
    if depth > MAX_DEPTH {
        return;
    }
    for simple in lex::parse(line) {
        for w in simple
            .words
            .iter()
            .chain(simple.redirects.iter().map(|r| &r.target))
        {
            for sub in &w.subs {
                collect(&sub.body, depth + 1, out);
            }
        }
        let texts: Vec<String> = simple.words.iter().map(|w| w.text.clone()).collect();
        if let Some(cmd) = Command::from_words(&texts) {
            let nested = cmd.nested();
            out.push(cmd);
            if let Some((text, _)) = nested {
                collect(&text, depth + 1, out);
            }
        }
    }
}
