//! Where memd lives on disk and on the network: the conventions the hooks and the daemon share.
//!
//! Resolution order, the same for the daemon, the CLI, the hooks and the MCP bridge
//! ([`resolve`]; the daemon passes its own strict parse of config.toml to [`resolve_with`]):
//! - data dir: `MEMD_DATA_DIR`, else `data_dir` in config.toml, else the platform default
//!   ([`default_data_dir_with`]): `$XDG_DATA_HOME/memd`, else `~/.local/share/memd` (macOS:
//!   `~/Library/Application Support/memd`; Windows: `%LOCALAPPDATA%\memd`), `memd-dev` with
//!   `MEMD_DEV=1`;
//! - config dir: `MEMD_CONFIG_DIR`, else `$XDG_CONFIG_HOME/memd`, else `~/.config/memd`
//!   (Windows: `%APPDATA%\memd`);
//! - port: `MEMD_PORT`, else `port` in config.toml, else 47111 (47112 with `MEMD_DEV=1`).
//!
//! The daemon writes `daemon.json` (port, pid) and `token` into the data dir; clients read them.
//! The platform rules are pure functions of an [`Os`] and an environment lookup, so every
//! platform's rule is unit-tested on any host. Must never create anything except through
//! [`create_private_dir`].

use crate::settings::{self, Settings};
use std::path::PathBuf;

pub const DEFAULT_PORT: u16 = 47111;
pub const DEFAULT_DEV_PORT: u16 = 47112;
/// File in the data dir holding the per-user API token (mode 0600).
pub const TOKEN_FILE: &str = "token";
/// File in the data dir where a running daemon announces its port and pid.
pub const DAEMON_FILE: &str = "daemon.json";
/// Header the hooks use to say which client they serve (informational).
pub const AUTH_HEADER: &str = "authorization";

/// Creates `dir` and its missing parents 0700 from the start (whoever runs first, a hook, the
/// CLI or the daemon): made with the umask's 0755 and narrowed later, the data dir would be
/// readable by others for a while.
///
/// Windows has no mode bits; a new directory inherits its parent's ACL. Under the default
/// `%LOCALAPPDATA%` that is the user's profile ACL (the user, SYSTEM and Administrators only),
/// the same guarantee; a `MEMD_DATA_DIR` elsewhere gets whatever its parent grants (documented
/// in the README; setting an explicit ACL is not done yet).
pub fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// The platform whose conventions apply; [`Os::CURRENT`] outside tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// Linux and the other Unixes: the XDG base directories.
    Unix,
    MacOs,
    Windows,
}

impl Os {
    pub const CURRENT: Os = if cfg!(windows) {
        Os::Windows
    } else if cfg!(target_os = "macos") {
        Os::MacOs
    } else {
        Os::Unix
    };
}

/// The process environment as the lookup the `*_with` functions take.
pub fn process_env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

fn env_nonempty(key: &str) -> Option<String> {
    nonempty(process_env, key)
}

/// `lookup(key)` unless it is unset or blank (blank variables count as unset everywhere).
fn nonempty(lookup: impl Fn(&str) -> Option<String>, key: &str) -> Option<String> {
    lookup(key).filter(|v| !v.trim().is_empty())
}

pub fn dev_mode() -> bool {
    dev_mode_with(process_env)
}

fn dev_mode_with(lookup: impl Fn(&str) -> Option<String>) -> bool {
    nonempty(lookup, "MEMD_DEV").is_some_and(|v| v != "0")
}

fn app_name(lookup: impl Fn(&str) -> Option<String>) -> &'static str {
    if dev_mode_with(lookup) {
        "memd-dev"
    } else {
        "memd"
    }
}

fn home() -> Option<PathBuf> {
    home_with(Os::CURRENT, process_env)
}

/// `HOME`; on Windows, where it is usually unset, `USERPROFILE` after it.
fn home_with(os: Os, lookup: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let home = nonempty(&lookup, "HOME");
    let home = match os {
        Os::Windows => home.or_else(|| nonempty(&lookup, "USERPROFILE")),
        Os::Unix | Os::MacOs => home,
    };
    home.map(PathBuf::from)
}

/// A Windows known folder from its variable, else its place under the user profile.
fn windows_folder(
    lookup: impl Fn(&str) -> Option<String>,
    var: &str,
    under_profile: &str,
) -> Option<PathBuf> {
    nonempty(&lookup, var)
        .map(PathBuf::from)
        .or_else(|| Some(home_with(Os::Windows, &lookup)?.join(under_profile)))
}

/// Where this user's memd lives, resolved from the environment and config.toml.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub data_dir: PathBuf,
    /// The configured port; a running daemon's `daemon.json` says where it really listens.
    pub port: u16,
    /// `config.toml`, when it exists.
    pub config_file: Option<PathBuf>,
}

