//! memd's OpenCode plugin file: rendering it for this install, planning its installation and
//! removal, and reading back where an installed one runs the hooks from.
//!
//! The plugin (`plugins/opencode.ts`, embedded in this binary) runs `hook-prompt --opencode`
//! and `hook-stop --opencode`, so it shares the hooks' daemon discovery, identity proof and
//! token handling instead of repeating them in TypeScript. Must never overwrite or delete a
//! file at the plugin's path that memd did not write (recognised by its first line).

use super::files::{self, Planned};
use anyhow::{Result, bail};
use std::path::{Path, PathBuf};

/// The plugin's source, as shipped.
const SOURCE: &str = include_str!("../plugins/opencode.ts");
/// The first line of every plugin memd writes.
pub const MARKER: &str = "// memd for OpenCode:";
/// Stands for the hook directory in [`SOURCE`] (quoted there as a TypeScript string).
const HOOK_DIR_SLOT: &str = "\"__MEMD_HOOK_DIR__\"";
const HOOK_DIR_DECL: &str = "const HOOK_DIR: string = ";

/// The plugin with `hook_dir` (absolute) filled in.
pub fn render(hook_dir: &Path) -> String {
    // A JSON string is a valid TypeScript string literal.
    let quoted = serde_json::to_string(&hook_dir.to_string_lossy()).unwrap_or_default();
    SOURCE.replacen(HOOK_DIR_SLOT, &quoted, 1)
}

/// Whether `text` is a plugin memd wrote.
pub fn is_ours(text: &str) -> bool {
    text.starts_with(MARKER)
}

/// The hook directory an installed plugin uses.
pub fn hook_dir_of(text: &str) -> Option<PathBuf> {
    let line = text.lines().find(|l| l.starts_with(HOOK_DIR_DECL))?;
    let literal = line[HOOK_DIR_DECL.len()..].trim().trim_end_matches(';');
    serde_json::from_str::<String>(literal)
        .ok()
        .map(PathBuf::from)
}

/// Writing (or refreshing) the plugin at `path`.
pub fn plan_install(path: &Path, hook_dir: &Path) -> Result<Planned> {
    let before = files::read_optional(path)?;
    if let Some(text) = &before
        && !is_ours(text)
    {
        bail!(
            "{} exists and was not written by memd; move it away, then run `memd init --opencode` again",
            path.display()
        );
    }
    Ok(Planned {
        path: path.to_path_buf(),
        before,
        after: Some(render(hook_dir)),
        new_mode: 0o644,
        secret: false,
    })
}

/// Removing the plugin at `path` if memd wrote it (anything else there stays).
pub fn plan_remove(path: &Path) -> Result<Planned> {
    let before = files::read_optional(path)?;
    let after = match &before {
        Some(text) if is_ours(text) => None,
        other => other.clone(),
    };
    Ok(Planned {
        path: path.to_path_buf(),
        before,
        after,
        new_mode: 0o644,
        secret: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_plugin_names_its_hook_dir_and_is_recognised() {
        let dir = Path::new("/opt/my \"memd\"/bin");
        let text = render(dir);
        assert!(is_ours(&text));
        assert!(!text.contains("__MEMD_HOOK_DIR__"));
        assert_eq!(hook_dir_of(&text).as_deref(), Some(dir));
    }

    #[test]
    fn a_foreign_file_is_neither_replaced_nor_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("memd.ts");
        std::fs::write(&path, "export const Mine = async () => ({})\n").unwrap();
        let err = plan_install(&path, Path::new("/bin"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not written by memd"), "{err}");
        assert!(!plan_remove(&path).unwrap().changes());
        std::fs::write(&path, render(Path::new("/bin"))).unwrap();
        let removal = plan_remove(&path).unwrap();
        assert!(removal.changes() && removal.after.is_none());
        assert!(!plan_install(&path, Path::new("/bin")).unwrap().changes());
    }
}
