//! The rules about shared state that lives on servers: `force_push_default` (git remotes) and
//! `drop_database` (SQL clients and the drop tools of PostgreSQL, MySQL and MongoDB).
//!
//! Must never treat text that is only searched or printed (`grep "DROP DATABASE"`, `echo`, `git
//! log --grep`) as executed, never flag a push that cannot rewrite a default branch (a feature
//! branch, a dry run), and never deny dropping a throwaway CI or test database by its name.

use super::{Ctx, Scan};
use crate::shell::{self, lex};

pub(crate) fn check(ctx: &Ctx, scan: &mut Scan) {
    if ctx.cmd.program == "git" {
        force_push(ctx, scan);
    }
    drop_database(ctx, scan);
}

// ---------------------------------------------------------------------------------------------
// force_push_default

const DEFAULT_BRANCHES: &[&str] = &["main", "master", "trunk", "develop", "production", "prod"];

fn is_default_branch(dst: &str) -> bool {
    let dst = dst.strip_prefix("refs/heads/").unwrap_or(dst);
    DEFAULT_BRANCHES.iter().any(|b| b.eq_ignore_ascii_case(dst))
}

/// The subcommand of `git [global options] sub …` and its arguments.
fn git_subcommand(args: &[String]) -> Option<(&str, &[String])> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
            | "--exec-path" | "--super-prefix" => i += 2,
            o if o.starts_with('-') => i += 1,
            sub => return Some((sub, &args[i + 1..])),
        }
    }
    None
}

