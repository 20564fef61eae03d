//! The workspace's import graph, read from the sources (`tests/tests/architecture.rs` keeps it
//! free of circles).
//!
//! Owns a small Rust reader: comments, strings and `#[cfg(test)]` items are skipped, `mod`
//! declarations (with `#[path]`) give each crate target's module tree, and every `crate::`,
//! `self::` and `super::` path (use trees included) becomes an edge from the module it is
//! written in to the longest module prefix it names. Pure std on purpose: it must never need a
//! parser crate, and it never compiles anything. It reads only what is declared: a file no
//! `mod` reaches is not part of the graph (the compiler would not see it either).
//!
//! `tokens` turns source into tokens, `reader` walks one file's items, `graph` finds the
//! circles; this file finds the crates and their targets and follows `mod` declarations.

mod graph;
mod reader;
mod tokens;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A module path inside one crate target (`["http", "routes"]`; empty for the root).
pub type ModPath = Vec<String>;

/// One import: where it is written and what it names.
#[derive(Debug, Clone)]
pub struct Import {
    pub from: ModPath,
    pub to: ModPath,
    /// `file:line` of the path, for the failure message.
    pub at: String,
}

/// One crate target (library, binary) and the imports between its modules.
#[derive(Debug, Default)]
pub struct Target {
    /// `memd-server (lib)`, `memd (bin)` (its `main.rs`), `memd-lab (memd-bench)` (`src/bin/`).
    pub name: String,
    pub modules: BTreeSet<ModPath>,
    pub imports: Vec<Import>,
}

/// One circle at one level: the modules of `folder` (`""` for the crate's top level) in order,
/// the first repeated at the end, and one import per step.
#[derive(Debug, Clone)]
pub struct Cycle {
    pub target: String,
    pub folder: String,
    pub members: Vec<String>,
    /// Every module caught in circles with these (the strongly connected component).
    pub component: BTreeSet<String>,
    pub steps: Vec<String>,
}

impl std::fmt::Display for Cycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = match self.folder.as_str() {
            "" => "top level".to_string(),
            folder => format!("inside {folder}/"),
        };
        writeln!(f, "{}, {level}: {}", self.target, self.members.join(" → "))?;
        for s in &self.steps {
            writeln!(f, "    {s}")?;
        }
        Ok(())
    }
}

/// The workspace root (this crate lives in `<root>/tests`).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// The workspace members' directories and package names, from the root `Cargo.toml`.
pub fn members(root: &Path) -> Vec<(String, PathBuf)> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let list = manifest
        .split_once("members")
        .and_then(|(_, rest)| rest.split_once('[').map(|(_, r)| r))
        .and_then(|rest| rest.split_once(']').map(|(l, _)| l))
        .unwrap_or_default();
    list.split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| {
            let dir = root.join(m);
            (package_name(&dir).unwrap_or_else(|| m.to_string()), dir)
        })
        .collect()
}

fn package_name(dir: &Path) -> Option<String> {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("name"))?;
    Some(line.split_once('=')?.1.trim().trim_matches('"').to_string())
}

/// Every crate target under `dir/src`: the library, the main binary, `src/bin/*`.
pub fn targets(package: &str, dir: &Path) -> Vec<Target> {
    let src = dir.join("src");
    let mut roots = Vec::new();
    for (file, kind) in [("lib.rs", "lib"), ("main.rs", "bin")] {
        if src.join(file).is_file() {
            roots.push((src.join(file), kind.to_string()));
        }
    }
    let mut bins: Vec<_> = std::fs::read_dir(src.join("bin"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    bins.sort();
    for b in bins {
        let stem = b
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        match b.is_dir() {
            true if b.join("main.rs").is_file() => roots.push((b.join("main.rs"), stem)),
            false if b.extension().is_some_and(|e| e == "rs") => roots.push((b, stem)),
            _ => {}
        }
    }
    roots
        .into_iter()
        .map(|(root, kind)| {
            let mut t = Target {
                name: format!("{package} ({kind})"),
                ..Target::default()
            };
            read_module(&root, true, Vec::new(), &mut t);
            t
        })
        .collect()
}

/// Reads `file` as module `path` and, recursively, the modules it declares.
fn read_module(file: &Path, owns_dir: bool, path: ModPath, t: &mut Target) {
    let Ok(text) = std::fs::read_to_string(file) else {
        return;
    };
    t.modules.insert(path.clone());
    let tokens = tokens::tokenize(&text);
    let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    // Where `mod x;` looks for x: beside lib.rs/main.rs/mod.rs, else in a folder named after
    // the file.
    let child_dir = match owns_dir {
        true => dir.clone(),
        false => dir.join(file.file_stem().unwrap_or_default()),
    };
    let rel = file
        .strip_prefix(workspace_root())
        .unwrap_or(file)
        .display()
        .to_string();
    let mut r = reader::Reader {
        tokens: &tokens,
        i: 0,
        file: rel,
        modules: Vec::new(),
        imports: Vec::new(),
    };
    r.items(&path, &child_dir, &dir, 0);
    for (child, child_file, child_owns) in std::mem::take(&mut r.modules) {
        if child_file.is_file() {
            read_module(&child_file, child_owns, child, t);
        } else {
            t.modules.insert(child);
        }
    }
    t.imports.extend(r.imports);
}
