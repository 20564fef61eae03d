//! The workspace's shape, checked from its sources: no import circles in any crate, the hooks
//! depend only on small crates, no new file over 600 lines, every crate says what it owns.
//!
//! Reads files and runs `cargo tree` offline; starts nothing. The module graph comes from
//! `tests::architecture` (std only).

use std::collections::BTreeSet;
use std::path::Path;
use tests::architecture::{self, Cycle};

/// Modules still caught in an import circle, as (crate target, folder, module). This list only
/// shrinks: a circle not listed here fails, and so does an entry that is no longer in one.
const STILL_CIRCULAR: &[(&str, &str, &str)] = &[];

/// Files over the ~600-line guide, relative to the workspace root. This list only shrinks: a
/// new big file fails, and so does an entry that has come under the limit (remove it).
const BIG_FILES: &[&str] = &[
    "memd/cli/tests/cli_init.rs",
    "memd/engine/src/index/vector.rs",
    "memd/engine/tests/redact.rs",
    "memd/lab/src/bin/memd-bench/dashboard.rs",
    "memd/lab/src/eval/coding.rs",
    "memd/lab/src/eval/locomo.rs",
    "tests/tests/dashboard.rs",
    "tests/tests/roampal_import.rs",
];
const MAX_LINES: usize = 600;

/// What the hooks may link besides the workspace's own small crates (proto, hookrt,
/// memd-client, memd-guard): the HTTP client, JSON, serde itself (proto's one dependency) and
/// sha2 (memd-client's HMAC for the daemon's proof of identity; pure Rust, no I/O).
const HOOK_EXTERNAL_DEPS: &[&str] = &["serde", "serde_json", "sha2", "ureq"];
const HOOKS: &[&str] = &["hook-prompt", "hook-stop", "hookrt"];

#[test]
fn no_crate_has_an_import_circle() {
    let root = architecture::workspace_root();
    let mut cycles: Vec<Cycle> = Vec::new();
    let mut targets = 0;
    for (package, dir) in architecture::members(&root) {
        for t in architecture::targets(&package, &dir) {
            assert!(t.modules.len() > 1 || t.imports.is_empty(), "{}", t.name);
            targets += 1;
            cycles.extend(t.cycles());
        }
    }
    assert!(targets >= 13, "found only {targets} crate targets");
    let allowed = |c: &Cycle, m: &String| {
        STILL_CIRCULAR.contains(&(c.target.as_str(), c.folder.as_str(), m.as_str()))
    };
    let new: Vec<String> = cycles
        .iter()
        .filter(|c| !c.component.iter().all(|m| allowed(c, m)))
        .map(|c| format!("{c}    (modules in circles with these: {:?})", c.component))
        .collect();
    assert!(
        new.is_empty(),
        "import circles (break them: move the shared piece down, or pass it in):\n{}",
        new.join("\n")
    );
    let still: BTreeSet<(&str, &str, &str)> = cycles
        .iter()
        .flat_map(|c| {
            c.component
                .iter()
                .map(|m| (c.target.as_str(), c.folder.as_str(), m.as_str()))
        })
        .collect();
    let stale: Vec<_> = STILL_CIRCULAR
        .iter()
        .filter(|e| !still.contains(*e))
        .collect();
    assert!(
        stale.is_empty(),
        "no longer in a circle, remove from STILL_CIRCULAR: {stale:?}"
    );
}

/// The reader sees a circle through a use tree and a path in an expression, and nothing in
/// comments, strings or `#[cfg(test)]` code: without this the test above could pass by
/// reading nothing.
#[test]
fn the_reader_finds_a_planted_circle_and_ignores_tests_and_comments() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    let write = |p: &str, s: &str| std::fs::write(src.join(p), s).unwrap();
    write("lib.rs", "//! x\npub mod a;\npub mod b;\nmod c;\n");
    write(
        "a.rs",
        "use crate::{b::{inner::Thing, self}};\n// crate::c::x\nfn f() { let s = \"crate::c::y\"; }\n",
    );
    write("b/mod.rs", "pub mod inner;\n");
    write(
        "b/inner.rs",
        "pub struct Thing;\nfn g<'a>(x: &'a str) -> char { super::super::a::h(); 'c' }\n",
    );
    write(
        "c.rs",
        "#[cfg(test)]\nmod tests { use crate::a::x; }\n#[cfg(test)]\nuse crate::b::y;\n",
    );
    let t = architecture::targets("planted", dir.path()).remove(0);
    let cycles = t.cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert_eq!(cycles[0].members, ["a", "b", "a"], "{}", cycles[0]);
    assert!(cycles[0].steps[0].contains("src/a.rs:1"), "{}", cycles[0]);
    let from_c = t.imports.iter().filter(|i| i.from == ["c"]).count();
    assert_eq!(from_c, 0, "test-only imports counted: {:?}", t.imports);
    assert!(
        t.imports
            .iter()
            .all(|i| i.to.first() != Some(&"c".to_string()))
    );
}

