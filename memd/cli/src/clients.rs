//! The clients memd wires itself into: where each keeps its config, how it is detected, which
//! ones a `memd init` run configures.
//!
//! Owns paths and detection only (Claude Code, Codex CLI, Cursor, Gemini CLI, OpenCode, Copilot
//! CLI). Must never read or
//! write a client's files: `init`, `opencode` and `doctor` do that.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The platform whose conventions apply (the clients' homes, executable names, hook shells).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Os {
    Unix,
    Windows,
}

impl Os {
    /// The OS this `memd` was built for.
    pub fn current() -> Os {
        if cfg!(windows) { Os::Windows } else { Os::Unix }
    }

    /// An executable's file name: `hook-prompt.exe` on Windows.
    pub fn exe(self, name: &str) -> String {
        match self {
            Os::Unix => name.to_string(),
            Os::Windows => format!("{name}.exe"),
        }
    }
}

/// Where each client keeps what memd edits.
#[derive(Debug, Clone)]
pub struct ClientFiles {
    pub claude_dir: PathBuf,
    pub claude_settings: PathBuf,
    pub claude_json: PathBuf,
    pub cursor_dir: PathBuf,
    pub cursor_hooks: PathBuf,
    pub cursor_mcp: PathBuf,
    /// `~/.codex` (`$CODEX_HOME` when set).
    pub codex_dir: PathBuf,
    pub codex_hooks: PathBuf,
    pub codex_config: PathBuf,
    /// `~/.gemini` (`$GEMINI_CLI_HOME/.gemini` when set): Gemini CLI and Antigravity's `agy`.
    pub gemini_dir: PathBuf,
    pub gemini_settings: PathBuf,
    /// `$XDG_CONFIG_HOME/opencode`, else `~/.config/opencode` (on Windows too:
    /// `%USERPROFILE%\.config\opencode`).
    pub opencode_dir: PathBuf,
    pub opencode_config: PathBuf,
    /// memd's plugin, in the directory OpenCode loads global plugins from.
    pub opencode_plugin: PathBuf,
    /// `~/.copilot`: GitHub Copilot CLI (memd registers only its MCP server there).
    pub copilot_dir: PathBuf,
    pub copilot_mcp: PathBuf,
}

impl ClientFiles {
    /// The files under one home directory, with every client at its default place.
    #[cfg(test)]
    pub fn under(home: &Path) -> ClientFiles {
        ClientFiles::at(home, &home.join(".gemini"), &home.join(".config"))
    }

    fn at(home: &Path, gemini_dir: &Path, config_home: &Path) -> ClientFiles {
        let opencode_dir = config_home.join("opencode");
        ClientFiles {
            claude_dir: home.join(".claude"),
            claude_settings: home.join(".claude").join("settings.json"),
            claude_json: home.join(".claude.json"),
            cursor_dir: home.join(".cursor"),
            cursor_hooks: home.join(".cursor").join("hooks.json"),
            cursor_mcp: home.join(".cursor").join("mcp.json"),
            codex_dir: codex_dir(home),
            codex_hooks: codex_dir(home).join("hooks.json"),
            codex_config: codex_dir(home).join("config.toml"),
            gemini_dir: gemini_dir.to_path_buf(),
            gemini_settings: gemini_dir.join("settings.json"),
            opencode_config: opencode_dir.join("opencode.json"),
            opencode_plugin: opencode_dir.join("plugins").join("memd.ts"),
            opencode_dir,
            copilot_dir: home.join(".copilot"),
            copilot_mcp: home.join(".copilot").join("mcp-config.json"),
        }
    }

