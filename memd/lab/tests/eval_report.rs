//! `memd-eval retrieval` as a user runs it: the report starts with the commit it was built
//! from and the configuration measured, labels the fused ranking "first stage only" and the
//! daemon's pipeline "shipped" on both repository sets (and they differ: the late stage ran),
//! and reports which note each stage ranks first in the paraphrase probe.
//!
//! Needs the embedding and late-interaction runtime (install/fetch-runtime.sh); without it the
//! test fails and says so. Set MEMD_SKIP_MODEL_TESTS=1 to skip.

use std::process::Command;

fn git_head() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The `(R@1, R@5, R@10, MRR)` cells of the table row of `set` at `stage`.
fn row(report: &str, set: &str, stage: &str) -> Vec<String> {
    let line = report
        .lines()
        .find(|l| l.starts_with(&format!("| {set}")) && l.contains(&format!("| {stage} |")))
        .unwrap_or_else(|| panic!("no {set} / {stage} row in\n{report}"));
    line.split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .skip(3)
        .map(String::from)
        .collect()
}

/// `memd-eval retrieval <args>`'s report, asserting it succeeded; `None` when model tests are
/// skipped (MEMD_SKIP_MODEL_TESTS=1).
fn retrieval(args: &[&str]) -> Option<String> {
    if std::env::var("MEMD_SKIP_MODEL_TESTS").as_deref() == Ok("1") {
        eprintln!("MEMD_SKIP_MODEL_TESTS=1: skipping memd-eval retrieval (needs the models)");
        return None;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_memd-eval"))
        .arg("retrieval")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("memd-eval runs");
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(report)
}

#[test]
fn the_retrieval_report_names_its_commit_configuration_and_stages() {
    let Some(report) = retrieval(&[]) else {
        return;
    };
    let first = report.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("memd-eval ") && first.contains(" at commit "),
        "{first}"
    );
    if let Some(head) = git_head() {
        assert!(first.contains(&head), "{first} does not name HEAD {head}");
    }
    assert!(report.contains("\nfirst stage only: "), "{report}");
    assert!(
        report.contains("\nshipped: the first stage -> late interaction"),
        "{report}"
    );
    for set in ["coding set", "holdout set"] {
        let first_stage = row(&report, set, "first stage only");
        let shipped = row(&report, set, "shipped");
        assert_eq!(first_stage.len(), 4, "{first_stage:?}");
        // The shipped row went through late interaction: on these sets it reorders the head.
        assert_ne!(first_stage, shipped, "{set}: shipped == first stage only");
    }
    assert!(
        !report.contains("| LoCoMo"),
        "no LoCoMo row without --locomo"
    );
    let probe: Vec<&str> = report
        .lines()
        .skip_while(|l| !l.starts_with("paraphrase probe:"))
        .filter(|l| l.contains(" order "))
        .collect();
    let stages: Vec<&str> = probe
        .iter()
        .map(|l| l.split(" order ").next().unwrap_or_default().trim())
        .collect();
    assert!(
        stages.starts_with(&["first stage only", "+ late interaction"])
            && stages.last() == Some(&"shipped"),
        "{report}"
    );
}

/// `--stores mixed` ranks the coding set's questions in one store that also holds the probe's
/// notes, and says so; a late score given beside the shipped one gets its own row, which in a
/// store of notes only (one kind, no outcomes) must equal the shipped row.
#[test]
fn the_mixed_store_report_names_its_store_and_its_late_scores() {
    let args = [
        "--stores",
        "mixed",
        "--notes",
        "coding",
        "--late-score",
        "priors:1",
    ];
    let Some(report) = retrieval(&args) else {
        return;
    };
    assert!(
        report.contains("stores: every set in one store"),
        "{report}"
    );
    assert!(!report.contains("| holdout set"), "--notes coding only");
    let shipped = row(&report, "coding set", "shipped");
    assert_eq!(shipped.len(), 4, "{report}");
    assert_eq!(row(&report, "coding set", "late score priors:1"), shipped);
    assert_eq!(
        row(&report, "paraphrase probe (3 notes)", "shipped").len(),
        4,
        "{report}"
    );
}

/// `--projects kept` stores each note in its project and asks each question from its
/// answer's, as the prompt hook scopes reads: other projects' notes stop being candidates, so
/// the coding set's rows change, and the report says how the questions were asked.
#[test]
fn questions_asked_from_their_project_are_ranked_among_its_notes() {
    let Some(ignored) = retrieval(&["--notes", "coding"]) else {
        return;
    };
    let Some(kept) = retrieval(&["--notes", "coding", "--projects", "kept"]) else {
        return;
    };
    assert!(
        ignored.contains("notes stored with no project"),
        "{ignored}"
    );
    assert!(
        kept.contains("each question asked from its answer's project"),
        "{kept}"
    );
    for stage in ["first stage only", "shipped"] {
        let (a, b) = (
            row(&ignored, "coding set", stage),
            row(&kept, "coding set", stage),
        );
        assert_eq!(b.len(), 4, "{kept}");
        assert_ne!(
            a, b,
            "{stage}: scoping to the answer's project changed nothing"
        );
    }
}

/// A late score that does not parse is refused before anything loads, naming the flag.
#[test]
fn a_bad_late_score_is_refused_naming_the_flag() {
    for bad in ["priors:x", "priors", "sideways", "priors:-1"] {
        let out = Command::new(env!("CARGO_BIN_EXE_memd-eval"))
            .args(["retrieval", "--late-score", bad])
            .output()
            .expect("memd-eval runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad} accepted");
        assert!(err.contains("--late-score"), "{bad}: {err}");
    }
}
