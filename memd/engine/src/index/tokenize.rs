//! Text → search terms for the lexical index: lowercase, unicode-aware words, a small English
//! stopword list and light suffix stemming.
//!
//! Owns the one definition of "a term", so documents and queries are always cut the same way.
//! Must never allocate per token on the indexing path (`for_each_term` reuses one buffer) and
//! never depend on index state.
//!
//! The lexical index is saved with each snapshot as terms, not text: any change to what a term
//! is must bump `TERMS_VERSION`, so a saved index cut the old way is rebuilt, not trusted.

/// The version of this module's cut, part of the saved lexical index's format version.
pub const TERMS_VERSION: u32 = 1;

/// Words so common in prompts and memories that they only add noise and long posting lists.
/// Kept small on purpose: negations ("not", "no") and pronoun-like words that carry meaning in
/// a coding context ("this", "that") matter little for BM25 but would hide exact phrases.
/// Measured on LoCoMo (BM25 alone, plural stemming, b 0.75): dropping them lifts R@5 from 51.2
/// to 57.2 and MRR from 0.386 to 0.444.
const STOPWORDS: &[&str] = &[
    "a", "about", "am", "an", "and", "are", "as", "at", "be", "been", "but", "by", "did", "do",
    "does", "for", "from", "had", "has", "have", "he", "her", "him", "his", "i", "if", "in",
    "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "to", "us", "was", "we",
    "were", "what", "when", "where", "which", "who", "will", "with", "would", "you", "your",
];

/// Every stopword fits in 8 bytes, so a word is packed into a `u64` and looked up among the
/// packed list: integer compares instead of string compares on the hottest path of indexing.
const fn pack(word: &[u8]) -> u64 {
    let mut v = 0u64;
    let mut i = 0;
    while i < word.len() {
        v = (v << 8) | word[i] as u64;
        i += 1;
    }
    v
}

const PACKED_STOPWORDS: [u64; STOPWORDS.len()] = {
    let mut out = [0u64; STOPWORDS.len()];
    let mut i = 0;
    while i < STOPWORDS.len() {
        out[i] = pack(STOPWORDS[i].as_bytes());
        i += 1;
    }
    out
};

/// Whether a lowercase word is on the stopword list (also read by the query-token study,
/// `memd-eval fusion`, through `LateInteraction::is_stopword`).
pub fn is_stopword(term: &str) -> bool {
    term.len() <= 8 && PACKED_STOPWORDS.contains(&pack(term.as_bytes()))
}

/// Light suffix stemming, measured on LoCoMo with BM25 alone (762 questions, see lexical.rs):
/// none: R@5 56.0, R@10 62.6, MRR 0.444; plurals only: 57.2 / 63.6 / 0.444; plurals plus
/// "-ing"/"-ed"/"-ied" with consonant undoubling: 58.7 / 66.3 / 0.465. Stripping "-ly" too made
/// no difference, so it is left out. ASCII words only: other scripts are left as they are.
pub fn stem(term: &mut String) {
    if term.len() <= 3 || !term.is_ascii() {
        return;
    }
    strip_plural(term);
    strip_verb_ending(term);
}

// Suffixes are matched with slice patterns: byte compares the compiler inlines, where
// `ends_with` calls memcmp (measurable at 4M words per rebuild).
fn strip_plural(term: &mut String) {
    let n = term.len();
    match term.as_bytes() {
        [_, _, .., b'i', b'e', b's'] if n > 4 => {
            term.truncate(n - 3);
            term.push('y');
        }
        [.., b's', b's', b'e', b's'] => term.truncate(n - 2),
        [.., b's', b's'] | [.., b'u', b's'] | [.., b'i', b's'] => {}
        [.., b's'] => term.truncate(n - 1),
        _ => {}
    }
}