/// What `git NAME` stands for when NAME is an alias set on the command line (`git -c
/// alias.p='push -f' p`) or by an earlier `git config alias.p …` in the same line.
fn git_alias<'a>(ctx: &'a Ctx, name: &str) -> Option<&'a str> {
    let key = format!("alias.{name}=");
    let mut it = ctx.cmd.args.iter();
    while let Some(a) = it.next() {
        let set = if a == "-c" { it.next() } else { None };
        if let Some(v) = set.and_then(|s| s.strip_prefix(&key)) {
            return Some(v);
        }
        if a == name {
            break;
        }
    }
    ctx.line
        .git_aliases
        .iter()
        .rev()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn force_push(ctx: &Ctx, scan: &mut Scan) {
    let Some((sub, rest)) = git_subcommand(&ctx.cmd.args) else {
        return;
    };
    let aliased: Vec<String>;
    let args = match git_alias(ctx, sub) {
        Some(value) if !value.starts_with('!') => {
            aliased = shell::words(value)
                .into_iter()
                .chain(rest.iter().cloned())
                .collect();
            match aliased.split_first() {
                Some((first, tail)) if first == "push" => tail,
                _ => return,
            }
        }
        _ if sub == "push" => rest,
        _ => return,
    };
    let (mut force, mut mirror, mut delete, mut all) = (false, false, false, false);
    let mut positionals: Vec<&str> = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        match a.as_str() {
            "--" => {
                positionals.extend(args[i..].iter().map(String::as_str));
                break;
            }
            // A lease only checks what the remote had: the default branch is rewritten all the
            // same. `--force-if-includes` is a lease too.
            "--force" | "--force-with-lease" | "--force-if-includes" => force = true,
            l if l.starts_with("--force-with-lease=") => force = true,
            "--no-force" | "--no-force-with-lease" => force = false,
            "--mirror" => mirror = true,
            "--delete" => delete = true,
            "--all" | "--branches" => all = true,
            // A dry run changes nothing on the remote.
            "--dry-run" => return,
            "--repo" | "--receive-pack" | "--exec" | "--push-option" => i += 1,
            long if long.starts_with("--") => {}
            short if short.len() > 1 && short.starts_with('-') => {
                for c in short[1..].chars() {
                    match c {
                        'f' => force = true,
                        'd' => delete = true,
                        'n' => return,
                        'o' => {
                            // `-o value` / `-ovalue`: the rest is the push option's value.
                            if short.ends_with('o') {
                                i += 1;
                            }
                            break;
                        }
                        _ => {}
                    }
                }
            }
            p => positionals.push(p),
        }
    }
    let remote = positionals.first().copied().unwrap_or("the default remote");
    let refspecs = positionals.get(1..).unwrap_or_default();
    let said = ctx.snippet();
    if mirror {
        scan.add(
            "force_push_default",
            format!("mirror push overwrites and deletes every branch on {remote}, the default one included (`{said}`)"),
        );
        return;
    }
    for spec in refspecs {
        let forced = force || spec.starts_with('+');
        let spec = spec.trim_start_matches('+');
        let (src, dst) = spec.split_once(':').unwrap_or((spec, spec));
        if (delete || src.is_empty()) && is_default_branch(dst) {
            scan.add(
                "force_push_default",
                format!("deletes the default branch `{dst}` on {remote} (`{said}`)"),
            );
            return;
        }
        // `HEAD`, `@` and `$(git branch --show-current)` all mean the current branch; a
        // pattern (`refs/heads/*`) covers the default branch too.
        let current = matches!(dst, "HEAD" | "@")
            || dst.contains("--show-current")
            || dst.contains("--abbrev-ref");
        if forced && !delete && (is_default_branch(dst) || current || dst.contains('*')) {
            let what = if current {
                "the current branch, which may be the default branch".to_string()
            } else if dst.contains('*') {
                format!("every branch matching `{dst}`, the default one included")
            } else {
                format!("the default branch `{dst}`")
            };
            scan.add(
                "force_push_default",
                format!("force push to {what} on {remote}, rewriting its history (`{said}`)"),
            );
            return;
        }
    }
    if force && refspecs.is_empty() {
        let what = if all {
            "every branch, the default one included"
        } else {
            "the current branch, which may be the default branch"
        };
        scan.add(
            "force_push_default",
            format!("force push of {what}, with no branch named (`{said}`)"),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// drop_database

const SQL_CLIENTS: &[&str] = &[
    "psql",
    "pgcli",
    "mysql",
    "mariadb",
    "mycli",
    "mysqlsh",
    "sqlite3",
    "sqlite",
    "duckdb",
    "clickhouse-client",
    "clickhouse",
    "cockroach",
    "sqlcmd",
    "usql",
    "snowsql",
    "litecli",
];
const DB_TOOLS: &[&str] = &["dropdb", "mysqladmin", "mongo", "mongosh"];
/// Programs that run another program given later in their arguments (`docker exec db psql …`).
const RUNNERS: &[&str] = &[
    "docker",
    "podman",
    "nerdctl",
    "kubectl",
    "oc",
    "docker-compose",
    "lxc",
    "incus",
];

/// A database (or schema) named as a throwaway one for tests or CI: one of the name's words
/// (split at `_`, `-`, `.` and between letters and digits) is `test`, `tests`, `testing` or
/// `ci` (`test_db_ci_123`, `myapp_test`, `ci-42`; not `latest`, `contest` or `testimonials`).
/// Dropping one is how test suites clean up, not a catastrophe.
pub(crate) fn throwaway_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let mut parts: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut digits = false;
    for c in lower.chars() {
        let boundary =
            !c.is_ascii_alphanumeric() || (!cur.is_empty() && c.is_ascii_digit() != digits);
        if boundary && !cur.is_empty() {
            parts.push(std::mem::take(&mut cur));
        }
        if c.is_ascii_alphanumeric() {
            digits = c.is_ascii_digit();
            cur.push(c);
        }
    }
    parts.push(cur);
    parts
        .iter()
        .any(|p| matches!(p.as_str(), "test" | "tests" | "testing" | "ci"))
}

/// Whether `text` contains `DROP DATABASE`, or `DROP SCHEMA … CASCADE` (in MySQL a schema *is*
/// a database, so there `DROP SCHEMA` alone counts), of a database that is not a throwaway
/// test one ([`throwaway_name`]). Words are compared case-insensitively and anything that is
/// not a word (comments included) separates them.
pub(crate) fn drops_database(text: &str, mysql: bool) -> Option<&'static str> {
    #[derive(PartialEq, Clone, Copy)]
    enum St {
        Idle,
        Drop,
        /// After DROP DATABASE / DROP SCHEMA (MySQL): the name comes next.
        DbName,
        /// After DROP SCHEMA: the name, then CASCADE; `Some(throwaway)` once named.
        Schema(Option<bool>),
    }
    let mut st = St::Idle;
    let b = text.as_bytes();
    let mut i = 0;
    // String literals and comments are data, not statements (`SELECT 'DROP DATABASE'`).
    let skip_to = |from: usize, end: &[u8]| {
        b[from..]
            .windows(end.len())
            .position(|w| w == end)
            .map_or(b.len(), |p| from + p + end.len())
    };
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b';', _) => {
                if st == St::DbName {
                    return Some("DROP DATABASE");
                }
                st = St::Idle;
                i += 1;
                continue;
            }
            (b'\'', _) => {
                i = skip_to(i + 1, b"'");
                continue;
            }
            (b'-', Some(b'-')) => {
                i = skip_to(i + 2, b"\n");
                continue;
            }
            (b'/', Some(b'*')) => {
                i = skip_to(i + 2, b"*/");
                continue;
            }
            _ => {}
        }
        if !(b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$') {
            i += 1;
        }
        let w = &text[start..i];
        let is = |k: &str| w.eq_ignore_ascii_case(k);
        st = match st {
            St::Drop if is("database") || (is("schema") && mysql) => St::DbName,
            St::Drop if is("schema") => St::Schema(None),
            St::DbName | St::Schema(None) if is("if") || is("exists") => st,
            St::DbName if throwaway_name(w) => St::Idle,
            St::DbName => {
                return Some(
                    if mysql && !text.to_ascii_lowercase().contains("database") {
                        "DROP SCHEMA"
                    } else {
                        "DROP DATABASE"
                    },
                );
            }
            St::Schema(None) => St::Schema(Some(throwaway_name(w))),
            St::Schema(Some(false)) if is("cascade") => return Some("DROP SCHEMA … CASCADE"),
            St::Schema(_) => st,
            _ if is("drop") => St::Drop,
            _ => St::Idle,
        };
    }
    (st == St::DbName).then_some("DROP DATABASE")
}

