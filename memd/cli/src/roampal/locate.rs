//! Where a Roampal store lives.
//!
//! Owns the resolution of `memd import --from-roampal [DIR] [--profile NAME]` to a data
//! directory, following Roampal 0.6's own rules (its `profile_manager`): `ROAMPAL_DATA_PATH`
//! first, then a named profile from `profiles.json` (a registered path, or `<base>/<slug>`),
//! then the persisted active profile, then the system default — `~/.local/share/roampal/data`
//! (`$XDG_DATA_HOME`) on Linux, `~/Library/Application Support/Roampal/data` on macOS,
//! `%APPDATA%\Roampal\data` on Windows; `Roampal_DEV` instead of `Roampal` with
//! `ROAMPAL_DEV=1`. Must never create or change anything there.

use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The data directory to import from: `dir` when given, else what Roampal itself would use.
pub fn data_dir(dir: Option<&Path>, profile: Option<&str>) -> Result<PathBuf> {
    if let Some(d) = dir {
        return checked(d.to_path_buf(), "the directory given");
    }
    let env = Env::from_process();
    if profile.is_none()
        && let Some(p) = env.get("ROAMPAL_DATA_PATH").filter(|p| !p.is_empty())
    {
        return checked(PathBuf::from(p), "ROAMPAL_DATA_PATH");
    }
    let name = match profile {
        Some(p) => Some(p.to_string()),
        None => read_trimmed(&config_dir(&env)?.join("active_profile")),
    };
    match name.as_deref() {
        None | Some("default") => checked(default_base(&env)?, "Roampal's default location"),
        Some(name) => checked(profile_dir(&env, name)?, &format!("profile {name:?}")),
    }
}

/// The environment variables the rules read (a snapshot, so tests can give their own).
pub struct Env(BTreeMap<String, String>);

impl Env {
    fn from_process() -> Env {
        Env(std::env::vars().collect())
    }