/// The config file path (`<config dir>/config.toml`), whether or not it exists.
pub fn config_file() -> Option<PathBuf> {
    Some(config_dir()?.join("config.toml"))
}

/// Resolves the data dir and port, reading the two keys clients need from config.toml.
pub fn resolve() -> Result<Resolved, String> {
    let (settings, file) = read_settings()?;
    resolve_with(settings, file)
}

/// config.toml's client keys, and the file when it exists.
fn read_settings() -> Result<(Settings, Option<PathBuf>), String> {
    let file = config_file().filter(|p| p.exists());
    let settings = match &file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            settings::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => Settings::default(),
    };
    Ok((settings, file))
}

/// Applies the resolution order to settings already read from `config_file`.
pub fn resolve_with(file: Settings, config_file: Option<PathBuf>) -> Result<Resolved, String> {
    let data_dir = data_dir_from(file.data_dir)?;
    let port = match env_nonempty("MEMD_PORT") {
        Some(p) => p
            .trim()
            .parse()
            .map_err(|_| format!("MEMD_PORT={p:?} is not a TCP port (0-65535)"))?,
        None => file.port.unwrap_or(if dev_mode() {
            DEFAULT_DEV_PORT
        } else {
            DEFAULT_PORT
        }),
    };
    Ok(Resolved {
        data_dir,
        port,
        config_file,
    })
}

/// `MEMD_DATA_DIR`, else config.toml's `data_dir` (a leading `~/` is the home dir), else the
/// default. A relative path is an error: the daemon runs from `/` and the hooks from the
/// user's project, so it would name two different places.
fn data_dir_from(configured: Option<PathBuf>) -> Result<PathBuf, String> {
    let (dir, source) = match (env_nonempty("MEMD_DATA_DIR"), configured) {
        (Some(d), _) => (PathBuf::from(d), "MEMD_DATA_DIR"),
        (None, Some(d)) => (expand_home(d), "data_dir in config.toml"),
        (None, None) => {
            return default_data_dir().ok_or_else(|| {
                let base = match Os::CURRENT {
                    Os::Windows => "LOCALAPPDATA",
                    Os::Unix | Os::MacOs => "HOME",
                };
                format!("cannot find a data directory: set {base} or MEMD_DATA_DIR")
            });
        }
    };
    if dir.is_absolute() {
        Ok(dir)
    } else {
        Err(format!(
            "{source} must be an absolute path (got {})",
            dir.display()
        ))
    }
}

fn expand_home(path: PathBuf) -> PathBuf {
    match (path.strip_prefix("~"), home()) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path,
    }
}

/// The data directory when neither `MEMD_DATA_DIR` nor config.toml names one.
pub fn default_data_dir() -> Option<PathBuf> {
    default_data_dir_with(Os::CURRENT, process_env)
}

/// [`default_data_dir`] for `os` and the environment `lookup`. Windows keeps the data (store,
/// token, logs) in the machine-local `%LOCALAPPDATA%`, never the roaming profile: the store is
/// large and the token must not travel to other machines.
pub fn default_data_dir_with(os: Os, lookup: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let name = app_name(&lookup);
    if os == Os::Windows {
        return Some(windows_folder(&lookup, "LOCALAPPDATA", r"AppData\Local")?.join(name));
    }
    if let Some(x) = nonempty(&lookup, "XDG_DATA_HOME") {
        return Some(PathBuf::from(x).join(name));
    }
    let home = home_with(os, &lookup)?;
    if os == Os::MacOs {
        Some(home.join("Library/Application Support").join(name))
    } else {
        Some(home.join(".local/share").join(name))
    }
}

/// memd's cache (models, runtimes, test servers: everything re-creatable by the install
/// scripts): `${XDG_CACHE_HOME:-~/.cache}/memd` (Windows: `%LOCALAPPDATA%\memd\cache`).
/// `lookup` reads the environment (a parameter so the rule can be tested without mutating it);
/// empty variables count as unset, as in the install scripts.
pub fn cache_dir_with(lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    cache_dir_for(Os::CURRENT, lookup)
}

