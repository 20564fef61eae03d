//! The `secret_exfiltration` rule: one command line that both reads a secret file (a private
//! key, `.env`, cloud or registry credentials) and sends data to another machine. The two are
//! collected over the whole line, nesting included, and judged once at the end.
//!
//! Must never count a secret used for authentication (`ssh -i key`, `scp -i`, `curl --key`) as
//! one being sent, nor a remote file (`scp host:.env .`) or a URL (`curl https://x/.env`) as a
//! local secret.

use super::{Ctx, Scan, clip, paths};
use crate::shell::{Command, lex};

/// The first secret read and the first network sender seen anywhere in the command line.
#[derive(Default)]
pub(crate) struct Exfil {
    secret: Option<(&'static str, String)>,
    sender: Option<String>,
}

/// Programs that do not read the contents of the files they name.
const NON_READERS: &[&str] = &[
    "echo",
    "printf",
    "test",
    "[",
    "ls",
    "touch",
    "mkdir",
    "rm",
    "stat",
    "chmod",
    "chown",
    "file",
    "which",
    "type",
    "git",
    "ssh",
    "ssh-add",
    "ssh-keygen",
    "ssh-copy-id",
    "cd",
    "realpath",
    "basename",
    "dirname",
    "export",
    "unset",
];

pub(crate) fn note(ctx: &Ctx, scan: &mut Scan) {
    if ctx.remote {
        return;
    }
    if scan.exfil.secret.is_none() {
        scan.exfil.secret = secret_read_by(ctx);
    }
    if scan.exfil.sender.is_none() {
        scan.exfil.sender = sender(ctx.cmd);
    }
}

pub(crate) fn finish(scan: &mut Scan) {
    if let (Some((what, path)), Some(sender)) = (&scan.exfil.secret, &scan.exfil.sender) {
        let reason = format!(
            "sends {what} (`{}`) off the machine with `{sender}`",
            clip(path)
        );
        scan.add("secret_exfiltration", reason);
    }
}

fn secret_read_by(ctx: &Ctx) -> Option<(&'static str, String)> {
    let cmd = ctx.cmd;
    let from_redirect = ctx
        .simple
        .redirects
        .iter()
        .filter(|r| matches!(r.op, lex::RedirOp::Read | lex::RedirOp::ReadWrite))
        .find_map(|r| paths::secret_mention(&r.target.text));
    if from_redirect.is_some() {
        return from_redirect;
    }
    let args = &cmd.args;
    match cmd.program.as_str() {
        p if NON_READERS.contains(&p) => None,
        // Identity files authenticate the transfer; only the files transferred count.
        "scp" | "rsync" | "sftp" => {
            let mut i = 0;
            let mut found = None;
            while let Some(a) = args.get(i) {
                i += 1;
                if matches!(
                    a.as_str(),
                    "-i" | "-F" | "-P" | "-o" | "-c" | "-S" | "-J" | "-l" | "-e" | "-B"
                ) {
                    i += 1;
                } else if !a.starts_with('-') && found.is_none() {
                    found = paths::secret_mention(a);
                }
            }
            found
        }
        // curl sends a file named after `@` or with `-T`; `--key`/`--cert` only authenticate.
        "curl" | "http" | "https" | "xh" | "xhs" | "httpie" => {
            let mut it = args.iter();
            while let Some(a) = it.next() {
                if matches!(a.as_str(), "-T" | "--upload-file") {
                    if let Some(m) = it.next().and_then(|f| paths::secret_mention(f)) {
                        return Some(m);
                    }
                } else if let Some((_, f)) = a.rsplit_once('@')
                    && let Some(m) = paths::secret_mention(&format!("@{f}"))
                {
                    return Some(m);
                }
            }
            None
        }
        "wget" => args
            .iter()
            .filter_map(|a| {
                a.strip_prefix("--post-file=")
                    .or(a.strip_prefix("--body-file="))
            })
            .find_map(paths::secret_mention),
        _ => args.iter().find_map(|a| paths::secret_mention(a)),
    }
}

/// The program, if `cmd` sends data to another machine.
fn sender(cmd: &Command) -> Option<String> {
    let p = cmd.program.as_str();
    let args = &cmd.args;
    let operands: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let last = operands.last().copied().unwrap_or("");
    let has = |w: &str| args.iter().any(|a| a == w);
    let sends = match p {
        "curl" | "wget" | "wget2" | "http" | "https" | "xh" | "xhs" | "httpie" | "nc" | "ncat"
        | "netcat" | "socat" | "telnet" | "ftp" | "sftp" | "tftp" | "lftp" | "ssh" | "mail"
        | "mailx" | "sendmail" | "mutt" => !operands.is_empty(),
        "scp" | "rsync" => paths::is_remote_spec(last),
        "aws" => {
            has("s3") && (has("cp") || has("mv") || has("sync")) && last.starts_with("s3://")
                || has("s3api") && has("put-object")
        }
        "gsutil" => (has("cp") || has("mv") || has("rsync")) && last.starts_with("gs://"),
        "gcloud" => has("storage") && (has("cp") || has("rsync")) && last.starts_with("gs://"),
        "rclone" => {
            (has("copy") || has("copyto") || has("sync") || has("move"))
                && paths::is_remote_spec(last)
        }
        "az" => has("storage") && has("upload"),
        _ => false,
    };
    sends.then(|| p.to_string())
}
