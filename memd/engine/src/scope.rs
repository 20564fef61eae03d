//! Whose memories a caller sees, and where a new memory belongs.
//!
//! Every memory is global or belongs to one project (`Record::project`). A caller working in a
//! project sees that project's memories and the global ones; other projects' memories are
//! filtered out before ranking, so they are never candidates. This module owns that filter
//! ([`Visibility`]), the `project` selectors and `scope` arguments of the API, and the
//! per-directory cache in front of [`crate::project::resolve`]. It must never rank, never write,
//! and never resolve a relative path (the daemon's working directory is not the caller's).

use crate::error::{ApiError, check_len};
use crate::project::{self, Project};
use proto::{Scope, limits};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Which memories are candidates for a read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Visibility {
    /// Every memory (`project: "all"`, and reads with no project context at all).
    #[default]
    All,
    /// Global memories only (a hook call whose project could not be told).
    GlobalOnly,
    /// One project's memories and the global ones.
    Project(String),
}

impl Visibility {
    /// May a memory of `project` (`None`: global) be a candidate?
    pub fn admits(&self, project: Option<&str>) -> bool {
        match (self, project) {
            (Visibility::All, _) | (_, None) => true,
            (Visibility::GlobalOnly, Some(_)) => false,
            (Visibility::Project(mine), Some(theirs)) => mine == theirs,
        }
    }

    /// The visibility of a caller standing in `current` (hook calls: nothing from elsewhere).
    pub fn of_current(current: Option<&str>) -> Visibility {
        match current {
            Some(p) => Visibility::Project(p.to_string()),
            None => Visibility::GlobalOnly,
        }
    }

    /// Parses a `project` selector: `current`, `global`, `all` or a project id. Absent means
    /// the current project when one is known, else everything (a plain API or CLI call that
    /// says nothing about projects sees what it saw before projects existed).
    pub fn select(selector: Option<&str>, current: Option<&str>) -> Result<Visibility, ApiError> {
        let Some(sel) = selector.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(current.map_or(Visibility::All, |p| Visibility::Project(p.to_string())));
        };
        check_len("project", sel, limits::PROJECT_MAX_CHARS)?;
        Ok(match sel {
            "current" => Visibility::of_current(current),
            "all" => Visibility::All,
            "global" => Visibility::GlobalOnly,
            id => Visibility::Project(id.to_string()),
        })
    }
}

/// The project a new memory of `scope` gets when its author stands in `current`.
pub fn home(scope: Scope, current: Option<&str>) -> Option<String> {
    match scope {
        Scope::Global => None,
        Scope::Project => current.map(str::to_string),
    }
}

/// How long a directory's resolution is reused. A prompt resolves its directory once per
/// turn; re-reading `.git` every 30 s picks up a new remote or a fresh `git init` soon enough.
const CACHE_TTL: Duration = Duration::from_secs(30);
/// Directories remembered at most (a user works in a handful; this bounds a hostile caller).
const CACHE_MAX: usize = 1024;

/// Project resolution per directory, cached: the prompt path reads `.git` once per
/// `CACHE_TTL`, not on every prompt.
#[derive(Default)]
pub struct ProjectCache {
    entries: Mutex<HashMap<String, (Project, Instant)>>,
}

impl ProjectCache {
    /// Resolves a caller's directory (`field` names it in errors). Empty means "not given".
    pub fn resolve(&self, field: &str, dir: Option<&str>) -> Result<Option<Project>, ApiError> {
        let Some(dir) = dir.map(str::trim).filter(|d| !d.is_empty()) else {
            return Ok(None);
        };
        check_len(field, dir, limits::DIR_MAX_CHARS)?;
        if !Path::new(dir).is_absolute() {
            return Err(ApiError::bad(
                field,
                format!("{field} must be an absolute path"),
            ));
        }
        if let Some(hit) = self.cached(dir) {
            return Ok(Some(hit));
        }
        let resolved = project::resolve(Path::new(dir));
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= CACHE_MAX {
                entries.clear();
            }
            entries.insert(dir.to_string(), (resolved.clone(), Instant::now()));
        }
        Ok(Some(resolved))
    }

    fn cached(&self, dir: &str) -> Option<Project> {
        let entries = self.entries.lock().ok()?;
        let (p, at) = entries.get(dir)?;
        (at.elapsed() < CACHE_TTL).then(|| p.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_sees_itself_and_global_never_another() {
        let v = Visibility::Project("github.com/acme/shop".into());
        assert!(v.admits(Some("github.com/acme/shop")));
        assert!(v.admits(None));
        assert!(!v.admits(Some("github.com/acme/blog")));
        assert!(!Visibility::GlobalOnly.admits(Some("github.com/acme/shop")));
        assert!(Visibility::GlobalOnly.admits(None));
        assert!(Visibility::All.admits(Some("github.com/acme/blog")));
    }

    #[test]
    fn selectors() {
        let shop = Some("github.com/acme/shop");
        let sel = |s: Option<&str>, cur| Visibility::select(s, cur).unwrap();
        assert_eq!(
            sel(None, shop),
            Visibility::Project("github.com/acme/shop".into())
        );
        assert_eq!(sel(None, None), Visibility::All);
        assert_eq!(sel(Some("current"), None), Visibility::GlobalOnly);
        assert_eq!(sel(Some(" all "), shop), Visibility::All);
        assert_eq!(sel(Some("global"), shop), Visibility::GlobalOnly);
        assert_eq!(
            sel(Some("path:/srv/blog"), shop),
            Visibility::Project("path:/srv/blog".into())
        );
        let long = "x".repeat(limits::PROJECT_MAX_CHARS + 1);
        let err = Visibility::select(Some(&long), None).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("project"));
    }

    #[test]
    fn scope_decides_the_home_of_a_new_memory() {
        assert_eq!(home(Scope::Global, Some("p")), None);
        assert_eq!(home(Scope::Project, Some("p")), Some("p".into()));
        assert_eq!(home(Scope::Project, None), None);
    }

    #[test]
    fn relative_and_oversized_directories_are_refused_empty_is_absent() {
        let cache = ProjectCache::default();
        let err = cache.resolve("cwd", Some("src/app")).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("cwd"));
        assert!(err.message.contains("absolute"), "{}", err.message);
        let long = format!("/{}", "a".repeat(limits::DIR_MAX_CHARS));
        assert!(cache.resolve("cwd", Some(&long)).is_err());
        assert_eq!(cache.resolve("cwd", Some("  ")).unwrap(), None);
        assert_eq!(cache.resolve("cwd", None).unwrap(), None);
    }

    #[test]
    fn resolution_is_cached_per_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap().to_string();
        let cache = ProjectCache::default();
        let first = cache.resolve("cwd", Some(&path)).unwrap().unwrap();
        assert!(first.id.starts_with("path:"), "{}", first.id);
        // A repository appearing within the TTL is not seen yet: the cached answer stands.
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(
            dir.path().join(".git/config"),
            "[remote \"origin\"]\n\turl = git@github.com:acme/shop.git\n",
        )
        .unwrap();
        assert_eq!(cache.resolve("cwd", Some(&path)).unwrap().unwrap(), first);
        let fresh = ProjectCache::default();
        assert_eq!(
            fresh.resolve("cwd", Some(&path)).unwrap().unwrap().id,
            "github.com/acme/shop"
        );
    }
}