/// [`cache_dir_with`] for `os`.
pub fn cache_dir_for(os: Os, lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    let var = |name: &str| lookup(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if os == Os::Windows
        && let Some(local) = var("LOCALAPPDATA")
    {
        return local.join("memd").join("cache");
    }
    var("XDG_CACHE_HOME")
        .or_else(|| var("HOME").map(|home| home.join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"))
        .join("memd")
}

/// [`cache_dir_with`] the process environment.
pub fn cache_dir() -> PathBuf {
    cache_dir_with(|name| std::env::var_os(name))
}

/// The config directory: `MEMD_CONFIG_DIR`, else `$XDG_CONFIG_HOME/memd`, else `~/.config/memd`
/// (Windows: `%APPDATA%\memd`).
pub fn config_dir() -> Option<PathBuf> {
    config_dir_with(Os::CURRENT, process_env)
}

/// [`config_dir`] for `os` and the environment `lookup`. Windows keeps config.toml in the
/// roaming `%APPDATA%`, where settings belong (it holds no secret: the token is data).
pub fn config_dir_with(os: Os, lookup: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(d) = nonempty(&lookup, "MEMD_CONFIG_DIR") {
        return Some(PathBuf::from(d));
    }
    let name = app_name(&lookup);
    if os == Os::Windows {
        return Some(windows_folder(&lookup, "APPDATA", r"AppData\Roaming")?.join(name));
    }
    if let Some(x) = nonempty(&lookup, "XDG_CONFIG_HOME") {
        return Some(PathBuf::from(x).join(name));
    }
    Some(home_with(os, &lookup)?.join(".config").join(name))
}

/// Log directory (hook log, daemon log): `<data dir>/logs`. Tolerant on purpose: a bad
/// `MEMD_PORT` or an unreadable config.toml must still be logged somewhere, so this falls back
/// to the default data dir rather than failing.
pub fn log_dir() -> Option<PathBuf> {
    let configured = read_settings().ok().and_then(|(s, _)| s.data_dir);
    let dir = data_dir_from(configured).ok().or_else(default_data_dir)?;
    Some(dir.join("logs"))
}

/// The header `memd mcp` sends with every relayed request: the directory the client started
/// it in, so MCP tools know the caller's project.
pub const PROJECT_DIR_HEADER: &str = "memd-project-dir";

/// A directory as a header value: bytes outside printable ASCII, `%` and controls become
/// `%XX` (header values are ASCII; paths are not).
pub fn encode_header_dir(dir: &str) -> String {
    let mut out = String::with_capacity(dir.len());
    for b in dir.bytes() {
        if (0x21..0x7f).contains(&b) && b != b'%' || b == b' ' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The inverse of [`encode_header_dir`]; `None` for a malformed escape or non-UTF-8 result.
pub fn decode_header_dir(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// What a running daemon writes to `daemon.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DaemonInfo {
    pub port: u16,
    pub pid: u32,
    pub version: String,
}

#[cfg(test)]
mod tests {

    #[test]
    fn cache_dir_prefers_xdg_then_home_and_ignores_empty_values() {
        let env = |pairs: Vec<(&'static str, &'static str)>| {
            move |k: &str| {
                let found = pairs.iter().find(|(n, _)| *n == k);
                found.map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        let both = vec![("HOME", "/home/u"), ("XDG_CACHE_HOME", "/xdg")];
        assert_eq!(
            cache_dir_for(Os::Unix, env(both)),
            PathBuf::from("/xdg/memd")
        );
        let empty_xdg = vec![("HOME", "/home/u"), ("XDG_CACHE_HOME", "")];
        assert_eq!(
            cache_dir_for(Os::Unix, env(empty_xdg)),
            PathBuf::from("/home/u/.cache/memd")
        );
        assert_eq!(
            cache_dir_for(Os::Unix, env(vec![])),
            PathBuf::from(".cache/memd")
        );
    }

    use super::*;

    /// An environment lookup over fixed pairs (the process environment is never touched).
    fn env_of(pairs: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        let pairs = pairs.to_vec();
        move |k: &str| {
            let found = pairs.iter().find(|(n, _)| *n == k);
            found.map(|(_, v)| v.to_string())
        }
    }

    const WINDOWS_ENV: &[(&str, &str)] = &[
        ("USERPROFILE", r"C:\Users\Ada Lovelace"),
        ("LOCALAPPDATA", r"C:\Users\Ada Lovelace\AppData\Local"),
        ("APPDATA", r"C:\Users\Ada Lovelace\AppData\Roaming"),
        // Set by Git Bash / MSYS shells; Windows conventions still win.
        ("XDG_DATA_HOME", "/home/ada/.local/share"),
        ("XDG_CONFIG_HOME", "/home/ada/.config"),
    ];

    #[test]
    fn windows_data_is_local_and_config_is_roaming() {
        let env = env_of(WINDOWS_ENV);
        assert_eq!(
            default_data_dir_with(Os::Windows, &env).unwrap(),
            PathBuf::from(r"C:\Users\Ada Lovelace\AppData\Local").join("memd")
        );
        assert_eq!(
            config_dir_with(Os::Windows, &env).unwrap(),
            PathBuf::from(r"C:\Users\Ada Lovelace\AppData\Roaming").join("memd")
        );
        assert_eq!(
            cache_dir_for(Os::Windows, |k: &str| env(k).map(Into::into)),
            PathBuf::from(r"C:\Users\Ada Lovelace\AppData\Local")
                .join("memd")
                .join("cache")
        );
    }

    #[test]
    fn windows_falls_back_to_the_profile_and_honours_dev_and_overrides() {
        let profile_only = env_of(&[("USERPROFILE", r"C:\Users\ada"), ("LOCALAPPDATA", " ")]);
        let home = PathBuf::from(r"C:\Users\ada");
        assert_eq!(
            default_data_dir_with(Os::Windows, &profile_only).unwrap(),
            home.join(r"AppData\Local").join("memd")
        );
        assert_eq!(
            config_dir_with(Os::Windows, &profile_only).unwrap(),
            home.join(r"AppData\Roaming").join("memd")
        );
        let dev = env_of(&[
            ("LOCALAPPDATA", r"C:\L"),
            ("APPDATA", r"C:\R"),
            ("MEMD_DEV", "1"),
        ]);
        assert!(
            default_data_dir_with(Os::Windows, &dev)
                .unwrap()
                .ends_with("memd-dev")
        );
        assert!(
            config_dir_with(Os::Windows, &dev)
                .unwrap()
                .ends_with("memd-dev")
        );
        let chosen = env_of(&[("APPDATA", r"C:\R"), ("MEMD_CONFIG_DIR", r"D:\cfg")]);
        assert_eq!(
            config_dir_with(Os::Windows, &chosen).unwrap(),
            PathBuf::from(r"D:\cfg")
        );
        assert_eq!(default_data_dir_with(Os::Windows, env_of(&[])), None);
        assert_eq!(config_dir_with(Os::Windows, env_of(&[])), None);
    }

    #[test]
    fn unix_and_macos_keep_the_xdg_and_home_rules() {
        let home_only = env_of(&[("HOME", "/home/ada"), ("LOCALAPPDATA", r"C:\L")]);
        assert_eq!(
            default_data_dir_with(Os::Unix, &home_only).unwrap(),
            PathBuf::from("/home/ada/.local/share/memd")
        );
        assert_eq!(
            default_data_dir_with(Os::MacOs, &home_only).unwrap(),
            PathBuf::from("/home/ada/Library/Application Support/memd")
        );
        assert_eq!(
            config_dir_with(Os::Unix, &home_only).unwrap(),
            PathBuf::from("/home/ada/.config/memd")
        );
        let xdg = env_of(&[
            ("HOME", "/h"),
            ("XDG_DATA_HOME", "/x/d"),
            ("XDG_CONFIG_HOME", "/x/c"),
        ]);
        assert_eq!(
            default_data_dir_with(Os::Unix, &xdg).unwrap(),
            PathBuf::from("/x/d/memd")
        );
        assert_eq!(
            config_dir_with(Os::Unix, &xdg).unwrap(),
            PathBuf::from("/x/c/memd")
        );
        // USERPROFILE is a Windows convention only.
        let profile = env_of(&[("USERPROFILE", "/p")]);
        assert_eq!(default_data_dir_with(Os::Unix, &profile), None);
    }

    #[test]
    fn header_dirs_round_trip() {
        for dir in [
            "/home/dev/shop",
            "/home/dév/my project",
            "/tmp/100%/x",
            "/a\tb",
        ] {
            let enc = encode_header_dir(dir);
            assert!(enc.bytes().all(|b| (0x20..0x7f).contains(&b)), "{enc}");
            assert_eq!(decode_header_dir(&enc).as_deref(), Some(dir));
        }
        assert_eq!(decode_header_dir("/x%4"), None);
        assert_eq!(decode_header_dir("/x%zz"), None);
    }

    #[test]
    fn config_data_dir_must_be_absolute_and_may_start_at_home() {
        if env_nonempty("MEMD_DATA_DIR").is_some() {
            // The environment wins over config.toml; this test is about config.toml.
            return eprintln!("SKIPPED: MEMD_DATA_DIR is set in this environment");
        }
        let e = data_dir_from(Some(PathBuf::from("memd-data"))).unwrap_err();
        assert!(e.contains("absolute"), "{e}");
        assert_eq!(
            data_dir_from(Some(PathBuf::from("/srv/memd"))).unwrap(),
            PathBuf::from("/srv/memd")
        );
        if let Some(home) = home() {
            assert_eq!(
                data_dir_from(Some(PathBuf::from("~/memd"))).unwrap(),
                home.join("memd")
            );
        }
    }
}