#[test]
fn the_hooks_link_only_small_crates() {
    let root = architecture::workspace_root();
    let workspace: BTreeSet<String> = architecture::members(&root)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    for hook in HOOKS {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = std::process::Command::new(cargo)
            .args(["tree", "--offline", "-e", "normal", "--prefix", "depth"])
            .args(["--format", "{p}", "-p", hook])
            .current_dir(&root)
            .output()
            .expect("cargo tree runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && !text.is_empty(),
            "cargo tree -p {hook}: {out:?}"
        );
        // Each line is "<depth><name> v<version> …"; a workspace crate's direct dependencies
        // are the lines one level below it.
        let mut parents: Vec<String> = Vec::new();
        let mut heavy = Vec::new();
        for line in text.lines() {
            let depth_len = line.chars().take_while(char::is_ascii_digit).count();
            let depth: usize = line[..depth_len].parse().unwrap();
            let name = line[depth_len..].split(' ').next().unwrap().to_string();
            parents.truncate(depth);
            let parent = parents.last().cloned();
            parents.push(name.clone());
            let Some(parent) = parent else { continue };
            let under_ours = workspace.contains(&parent);
            if under_ours && !workspace.contains(&name) && !HOOK_EXTERNAL_DEPS.contains(&&*name) {
                heavy.push(format!("{parent} → {name}"));
            }
        }
        assert!(
            heavy.is_empty(),
            "{hook} links more than {HOOK_EXTERNAL_DEPS:?}: {heavy:?}"
        );
    }
}

/// The shared store's worker reaches the engine through `SharedSync` only: the bookkeeping
/// rules stay in the engine's `state::sync`, and the worker cannot log a change of its own.
#[test]
fn memd_pg_never_builds_engine_ops_or_reads_engine_state() {
    let root = architecture::workspace_root();
    let forbidden = [
        "state::ops",
        "SyncOp",
        "Op::",
        ".store.",
        "Arc<Core>",
        "core::Core;",
    ];
    let mut found = Vec::new();
    for file in rust_files(&root.join("memd/pg/src")) {
        let text = std::fs::read_to_string(&file).unwrap();
        let rel = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for f in forbidden.iter().filter(|f| code.contains(**f)) {
                found.push(format!("{rel}:{}: {f}", n + 1));
            }
        }
    }
    assert!(found.is_empty(), "memd-pg past SharedSync: {found:?}");
}

#[test]
fn no_new_file_is_over_600_lines() {
    let root = architecture::workspace_root();
    let mut big = BTreeSet::new();
    for (_, dir) in architecture::members(&root) {
        for file in rust_files(&dir) {
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            if lines > MAX_LINES {
                let rel = file.strip_prefix(&root).unwrap().display().to_string();
                big.insert(rel);
            }
        }
    }
    let listed: BTreeSet<String> = BIG_FILES.iter().map(|s| s.to_string()).collect();
    let new: Vec<_> = big.difference(&listed).collect();
    let shrunk: Vec<_> = listed.difference(&big).collect();
    assert!(
        new.is_empty(),
        "over {MAX_LINES} lines (split by what each part owns): {new:?}"
    );
    assert!(
        shrunk.is_empty(),
        "now under {MAX_LINES} lines, remove from BIG_FILES: {shrunk:?}"
    );
}

#[test]
fn every_crate_root_says_what_it_owns() {
    let root = architecture::workspace_root();
    for (package, dir) in architecture::members(&root) {
        for file in ["src/lib.rs", "src/main.rs"] {
            let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
                continue;
            };
            let header: Vec<&str> = text.lines().take_while(|l| l.starts_with("//!")).collect();
            assert!(
                header.len() >= 2,
                "{package} {file}: no //! header saying what it owns"
            );
        }
    }
}

/// Every `.rs` file of a crate outside `target/`, its own nested crates (fuzz) included.
fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    tests::files_under(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| !p.components().any(|c| c.as_os_str() == "target"))
        .collect()
}