/// "painting"/"painted" → "paint", "studied" → "study", "running" → "run". Short words
/// ("red", "thing", "added") are left alone: their endings are more often part of the stem.
fn strip_verb_ending(term: &mut String) {
    let n = term.len();
    if n <= 5 {
        return;
    }
    match term.as_bytes() {
        [.., b'i', b'n', b'g'] => term.truncate(n - 3),
        [.., b'i', b'e', b'd'] => {
            term.truncate(n - 3);
            term.push('y');
            return;
        }
        [.., b'e', b'd'] => term.truncate(n - 2),
        _ => return,
    }
    if let [.., x, y] = term.as_bytes()
        && x == y
        && !b"aeiouylsz".contains(y)
    {
        term.pop();
    }
}

/// Calls `f` with every term of `text`, in order, reusing `buf` for the current term.
/// ASCII bytes take a fast path; anything else is decoded and classified as a `char`.
pub(crate) fn for_each_term(text: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    buf.clear();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii() {
            i += 1;
            if b.is_ascii_alphanumeric() {
                buf.push(char::from(b.to_ascii_lowercase()));
                continue;
            }
        } else {
            // `i` is always at a char boundary: ASCII bytes advance by one, others by their width.
            let Some(ch) = text[i..].chars().next() else {
                break;
            };
            i += ch.len_utf8();
            if ch.is_alphanumeric() {
                buf.extend(ch.to_lowercase());
                continue;
            }
        }
        if !buf.is_empty() {
            emit(buf, &mut f);
        }
    }
    if !buf.is_empty() {
        emit(buf, &mut f);
    }
}

fn emit(buf: &mut String, f: &mut impl FnMut(&str)) {
    if !is_stopword(buf) {
        stem(buf);
        f(buf);
    }
    buf.clear();
}

/// The terms of `text` as owned strings (tests; the index itself uses the allocation-free
/// `for_each_term`).
#[cfg(test)]
fn tokenize(text: &str) -> impl Iterator<Item = String> {
    let mut terms = Vec::new();
    let mut buf = String::new();
    for_each_term(text, &mut buf, |t| terms.push(t.to_owned()));
    terms.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(s: &str) -> Vec<String> {
        tokenize(s).collect()
    }

    #[test]
    fn stopwords_fit_the_packed_lookup() {
        assert!(STOPWORDS.iter().all(|w| w.len() <= 8 && w.is_ascii()));
        assert!(STOPWORDS.iter().all(|w| is_stopword(w)));
        assert!(!is_stopword("theirs") && !is_stopword("xyz") && !is_stopword("overlongword"));
    }

    #[test]
    fn lowercases_splits_and_drops_stopwords() {
        assert_eq!(
            terms("The Borrow-Checker rejected my_code, again!"),
            ["borrow", "checker", "reject", "code", "again"]
        );
    }

    #[test]
    fn unicode_words_survive() {
        assert_eq!(terms("Größe café 東京"), ["größe", "café", "東京"]);
        assert_eq!(terms("ÉCOLE"), ["école"]);
    }

    #[test]
    fn plurals_fold_to_the_singular() {
        assert_eq!(
            terms("tests libraries classes"),
            ["test", "library", "class"]
        );
        assert_eq!(terms("test library class"), ["test", "library", "class"]);
        // words that only look plural stay intact
        assert_eq!(
            terms("status analysis glass gas"),
            ["status", "analysis", "glass", "gas"]
        );
    }

    #[test]
    fn verb_endings_fold_to_the_stem() {
        assert_eq!(
            terms("painting painted paints"),
            ["paint", "paint", "paint"]
        );
        assert_eq!(terms("running runs"), ["run", "run"]);
        assert_eq!(terms("studied studies"), ["study", "study"]);
        assert_eq!(terms("called missed"), ["call", "miss"]);
        // short words keep their endings
        assert_eq!(terms("thing red added"), ["thing", "red", "added"]);
    }

    #[test]
    fn empty_and_punctuation_only_give_nothing() {
        assert!(terms("").is_empty());
        assert!(terms(" ,.;-- ").is_empty());
        assert!(terms("the and of").is_empty());
    }
}
