//! Where memd lives on disk and on the network: the conventions the hooks and the daemon share.
//!
//! Resolution order, same on both sides:
//! - data dir: `MEMD_DATA_DIR`, else `$XDG_DATA_HOME/memd` (`memd-dev` with `MEMD_DEV=1`),
//!   else `~/.local/share/memd` (macOS: `~/Library/Application Support/memd`);
//! - port: `MEMD_PORT`, else 47111 (47112 with `MEMD_DEV=1`).
//!
//! The daemon writes `daemon.json` (port, pid) and `token` into the data dir; hooks read them.

use std::path::PathBuf;

pub const DEFAULT_PORT: u16 = 47111;
pub const DEFAULT_DEV_PORT: u16 = 47112;
/// File in the data dir holding the per-user API token (mode 0600).
pub const TOKEN_FILE: &str = "token";
/// File in the data dir where a running daemon announces its port and pid.
pub const DAEMON_FILE: &str = "daemon.json";
/// Header the hooks use to say which client they serve (informational).
pub const AUTH_HEADER: &str = "authorization";

fn env_nonempty(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.trim().is_empty())
}

pub fn dev_mode() -> bool {
    env_nonempty("MEMD_DEV").is_some_and(|v| v != "0")
}

fn home() -> Option<PathBuf> {
    env_nonempty("HOME").map(PathBuf::from)
}

/// The data directory (see module docs for the order).
pub fn data_dir() -> Option<PathBuf> {
    if let Some(d) = env_nonempty("MEMD_DATA_DIR") {
        return Some(PathBuf::from(d));
    }
    let name = if dev_mode() { "memd-dev" } else { "memd" };
    if let Some(x) = env_nonempty("XDG_DATA_HOME") {
        return Some(PathBuf::from(x).join(name));
    }
    let home = home()?;
    if cfg!(target_os = "macos") {
        Some(home.join("Library/Application Support").join(name))
    } else {
        Some(home.join(".local/share").join(name))
    }
}

/// The config directory: `MEMD_CONFIG_DIR`, else `$XDG_CONFIG_HOME/memd`, else `~/.config/memd`.
pub fn config_dir() -> Option<PathBuf> {
    if let Some(d) = env_nonempty("MEMD_CONFIG_DIR") {
        return Some(PathBuf::from(d));
    }
    let name = if dev_mode() { "memd-dev" } else { "memd" };
    if let Some(x) = env_nonempty("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(x).join(name));
    }
    Some(home()?.join(".config").join(name))
}

/// Log directory (hook log, daemon log): `<data dir>/logs`.
pub fn log_dir() -> Option<PathBuf> {
    Some(data_dir()?.join("logs"))
}

/// Port from `MEMD_PORT`, else the default for the mode. `None` if `MEMD_PORT` is not a port.
pub fn port_from_env() -> Option<u16> {
    match env_nonempty("MEMD_PORT") {
        Some(p) => p.trim().parse().ok(),
        None => Some(if dev_mode() {
            DEFAULT_DEV_PORT
        } else {
            DEFAULT_PORT
        }),
    }
}

/// What a running daemon writes to `daemon.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DaemonInfo {
    pub port: u16,
    pub pid: u32,
    pub version: String,
}
