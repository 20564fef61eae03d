//! The shared tokenizer against the real `tokenizer.json` files (install/fetch-runtime.sh; set
//! MEMD_SKIP_MODEL_TESTS=1 to skip): which files share one, and that a per-call cut gives
//! exactly the encoding of a tokenizer loaded with that cut as its own truncation.

use super::*;
use crate::models::embed::{RuntimePaths, late_interaction_dir, reranker_dir};
use std::path::PathBuf;
use tokenizers::TruncationStrategy;

fn skip() -> bool {
    let skip = std::env::var_os("MEMD_SKIP_MODEL_TESTS").is_some_and(|v| v == "1");
    if skip {
        eprintln!("MEMD_SKIP_MODEL_TESTS=1: skipping a test that needs the model files");
    }
    skip
}

/// The three models' tokenizer files; fails with the fix when one is missing.
fn files() -> [PathBuf; 3] {
    let files = [
        RuntimePaths::resolve().tokenizer,
        late_interaction_dir().join("tokenizer.json"),
        reranker_dir().join("tokenizer.json"),
    ];
    for f in &files {
        assert!(
            f.is_file(),
            "missing {} (fix: run install/fetch-runtime.sh)",
            f.display()
        );
    }
    files
}

/// A tokenizer loaded as memd loaded each model's before `Vocab`: the cut as its truncation.
fn own(path: &Path, cut: &Cut) -> Tokenizer {
    let mut t = Tokenizer::from_file(path).expect("tokenizer");
    t.with_truncation(Some(cut.clone())).expect("truncation");
    t.with_padding(None);
    t
}

fn texts() -> Vec<String> {
    let long: String = (0..400).map(|i| format!("word{i} ")).collect();
    let mut texts: Vec<String> = [
        "",
        "Hello, world!",
        "Use `cargo test -p memd-engine --lib` before pushing; CI runs clippy with -D warnings.",
        "Crème brûlée für 東京の友達 — naïve café, emoji 🦀 and tabs\tand\nnewlines.",
        "fn main() { println!(\"{}\", x.unwrap_or_default()); } // snake_case & CamelCase",
        "  leading and trailing spaces  ",
        "[CLS] [SEP] [MASK] [unused0] literal special tokens",
    ]
    .map(String::from)
    .to_vec();
    texts.push(long.clone());
    texts.push(format!("{long}{long}"));
    texts.push("x".repeat(5000));
    texts
}

fn same(got: &Encoding, want: &Encoding, what: &str) {
    assert_eq!(got.get_ids(), want.get_ids(), "{what}: ids");
    assert_eq!(got.get_type_ids(), want.get_type_ids(), "{what}: type ids");
    assert_eq!(
        got.get_attention_mask(),
        want.get_attention_mask(),
        "{what}: mask"
    );
    assert_eq!(got.get_offsets(), want.get_offsets(), "{what}: offsets");
    assert_eq!(got.get_word_ids(), want.get_word_ids(), "{what}: words");
    let got_special = got.get_special_tokens_mask();
    assert_eq!(
        got_special,
        want.get_special_tokens_mask(),
        "{what}: specials"
    );
}

#[test]
fn files_that_tokenize_alike_share_one_tokenizer() {
    if skip() {
        return;
    }
    let [embedder, late, cross] = files().map(|f| Vocab::load(&f).expect("load"));
    assert!(embedder.is_shared_with(&late), "embedder and late model");
    assert!(
        embedder.is_shared_with(&cross),
        "embedder and cross-encoder"
    );
    // Another vocabulary (one entry renamed) gets its own.
    let dir = std::env::temp_dir().join(format!("memd-vocab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let other = dir.join("tokenizer.json");
    let text = std::fs::read_to_string(&files()[0]).expect("read");
    assert!(text.contains("\"zebra\""), "the vocabulary has `zebra`");
    std::fs::write(&other, text.replacen("\"zebra\"", "\"zebrafish\"", 1)).expect("write");
    let changed = Vocab::load(&other);
    let _ = std::fs::remove_dir_all(&dir);
    let changed = changed.expect("load the changed file");
    assert!(!changed.is_shared_with(&embedder));
    assert_eq!(
        changed
            .id_to_token(embedder_id(&embedder, "zebra"))
            .as_deref(),
        Some("zebrafish")
    );
}

fn embedder_id(v: &Vocab, token: &str) -> u32 {
    v.tokenizer.token_to_id(token).expect("in the vocabulary")
}

#[test]
fn a_cut_per_call_encodes_as_the_models_own_tokenizers_did() {
    if skip() {
        return;
    }
    let [embedder, late, _] = files();
    let shared = Vocab::load(&embedder).expect("load");
    // The embedder's cut (256) and the late model's (179: one place left for its marker).
    for (path, max_length) in [(&embedder, 256), (&late, 179)] {
        let cut = Cut {
            max_length,
            ..Default::default()
        };
        let own = own(path, &cut);
        for text in texts() {
            let want = own.encode(text.as_str(), true).expect("encode");
            let got = shared.encode(&text, &cut).expect("encode");
            same(&got, &want, &format!("{max_length}: {:.40}", text));
            assert!(got.len() <= max_length);
        }
    }
}

#[test]
fn pairs_are_cut_longest_first_as_the_cross_encoders_tokenizer_did() {
    if skip() {
        return;
    }
    let [_, _, cross] = files();
    let shared = Vocab::load(&cross).expect("load");
    let cut = Cut {
        max_length: LONGEST,
        strategy: TruncationStrategy::LongestFirst,
        ..Default::default()
    };
    let own = own(&cross, &cut);
    let texts = texts();
    for query in &texts {
        for passage in texts.iter().rev() {
            let want = own
                .encode((query.as_str(), passage.as_str()), true)
                .expect("encode");
            let got = shared.encode_pair(query, passage, &cut).expect("encode");
            same(&got, &want, &format!("{:.30} / {:.30}", query, passage));
        }
    }
}

#[test]
fn a_cut_over_the_limit_is_an_error() {
    if skip() {
        return;
    }
    let shared = Vocab::load(&files()[0]).expect("load");
    let cut = Cut {
        max_length: LONGEST + 1,
        ..Default::default()
    };
    let err = shared.encode("text", &cut).expect_err("over the limit");
    assert!(
        err.to_string().contains("257") && err.to_string().contains("256"),
        "{err}"
    );
}
