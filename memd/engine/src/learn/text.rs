//! Deterministic text features for the knowledge graphs: concepts (for routing), entities
//! (for the content graph) and a coarse context type (for action effectiveness).
//!
//! Pure string functions: same input, same output, on every platform. No models, no I/O,
//! no randomness, and never any allocation proportional to more than `MAX_SCAN_CHARS` of
//! input.

use std::collections::{BTreeMap, BTreeSet};

/// At most this many concepts per text.
pub const MAX_CONCEPTS: usize = 8;
/// Of which at most this many are bigrams (unigrams recur across queries, bigrams rarely).
pub const MAX_BIGRAMS: usize = 2;
/// At most this many entities per text.
pub const MAX_ENTITIES: usize = 16;
/// Only this many characters of a text are examined (prompts can be pasted files).
pub const MAX_SCAN_CHARS: usize = 8_000;
/// The context types `detect_context_type` returns, `general` being the fallback.
pub const CONTEXT_TYPES: [&str; 5] = ["coding", "debugging", "devops", "writing", "general"];

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

/// Capitalised words that are sentence openers or roles, not names.
#[rustfmt::skip]
const NON_ENTITY_WORDS: &[&str] = &[
    "assistant", "currently", "do", "does", "don", "great", "hi", "note", "remember", "today",
    "tomorrow", "user", "yesterday",
];

/// Keyword lists per context type, checked in this order (ties go to the earlier type).
#[rustfmt::skip]
const CONTEXT_KEYWORDS: [(&str, &[&str]); 4] = [
    ("debugging", &[
        "backtrace", "broken", "bug", "bugs", "crash", "crashes", "debug", "error", "errors",
        "exception", "fail", "failed", "failing", "fails", "fix", "panic", "panics", "segfault",
        "stacktrace", "traceback", "undefined", "wrong",
    ]),
    ("devops", &[
        "ansible", "aws", "cd", "ci", "cluster", "container", "deploy", "deployment", "docker",
        "helm", "infra", "k8s", "kubectl", "kubernetes", "nginx", "pipeline", "prod", "production",
        "server", "ssh", "systemd", "terraform",
    ]),
    ("coding", &[
        "api", "class", "code", "compile", "compiler", "function", "implement", "java",
        "javascript", "method", "module", "python", "refactor", "rust", "struct", "test", "tests",
        "type", "typescript", "variable",
    ]),
    ("writing", &[
        "article", "blog", "draft", "edit", "email", "essay", "grammar", "letter", "paragraph",
        "proofread", "rewrite", "sentence", "story", "summary", "tone", "write",
    ]),
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
pub fn words(text: &str) -> Vec<String> {
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

/// Named things in a text, as lowercase keys in order of first appearance (deduplicated,
/// at most `MAX_ENTITIES`): paths (`src/main.rs`, `/etc/hosts`, `~/.config`), identifiers
/// (`snake_case`, `camelCase`, `TypeScript`, `std::fs`, `file.rs`), acronyms (`JWT`) and
/// capitalised words that are not stopwords (`Python`, `Alice`).
pub fn extract_entities(text: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut entities = Vec::new();
    for piece in scanned(text).split_whitespace() {
        let candidate = trim_punctuation(piece);
        if candidate.chars().count() > MAX_TERM_CHARS || !is_entity(candidate) {
            continue;
        }
        let key = candidate.to_lowercase();
        if seen.insert(key.clone()) {
            entities.push(key);
            if entities.len() == MAX_ENTITIES {
                break;
            }
        }
    }
    entities
}

fn trim_punctuation(piece: &str) -> &str {
    piece
        .trim_start_matches(['(', '[', '{', '<', '"', '\'', '`', '*'])
        .trim_end_matches([
            '.', ',', ';', ':', '!', '?', ')', ']', '}', '>', '"', '\'', '`', '*',
        ])
}

fn is_entity(token: &str) -> bool {
    if !token.chars().any(char::is_alphabetic) {
        return false;
    }
    is_path(token) || is_identifier(token) || is_acronym(token) || is_capitalised_name(token)
}

/// `a/b.ext`, `/abs/path`, `~/x`, `./x`, or anything with two or more separators; a lone
/// `and/or` is not a path.
fn is_path(token: &str) -> bool {
    let separators = token.matches(['/', '\\']).count();
    if separators == 0 {
        return false;
    }
    let last = token.rsplit(['/', '\\']).next().unwrap_or("");
    token.starts_with(['/', '~', '.']) || separators >= 2 || last.contains('.') && last.len() > 1
}

fn is_identifier(token: &str) -> bool {
    let chars: Vec<char> = token.chars().collect();
    if !chars
        .iter()
        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
    {
        return false;
    }
    let joined_by = |sep: char| {
        chars
            .windows(3)
            .any(|w| w[0].is_alphanumeric() && w[1] == sep && w[2].is_alphanumeric())
    };
    let camel = chars
        .windows(2)
        .any(|w| w[0].is_lowercase() && w[1].is_uppercase());
    let dotted = joined_by('.') && !chars.iter().all(|c| c.is_numeric() || *c == '.');
    joined_by('_') || token.contains("::") || camel || dotted
}

fn is_acronym(token: &str) -> bool {
    let letters = token.chars().filter(|c| c.is_alphabetic()).count();
    letters >= 2
        && token.chars().count() <= 10
        && token
            .chars()
            .all(|c| c.is_uppercase() || c.is_ascii_digit())
        && !is_stopword(&token.to_lowercase())
}

fn is_capitalised_name(token: &str) -> bool {
    let mut chars = token.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let rest: Vec<char> = chars.collect();
    if !first.is_uppercase() || rest.is_empty() {
        return false;
    }
    if !rest.iter().all(|c| c.is_lowercase() || c.is_ascii_digit()) {
        return false;
    }
    let lower = token.to_lowercase();
    !is_stopword(&lower) && !NON_ENTITY_WORDS.contains(&lower.as_str())
}

/// A coarse label for what a text is about: the context type whose keywords occur most
/// often (`debugging` before `devops` before `coding` before `writing` on ties), `general`
/// when none occurs.
pub fn detect_context_type(text: &str) -> &'static str {
    let tokens = words(text);
    let mut best: (&'static str, usize) = ("general", 0);
    for (label, keywords) in CONTEXT_KEYWORDS {
        let hits = tokens
            .iter()
            .filter(|t| keywords.contains(&t.as_str()))
            .count();
        if hits > best.1 {
            best = (label, hits);
        }
    }
    best.0
}

#[cfg(test)]
pub(crate) fn stopwords_sorted() -> bool {
    STOPWORDS.windows(2).all(|w| w[0] < w[1])
}
