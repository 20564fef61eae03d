//! The rules about this machine's own files: `rm_root` (rm, find, rsync --delete, xargs-fed
//! rm), `chmod_world`, and the shell form of `fork_bomb` (disks are `disk`'s).
//!
//! Must never flag a path it cannot resolve (a relative path with an unknown working directory,
//! an unknown variable): these rules deny by default, and a false denial blocks real work.

use super::{Ctx, Scan, paths};
use crate::shell::{Command, lex, scan};

pub(crate) fn check(ctx: &Ctx, scan: &mut Scan) {
    match ctx.cmd.program.as_str() {
        "rm" => rm(ctx, scan),
        "find" => find(ctx, scan),
        "rsync" => rsync(ctx, scan),
        "chmod" => chmod(ctx, scan),
        _ => {}
    }
}

/// Options (anywhere before `--`, as GNU tools permute them) and operands.
pub(crate) fn split_args(args: &[String]) -> (Vec<&str>, Vec<&str>) {
    let mut flags = Vec::new();
    let mut operands = Vec::new();
    let mut it = args.iter();
    for a in it.by_ref() {
        if a == "--" {
            break;
        }
        if a.len() > 1 && a.starts_with('-') {
            flags.push(a.as_str());
        } else {
            operands.push(a.as_str());
        }
    }
    operands.extend(it.map(String::as_str));
    (flags, operands)
}

/// What deleting `target` recursively would destroy, if that is catastrophic.
pub(crate) fn catastrophic_target(ctx: &Ctx, target: &str) -> Option<String> {
    ctx.line.expand(target).iter().find_map(|t| {
        let comps = paths::resolve(t, ctx.line.cwd.as_deref())?;
        paths::catastrophic(&comps)
    })
}

fn rm(ctx: &Ctx, scan: &mut Scan) {
    let (flags, targets) = split_args(&ctx.cmd.args);
    let recursive = flags
        .iter()
        .any(|f| *f == "--recursive" || (!f.starts_with("--") && f.contains(['r', 'R'])));
    if !recursive {
        return;
    }
    if let Some(what) = targets.iter().find_map(|t| catastrophic_target(ctx, t)) {
        scan.add(
            "rm_root",
            format!("recursive delete of {what} (`{}`)", ctx.snippet()),
        );
    } else if let Some((what, literal)) = xargs_fed(ctx) {
        scan.add(
            "rm_root",
            format!(
                "recursive delete of {what}: `{literal}` is fed to `xargs rm` (`{}`)",
                ctx.pipeline_snippet()
            ),
        );
    }
}

/// For a command run by `xargs` (or `parallel`): a catastrophic path it is fed from the
/// pipeline or from a here-string / here-document, as (what, literal).
pub(crate) fn xargs_fed(ctx: &Ctx) -> Option<(String, String)> {
    if !ctx
        .cmd
        .wrappers
        .iter()
        .any(|w| w == "xargs" || w == "parallel")
    {
        return None;
    }
    let fed = ctx
        .simple
        .redirects
        .iter()
        .filter(|r| matches!(r.op, lex::RedirOp::HereDoc | lex::RedirOp::HereString))
        .flat_map(|r| r.target.text.split_whitespace())
        .find_map(|w| {
            let comps = paths::resolve(w, None)?;
            paths::catastrophic(&comps).map(|what| (what, w.to_string()))
        });
    fed.or_else(|| ctx.pipe.rootish.clone())
}

/// The string `xargs -I STR` replaces with each input (`{}` for `-i`, `--replace` and by
/// default).
pub(crate) fn xargs_placeholder(simple: &lex::Simple) -> String {
    let words: Vec<&str> = simple.words.iter().map(|w| w.text.as_str()).collect();
    let start = words
        .iter()
        .position(|w| matches!(crate::shell::program_name(w).as_str(), "xargs" | "parallel"))
        .map_or(words.len(), |p| p + 1);
    let mut it = words[start..].iter();
    while let Some(w) = it.next() {
        if *w == "-I" {
            return it.next().map_or("{}", |v| v).to_string();
        }
        if let Some(v) = w
            .strip_prefix("--replace=")
            .or_else(|| w.strip_prefix("-I"))
        {
            return v.to_string();
        }
        if !w.starts_with('-') {
            break;
        }
    }
    "{}".to_string()
}

