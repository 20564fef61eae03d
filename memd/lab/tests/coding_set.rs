//! The coding-memory set (`tests/data/coding-set/set.json`) is well formed and stays hard for
//! word matching: it parses, ids are unique, every answer and distractor exists, it holds at
//! least 60 notes and 40 questions, and its questions share few content words with their
//! answers (more with their distractors). Needs no model.

use memd_lab::eval::coding::{self, CodingSet, Overlap};
use std::path::PathBuf;

/// Measured when the set was written (67 questions): mean question/answer overlap 0.037, the
/// largest 0.133; question/distractor 0.062. The bounds leave room for new questions with some
/// shared words, but a set whose questions repeat their answers' wording fails them.
const MAX_MEAN_ANSWER_OVERLAP: f64 = 0.06;
const MAX_ANSWER_OVERLAP: f64 = 0.25;

/// The repository's copy, found from this crate's directory (not the current directory), so
/// the test checks the file the repository ships.
fn data_dir() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .map(|a| a.join(coding::DEFAULT_DATA_DIR))
        .find(|d| d.join(coding::DATA_FILE).is_file())
        .unwrap_or_else(|| {
            panic!(
                "no {} above {}",
                coding::DEFAULT_DATA_DIR,
                manifest.display()
            )
        })
}

fn load() -> CodingSet {
    CodingSet::load(&data_dir()).unwrap_or_else(|e| panic!("{e:#}"))
}

#[test]
fn the_set_parses_and_every_reference_resolves() {
    // `load` validates: unique ids, answers and distractors that exist, no note both.
    let set = load();
    assert!(set.notes.len() >= 60, "{} notes", set.notes.len());
    assert!(
        set.questions.len() >= 40,
        "{} questions",
        set.questions.len()
    );
    for n in &set.notes {
        // Notes are what an agent saves: a sentence to three, not a document.
        let sentences = n.text.matches(". ").count() + 1;
        assert!(
            (20..=300).contains(&n.text.len()) && sentences <= 3,
            "note {} is not 1-3 short sentences: {:?}",
            n.id,
            n.text
        );
        assert!(!n.kind.is_empty() && !n.project.is_empty(), "note {}", n.id);
    }
    // Distractors are the point of the set: every question has one to beat.
    for q in &set.questions {
        assert!(
            !q.distractors.is_empty(),
            "question {} has no distractor",
            q.id
        );
    }
    // The default directory `memd-eval coding` uses is this one.
    let default = coding::default_data_dir().canonicalize().unwrap();
    assert_eq!(default, data_dir().canonicalize().unwrap());
}

#[test]
fn questions_share_few_words_with_their_answers() {
    let set = load();
    let overlap = Overlap::of(&set);
    for (q, o) in set.questions.iter().zip(&overlap.answer) {
        println!("{} answer overlap {o:.3}  {}", q.id, q.text);
    }
    println!(
        "mean question/answer Jaccard overlap {:.3} (max {:.3}); question/distractor {:.3}",
        overlap.mean_answer(),
        overlap.max_answer(),
        overlap.mean_distractor()
    );
    assert!(
        overlap.mean_answer() < MAX_MEAN_ANSWER_OVERLAP,
        "questions repeat their answers' words: mean overlap {:.3}",
        overlap.mean_answer()
    );
    let worst = set
        .questions
        .iter()
        .zip(&overlap.answer)
        .find(|(_, o)| **o >= MAX_ANSWER_OVERLAP);
    assert!(worst.is_none(), "{worst:?}");
    assert!(
        overlap.mean_distractor() > overlap.mean_answer(),
        "distractors must share more of the questions' words than the answers do: {:.3} vs {:.3}",
        overlap.mean_distractor(),
        overlap.mean_answer()
    );
}
