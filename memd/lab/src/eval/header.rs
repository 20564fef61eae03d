//! The lines at the top of every `memd-eval` report: the commit measured and the retrieval
//! configuration (models, depths, budget, weights), so a figure can always be traced back.
//!
//! Owns the commit lookup: stamped at build time by build.rs, else asked of git at run time in
//! the current directory, else said to be unknown. Must never fail a report over it.

use super::pipeline::Settings;
use std::fmt::Write as _;
use std::process::Command;

/// The commit `memd-eval` was built from (`git describe --always --dirty`), else the checkout
/// it runs in, else "unknown".
pub fn commit() -> String {
    if let Some(c) = option_env!("MEMD_EVAL_COMMIT") {
        return c.to_string();
    }
    Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| format!("{} (checkout at run time)", s.trim()))
        .filter(|s| !s.starts_with(' '))
        .unwrap_or_else(|| "unknown (not built in a git checkout)".to_string())
}

/// The header: `memd-eval <version> at commit <commit>`, then the configuration measured.
pub fn header(settings: &Settings) -> String {
    let mut h = format!(
        "memd-eval {} at commit {}\n",
        env!("CARGO_PKG_VERSION"),
        commit()
    );
    let _ = writeln!(h, "{settings}");
    h
}
