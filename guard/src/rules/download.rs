//! The `pipe_to_shell` rule: a download executed without being looked at, whether piped into
//! an interpreter (`curl … | sh`), substituted into its code (`sh -c "$(curl …)"`,
//! `bash <(curl …)`, `eval "$(curl …)"`) or saved and run in the same command line
//! (`curl -O …/install.sh && ./install.sh`). Also knows where an interpreter takes its program
//! from, which the walk uses to follow `echo … | sh` and here-documents.
//!
//! Must never flag a download that is only read or parsed (`| jq`, `| python -m json.tool`,
//! `| gpg --dearmor`, `-o file && less file`).

use super::{Ctx, Scan, clip};
use crate::shell::{self, Command, is_shell, lex};

const DOWNLOADERS: &[&str] = &[
    "curl", "wget", "wget2", "fetch", "http", "https", "xh", "xhs", "httpie", "aria2c",
];

pub(crate) fn is_downloader(p: &str) -> bool {
    DOWNLOADERS.contains(&p)
}

#[derive(Clone, Copy, PartialEq)]
enum Family {
    Shell,
    Python,
    Perl,
    Ruby,
    Node,
    Php,
    Other,
}

fn family(p: &str) -> Option<Family> {
    let versioned = |base: &str| {
        p.strip_prefix(base)
            .is_some_and(|v| v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    };
    Some(if is_shell(p) {
        Family::Shell
    } else if versioned("python") || versioned("pypy") {
        Family::Python
    } else if versioned("perl") {
        Family::Perl
    } else if versioned("ruby") {
        Family::Ruby
    } else if matches!(p, "node" | "nodejs") {
        Family::Node
    } else if versioned("php") {
        Family::Php
    } else if matches!(
        p,
        "lua" | "luajit" | "pwsh" | "powershell" | "rscript" | "tclsh"
    ) {
        Family::Other
    } else {
        return None;
    })
}

/// Where an interpreter takes its program from.
#[derive(PartialEq)]
enum Source {
    Stdin,
    Code(String),
    Script(String),
    /// A module or something else that is not the command line's text (`python -m json.tool`).
    Other,
}

fn source(cmd: &Command) -> Option<Source> {
    let fam = family(&cmd.program)?;
    let args = &cmd.args;
    if fam == Family::Shell
        && let Some((text, _)) = cmd.nested()
    {
        return Some(Source::Code(text));
    }
    let (code, value, module): (&str, &str, &str) = match fam {
        Family::Shell => ("", "oO", ""),
        Family::Python => ("c", "WXQ", "m"),
        Family::Perl => ("eE", "", ""),
        Family::Ruby => ("e", "Ir", ""),
        Family::Node => ("ep", "r", ""),
        Family::Php => ("r", "cdz", ""),
        Family::Other => ("ec", "", ""),
    };
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if a == "-" {
            return Some(Source::Stdin);
        }
        if a == "--" {
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            for key in ["eval", "print", "command"] {
                if long == key {
                    return Some(Source::Code(args.get(i).cloned().unwrap_or_default()));
                }
                if let Some(v) = long.strip_prefix(key).and_then(|r| r.strip_prefix('=')) {
                    return Some(Source::Code(v.to_string()));
                }
            }
            if matches!(long, "rcfile" | "init-file" | "require") {
                i += 1;
            }
            continue;
        }
        let is_opt =
            a.len() > 1 && (a.starts_with('-') || (fam == Family::Shell && a.starts_with('+')));
        if !is_opt {
            return Some(Source::Script(a.clone()));
        }
        for (k, c) in a[1..].char_indices() {
            let rest = &a[1 + k + c.len_utf8()..];
            if code.contains(c) {
                let text = if rest.is_empty() {
                    args.get(i).cloned().unwrap_or_default()
                } else {
                    rest.to_string()
                };
                return Some(Source::Code(text));
            }
            if module.contains(c) {
                return Some(Source::Other);
            }
            if fam == Family::Shell && c == 's' {
                return Some(Source::Stdin);
            }
            if value.contains(c) {
                if rest.is_empty() {
                    i += 1;
                }
                break;
            }
        }
    }
    Some(
        args.get(i)
            .map_or(Source::Stdin, |a| Source::Script(a.clone())),
    )
}

/// An interpreter that will execute whatever arrives on its standard input.
pub(crate) fn reads_code_from_stdin(cmd: &Command) -> bool {
    match source(cmd) {
        Some(Source::Stdin) => true,
        Some(Source::Script(s)) => is_stdin_path(&s),
        _ => false,
    }
}

fn is_stdin_path(p: &str) -> bool {
    matches!(p, "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0")
}

/// Whether `text` runs a downloader inside a substitution (`$(curl …)`, `<(wget …)`).
fn fetches(text: &str) -> bool {
    lex::parse(text).iter().any(|s| {
        s.words
            .iter()
            .chain(s.redirects.iter().map(|r| &r.target))
            .flat_map(|w| &w.subs)
            .any(|sub| {
                shell::commands(&sub.body)
                    .iter()
                    .any(|c| is_downloader(&c.program))
            })
    })
}

