//! Claude Code's version, for writing only what it accepts (`alwaysLoad` on a server entry came
//! in 2.1.121). Owns running `claude --version`, reading its answer and telling the user what
//! that means for the scoring tool; must never fail
//! `memd init`: no answer is `None`.

use std::process::{Command, Stdio};

/// The first release that loads an MCP server's tools up front when its entry says
/// `"alwaysLoad": true`.
pub const ALWAYS_LOAD_SINCE: (u32, u32, u32) = (2, 1, 121);

/// `(major, minor, patch)` of the `claude` on PATH, if it runs and says.
pub fn installed_version() -> Option<(u32, u32, u32)> {
    let claude = super::clients::on_path("claude")?;
    let out = Command::new(claude)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    parse_version(&String::from_utf8_lossy(&out.stdout))
}

/// `2.1.328 (Claude Code)` → `(2, 1, 328)`.
pub fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let word = text.split_whitespace().next()?;
    let mut parts = word.split('.').map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

pub fn takes_always_load(v: (u32, u32, u32)) -> bool {
    v >= ALWAYS_LOAD_SINCE
}

/// Whether the installed Claude Code accepts `alwaysLoad` on a server entry (2.1.121 and later);
/// says what it found. Without a `claude` to ask, memd writes only what every version accepts.
pub fn announce_always_load() -> bool {
    match installed_version() {
        Some(v) if takes_always_load(v) => {
            println!(
                "Claude Code {}.{}.{}: memd-score (score_response only) is always loaded",
                v.0, v.1, v.2
            );
            true
        }
        Some(v) => {
            println!(
                "Claude Code {}.{}.{} predates alwaysLoad (2.1.121): the scoring tool stays deferred, one ToolSearch per session",
                v.0, v.1, v.2
            );
            false
        }
        None => {
            println!(
                "Claude Code's version is unknown (no `claude` on PATH): the scoring tool stays deferred; run `memd init` again from a shell where `claude` runs"
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_and_compared() {
        assert_eq!(parse_version("2.1.328 (Claude Code)\n"), Some((2, 1, 328)));
        assert_eq!(parse_version("claude 2"), None);
        assert!(takes_always_load((2, 1, 121)));
        assert!(takes_always_load((3, 0, 0)));
        assert!(!takes_always_load((2, 1, 120)));
        assert!(!takes_always_load((1, 9, 999)));
    }
}
