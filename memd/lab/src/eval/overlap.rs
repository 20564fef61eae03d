//! How paraphrased a coding-format set's questions are: the content words a question shares
//! with its answers and with its distractors (Jaccard), counted the way the lexical index
//! counts words.
//!
//! Owns the function-word list and the figure. Must never look at rankings.

use memd_engine::search;
use std::collections::BTreeSet;

/// Function words left out of the overlap figure: the lexical index's stopwords plus the
/// question words and auxiliaries every question has ("how", "should", "can"), which would
/// otherwise make a question look like any note that happens to contain them.
const FUNCTION_WORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "but", "by", "can", "could", "did", "do", "does", "each", "every",
    "for", "from", "had", "has", "have", "he", "her", "here", "him", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "just", "let", "me", "might", "more", "most", "much", "must", "my",
    "no", "not", "of", "on", "only", "or", "other", "our", "out", "over", "own", "same", "she",
    "should", "so", "some", "still", "than", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "to", "up", "us", "very", "was", "we", "were", "what", "when",
    "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// A text's content words: lowercase alphanumeric runs of two characters or more (so the
/// `s` of "shipper's" is no word), function words dropped, plural and verb endings folded the
/// way the lexical index folds them ("redelivered" → "redeliver", "queries" → "query").
pub fn content_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() > 1 && !FUNCTION_WORDS.contains(&w.as_str()))
        .map(fold)
        .collect()
}

/// The lexical index's own folding (`search::stem_term`), so overlap counts words as BM25 does.
fn fold(mut w: String) -> String {
    search::stem_term(&mut w);
    w
}

/// |a ∩ b| / |a ∪ b| of two texts' content words (0 when both have none).
pub fn jaccard(a: &str, b: &str) -> f64 {
    let (a, b) = (content_words(a), content_words(b));
    let union = a.union(&b).count();
    if union == 0 {
        0.0
    } else {
        a.intersection(&b).count() as f64 / union as f64
    }
}

/// How many words each question shares with its answers and with its distractors.
#[derive(Debug, Clone, PartialEq)]
pub struct Overlap {
    /// Per question, in order: the largest Jaccard overlap with one of its answers.
    pub answer: Vec<f64>,
    /// Per question with distractors: the largest overlap with one of them.
    pub distractor: Vec<f64>,
}

impl Overlap {
    pub fn mean_answer(&self) -> f64 {
        mean(&self.answer)
    }

    pub fn max_answer(&self) -> f64 {
        self.answer.iter().copied().fold(0.0, f64::max)
    }

    pub fn mean_distractor(&self) -> f64 {
        mean(&self.distractor)
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_words_fold_like_the_index_and_drop_function_words() {
        let w = content_words("How do we ship the payments backend to the cluster's nodes?");
        let want: BTreeSet<String> = ["ship", "payment", "backend", "cluster", "node"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(w, want);
        assert!(content_words("redelivered queries running").contains("redeliver"));
        assert!(content_words("redelivered queries running").contains("query"));
        assert!(content_words("redelivered queries running").contains("run"));
        assert_eq!(jaccard("deploy billing", "billing deploys"), 1.0);
        assert_eq!(jaccard("the", "a"), 0.0);
    }
}