    #[cfg(test)]
    pub fn of(pairs: &[(&str, &str)]) -> Env {
        Env(pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn home(&self) -> Result<PathBuf> {
        let key = if cfg!(windows) { "USERPROFILE" } else { "HOME" };
        self.get(key)
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .with_context(|| format!("{key} is not set: name the Roampal data directory"))
    }

    fn app_folder(&self) -> &'static str {
        match self
            .get("ROAMPAL_DEV")
            .map(|v| v.to_ascii_lowercase())
            .as_deref()
        {
            Some("1" | "true" | "yes") => "Roampal_DEV",
            _ => "Roampal",
        }
    }
}

/// `<base>`: where the default profile's data lives and named profiles' folders are made.
pub fn default_base(env: &Env) -> Result<PathBuf> {
    let folder = env.app_folder();
    if cfg!(windows) {
        let appdata = env.get("APPDATA").map(PathBuf::from);
        return Ok(appdata
            .map_or_else(|| env.home(), Ok)?
            .join(folder)
            .join("data"));
    }
    if cfg!(target_os = "macos") {
        return Ok(env
            .home()?
            .join("Library/Application Support")
            .join(folder)
            .join("data"));
    }
    let xdg = match env.get("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => env.home()?.join(".local/share"),
    };
    Ok(xdg.join(folder.to_ascii_lowercase()).join("data"))
}

/// Where Roampal keeps `profiles.json` and `active_profile`.
pub fn config_dir(env: &Env) -> Result<PathBuf> {
    if cfg!(windows) {
        let appdata = env.get("APPDATA").map(PathBuf::from);
        return Ok(appdata.map_or_else(|| env.home(), Ok)?.join("Roampal"));
    }
    if cfg!(target_os = "macos") {
        return Ok(env.home()?.join("Library/Application Support/Roampal"));
    }
    let xdg = match env.get("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => env.home()?.join(".config"),
    };
    Ok(xdg.join("roampal"))
}

/// A named profile's directory: its registered path, else `<base>/<slug>`.
pub fn profile_dir(env: &Env, name: &str) -> Result<PathBuf> {
    if name == "default" {
        return default_base(env);
    }
    let registry = config_dir(env)?.join("profiles.json");
    let text = read_bounded(&registry, SMALL_FILE_MAX)
        .and_then(|t| t.ok_or_else(|| anyhow::anyhow!("not found")))
        .with_context(|| {
            format!(
                "Roampal profile {name:?}: cannot read its registry {}",
                registry.display()
            )
        })?;
    let raw: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a JSON object", registry.display()))?;
    match raw.get(name) {
        Some(serde_json::Value::String(path)) if !path.is_empty() => Ok(PathBuf::from(path)),
        Some(_) if name != "bindings" => Ok(default_base(env)?.join(slug(name))),
        _ => {
            let known: Vec<&str> = raw
                .keys()
                .map(String::as_str)
                .filter(|k| *k != "bindings")
                .collect();
            bail!(
                "Roampal has no profile {name:?} (registered in {}: {})",
                registry.display(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )
        }
    }
}

/// Roampal's folder name for a profile: lowercase, runs of anything but `a-z0-9` as one `_`,
/// no `_` at either end, at most 30 characters.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.to_lowercase().chars() {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    out.trim_matches('_').chars().take(30).collect()
}

/// The most read of `profiles.json` or a one-line pointer file.
const SMALL_FILE_MAX: u64 = 1024 * 1024;
/// The most read of `ghost_ids.json` (about 300,000 ids).
const GHOSTS_MAX: u64 = 16 * 1024 * 1024;

/// The text of a file of Roampal's, read whole but never more than `limit` bytes; `None` when
/// it does not exist. Anything but a regular file (a FIFO would block the import, a device such
/// as /dev/zero never ends) and anything over the limit is an error naming the file and the
/// limit (issue 36: a `ghost_ids.json` pointing at /dev/zero grew to 2.1 GB).
pub fn read_bounded(path: &Path, limit: u64) -> Result<Option<String>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let not_regular = || {
        anyhow::anyhow!(
            "{} is not a regular file (a FIFO, device or directory): not read",
            path.display()
        )
    };
    if !meta.is_file() {
        return Err(not_regular());
    }
    let too_big = || {
        anyhow::anyhow!(
            "{} is larger than the {} bytes memd reads of it: not read",
            path.display(),
            limit
        )
    };
    if meta.len() > limit {
        return Err(too_big());
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Never blocks on a FIFO swapped in since the check above.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options
        .open(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(not_regular());
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, limit + 1), &mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    String::from_utf8(bytes)
        .map(Some)
        .with_context(|| format!("{} is not UTF-8 text", path.display()))
}

/// Ids Roampal removed but left in ChromaDB (`ghost_ids.json`: `{"ghost_ids": [...]}`); none
/// when the file is absent. A file memd cannot read is an error: importing what the user
/// removed would be worse than stopping.
pub fn ghost_ids(dir: &Path) -> Result<std::collections::HashSet<String>> {
    let path = dir.join("ghost_ids.json");
    let Some(text) = read_bounded(&path, GHOSTS_MAX)? else {
        return Ok(Default::default());
    };
    #[derive(serde::Deserialize)]
    struct Ghosts {
        #[serde(default)]
        ghost_ids: Vec<String>,
    }
    let g: Ghosts = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not the list of removed ids memd knows ({{\"ghost_ids\": [...]}}); \
             nothing was imported",
            path.display()
        )
    })?;
    Ok(g.ghost_ids.into_iter().collect())
}

fn read_trimmed(path: &Path) -> Option<String> {
    let s = read_bounded(path, SMALL_FILE_MAX).ok()??;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// `dir` if it holds a ChromaDB file; otherwise an error saying where memd looked and why.
fn checked(dir: PathBuf, source: &str) -> Result<PathBuf> {
    let file = dir.join("chromadb").join("chroma.sqlite3");
    if file.is_file() {
        return Ok(dir);
    }
    // A user pointing at the store's parent (`~/.local/share/roampal`) means its `data`.
    if dir.join("data/chromadb/chroma.sqlite3").is_file() {
        return Ok(dir.join("data"));
    }
    bail!(
        "no Roampal store at {} ({source}): {} does not exist. Name the directory that holds \
         `chromadb/` (`memd import --from-roampal DIR`) or a profile (`--profile NAME`)",
        dir.display(),
        file.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_roampal() {
        assert_eq!(slug("Work Stuff!"), "work_stuff");
        assert_eq!(slug("__A--b__"), "a_b");
        assert_eq!(slug(&"x".repeat(40)).len(), 30);
    }

    #[cfg(all(unix, not(target_os = "macos")))]
    #[test]
    fn linux_locations() {
        let env = Env::of(&[("HOME", "/home/u")]);
        assert_eq!(
            default_base(&env).unwrap(),
            Path::new("/home/u/.local/share/roampal/data")
        );
        let env = Env::of(&[
            ("HOME", "/home/u"),
            ("XDG_DATA_HOME", "/d"),
            ("ROAMPAL_DEV", "1"),
        ]);
        assert_eq!(
            default_base(&env).unwrap(),
            Path::new("/d/roampal_dev/data")
        );
        assert_eq!(
            config_dir(&Env::of(&[("HOME", "/home/u")])).unwrap(),
            Path::new("/home/u/.config/roampal")
        );
    }

    #[cfg(all(unix, not(target_os = "macos")))]
    #[test]
    fn profiles_resolve_to_a_registered_path_or_a_slug_dir() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().to_str().unwrap();
        let cfg = home.path().join(".config/roampal");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(
            cfg.join("profiles.json"),
            r#"{"Work Stuff": null, "old": "/srv/roampal", "bindings": {"/p": "old"}}"#,
        )
        .unwrap();
        let env = Env::of(&[("HOME", h)]);
        assert_eq!(
            profile_dir(&env, "Work Stuff").unwrap(),
            home.path().join(".local/share/roampal/data/work_stuff")
        );
        assert_eq!(profile_dir(&env, "old").unwrap(), Path::new("/srv/roampal"));
        let e = profile_dir(&env, "nope").unwrap_err().to_string();
        assert!(e.contains("Work Stuff, old"), "{e}");
        assert!(profile_dir(&env, "bindings").is_err());
    }
}
