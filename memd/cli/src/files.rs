//! Safe edits of other programs' config files: read, plan, back up, replace atomically.
//!
//! Owns the file side of `memd init` / `uninstall`: a planned edit carries the exact bytes seen
//! and the bytes to write; applying it re-checks that the file did not change meanwhile, copies
//! the old file to `<file>.memd-backup-<YYYYmmddHHMMSS>`, writes a temporary file with the
//! original mode next to the target and renames it over (through symlinks, so dotfile managers
//! keep their links). A file that holds a secret (memd's token) loses group and other access.
//! Must never leave a half-written file, leave a secret readable by others, or touch a file
//! whose content it did not plan for.

use super::json::{self, Json};
use anyhow::{Context, Result, anyhow, bail};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One file's planned change. `before`/`after` of `None` mean "absent".
#[derive(Debug, Clone)]
pub struct Planned {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: Option<String>,
    /// Mode for a file that does not exist yet (existing files keep theirs).
    pub new_mode: u32,
    /// The file holds memd's token: an existing file keeps only its owner's permission bits
    /// (and so does its backup, which may hold an earlier token).
    pub secret: bool,
}

impl Planned {
    pub fn changes(&self) -> bool {
        self.before != self.after
    }
}

/// What applying a plan did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    Unchanged,
    Created,
    Updated { backup: PathBuf },
    Deleted { backup: PathBuf },
}

/// The file changed between planning and writing (another program wrote it).
#[derive(Debug)]
pub struct Conflict(pub PathBuf);

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} changed while memd was editing it; nothing was written to it",
            self.0.display()
        )
    }
}

impl std::error::Error for Conflict {}

/// Reads a file that may not exist.
pub fn read_optional(path: &Path) -> Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| anyhow!("{} is not UTF-8 text; memd leaves it alone", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Parses a config file's text; the error names the file and the position.
pub fn parse_doc(path: &Path, text: Option<&str>) -> Result<Json> {
    json::parse(text.unwrap_or("")).map_err(|e| {
        anyhow!(
            "{} is not valid JSON ({e}). Fix or move that file, then run this command again; it was not changed",
            path.display()
        )
    })
}

/// Plans an edit of a JSON config file: `edit` changes the parsed document. The file is only
/// rewritten when the document really changed, so formatting-only differences never count.
pub fn plan_json_edit<F>(path: &Path, new_mode: u32, edit: F) -> Result<Planned>
where
    F: FnOnce(&mut Json) -> Result<EditResult>,
{
    let before = read_optional(path)?;
    let original = parse_doc(path, before.as_deref())?;
    let mut doc = original.clone();
    let result = edit(&mut doc).with_context(|| format!("cannot update {}", path.display()))?;
    let after = match result {
        EditResult::Delete => None,
        EditResult::Keep if doc == original => before.clone(),
        EditResult::Keep => {
            let indent = before
                .as_deref()
                .map(json::detect_indent)
                .unwrap_or_else(|| "  ".into());
            Some(json::to_pretty(&doc, &indent))
        }
    };
    Ok(Planned {
        path: path.to_path_buf(),
        before,
        after,
        new_mode,
        secret: false,
    })
}

/// What an edit wants done with the file.
pub enum EditResult {
    Keep,
    Delete,
}

/// Applies a plan: backup, atomic replace (or removal). Returns a [`Conflict`] error (use
/// `downcast_ref`) when the file no longer has the content the plan was made from.
/// A secret file that already has the planned content is still made private: it may have
/// been written before memd did this.
pub fn apply(plan: &Planned, stamp: &str) -> Result<Applied> {
    let target = resolve_symlink(&plan.path);
    if !plan.changes() {
        if plan.secret && plan.after.is_some() {
            make_private(&target)?;
        }
        return Ok(Applied::Unchanged);
    }
    let now = read_optional(&target)?;
    if now != plan.before {
        return Err(Conflict(plan.path.clone()).into());
    }
    let backup = match &plan.before {
        Some(_) => Some(backup(&target, stamp, plan.secret)?),
        None => None,
    };
    match (&plan.after, backup) {
        (None, Some(backup)) => {
            std::fs::remove_file(&target)
                .with_context(|| format!("cannot remove {}", target.display()))?;
            Ok(Applied::Deleted { backup })
        }
        (None, None) => Ok(Applied::Unchanged),
        (Some(text), backup) => {
            let mode = match existing_mode(&target) {
                Some(mode) if plan.secret => private_mode(mode),
                Some(mode) => mode,
                None => plan.new_mode,
            };
            write_atomic(&target, text.as_bytes(), mode)?;
            Ok(match backup {
                Some(backup) => Applied::Updated { backup },
                None => Applied::Created,
            })
        }
    }
}

/// The file a symlink finally points to (the path itself when it is not a link).
fn resolve_symlink(path: &Path) -> PathBuf {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if is_link {
        std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
    } else {
        path.to_path_buf()
    }
}

/// `YYYYmmddHHMMSS` in UTC, for backup names.
pub fn timestamp() -> String {
    let fmt = time::macros::format_description!("[year][month][day][hour][minute][second]");
    time::OffsetDateTime::now_utc()
        .format(&fmt)
        .unwrap_or_else(|_| "00000000000000".into())
}

fn backup(target: &Path, stamp: &str, secret: bool) -> Result<PathBuf> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut candidate = target.with_file_name(format!("{name}.memd-backup-{stamp}"));
    let mut n = 1;
    while candidate.exists() {
        candidate = target.with_file_name(format!("{name}.memd-backup-{stamp}-{n}"));
        n += 1;
    }
    // fs::copy keeps the permission bits: a private file's backup stays private.
    std::fs::copy(target, &candidate).with_context(|| {
        format!(
            "cannot back up {} to {}",
            target.display(),
            candidate.display()
        )
    })?;
    if secret {
        make_private(&candidate)?;
    }
    Ok(candidate)
}