    /// This user's files, following the clients' own overrides (`GEMINI_CLI_HOME`,
    /// `XDG_CONFIG_HOME`).
    pub fn for_user() -> Result<ClientFiles> {
        let env_dir = |key: &str| {
            std::env::var_os(key)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = home_vars(Os::current())
            .iter()
            .find_map(|k| env_dir(k))
            .with_context(|| format!("{} is not set", home_vars(Os::current()).join(" or ")))?;
        let gemini_home = env_dir("GEMINI_CLI_HOME").unwrap_or_else(|| home.clone());
        let config_home = env_dir("XDG_CONFIG_HOME")
            .filter(|d| d.is_absolute())
            .unwrap_or_else(|| home.join(".config"));
        Ok(ClientFiles::at(
            &home,
            &gemini_home.join(".gemini"),
            &config_home,
        ))
    }

    /// The directory whose presence says a client is installed.
    pub fn dir_of(&self, kind: ClientKind) -> &Path {
        match kind {
            ClientKind::ClaudeCode => &self.claude_dir,
            ClientKind::Codex => &self.codex_dir,
            ClientKind::Cursor => &self.cursor_dir,
            ClientKind::Gemini => &self.gemini_dir,
            ClientKind::Opencode => &self.opencode_dir,
            ClientKind::Copilot => &self.copilot_dir,
        }
    }

    /// Why a client looks installed, if it does: its directory, else its command on PATH.
    pub fn detected(&self, kind: ClientKind) -> Option<String> {
        let dir = self.dir_of(kind);
        let program = match kind {
            ClientKind::ClaudeCode => Some("claude"),
            ClientKind::Codex => Some("codex"),
            ClientKind::Cursor => None,
            ClientKind::Gemini => Some("gemini"),
            ClientKind::Opencode => Some("opencode"),
            ClientKind::Copilot => Some("copilot"),
        };
        if dir.is_dir() {
            return Some(format!("{} exists", dir.display()));
        }
        program
            .and_then(|p| on_path(p).map(|found| (p, found)))
            .map(|(p, found)| format!("`{p}` is on PATH ({})", found.display()))
    }
}

/// Where the clients find the user's home: Node's `os.homedir()` (Claude Code, Cursor, Gemini
/// CLI, OpenCode) and Codex read `USERPROFILE` on Windows, where Git Bash's `HOME` may differ.
pub fn home_vars(os: Os) -> &'static [&'static str] {
    match os {
        Os::Unix => &["HOME"],
        Os::Windows => &["USERPROFILE", "HOME"],
    }
}

/// The first executable called `name` on PATH (on Windows `name.exe`, or npm's `name.cmd` shim).
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let names: Vec<String> = match Os::current() {
        Os::Unix => vec![name.to_string()],
        Os::Windows => [".exe", ".cmd"].map(|e| format!("{name}{e}")).to_vec(),
    };
    std::env::split_paths(&path)
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        .find(|p| is_executable(p))
}

pub fn is_executable(p: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(p) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    meta.is_file()
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClientKind {
    ClaudeCode,
    Codex,
    Cursor,
    Gemini,
    Opencode,
    Copilot,
}

impl ClientKind {
    pub const ALL: [ClientKind; 6] = [
        ClientKind::ClaudeCode,
        ClientKind::Codex,
        ClientKind::Cursor,
        ClientKind::Gemini,
        ClientKind::Opencode,
        ClientKind::Copilot,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ClientKind::ClaudeCode => "Claude Code",
            ClientKind::Codex => "Codex CLI",
            ClientKind::Cursor => "Cursor",
            ClientKind::Gemini => "Gemini CLI",
            ClientKind::Opencode => "OpenCode",
            ClientKind::Copilot => "Copilot CLI",
        }
    }

    /// The `memd init` flag that names this client.
    pub fn flag(self) -> &'static str {
        match self {
            ClientKind::ClaudeCode => "--claude-code",
            ClientKind::Codex => "--codex",
            ClientKind::Cursor => "--cursor",
            ClientKind::Gemini => "--gemini",
            ClientKind::Opencode => "--opencode",
            ClientKind::Copilot => "--copilot",
        }
    }
}

/// The clients to configure: the ones named by flags (`named`), else the ones detected, each
/// with the reason.
pub fn select(files: &ClientFiles, named: &[ClientKind]) -> Vec<(ClientKind, String)> {
    if !named.is_empty() {
        return named.iter().map(|k| (*k, k.flag().to_string())).collect();
    }
    ClientKind::ALL
        .iter()
        .filter_map(|k| files.detected(*k).map(|why| (*k, why)))
        .collect()
}

/// Where Codex keeps its files: `$CODEX_HOME`, else `<home>/.codex`.
pub fn codex_dir(home: &Path) -> PathBuf {
    match std::env::var_os("CODEX_HOME").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => home.join(".codex"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_by_directory_and_named_clients_win() {
        let home = tempfile::tempdir().unwrap();
        let files = ClientFiles::under(home.path());
        assert_eq!(
            files.opencode_plugin,
            home.path().join(".config/opencode/plugins/memd.ts")
        );
        std::fs::create_dir_all(&files.gemini_dir).unwrap();
        let found: Vec<ClientKind> = select(&files, &[]).into_iter().map(|(k, _)| k).collect();
        assert!(found.contains(&ClientKind::Gemini), "{found:?}");
        assert!(!found.contains(&ClientKind::Cursor));
        let named = select(&files, &[ClientKind::Opencode]);
        assert_eq!(
            named,
            vec![(ClientKind::Opencode, "--opencode".to_string())]
        );
    }
}
