//! Stamps the commit `memd-eval` was built from into the binary (`MEMD_EVAL_COMMIT`), so every
//! report says what it measured. Outside a git checkout (a source tarball) nothing is set and
//! the report says so. Must never fail the build.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
}

fn main() {
    if let Some(commit) = git(&["describe", "--always", "--dirty", "--abbrev=12"]) {
        println!("cargo:rustc-env=MEMD_EVAL_COMMIT={commit}");
    }
    // Rebuilt when HEAD moves (a commit, a checkout) or the index changes (`--dirty`).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for file in ["HEAD", "logs/HEAD", "index"] {
            println!("cargo:rerun-if-changed={dir}/{file}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
