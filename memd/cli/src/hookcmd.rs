//! The command line a client's config runs to start one of memd's hooks, for the OS and the
//! shell that client hands the line to, and reading the program back out of such a line.
//!
//! Pure functions of (OS, client, directory, file): only `Os::current` looks at the build
//! target, so the Windows renderings are unit-tested on Linux. Must never touch files or the
//! environment.
//!
//! The shells, as the clients use them on Windows: Claude Code runs hook commands through Git
//! Bash (`bash -c`); Cursor, Codex CLI and Gemini CLI through PowerShell (Codex falls back to
//! `cmd.exe`). A bare path is the one spelling all three accept, so it is used whenever the path
//! has no character any of them treats specially; otherwise Git Bash gets a single-quoted path
//! with forward slashes, PowerShell its call operator and a single-quoted path (`& 'C:\a b\x'`).

use super::clients::{ClientKind, Os};

/// The shell a client hands its hook command line to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Interpreter {
    /// `sh -c` on Linux and macOS.
    Posix,
    /// Git for Windows' bash (Claude Code on Windows).
    GitBash,
    /// Windows PowerShell (Cursor, Codex CLI, Gemini CLI on Windows).
    PowerShell,
}

pub fn shell_for(os: Os, client: ClientKind) -> Interpreter {
    match (os, client) {
        (Os::Unix, _) => Interpreter::Posix,
        (Os::Windows, ClientKind::ClaudeCode) => Interpreter::GitBash,
        (Os::Windows, _) => Interpreter::PowerShell,
    }
}

/// The hook command line: executable `exe` (without `.exe`) in `dir`, then `args`.
pub fn hook_line(os: Os, client: ClientKind, dir: &str, exe: &str, args: &str) -> String {
    let sep = if os == Os::Windows { '\\' } else { '/' };
    let trimmed = dir.trim_end_matches(['/', sep]);
    let path = format!("{trimmed}{sep}{}", os.exe(exe));
    let program = quote(shell_for(os, client), &path);
    if args.is_empty() {
        program
    } else {
        format!("{program} {args}")
    }
}

/// `path` as the first word of a command line for `shell`.
pub fn quote(shell: Interpreter, path: &str) -> String {
    match shell {
        Interpreter::Posix => posix_quote(path),
        Interpreter::GitBash => posix_quote(&path.replace('\\', "/")),
        Interpreter::PowerShell if is_plain(path, "\\/._-:") => path.to_string(),
        // PowerShell reads the typographic single quotes as `'` too; each is escaped by doubling.
        Interpreter::PowerShell => {
            let mut out = String::from("& '");
            for c in path.chars() {
                if matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '\u{201a}' | '\u{201b}') {
                    out.push(c);
                }
                out.push(c);
            }
            out.push('\'');
            out
        }
    }
}

