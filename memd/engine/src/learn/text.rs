//! Deterministic text features for the routing graph: the concepts of a prompt.
//!
//! Pure string functions: same input, same output, on every platform. No models, no I/O,
//! no randomness, and never any allocation proportional to more than `MAX_SCAN_CHARS` of
//! input.

use std::collections::BTreeMap;

/// At most this many concepts per text.
pub const MAX_CONCEPTS: usize = 8;
/// Of which at most this many are bigrams (unigrams recur across queries, bigrams rarely).
pub const MAX_BIGRAMS: usize = 2;
/// Only this many characters of a text are examined (prompts can be pasted files).
pub const MAX_SCAN_CHARS: usize = 8_000;

const MIN_CONCEPT_CHARS: usize = 3;
const MAX_TERM_CHARS: usize = 64;

/// Function words and conversational filler that say nothing about a topic.
#[rustfmt::skip]
const STOPWORDS: &[&str] = &[
    "about", "above", "actually", "after", "again", "against", "all", "also", "always", "am", "an",
    "and", "any", "anything", "are", "around", "as", "ask", "asked", "at", "back", "be", "because",
    "been", "before", "being", "below", "best", "better", "between", "both", "but", "by", "can",
    "cannot", "could", "did", "does", "doing", "done", "down", "during", "each", "either", "else",
    "even", "ever", "every", "few", "find", "first", "for", "from", "further", "get", "gets",
    "getting", "give", "going", "good", "got", "had", "has", "have", "having", "he", "hello",
    "help", "her", "here", "hers", "hey", "him", "his", "how", "however", "i", "if", "in",
    "instead", "into", "is", "it", "its", "itself", "just", "know", "last", "let", "like", "look",
    "made", "make", "many", "may", "maybe", "me", "might", "more", "most", "much", "must", "my",
    "need", "needs", "never", "new", "next", "no", "nor", "not", "now", "of", "off", "ok", "okay",
    "old", "on", "once", "one", "only", "or", "other", "our", "ours", "out", "over", "own",
    "please", "pretty", "put", "quite", "rather", "really", "right", "said", "same", "say", "see",
    "seems", "she", "should", "show", "so", "some", "something", "still", "such", "sure", "take",
    "tell", "than", "thank", "thanks", "that", "the", "their", "theirs", "them", "then", "there",
    "these", "they", "thing", "things", "think", "this", "those", "through", "to", "too", "try",
    "trying", "under", "until", "up", "upon", "us", "use", "used", "uses", "using", "very", "via",
    "want", "wants", "was", "way", "we", "well", "were", "what", "when", "where", "whether",
    "which", "while", "who", "whom", "why", "will", "with", "within", "without", "work", "would",
    "yes", "yet", "you", "your", "yours", "yourself",
];

fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// The examined prefix of `text`, cut on a character boundary.
fn scanned(text: &str) -> &str {
    match text.char_indices().nth(MAX_SCAN_CHARS) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

/// Lowercase word tokens: maximal runs of alphanumerics and `_`, at most `MAX_TERM_CHARS`.
fn words(text: &str) -> Vec<String> {
    scanned(text)
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty() && w.chars().count() <= MAX_TERM_CHARS)
        .map(str::to_lowercase)
        .collect()
}

fn is_content_word(word: &str) -> bool {
    word.chars().count() >= MIN_CONCEPT_CHARS
        && !word.chars().all(|c| c.is_numeric() || c == '_')
        && !is_stopword(word)
}

/// Frequency and first position of each candidate term.
#[derive(Default)]
struct Tally {
    counts: BTreeMap<String, (usize, usize)>,
}

impl Tally {
    fn add(&mut self, term: String, position: usize) {
        self.counts.entry(term).or_insert((0, position)).0 += 1;
    }

    /// Terms by descending frequency, then first appearance.
    fn ranked(self) -> Vec<String> {
        let mut terms: Vec<(String, usize, usize)> = self
            .counts
            .into_iter()
            .map(|(term, (count, first))| (term, count, first))
            .collect();
        terms.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)));
        terms.into_iter().map(|(term, _, _)| term).collect()
    }
}

/// Topic concepts of a text: lowercase content words (≥ 3 characters, no stopwords, not
/// numbers) and bigrams of adjacent content words, ranked by frequency then first
/// appearance, at most `MAX_CONCEPTS` of which at most `MAX_BIGRAMS` bigrams.
pub fn extract_concepts(text: &str) -> Vec<String> {
    let tokens = words(text);
    let mut unigrams = Tally::default();
    let mut bigrams = Tally::default();
    for (i, token) in tokens.iter().enumerate() {
        if !is_content_word(token) {
            continue;
        }
        unigrams.add(token.clone(), i);
        if let Some(next) = tokens
            .get(i + 1)
            .filter(|n| is_content_word(n) && *n != token)
        {
            bigrams.add(format!("{token} {next}"), i);
        }
    }
    let unigrams = unigrams.ranked();
    let bigrams = bigrams.ranked();
    let unigram_slots = MAX_CONCEPTS - MAX_BIGRAMS.min(bigrams.len());
    let mut concepts: Vec<String> = unigrams.into_iter().take(unigram_slots).collect();
    // Bigrams fill what the unigrams left, which is more than MAX_BIGRAMS only for short
    // texts with few distinct words.
    let room = MAX_CONCEPTS - concepts.len();
    concepts.extend(bigrams.into_iter().take(room));
    concepts
}

#[cfg(test)]
pub(crate) fn stopwords_sorted() -> bool {
    STOPWORDS.windows(2).all(|w| w[0] < w[1])
}