fn base_name(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    shell::program_name(path.trim_end_matches('/'))
}

/// The files a downloader writes (`-o f`, `-O`, `wget URL`, `> f`), by base name.
fn download_targets(cmd: &Command, simple: &lex::Simple) -> Vec<String> {
    let mut out = Vec::new();
    let urls = || {
        cmd.args
            .iter()
            .filter(|a| a.contains("://"))
            .map(|a| base_name(a))
    };
    let mut named = false;
    let mut remote_name = cmd.program == "wget";
    let mut it = cmd.args.iter();
    while let Some(a) = it.next() {
        let file = if let Some(v) = a
            .strip_prefix("--output=")
            .or(a.strip_prefix("--output-document="))
        {
            Some(v.to_string())
        } else if a == "--output" || a == "--output-document" {
            it.next().cloned()
        } else if a == "--remote-name" || a == "--remote-name-all" {
            remote_name = true;
            None
        } else if a.len() > 1 && a.starts_with('-') && !a.starts_with("--") {
            let out_letter = if cmd.program == "curl" { 'o' } else { 'O' };
            let mut file = None;
            for (k, c) in a[1..].char_indices() {
                if c == out_letter {
                    let rest = &a[2 + k..];
                    file = if rest.is_empty() {
                        it.next().cloned()
                    } else {
                        Some(rest.to_string())
                    };
                    break;
                }
                if c == 'O' && cmd.program == "curl" {
                    remote_name = true;
                }
                if "HdeuXAbcTwmxKEFryYzCDPQtU".contains(c) {
                    break;
                }
            }
            file
        } else {
            None
        };
        if let Some(f) = file.filter(|f| f != "-") {
            out.push(base_name(&f));
            named = true;
        }
    }
    if remote_name && !named {
        out.extend(urls().filter(|u| !u.is_empty()));
    }
    for r in &simple.redirects {
        if matches!(r.op, lex::RedirOp::Write | lex::RedirOp::Append) {
            out.push(base_name(&r.target.text));
        }
    }
    out
}

/// `… | curl … | … | sh`: a downloader earlier in the pipeline feeds this interpreter.
fn piped(ctx: &Ctx, scan: &mut Scan) -> bool {
    let Some(dl) = ctx.pipe.download.as_ref().filter(|_| ctx.simple.stage > 0) else {
        return false;
    };
    scan.add(
        "pipe_to_shell",
        format!(
            "pipes a download from `{dl}` straight into `{}` (`{}`)",
            ctx.cmd.program,
            ctx.pipeline_snippet()
        ),
    );
    true
}

pub(crate) fn check(ctx: &Ctx, scan: &mut Scan) {
    let cmd = ctx.cmd;
    let p = cmd.program.as_str();
    if is_downloader(p) {
        for f in download_targets(cmd, ctx.simple) {
            if scan.downloads.len() < 32 {
                scan.downloads.push((f, p.to_string()));
            }
        }
        return;
    }
    let downloaded = |scan: &Scan, file: &str| {
        let base = base_name(file);
        scan.downloads
            .iter()
            .find(|(f, _)| *f == base)
            .map(|(_, d)| d.clone())
    };
    let operand = match p {
        "source" | "." if cmd.args.first().is_some_and(|a| is_stdin_path(a)) => {
            piped(ctx, scan);
            None
        }
        "source" | "." => cmd.args.first().cloned(),
        "eval" => Some(cmd.args.join(" ")),
        _ => match source(cmd) {
            Some(Source::Script(t)) if !is_stdin_path(&t) => Some(t),
            Some(Source::Code(t)) => Some(t),
            Some(Source::Stdin | Source::Script(_)) => {
                let stdin_fetch = ctx.simple.redirects.iter().any(|r| {
                    r.op == lex::RedirOp::Read
                        && r.target.subs.iter().any(|s| {
                            s.kind == lex::SubKind::Process
                                && shell::commands(&s.body)
                                    .iter()
                                    .any(|c| is_downloader(&c.program))
                        })
                });
                if !piped(ctx, scan) && stdin_fetch {
                    scan.add(
                        "pipe_to_shell",
                        format!(
                            "feeds a download to `{p}` on its input (`{}`)",
                            ctx.snippet()
                        ),
                    );
                }
                None
            }
            Some(Source::Other) => None,
            None => {
                // Running a file that was just downloaded: `curl -O …/install.sh && ./install.sh`.
                if let Some(dl) = downloaded(scan, p) {
                    scan.add(
                        "pipe_to_shell",
                        format!(
                            "runs `{p}` right after downloading it with `{dl}` (`{}`)",
                            ctx.snippet()
                        ),
                    );
                }
                None
            }
        },
    };
    let Some(op) = operand else { return };
    if fetches(&op) {
        scan.add(
            "pipe_to_shell",
            format!("runs a download with `{p}` (`{}`)", ctx.snippet()),
        );
    } else if let Some(dl) = downloaded(scan, &op) {
        scan.add(
            "pipe_to_shell",
            format!(
                "runs `{}` with `{p}` right after downloading it with `{dl}` (`{}`)",
                clip(&op),
                ctx.snippet()
            ),
        );
    }
}
