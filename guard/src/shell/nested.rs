//! The command text that multiplexers and job runners run in turn: `tmux new-session 'cmd'`,
//! `tmux send-keys 'cmd' Enter`, `parallel cmd ::: args`, and whether `runuser` wraps a
//! command (`runuser -u user -- cmd`) or runs one with `-c` like `su`.
//!
//! Must never build more text than it was given times a small bound (`parallel`'s
//! combinations are capped).

use super::option_value;

/// Commands built from one `parallel` line at most.
const MAX_JOBS: usize = 16;

/// `runuser -u USER [--] CMD…` wraps CMD; the su-like forms (`runuser -l USER -c CMD`,
/// `runuser - USER`) are read by `nested` instead.
pub(super) fn runuser_wraps(args: &[String]) -> bool {
    let user = args
        .iter()
        .any(|a| a == "-u" || a == "--user" || a.starts_with("--user="));
    user && option_value(args, "-c", "--command").is_none()
}

/// What a tmux command runs: the shell command of `new-session`, `new-window`,
/// `split-window`, `respawn-*` and `run-shell`, or the keys `send-keys` types.
pub(super) fn tmux(args: &[String]) -> Option<String> {
    // Global options before the subcommand; `-L`, `-S`, `-f`, `-T` take a value.
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if !a.starts_with('-') {
            break;
        }
        i += if matches!(a.as_str(), "-L" | "-S" | "-f" | "-T" | "-c") {
            2
        } else {
            1
        };
    }
    let sub = args.get(i)?.as_str();
    let rest = args.get(i + 1..).unwrap_or_default();
    let (valued, keys): (&[u8], bool) = match sub {
        "new-session" | "new" | "new-window" | "neww" | "split-window" | "splitw"
        | "respawn-pane" | "respawnp" | "respawn-window" | "respawnw" => (b"cefFnstxylSb", false),
        "run-shell" | "run" => (b"td", false),
        "send-keys" | "send" => (b"tNc", true),
        _ => return None,
    };
    let mut words = Vec::new();
    let mut k = 0;
    while let Some(a) = rest.get(k) {
        k += 1;
        if a.len() > 1 && a.starts_with('-') && words.is_empty() {
            let last = a.as_bytes()[a.len() - 1];
            if a.len() == 2 && valued.contains(&last) {
                k += 1;
            }
            continue;
        }
        if keys {
            // Key names: Enter and C-m end a line; other named keys are not text.
            match a.as_str() {
                "Enter" | "C-m" | "KPEnter" => words.push("\n".to_string()),
                k if k.len() > 2 && k.starts_with("C-") || k == "Escape" || k == "Space" => {}
                _ => words.push(a.clone()),
            }
        } else {
            words.push(a.clone());
        }
    }
    let text = words.join(" ");
    (!text.trim().is_empty()).then_some(text)
}

/// `parallel [options] CMD… ::: ARGS…`: the commands it runs, one per argument (`{}` replaced
/// by the argument, or the argument appended); with no CMD each argument is a command. `None`
/// without `:::` (the arguments come from standard input, as for `xargs`).
pub(super) fn parallel(args: &[String]) -> Option<String> {
    let sep = args.iter().position(|a| a == ":::" || a == ":::+")?;
    let sk = super::opts::skip_opts(&args[..sep], 0, &super::opts::PARALLEL);
    let cmd = args[sk.next.min(sep)..sep].join(" ");
    let values = args[sep + 1..]
        .iter()
        .take_while(|a| !a.starts_with(":::"))
        .take(MAX_JOBS);
    let jobs: Vec<String> = values
        .map(|v| {
            if cmd.is_empty() {
                v.clone()
            } else if cmd.contains("{}") {
                cmd.replace("{}", v)
            } else {
                format!("{cmd} {v}")
            }
        })
        .collect();
    (!jobs.is_empty()).then(|| jobs.join("\n"))
}
