//! The rules about shared state that lives on servers: `force_push_default` (git remotes) and
//! `drop_database` (SQL clients and the drop tools of PostgreSQL, MySQL and MongoDB).
//!
//! Must never treat text that is only searched or printed (`grep "DROP DATABASE"`, `echo`, `git
//! log --grep`) as executed, and never flag a push that cannot rewrite a default branch
//! (`--force-with-lease`, a feature branch, a dry run).

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

fn force_push(ctx: &Ctx, scan: &mut Scan) {
    let Some(("push", args)) = git_subcommand(&ctx.cmd.args) else {
        return;
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
            "--force" => force = true,
            "--no-force" => force = false,
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

/// Whether `text` contains `DROP DATABASE`, or `DROP SCHEMA … CASCADE` (in MySQL a schema *is*
/// a database, so there `DROP SCHEMA` alone counts). Words are compared case-insensitively and
/// anything that is not a word (comments included) separates them.
pub(crate) fn drops_database(text: &str, mysql: bool) -> Option<&'static str> {
    #[derive(PartialEq)]
    enum St {
        Idle,
        Drop,
        Schema,
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
        st = match st {
            St::Drop if w.eq_ignore_ascii_case("database") => return Some("DROP DATABASE"),
            St::Drop if w.eq_ignore_ascii_case("schema") && mysql => return Some("DROP SCHEMA"),
            St::Drop if w.eq_ignore_ascii_case("schema") => St::Schema,
            St::Schema if w.eq_ignore_ascii_case("cascade") => {
                return Some("DROP SCHEMA … CASCADE");
            }
            St::Schema => St::Schema,
            _ if w.eq_ignore_ascii_case("drop") => St::Drop,
            _ => St::Idle,
        };
    }
    None
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
        "dropdb" => args
            .iter()
            .any(|a| !a.starts_with('-'))
            .then(|| "drops a PostgreSQL database with dropdb".into()),
        "mysqladmin" => args
            .iter()
            .any(|a| a.eq_ignore_ascii_case("drop"))
            .then(|| "drops a MySQL database with mysqladmin".into()),
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
                .map(
                    |a| match a.strip_prefix("--").and_then(|o| o.split_once('=')) {
                        Some((_, v)) => v,
                        None => a.as_str(),
                    },
                )
                .chain(stdin())
                .find_map(|t| drops_database(t, mysql))
                .map(|sql| format!("drops a database with `{sql}` run by {p}"))
        }
        _ => None,
    }
}
