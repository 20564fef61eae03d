//! `Pieces` against the library's WordPiece: on the shipped vocabulary (install/fetch-runtime.sh;
//! MEMD_SKIP_MODEL_TESTS=1 skips), every entry and words built from them split alike; small
//! made-up vocabularies for the load errors.

use super::*;
use crate::models::embed::RuntimePaths;
use tokenizers::{ModelWrapper, Tokenizer};

fn shipped() -> Option<WordPiece> {
    if std::env::var_os("MEMD_SKIP_MODEL_TESTS").is_some_and(|v| v == "1") {
        eprintln!("MEMD_SKIP_MODEL_TESTS=1: skipping a test that needs the model files");
        return None;
    }
    let path = RuntimePaths::resolve().tokenizer;
    let t = Tokenizer::from_file(&path).unwrap_or_else(|e| {
        panic!(
            "{} (fix: run install/fetch-runtime.sh): {e}",
            path.display()
        )
    });
    match t.get_model() {
        ModelWrapper::WordPiece(w) => Some(w.clone()),
        _ => panic!("the embedder's tokenizer is not WordPiece"),
    }
}

fn made_up(vocab: serde_json::Value) -> WordPiece {
    // From text: the library's model borrows its strings while deserialising.
    let json = serde_json::json!({
        "type": "WordPiece",
        "unk_token": "[UNK]",
        "continuing_subword_prefix": "##",
        "max_input_chars_per_word": 12,
        "vocab": vocab,
    });
    serde_json::from_str(&json.to_string()).expect("a WordPiece")
}

fn split(model: &impl Model, word: &str) -> Vec<(u32, String, (usize, usize))> {
    model
        .tokenize(word)
        .expect("tokenize")
        .into_iter()
        .map(|t| (t.id, t.value, t.offsets))
        .collect()
}

#[test]
fn every_entry_has_the_librarys_id() {
    let Some(library) = shipped() else { return };
    let pieces = Pieces::from_library(&library).expect("load");
    assert_eq!(pieces.get_vocab_size(), library.get_vocab_size());
    assert_eq!(pieces.get_vocab(), library.get_vocab());
    for (token, id) in library.get_vocab() {
        assert_eq!(pieces.token_to_id(&token), Some(id), "{token}");
        assert_eq!(pieces.id_to_token(id), Some(token));
    }
    let size = pieces.get_vocab_size() as u32;
    assert_eq!(pieces.id_to_token(size), None);
    assert_eq!(pieces.token_to_id("not-in-the-vocabulary"), None);
}

#[test]
fn words_split_as_the_librarys_wordpiece_splits_them() {
    let Some(library) = shipped() else { return };
    let pieces = Pieces::from_library(&library).expect("load");
    let mut words: Vec<String> = [
        "",
        "unaffable",
        "memd",
        "tokenization",
        "東京",
        "naïve",
        "🦀🦀",
        "ﬁ",
        "a".repeat(100).as_str(),
        "a".repeat(101).as_str(),
        "é".repeat(101).as_str(),
        "xqzzjkwv",
    ]
    .map(String::from)
    .to_vec();
    for token in library.get_vocab().into_keys() {
        let bare = token.trim_start_matches("##").to_owned();
        words.push(format!("{bare}s"));
        words.push(format!("q{bare}ing"));
        words.push(format!("{bare}{bare}"));
        words.push(bare);
    }
    for word in &words {
        assert_eq!(split(&pieces, word), split(&library, word), "{word:?}");
    }
}

#[test]
fn the_vocabulary_is_held_in_under_a_megabyte() {
    let Some(library) = shipped() else { return };
    let pieces = Pieces::from_library(&library).expect("load");
    // The library's two maps of 30,522 strings each hold ~6 MB (bench/EVAL.md section 19).
    assert!(
        pieces.heap_bytes() < 1 << 20,
        "{} bytes",
        pieces.heap_bytes()
    );
}

#[test]
fn an_unsplittable_or_overlong_word_is_the_unknown_token() {
    let vocab = serde_json::json!({"[UNK]": 0, "ab": 1, "##c": 2, "a": 3});
    let (library, pieces) = (made_up(vocab.clone()), made_up(vocab));
    let pieces = Pieces::from_library(&pieces).expect("load");
    for word in [
        "abc",
        "abcc",
        "a",
        "abd",
        "d",
        "abcabcabcabc",
        "abcccccccccccc",
    ] {
        assert_eq!(split(&pieces, word), split(&library, word), "{word}");
    }
    assert_eq!(split(&pieces, "abd"), vec![(0, "[UNK]".into(), (0, 3))]);
}

#[test]
fn a_vocabulary_it_cannot_hold_exactly_is_an_error() {
    let gap = made_up(serde_json::json!({"[UNK]": 0, "a": 2}));
    let err = Pieces::from_library(&gap).err().expect("ids with a gap");
    assert!(err.to_string().contains("vocabulary id 2"), "{err}");
    let no_unknown = made_up(serde_json::json!({"a": 0, "b": 1}));
    let err = Pieces::from_library(&no_unknown).err().expect("no [UNK]");
    assert!(err.to_string().contains("unknown token [UNK]"), "{err}");
}
