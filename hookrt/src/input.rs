//! How a hook was invoked: the command-line mode, the Cursor double-fire guard, bounded stdin.
//!
//! Owns reading the client's stdin with a hard size cap. It must never read more than the cap into
//! memory (a larger input is refused without draining the rest).

use std::io::Read;

/// Largest stdin a hook accepts (1 MiB).
pub const MAX_STDIN_BYTES: u64 = 1024 * 1024;

/// Which client's hook configuration invoked the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Invoked from a Claude Code settings file (no flag).
    Claude,
    /// Invoked from `~/.cursor/hooks.json` (`--cursor`).
    Cursor,
    /// Invoked from Codex CLI's `~/.codex/hooks.json` (`--codex`): Claude Code's event shapes,
    /// without `CLAUDE_PROJECT_DIR` and with a transcript in Codex's own format.
    Codex,
    /// Invoked from `~/.gemini/settings.json` (`--gemini`): Gemini CLI, Antigravity's `agy`.
    Gemini,
    /// Invoked by memd's OpenCode plugin (`--opencode`), with the plugin's own JSON.
    Opencode,
}

/// The mode from the command-line arguments (program name excluded). Any `--cursor*` flag counts,
/// so variants such as `--cursor-response` in older configs still select Cursor.
pub fn mode_from_args<I: IntoIterator<Item = String>>(args: I) -> Mode {
    let mut mode = Mode::Claude;
    for arg in args {
        match arg.as_str() {
            "--codex" => mode = Mode::Codex,
            "--gemini" => mode = Mode::Gemini,
            "--opencode" => mode = Mode::Opencode,
            a if a.starts_with("--cursor") => return Mode::Cursor,
            _ => {}
        }
    }
    mode
}

/// True when Cursor is running the copy of the hook registered in Claude Code's settings: Cursor
/// loads `~/.claude/settings.json` too, and its own copy (with `--cursor`) already handles the event.
pub fn is_cursor_double_fire(mode: Mode, cursor_version_env: Option<&str>) -> bool {
    mode == Mode::Claude && cursor_version_env.is_some_and(|v| !v.trim().is_empty())
}

/// Why stdin could not be used.
#[derive(Debug)]
pub enum StdinError {
    TooLarge,
    Io(std::io::Error),
}

impl StdinError {
    pub fn kind(&self) -> &'static str {
        match self {
            StdinError::TooLarge => "stdin_too_large",
            StdinError::Io(_) => "stdin_read",
        }
    }

    pub fn message(&self) -> String {
        match self {
            StdinError::TooLarge => format!("stdin larger than {MAX_STDIN_BYTES} bytes"),
            StdinError::Io(e) => format!("reading stdin failed: {e}"),
        }
    }
}

/// Reads all of `reader` if it holds at most `limit` bytes.
pub fn read_bounded<R: Read>(reader: R, limit: u64) -> Result<Vec<u8>, StdinError> {
    let mut buf = Vec::new();
    // One byte past the cap tells "exactly at the limit" from "too large".
    reader
        .take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(StdinError::Io)?;
    if buf.len() as u64 > limit {
        return Err(StdinError::TooLarge);
    }
    Ok(buf)
}

/// Reads the process's stdin with the 1 MiB cap.
pub fn read_stdin() -> Result<Vec<u8>, StdinError> {
    read_bounded(std::io::stdin().lock(), MAX_STDIN_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_follows_the_cursor_flag() {
        assert_eq!(mode_from_args(Vec::<String>::new()), Mode::Claude);
        assert_eq!(mode_from_args(vec!["--cursor".to_string()]), Mode::Cursor);
        assert_eq!(
            mode_from_args(vec!["--cursor-response".to_string()]),
            Mode::Cursor
        );
        assert_eq!(mode_from_args(vec!["--verbose".to_string()]), Mode::Claude);
        assert_eq!(mode_from_args(vec!["--gemini".to_string()]), Mode::Gemini);
        assert_eq!(
            mode_from_args(vec!["--opencode".to_string()]),
            Mode::Opencode
        );
        assert_eq!(mode_from_args(vec!["--codex".to_string()]), Mode::Codex);
    }

    #[test]
    fn double_fire_only_for_the_claude_copy_inside_cursor() {
        assert!(is_cursor_double_fire(Mode::Claude, Some("1.7.2")));
        assert!(!is_cursor_double_fire(Mode::Cursor, Some("1.7.2")));
        assert!(!is_cursor_double_fire(Mode::Claude, None));
        assert!(!is_cursor_double_fire(Mode::Claude, Some(" ")));
    }

    #[test]
    fn bounded_read_accepts_the_limit_and_refuses_more() {
        assert_eq!(read_bounded(&b"abcd"[..], 4).unwrap(), b"abcd");
        assert!(matches!(
            read_bounded(&b"abcde"[..], 4),
            Err(StdinError::TooLarge)
        ));
    }

    #[test]
    fn bounded_read_stops_at_the_cap_on_endless_input() {
        // An endless reader must not be drained: the read stops one byte past the cap.
        let endless = std::io::repeat(b'x');
        assert!(matches!(
            read_bounded(endless, 1024),
            Err(StdinError::TooLarge)
        ));
    }
}
