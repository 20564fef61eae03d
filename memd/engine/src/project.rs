//! Which project a working directory belongs to: the repository around it, named by its
//! `origin` remote when it has one (so two clones of one repository are one project), else by
//! the repository's root path, else by the directory itself.
//!
//! Owns only the resolution, by reading files (`.git`, `gitdir:` links, `commondir`, the git
//! config); it must never run a subprocess (it runs while a prompt waits) and never fail: a
//! directory it cannot make sense of is a project of its own path. Caching per directory is
//! the caller's.

use std::path::{Component, Path, PathBuf};

/// A resolved project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// Stable identity: `host/owner/repo` from the origin URL, else `path:<root>`; either one
    /// holding a secret is `redacted-<digest>` in its place.
    pub id: String,
    /// The repository's working-tree root (or the directory itself outside any repository).
    pub root: PathBuf,
    /// The origin remote as written in the git config, when there is one.
    pub origin: Option<String>,
}

/// Resolves `dir` (a hook's `cwd`, Cursor's workspace root). A directory that no longer exists
/// is resolved through its nearest existing ancestor, and is its own project if none of them
/// is a repository.
pub fn resolve(dir: &Path) -> Project {
    let dir = real_path(dir);
    for level in dir.ancestors() {
        let dot_git = level.join(".git");
        let Some(git_dir) = git_dir_of(&dot_git) else {
            continue;
        };
        let origin = origin_url(&common_dir(&git_dir));
        let id = match origin.as_deref().and_then(normalize_remote) {
            Some(remote) => crate::redact::safe_id(&remote).into_owned(),
            None => path_id(level),
        };
        return Project {
            id,
            root: level.to_path_buf(),
            origin,
        };
    }
    Project {
        id: path_id(&dir),
        root: dir,
        origin: None,
    }
}

/// `path:<root>`, or `path:redacted-<digest>` when the path holds a secret (a token used as a
/// directory name): project ids are stored with every memory and sent to the shared store,
/// so they are scrubbed like conversation ids (`redact::safe_id`, issue 36).
fn path_id(root: &Path) -> String {
    format!(
        "path:{}",
        crate::redact::safe_id(&root.display().to_string())
    )
}

/// `path` with symlinks resolved; for a path that does not exist, its nearest existing ancestor
/// resolved and the rest appended, lexically normalised (`..` and `.` removed).
fn real_path(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let normal = lexical(&absolute);
    let mut missing = Vec::new();
    let mut existing = normal.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let real = without_verbatim(real);
            return missing.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                existing = parent;
            }
            _ => return normal,
        }
    }
}