/// `mode` without group and other permissions: what a file holding a secret may have.
pub fn private_mode(mode: u32) -> u32 {
    mode & !0o077
}

/// True when group or others have any permission on a file with `mode`.
pub fn is_open(mode: u32) -> bool {
    mode & 0o077 != 0
}

/// Drops group and other permissions from an existing file (a missing one is left alone).
pub fn make_private(path: &Path) -> Result<()> {
    match existing_mode(path) {
        Some(mode) if is_open(mode) => set_mode(path, private_mode(mode))
            .with_context(|| format!("cannot chmod {:o} {}", private_mode(mode), path.display())),
        _ => Ok(()),
    }
}

#[cfg(unix)]
pub fn existing_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
pub fn existing_mode(_path: &Path) -> Option<u32> {
    None
}

/// Writes `bytes` to a temporary file beside `target` with `mode`, syncs, renames over.
pub fn write_atomic(target: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.memd-tmp-{}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut f = create_with_mode(&tmp, mode)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        set_mode(&tmp, mode)?;
        std::fs::rename(&tmp, target)?;
        Ok(())
    })();
    if result.is_err() {
        std::fs::remove_file(&tmp).ok();
    }
    result.with_context(|| format!("cannot write {}", target.display()))
}

fn create_with_mode(path: &Path, mode: u32) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    o.open(path)
}

/// Sets the exact mode (the umask applied at creation may have narrowed it).
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

/// Refuses a secret file others can read (`chmod 600` fixes it).
pub fn check_private(path: &Path) -> Result<()> {
    if let Some(mode) = existing_mode(path)
        && mode & 0o077 != 0
    {
        bail!(
            "{} has mode {:o}; it holds a secret, so run `chmod 600 {}` first",
            path.display(),
            mode & 0o777,
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_add(path: &Path) -> Planned {
        plan_json_edit(path, 0o600, |doc| {
            super::super::merge::mcp_add(doc, Json::str("x"))?;
            Ok(EditResult::Keep)
        })
        .unwrap()
    }

    #[test]
    fn atomic_edit_keeps_mode_and_backs_up() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        std::fs::write(&p, "{\n    \"a\": 1\n}\n").unwrap();
        set_mode(&p, 0o640).unwrap();
        let plan = plan_add(&p);
        assert!(plan.changes());
        let applied = apply(&plan, "20260101000000").unwrap();
        let Applied::Updated { backup } = applied else {
            panic!("{applied:?}")
        };
        assert_eq!(
            std::fs::read_to_string(&backup).unwrap(),
            "{\n    \"a\": 1\n}\n"
        );
        let now = std::fs::read_to_string(&p).unwrap();
        assert!(
            now.starts_with("{\n    \"a\": 1,\n    \"mcpServers\""),
            "{now}"
        );
        #[cfg(unix)]
        assert_eq!(existing_mode(&p), Some(0o640));
        assert!(!plan_add(&p).changes(), "second plan is a no-op");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("memd-tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn a_secret_makes_an_open_file_and_its_backup_private() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("mcp.json");
        std::fs::write(&p, "{}").unwrap();
        set_mode(&p, 0o644).unwrap();
        let mut plan = plan_add(&p);
        plan.secret = true;
        let Applied::Updated { backup } = apply(&plan, "t").unwrap() else {
            panic!("not updated")
        };
        assert_eq!(existing_mode(&p), Some(0o600));
        assert_eq!(existing_mode(&backup), Some(0o600));
        // Already holding the entry, opened again: applying the same plan narrows it.
        set_mode(&p, 0o640).unwrap();
        let mut again = plan_add(&p);
        again.secret = true;
        assert_eq!(apply(&again, "t").unwrap(), Applied::Unchanged);
        assert_eq!(existing_mode(&p), Some(0o600));
    }

    #[test]
    fn new_files_get_the_requested_mode_and_conflicts_are_detected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/new.json");
        let plan = plan_add(&p);
        assert_eq!(apply(&plan, "t").unwrap(), Applied::Created);
        #[cfg(unix)]
        assert_eq!(existing_mode(&p), Some(0o600));

        let q = dir.path().join("q.json");
        std::fs::write(&q, "{}").unwrap();
        let plan = plan_add(&q);
        std::fs::write(&q, "{\"someone\": \"else\"}").unwrap();
        let err = apply(&plan, "t").unwrap_err();
        assert!(err.downcast_ref::<Conflict>().is_some());
        assert_eq!(
            std::fs::read_to_string(&q).unwrap(),
            "{\"someone\": \"else\"}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_followed_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        let link = dir.path().join("link.json");
        std::fs::write(&real, "{}").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        apply(&plan_add(&link), "t").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(
            std::fs::read_to_string(&real)
                .unwrap()
                .contains("mcpServers")
        );
    }

    #[test]
    fn malformed_json_names_file_and_position() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.json");
        std::fs::write(&p, "{\n  \"a\": 1,,\n}").unwrap();
        let err = plan_json_edit(&p, 0o600, |_| Ok(EditResult::Keep))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad.json") && err.contains("line 2"), "{err}");
    }
}