/// `find` tests that keep it from matching everything under its start (`-name '*.pyc'`).
const NARROWING: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-lname",
    "-ilname",
    "-newer",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-size",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-nouser",
    "-nogroup",
    "-empty",
    "-perm",
    "-inum",
    "-samefile",
    "-links",
    "-used",
    "-fstype",
    "-context",
];

fn find_parts(args: &[String]) -> (Vec<&str>, &[String]) {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            o if o.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    let rest = args.get(i..).unwrap_or_default();
    let n = rest
        .iter()
        .take_while(|a| !a.starts_with('-') && !matches!(a.as_str(), "(" | "!" | ")"))
        .count();
    let starts = rest[..n].iter().map(String::as_str).collect();
    (starts, &rest[n..])
}

/// A `find` whose expression narrows what it matches: its output is not "everything".
pub(crate) fn narrowed_find(cmd: &Command) -> bool {
    cmd.program == "find"
        && find_parts(&cmd.args)
            .1
            .iter()
            .any(|a| NARROWING.contains(&a.as_str()))
}

fn find(ctx: &Ctx, scan: &mut Scan) {
    let (mut starts, expr) = find_parts(&ctx.cmd.args);
    let deletes = expr.iter().any(|a| a == "-delete") || exec_runs_rm(expr);
    if !deletes || expr.iter().any(|a| NARROWING.contains(&a.as_str())) {
        return;
    }
    if starts.is_empty() {
        starts.push(".");
    }
    if let Some(what) = starts.iter().find_map(|s| catastrophic_target(ctx, s)) {
        scan.add(
            "rm_root",
            format!("recursive delete of {what} (`{}`)", ctx.snippet()),
        );
    }
}

/// `-exec rm … ;` (or `-execdir`, `-ok`, wrappers included).
fn exec_runs_rm(expr: &[String]) -> bool {
    let mut i = 0;
    while i < expr.len() {
        if matches!(expr[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let end = expr[i + 1..]
                .iter()
                .position(|a| a == ";" || a == "+")
                .map_or(expr.len(), |p| i + 1 + p);
            if Command::from_words(&expr[i + 1..end]).is_some_and(|c| c.program == "rm") {
                return true;
            }
            i = end;
        }
        i += 1;
    }
    false
}

/// `rsync --delete EMPTY/ /` empties the destination just like `rm -rf`.
fn rsync(ctx: &Ctx, scan: &mut Scan) {
    let (flags, operands) = split_args(&ctx.cmd.args);
    if !flags.iter().any(|f| f.starts_with("--del")) || operands.len() < 2 {
        return;
    }
    let Some(dest) = operands.last() else { return };
    let whole = ctx.line.expand(dest).iter().find_map(|d| {
        let comps = paths::resolve(d, ctx.line.cwd.as_deref())?;
        paths::is_root_or_home(&comps)
            .then(|| paths::catastrophic(&comps))
            .flatten()
    });
    if let Some(what) = whole {
        scan.add(
            "rm_root",
            format!(
                "`rsync --delete` onto {what} removes everything not in the source (`{}`)",
                ctx.snippet()
            ),
        );
    }
}

/// A mode that lets everyone write: octal with the others' write bit, or `o+w`, `a=rwx`…
fn world_writable(mode: &str) -> bool {
    if !mode.is_empty() && mode.len() <= 5 && mode.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        let last = mode.as_bytes()[mode.len() - 1] - b'0';
        return last & 2 != 0 && mode.len() >= 3;
    }
    mode.split(',').any(|clause| {
        let who_len = clause.bytes().take_while(|b| b"ugoa".contains(b)).count();
        if !clause[..who_len].contains(['o', 'a']) {
            return false;
        }
        // An empty `who` means "all, minus the umask", which keeps others from writing.
        let mut op = ' ';
        clause[who_len..].chars().any(|c| {
            if matches!(c, '+' | '-' | '=') {
                op = c;
            }
            c == 'w' && op != '-'
        })
    })
}

