//! `memd-eval coding` end to end on the repository's coding-memory set, through the real
//! store, indexes, embedder and ranking: every configuration's figures are fractions, two runs
//! give the same lists, a configuration added as data runs like the built-in ones, and recall
//! stays above floors measured when the set was written.
//!
//! Needs the embedding runtime (install/fetch-runtime.sh); without it the test fails and says
//! so. Set MEMD_SKIP_MODEL_TESTS=1 to skip.

use memd_engine::models::embed::RuntimePaths;
use memd_engine::search::Ranking;
use memd_lab::eval::coding::{self, CodingOptions, Configuration, FUSED};
use memd_lab::eval::locomo::{LEXICAL_ONLY, VECTOR_ONLY, shipped_ranking};
use memd_lab::eval::pipeline::SHIPPED;
use memd_lab::eval::run_coding;
use std::path::PathBuf;

/// Measured (release build, 67 questions): vector R@5 0.896 / R@10 0.955, lexical R@5 0.463,
/// fused R@5 0.746 / R@10 0.940. Floors sit 4-6 questions below, room for float differences
/// between machines; a ranking change that loses more than that fails here.
const FUSED_MIN_R5: f64 = 0.66;
const FUSED_MIN_R10: f64 = 0.88;
const VECTOR_MIN_R10: f64 = 0.88;
/// The shipped pipeline (first stage -> late interaction at 40) measured R@5 0.851, MRR 0.695
/// on the 67 questions (issue 34); floors 4-5 questions below.
const SHIPPED_MIN_R5: f64 = 0.78;
const SHIPPED_MIN_MRR: f64 = 0.62;

const PRIOR_OFF: &str = "fused, prior off";

fn skip_requested() -> bool {
    if std::env::var("MEMD_SKIP_MODEL_TESTS").as_deref() == Ok("1") {
        eprintln!("MEMD_SKIP_MODEL_TESTS=1: skipping the coding-set evaluation (needs the model)");
        return true;
    }
    false
}

fn runtime() -> RuntimePaths {
    let paths = RuntimePaths::resolve();
    if let Err(msg) = paths.check() {
        panic!("{msg}\n(set MEMD_SKIP_MODEL_TESTS=1 to skip tests that need the model)");
    }
    paths
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|a| a.join(coding::DEFAULT_DATA_DIR))
        .find(|d| d.join(coding::DATA_FILE).is_file())
        .expect("the coding set is in the repository")
}

#[test]
fn coding_set_recall_is_sane_deterministic_and_above_its_floors() {
    if skip_requested() {
        return;
    }
    let mut configurations = coding::default_configurations();
    // A configuration is data: this one is the shipped fusion without the outcome prior.
    configurations.push(Configuration {
        name: PRIOR_OFF.to_string(),
        ranking: Ranking {
            prior_weight: 0.0,
            ..shipped_ranking()
        },
    });
    let options = CodingOptions {
        configurations,
        embed_threads: 2,
        per_question: true,
        ..CodingOptions::default()
    };
    let runtime = runtime();
    let report = run_coding(&data_dir(), &runtime, &options).unwrap_or_else(|e| panic!("{e:#}"));
    println!("{report}");
    let again = run_coding(&data_dir(), &runtime, &options).unwrap_or_else(|e| panic!("{e:#}"));

    let questions = report.set.questions.len();
    // Vector, lexical, first stage only, prior off, then the shipped pipeline.
    assert_eq!(report.runs.len(), 5);
    for (run, rerun) in report.runs.iter().zip(&again.runs) {
        let o = run.result.overall;
        assert_eq!(o.questions, questions, "{}", run.result.name);
        for x in [o.r1, o.r5, o.r10, o.all5, o.all10, o.mrr] {
            assert!((0.0..=1.0).contains(&x), "{}: {o:?}", run.result.name);
        }
        assert!(o.r1 <= o.r5 && o.r5 <= o.r10 && o.mrr <= o.r10, "{o:?}");
        assert_eq!(run.lists.len(), questions);
        assert!(run.distractor_above <= run.with_distractors);
        // Same notes, same model, same ranking: the same ranked lists, scores included.
        assert_eq!(
            run.result, rerun.result,
            "{} differs between runs",
            run.result.name
        );
        assert_eq!(
            run.lists, rerun.lists,
            "{} ranked differently",
            run.result.name
        );
    }

    let get = |name: &str| {
        report
            .run(name)
            .unwrap_or_else(|| panic!("no configuration {name:?}"))
    };
    let (vector, lexical, fused) = (
        get(VECTOR_ONLY).result.overall,
        get(LEXICAL_ONLY).result.overall,
        get(FUSED).result.overall,
    );
    // Every note has the same memory-bank importance and confidence, so the prior scales all
    // candidates alike: it may change scores, never the order.
    let prior_off = get(PRIOR_OFF);
    assert_eq!(prior_off.result.overall, fused);
    let order = |lists: &[Vec<coding::Candidate>]| -> Vec<Vec<String>> {
        lists
            .iter()
            .map(|l| l.iter().map(|c| c.note.clone()).collect())
            .collect()
    };
    assert_eq!(order(&prior_off.lists), order(&get(FUSED).lists));

    // The questions are paraphrases: word matching alone must do worse than meaning.
    assert!(
        lexical.r5 < vector.r5,
        "lexical R@5 {:.3} >= vector {:.3}: the questions no longer paraphrase their answers",
        lexical.r5,
        vector.r5
    );
    assert!(
        vector.r10 >= VECTOR_MIN_R10,
        "vector R@10 {:.3}",
        vector.r10
    );
    assert!(fused.r5 >= FUSED_MIN_R5, "fused R@5 {:.3}", fused.r5);
    // "shipped" is the daemon's pipeline, not the first stage under another name.
    let shipped = get(SHIPPED);
    assert_ne!(order(&shipped.lists), order(&get(FUSED).lists));
    let s = shipped.result.overall;
    assert!(s.r5 >= SHIPPED_MIN_R5, "shipped R@5 {:.3}", s.r5);
    assert!(s.mrr >= SHIPPED_MIN_MRR, "shipped MRR {:.3}", s.mrr);
    assert!(fused.r10 >= FUSED_MIN_R10, "fused R@10 {:.3}", fused.r10);
}