/// Windows' canonical form is verbatim (`\\?\C:\Users\...`); a drive path keeps the form users
/// and hooks write (`C:\Users\...`), which is what project ids and the dashboard show.
#[cfg(windows)]
fn without_verbatim(path: PathBuf) -> PathBuf {
    match path.to_str().and_then(|s| s.strip_prefix(r"\\?\")) {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => PathBuf::from(rest),
        _ => path,
    }
}

#[cfg(not(windows))]
fn without_verbatim(path: PathBuf) -> PathBuf {
    path
}

fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The git directory `.git` stands for: the directory itself, or the target of a `gitdir:`
/// file (worktrees and submodules write one).
fn git_dir_of(dot_git: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(dot_git).ok()?;
    if meta.is_dir() {
        return Some(dot_git.to_path_buf());
    }
    let text = read_small(dot_git)?;
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let base = dot_git.parent()?;
    let path = lexical(&base.join(target));
    path.is_dir().then_some(path)
}

/// A regular file's text, if it is one and not absurdly large: a FIFO or device named `.git`
/// (a tarball can hold anything) must not block a prompt.
fn read_small(path: &Path) -> Option<String> {
    const MAX: u64 = 1024 * 1024;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Where the shared config lives: a linked worktree's git dir names it in `commondir`.
fn common_dir(git_dir: &Path) -> PathBuf {
    match read_small(&git_dir.join("commondir")) {
        Some(text) if !text.trim().is_empty() => lexical(&git_dir.join(text.trim())),
        _ => git_dir.to_path_buf(),
    }
}

/// `url` of `[remote "origin"]` in `<git dir>/config`.
fn origin_url(git_dir: &Path) -> Option<String> {
    let text = read_small(&git_dir.join("config"))?;
    let mut in_origin = false;
    for raw in text.lines() {
        let line = raw.trim();
        if line.starts_with('[') {
            let section: String = line.chars().filter(|c| !c.is_whitespace()).collect();
            in_origin = section.eq_ignore_ascii_case("[remote\"origin\"]");
            continue;
        }
        if !in_origin {
            continue;
        }
        if let Some((key, value)) = line.split_once('=')
            && key.trim().eq_ignore_ascii_case("url")
        {
            let value = value.trim().trim_matches('"').trim();
            if !value.is_empty() {
                return Some(value.to_string());
            }
        }
    }
    None
}

/// `host/owner/repo` for the usual remote spellings: `https://host/owner/repo(.git)`,
/// `ssh://user@host:port/owner/repo`, `user@host:owner/repo.git`, `git://…`. Credentials and
/// ports are dropped, the host is lower-cased. A local path remote gives `None` (the clone's
/// own root path then names the project).
pub fn normalize_remote(url: &str) -> Option<String> {
    let url = url.trim();
    let (host_and_path, scp_like) = match url.split_once("://") {
        Some((scheme, rest)) if !scheme.eq_ignore_ascii_case("file") => (rest, false),
        Some(_) => return None,
        None => {
            // scp-like `[user@]host:path`, but not a Windows drive or a local path.
            let colon = url.find(':')?;
            let slash = url.find('/').unwrap_or(usize::MAX);
            if colon > slash || colon < 2 {
                return None;
            }
            (url, true)
        }
    };
    // Credentials end at the last `@` before the path (a password may contain `@`).
    let authority_end = if scp_like {
        host_and_path.rfind(':')
    } else {
        host_and_path.find('/')
    }
    .unwrap_or(host_and_path.len());
    let without_user = match host_and_path[..authority_end].rfind('@') {
        Some(at) => &host_and_path[at + 1..],
        None => host_and_path,
    };
    let (host, path) = if scp_like {
        without_user.split_once(':')?
    } else {
        without_user.split_once('/')?
    };
    let host = match host.strip_prefix('[') {
        // `[::1]:8080`: the address inside the brackets.
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => host.split(':').next().unwrap_or(host),
    }
    .to_ascii_lowercase();
    let path = path
        .trim_matches('/')
        .trim_end_matches(".git")
        .trim_end_matches('/');
    if host.is_empty() || path.is_empty() {
        return None;
    }
    Some(format!("{host}/{path}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn repo(root: &Path, origin: Option<&str>) {
        fs::create_dir_all(root.join(".git")).unwrap();
        let mut config = String::from("[core]\n\trepositoryformatversion = 0\n");
        if let Some(url) = origin {
            config.push_str(&format!(
                "[remote \"origin\"]\n\turl = {url}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
            ));
        }
        fs::write(root.join(".git/config"), config).unwrap();
    }

    #[test]
    fn remotes_normalise_to_one_name() {
        for url in [
            "https://github.com/Acme/billing.git",
            "https://user:secret@GitHub.com/Acme/billing/",
            "git@github.com:Acme/billing.git",
            "ssh://git@github.com:22/Acme/billing.git",
            "git://github.com/Acme/billing",
            "https://bot:p@ss@github.com/Acme/billing.git",
        ] {
            assert_eq!(
                normalize_remote(url).as_deref(),
                Some("github.com/Acme/billing"),
                "{url}"
            );
        }
        assert_eq!(
            normalize_remote("ssh://git@[::1]:2222/team/app.git").as_deref(),
            Some("::1/team/app")
        );
        for local in [
            "/srv/git/billing.git",
            "../billing",
            "file:///srv/git/b.git",
            "C:\\repos\\b",
        ] {
            assert_eq!(normalize_remote(local), None, "{local}");
        }
    }

    #[test]
    fn a_subdirectory_belongs_to_its_repository_named_by_origin() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("billing");
        repo(&root, Some("git@github.com:acme/billing.git"));
        fs::create_dir_all(root.join("src/api")).unwrap();
        let p = resolve(&root.join("src/api"));
        assert_eq!(p.id, "github.com/acme/billing");
        assert_eq!(p.root, fs::canonicalize(&root).unwrap());
        // A second clone elsewhere is the same project.
        let other = t.path().join("elsewhere/billing-copy");
        repo(&other, Some("https://github.com/acme/billing"));
        assert_eq!(resolve(&other).id, p.id);
    }

    #[test]
    fn a_fifo_named_git_is_not_read() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("odd");
        fs::create_dir_all(&dir).unwrap();
        let fifo = std::ffi::CString::new(dir.join(".git").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let p = resolve(&dir);
        assert!(p.id.starts_with("path:"), "{}", p.id);
    }

    #[test]
    fn without_origin_or_git_the_path_names_the_project() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("scratch");
        repo(&root, None);
        let real = fs::canonicalize(&root).unwrap();
        assert_eq!(resolve(&root).id, format!("path:{}", real.display()));
        let plain = t.path().join("notes");
        fs::create_dir_all(&plain).unwrap();
        let p = resolve(&plain);
        assert_eq!(
            p.id,
            format!("path:{}", fs::canonicalize(&plain).unwrap().display())
        );
        assert_eq!(p.origin, None);
    }

    /// Issue 36: a token used as a directory name survived in the project id, which is stored
    /// with every memory and sent to the shared store.
    #[test]
    fn a_secret_in_the_path_or_the_remote_stays_out_of_the_id() {
        let t = tempfile::tempdir().unwrap();
        let token = format!("ghp_{}", "A1b2C3d4E5".repeat(4).get(..36).unwrap());
        let plain = t.path().join(&token).join("work");
        fs::create_dir_all(&plain).unwrap();
        let p = resolve(&plain);
        assert!(!p.id.contains(&token), "{}", p.id);
        assert!(p.id.starts_with("path:redacted-"), "{}", p.id);
        assert_eq!(resolve(&plain).id, p.id, "the same id every time");
        assert!(
            p.root.ends_with("work"),
            "the root is still the real directory"
        );
        let repo_root = t.path().join(&token).join("repo");
        repo(&repo_root, None);
        let r = resolve(&repo_root);
        assert!(
            r.id.starts_with("path:redacted-") && !r.id.contains(&token),
            "{}",
            r.id
        );
        let remote = t.path().join("clone");
        repo(
            &remote,
            Some(&format!("https://example.com/team/{token}.git")),
        );
        let id = resolve(&remote).id;
        assert!(!id.contains(&token), "{id}");
        assert!(id.starts_with("redacted-"), "{id}");
    }

    #[test]
    fn worktrees_share_the_main_repositorys_origin() {
        let t = tempfile::tempdir().unwrap();
        let main = t.path().join("main");
        repo(&main, Some("https://gitlab.com/team/app.git"));
        let admin = main.join(".git/worktrees/feature");
        fs::create_dir_all(&admin).unwrap();
        fs::write(admin.join("commondir"), "../..\n").unwrap();
        let wt = t.path().join("feature-wt");
        fs::create_dir_all(wt.join("src")).unwrap();
        fs::write(wt.join(".git"), format!("gitdir: {}\n", admin.display())).unwrap();
        let p = resolve(&wt.join("src"));
        assert_eq!(p.id, "gitlab.com/team/app");
        assert_eq!(p.root, fs::canonicalize(&wt).unwrap());
    }

    #[test]
    fn a_submodule_is_its_own_project() {
        let t = tempfile::tempdir().unwrap();
        let sup = t.path().join("super");
        repo(&sup, Some("https://github.com/acme/super.git"));
        let modules = sup.join(".git/modules/vendor/lib");
        fs::create_dir_all(&modules).unwrap();
        fs::write(
            modules.join("config"),
            "[remote \"origin\"]\n\turl = https://github.com/acme/lib.git\n",
        )
        .unwrap();
        let sub = sup.join("vendor/lib");
        fs::create_dir_all(&sub).unwrap();
        // Relative, as git writes it.
        fs::write(sub.join(".git"), "gitdir: ../../.git/modules/vendor/lib\n").unwrap();
        assert_eq!(resolve(&sub).id, "github.com/acme/lib");
        assert_eq!(resolve(&sup.join("vendor")).id, "github.com/acme/super");
    }

    #[test]
    fn symlinked_and_vanished_paths_resolve_through_what_exists() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("real-repo");
        repo(&root, Some("https://github.com/acme/site.git"));
        fs::create_dir_all(root.join("docs")).unwrap();
        let link = t.path().join("link-to-repo");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        assert_eq!(resolve(&link.join("docs")).id, "github.com/acme/site");
        // A directory deleted since the conversation started is still inside the repository.
        assert_eq!(
            resolve(&root.join("docs/removed/deeper/../x")).id,
            "github.com/acme/site"
        );
        // Nothing around it: the path itself, normalised.
        let gone = t.path().join("gone/away");
        let p = resolve(&gone);
        assert!(
            p.id.starts_with("path:") && p.id.ends_with("gone/away"),
            "{}",
            p.id
        );
    }

    /// The same layouts as git itself writes them (the tests above build them by hand).
    #[test]
    fn real_git_worktree_and_submodule() {
        let git = |dir: &Path, args: &[&str]| {
            let out = std::process::Command::new("git")
                .args([
                    "-c",
                    "protocol.file.allow=always",
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                ])
                .args(args)
                .current_dir(dir)
                .output();
            match out {
                Ok(o) if o.status.success() => true,
                Ok(o) => panic!("git {args:?}: {}", String::from_utf8_lossy(&o.stderr)),
                Err(e) => {
                    eprintln!("SKIPPED: git is not runnable here ({e})");
                    false
                }
            }
        };
        let t = tempfile::tempdir().unwrap();
        let lib = t.path().join("lib");
        fs::create_dir_all(&lib).unwrap();
        if !git(&lib, &["init", "-q"]) {
            return;
        }
        git(&lib, &["commit", "-q", "--allow-empty", "-m", "x"]);
        let app = t.path().join("app");
        fs::create_dir_all(&app).unwrap();
        git(&app, &["init", "-q"]);
        git(
            &app,
            &["remote", "add", "origin", "git@example.com:team/app.git"],
        );
        git(&app, &["commit", "-q", "--allow-empty", "-m", "x"]);
        git(&app, &["worktree", "add", "-q", "../app-wt"]);
        git(
            &app,
            &[
                "submodule",
                "add",
                "-q",
                lib.to_str().unwrap(),
                "vendor/lib",
            ],
        );
        git(
            &app.join("vendor/lib"),
            &[
                "remote",
                "set-url",
                "origin",
                "https://example.com/team/lib.git",
            ],
        );
        assert_eq!(resolve(&app).id, "example.com/team/app");
        let wt = resolve(&t.path().join("app-wt"));
        assert_eq!(wt.id, "example.com/team/app");
        assert_eq!(wt.root, fs::canonicalize(t.path().join("app-wt")).unwrap());
        assert_eq!(resolve(&app.join("vendor/lib")).id, "example.com/team/lib");
    }
}