fn chmod(ctx: &Ctx, scan: &mut Scan) {
    let args = &ctx.cmd.args;
    // `-w` and `-x` are modes, not options: only these letters make an option word.
    let is_opt = |a: &str| {
        (a.starts_with("--") && a.len() > 2)
            || (a.len() > 1 && a.starts_with('-') && a[1..].bytes().all(|b| b"Rvcfh".contains(&b)))
    };
    let recursive = args.iter().any(|a| {
        a == "--recursive" || (is_opt(a.as_str()) && !a.starts_with("--") && a.contains('R'))
    });
    let mut operands = args.iter().filter(|a| !is_opt(a.as_str()));
    let Some(mode) = operands.next() else { return };
    if !world_writable(mode) {
        return;
    }
    let targets: Vec<&String> = operands.collect();
    if recursive {
        let what = targets
            .first()
            .map_or_else(|| "files".to_string(), |t| format!("`{}`", super::clip(t)));
        scan.add(
            "chmod_world",
            format!(
                "makes {what} and everything below it world-writable (`{}`)",
                ctx.snippet()
            ),
        );
    } else if let Some(what) = targets.iter().find_map(|t| catastrophic_target(ctx, t)) {
        scan.add(
            "chmod_world",
            format!("makes {what} world-writable (`{}`)", ctx.snippet()),
        );
    }
}

fn is_meta(b: u8) -> bool {
    b.is_ascii_whitespace() || b";&|(){}<>".contains(&b)
}

fn tokens(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    b.split(|&c| is_meta(c)).filter(|t| !t.is_empty())
}

/// How far a fork bomb's body and its call are looked for: real ones are a few bytes long.
const BOMB_WINDOW: usize = 256;

/// `:(){ :|:& };:` and its renamed forms: a function whose body runs itself at least twice
/// with a pipe or `&`, called afterwards. Quoted text is not code, so it is skipped.
pub(crate) fn fork_bomb(text: &str) -> Option<String> {
    let sk = scan::unquoted_skeleton(text);
    let b = sk.as_slice();
    for p in (0..b.len()).filter(|&i| b[i] == b'(' || b[i] == b'{') {
        // `name() {` / `name() (` / `function name {`
        let (name, open) = if b[p] == b'(' {
            let mut j = p + 1;
            skip_blank(b, &mut j);
            if b.get(j) != Some(&b')') {
                continue;
            }
            j += 1;
            skip_blank(b, &mut j);
            match b.get(j) {
                Some(b'{' | b'(') => (token_before(b, p), j),
                _ => continue,
            }
        } else {
            let (start, name) = token_before(b, p);
            if token_before(b, start).1 != b"function" {
                continue;
            }
            ((start, name), p)
        };
        let (start, name) = name;
        if name.is_empty() || name == b"function" {
            continue;
        }
        let close_byte = if b[open] == b'{' { b'}' } else { b')' };
        let end = (open + BOMB_WINDOW).min(b.len());
        let mut depth = 0usize;
        let Some(close) = (open..end).find(|&k| {
            if b[k] == b[open] {
                depth += 1;
            } else if b[k] == close_byte {
                depth -= 1;
            }
            depth == 0
        }) else {
            continue;
        };
        let body = &b[open + 1..close];
        let self_calls = tokens(body).filter(|t| *t == name).count();
        let spawns = body.contains(&b'|')
            || body.iter().enumerate().any(|(k, &c)| {
                c == b'&' && body.get(k + 1) != Some(&b'&') && (k == 0 || body[k - 1] != b'&')
            });
        let after = &b[close + 1..(close + 1 + BOMB_WINDOW).min(b.len())];
        let call = after
            .split(|&c| is_meta(c))
            .scan(0usize, |pos, t| {
                let at = *pos;
                *pos += t.len() + 1;
                Some((at, t))
            })
            .find(|(_, t)| *t == name);
        if let (true, true, Some((at, _))) = (self_calls >= 2, spawns, call) {
            let end = (close + 1 + at + name.len()).min(text.len());
            let shown = String::from_utf8_lossy(&text.as_bytes()[start..end]).into_owned();
            return Some(format!(
                "fork bomb: the function `{}` runs copies of itself without end (`{}`)",
                String::from_utf8_lossy(name),
                super::clip(&shown)
            ));
        }
    }
    None
}

fn skip_blank(b: &[u8], j: &mut usize) {
    while b.get(*j).is_some_and(|c| c.is_ascii_whitespace()) {
        *j += 1;
    }
}

/// The word just before `at`, skipping blanks, and where it starts.
fn token_before(b: &[u8], at: usize) -> (usize, &[u8]) {
    let mut k = at;
    while k > 0 && matches!(b[k - 1], b' ' | b'\t') {
        k -= 1;
    }
    let end = k;
    while k > 0 && !is_meta(b[k - 1]) {
        k -= 1;
    }
    (k, &b[k..end])
}
