//! The asking rules about this machine that stop short of wiping it: `perm_root` (recursive
//! chmod / chown / chgrp of `/`, the home directory or a system directory), `system_file`
//! (moving, removing, truncating or overwriting a system file) and `git_dir_delete` (deleting a
//! repository's `.git`).
//!
//! Must never flag a relative path it cannot place or a project's own files that merely share
//! a system file's name (`./etc/passwd`), and never deny: these are asked about.

use super::local::{catastrophic_target, split_args};
use super::{Ctx, Scan, clip, paths};
use crate::shell::lex;

pub(crate) fn check(ctx: &Ctx, scan: &mut Scan) {
    match ctx.cmd.program.as_str() {
        "chmod" | "chown" | "chgrp" | "setfacl" => perm_root(ctx, scan),
        "mv" | "cp" | "rm" | "truncate" | "tee" | "shred" | "unlink" => system_file(ctx, scan),
        _ => {}
    }
    if ctx.cmd.program == "rm" {
        git_dir(ctx, scan);
    }
}

fn perm_root(ctx: &Ctx, scan: &mut Scan) {
    let args = &ctx.cmd.args;
    let recursive = args.iter().any(|a| {
        a == "--recursive"
            || (a.len() > 1 && a.starts_with('-') && !a.starts_with("--") && a.contains('R'))
    });
    if !recursive {
        return;
    }
    let (_, operands) = split_args(args);
    // The first operand is the mode, owner or ACL spec (`-m spec` for setfacl is an option).
    let targets = if ctx.cmd.program == "setfacl" {
        &operands[..]
    } else {
        operands.get(1..).unwrap_or_default()
    };
    if let Some(what) = targets.iter().find_map(|t| catastrophic_target(ctx, t)) {
        scan.add(
            "perm_root",
            format!(
                "changes the permissions or owner of {what} and everything below it (`{}`)",
                ctx.snippet()
            ),
        );
    }
}

fn system_file(ctx: &Ctx, scan: &mut Scan) {
    let p = ctx.cmd.program.as_str();
    let args = &ctx.cmd.args;
    let found = if p == "truncate" {
        let mut it = args.iter();
        let mut hit = None;
        while let Some(a) = it.next() {
            if matches!(a.as_str(), "-s" | "-r" | "--size" | "--reference") {
                it.next();
            } else if !a.starts_with('-') && paths::in_system_tree(a) {
                hit = Some(format!("truncates the system file {}", clip(a)));
                break;
            }
        }
        hit
    } else {
        let (flags, operands) = split_args(args);
        let append = p == "tee" && flags.iter().any(|f| *f == "-a" || *f == "--append");
        let recursive_rm = p == "rm" && flags.iter().any(|f| f.contains(['r', 'R']));
        let verb = match p {
            "mv" => "moves",
            "cp" => "overwrites",
            "tee" => "overwrites",
            _ => "deletes",
        };
        // mv and cp: the sources (mv) and the destination (both) count; the rest: every operand.
        let candidates: Vec<&str> = match p {
            "cp" => operands.last().into_iter().copied().collect(),
            _ => operands.clone(),
        };
        // Deleting a program by hand is how one installed without a package is removed
        // (`rm /usr/bin/docker-compose`): only the configuration and boot files count there.
        let deletes = matches!(p, "rm" | "unlink" | "shred");
        (!append && !recursive_rm)
            .then(|| {
                candidates
                    .iter()
                    .filter(|o| !deletes || o.starts_with("/etc/") || o.starts_with("/boot/"))
                    .find_map(|o| paths::system_file(o))
                    .map(|what| format!("{verb} {what}"))
            })
            .flatten()
    };
    if let Some(what) = found {
        scan.add("system_file", format!("{what} (`{}`)", ctx.snippet()));
    }
}

/// `> /etc/fstab`: truncating a system file needs no command.
pub(crate) fn redirects(simple: &lex::Simple, scan: &mut Scan) {
    let hit = simple
        .redirects
        .iter()
        .filter(|r| r.op == lex::RedirOp::Write)
        .find_map(|r| paths::system_file(&r.target.text));
    if let Some(what) = hit {
        scan.add(
            "system_file",
            format!(
                "overwrites {what} with a redirection (`{}`)",
                clip(&super::render(simple))
            ),
        );
    }
}

/// `rm -r` of a directory called `.git`: the repository's whole history.
fn git_dir(ctx: &Ctx, scan: &mut Scan) {
    let (flags, operands) = split_args(&ctx.cmd.args);
    let recursive = flags
        .iter()
        .any(|f| *f == "--recursive" || (!f.starts_with("--") && f.contains(['r', 'R'])));
    if !recursive {
        return;
    }
    let hit = operands.iter().find(|o| {
        ctx.line.expand(o).iter().any(|t| {
            let t = t.trim_end_matches('/');
            t == ".git" || t.ends_with("/.git")
        })
    });
    if let Some(t) = hit {
        scan.add(
            "git_dir_delete",
            format!(
                "deletes the repository's history in `{}` (`{}`)",
                clip(t),
                ctx.snippet()
            ),
        );
    }
}