fn is_plain(s: &str, extra: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

/// Quotes a path for a POSIX shell when it needs it.
pub fn posix_quote(s: &str) -> String {
    if is_plain(s, "/._-+:@%,=") {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The program a command line from [`hook_line`] (or a user's similar one) runs: its first word,
/// unquoted. A leading PowerShell `&` is skipped and `''` inside its quotes is one `'`; a
/// backslash outside quotes is a path separator, except in POSIX's `'\''`.
pub fn program_of(cmd: &str) -> String {
    let mut rest = cmd.trim_start();
    let powershell = rest.starts_with("& ") || rest.starts_with("&'") || rest.starts_with("&\"");
    if powershell {
        rest = rest[1..].trim_start();
    }
    let chars: Vec<char> = rest.chars().collect();
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            None if c.is_whitespace() => break,
            None if c == '\\' && chars.get(i + 1) == Some(&'\'') => {
                out.push('\'');
                i += 1;
            }
            None if c == '\'' || c == '"' => quote = Some(c),
            Some('\'') if c == '\'' && powershell && chars.get(i + 1) == Some(&'\'') => {
                out.push('\'');
                i += 1;
            }
            Some(q) if c == q => quote = None,
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// An executable's file name without its directory (either separator) or a `.exe` suffix.
pub fn program_stem(program: &str) -> &str {
    let name = program.rsplit(['/', '\\']).next().unwrap_or(program);
    match name.len().checked_sub(4) {
        Some(cut) if name.is_char_boundary(cut) && name[cut..].eq_ignore_ascii_case(".exe") => {
            &name[..cut]
        }
        _ => name,
    }
}

/// `path` without the `\\?\` prefix Windows' `canonicalize` adds (`\\?\C:\x` is `C:\x`,
/// `\\?\UNC\host\share` is `\\host\share`): shells and clients do not take that form.
pub fn without_verbatim(path: &str) -> String {
    if let Some(unc) = path.strip_prefix(r"\\?\UNC\") {
        return format!(r"\\{unc}");
    }
    match path.strip_prefix(r"\\?\") {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => rest.to_string(),
        _ => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ClientKind::{ClaudeCode, Codex, Cursor, Gemini};

    fn win(client: ClientKind, dir: &str, args: &str) -> String {
        hook_line(Os::Windows, client, dir, "hook-prompt", args)
    }

    #[test]
    fn unix_lines_are_unchanged() {
        assert_eq!(
            hook_line(Os::Unix, Cursor, "/opt/memd bin/", "hook-stop", "--cursor"),
            "'/opt/memd bin/hook-stop' --cursor"
        );
        assert_eq!(
            hook_line(Os::Unix, ClaudeCode, "/usr/bin", "hook-stop", ""),
            "/usr/bin/hook-stop"
        );
    }

    #[test]
    fn windows_plain_paths_stay_bare_for_every_shell() {
        let dir = r"C:\Users\dev\.local\bin";
        assert_eq!(
            win(Cursor, dir, "--cursor"),
            r"C:\Users\dev\.local\bin\hook-prompt.exe --cursor"
        );
        assert_eq!(
            win(ClaudeCode, dir, ""),
            "C:/Users/dev/.local/bin/hook-prompt.exe"
        );
    }

    #[test]
    fn windows_paths_with_spaces_ampersands_quotes_and_trailing_backslashes() {
        let spaced = r"C:\Program Files\memd\";
        assert_eq!(
            win(Codex, spaced, "--codex"),
            r"& 'C:\Program Files\memd\hook-prompt.exe' --codex"
        );
        assert_eq!(
            win(ClaudeCode, spaced, ""),
            "'C:/Program Files/memd/hook-prompt.exe'"
        );
        let amp = r"D:\R&D tools\O'Neil";
        assert_eq!(
            win(Gemini, amp, "--gemini"),
            r"& 'D:\R&D tools\O''Neil\hook-prompt.exe' --gemini"
        );
        assert_eq!(
            win(ClaudeCode, amp, ""),
            r"'D:/R&D tools/O'\''Neil/hook-prompt.exe'"
        );
        assert_eq!(
            win(Cursor, "C:\\\u{2019}x", ""),
            "& 'C:\\\u{2019}\u{2019}x\\hook-prompt.exe'"
        );
    }

    #[test]
    fn canonical_windows_paths_lose_their_verbatim_prefix() {
        assert_eq!(
            without_verbatim(r"\\?\C:\Program Files\memd"),
            r"C:\Program Files\memd"
        );
        assert_eq!(
            without_verbatim(r"\\?\UNC\host\share\bin"),
            r"\\host\share\bin"
        );
        assert_eq!(without_verbatim("/opt/memd"), "/opt/memd");
        assert_eq!(without_verbatim(r"\\?\Volume{x}\bin"), r"\\?\Volume{x}\bin");
    }

    #[test]
    fn the_program_is_read_back_from_every_rendering() {
        for dir in [r"C:\Program Files\memd\", r"D:\R&D tools\O'Neil", r"C:\bin"] {
            for client in [ClaudeCode, Codex, Cursor, Gemini] {
                let line = win(client, dir, "--x");
                let program = program_of(&line);
                let want = format!("{}\\hook-prompt.exe", dir.trim_end_matches('\\'));
                let want = match client {
                    ClaudeCode => want.replace('\\', "/"),
                    _ => want,
                };
                assert_eq!(program, want, "{line}");
                assert_eq!(program_stem(&program), "hook-prompt", "{line}");
            }
        }
        assert_eq!(program_of("'/a b/hook-stop' --cursor"), "/a b/hook-stop");
        assert_eq!(program_stem("hook-stop"), "hook-stop");
        assert_eq!(program_stem(r"C:\x\HOOK-STOP.EXE"), "HOOK-STOP");
        assert_eq!(program_stem("é"), "é");
    }
}
