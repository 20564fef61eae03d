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

#[cfg(test)]
mod tests {
    use super::*;
    use memd_engine::config::SearchConfig;

    #[test]
    fn the_header_names_the_commit_and_every_setting_measured() {
        let h = header(&Settings::default());
        let first = h.lines().next().unwrap();
        assert!(
            first.starts_with("memd-eval ") && first.contains(" at commit "),
            "{first}"
        );
        if let Some(stamped) = option_env!("MEMD_EVAL_COMMIT") {
            assert!(first.ends_with(stamped), "{first}");
        }
        let d = SearchConfig::default();
        for part in [
            "\nfirst stage only: all-MiniLM-L6-v2".to_string(),
            "\nshipped: the first stage -> late interaction".to_string(),
            format!("over the first {} (search.rerank_depth)", d.rerank_depth),
            format!("prompt budget {} ms", d.prompt_budget_ms),
            "vectors (weight 1.00) + BM25 (weight 1.00)".to_string(),
        ] {
            assert!(h.contains(&part), "{part:?} not in\n{h}");
        }
        // What ships changes, the header changes with it.
        let with = |search: SearchConfig| {
            header(&Settings {
                search,
                ..Settings::default()
            })
        };
        let ce = with(SearchConfig {
            cross_encoder_depth: 10,
            ..d.clone()
        });
        assert!(
            ce.contains("-> cross-encoder ms-marco-MiniLM-L-12-v2 (int8) over the first 10"),
            "{ce}"
        );
        let off = with(SearchConfig {
            rerank: false,
            cross_encoder_depth: 10,
            ..d
        });
        assert!(
            off.contains("no reranking") && off.contains("cross-encoder off"),
            "{off}"
        );
    }
}