fn drop_database(ctx: &Ctx, scan: &mut Scan) {
    let cmd = ctx.cmd;
    let mut hit = database_drop(ctx, &cmd.program, &cmd.args);
    if hit.is_none() && RUNNERS.contains(&cmd.program.as_str()) {
        hit = cmd.args.iter().enumerate().find_map(|(k, a)| {
            let p = shell::program_name(a);
            (SQL_CLIENTS.contains(&p.as_str()) || DB_TOOLS.contains(&p.as_str()))
                .then(|| database_drop(ctx, &p, &cmd.args[k + 1..]))
                .flatten()
        });
    }
    if let Some(what) = hit {
        scan.add(
            "drop_database",
            format!("{what} (`{}`)", ctx.pipeline_snippet()),
        );
    }
}

/// What `program args…` drops, if it drops a database; stdin (here-documents, `echo … |`)
/// counts for the SQL clients.
fn database_drop(ctx: &Ctx, program: &str, args: &[String]) -> Option<String> {
    let stdin = || {
        ctx.simple
            .redirects
            .iter()
            .filter(|r| matches!(r.op, lex::RedirOp::HereDoc | lex::RedirOp::HereString))
            .map(|r| r.target.text.as_str())
            .chain((ctx.simple.stage > 0).then_some(ctx.pipe.fed.as_str()))
    };
    match program {
        "dropdb" => {
            let names = operands(
                args,
                &[
                    "-h",
                    "-p",
                    "-U",
                    "--host",
                    "--port",
                    "--username",
                    "--maintenance-db",
                ],
            );
            (!names.is_empty() && !names.iter().all(|n| throwaway_name(n)))
                .then(|| "drops a PostgreSQL database with dropdb".into())
        }
        "mysqladmin" => {
            let names = operands(
                args,
                &[
                    "-u", "-h", "-P", "-S", "--user", "--host", "--port", "--socket",
                ],
            );
            let drop = names.iter().position(|a| a.eq_ignore_ascii_case("drop"))?;
            let dropped = &names[drop + 1..];
            (!dropped.iter().all(|n| throwaway_name(n)) || dropped.is_empty())
                .then(|| "drops a MySQL database with mysqladmin".into())
        }
        "mongo" | "mongosh" => args
            .iter()
            .map(String::as_str)
            .chain(stdin())
            .any(|t| t.to_ascii_lowercase().contains("dropdatabase"))
            .then(|| "drops a MongoDB database with dropDatabase()".into()),
        p if SQL_CLIENTS.contains(&p) => {
            let mysql = matches!(p, "mysql" | "mariadb" | "mycli" | "mysqlsh");
            // `--command=SQL`: the option name is not SQL (its `--` would read as a comment).
            args.iter()
                .map(|a| sql_of_option(a))
                .chain(stdin())
                .find_map(|t| drops_database(t, mysql))
                .map(|sql| format!("drops a database with `{sql}` run by {p}"))
        }
        _ => None,
    }
}

/// The SQL an option word carries: `--command=SQL`'s value (the option name is not SQL: its
/// `--` would read as a comment), `-eSQL` / `-cSQL` glued to its flag; else the word.
fn sql_of_option(a: &str) -> &str {
    if let Some((_, v)) = a.strip_prefix("--").and_then(|o| o.split_once('=')) {
        return v;
    }
    match a.as_bytes() {
        [b'-', f, _, ..] if b"ecqQ".contains(f) => &a[2..],
        _ => a,
    }
}

/// The operands of `args`, the values of the options in `valued` left out.
fn operands<'a>(args: &'a [String], valued: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if valued.contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') {
            out.push(a.as_str());
        }
    }
    out
}
