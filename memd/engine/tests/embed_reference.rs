//! The real embedder against reference vectors from the exact fp32 all-MiniLM-L6-v2
//! (tests/fixtures/embed_reference.json, made by install/reference_vectors.py).
//!
//! Needs the runtime from install/fetch-runtime.sh. When it is missing these tests fail with
//! the fix, unless MEMD_SKIP_MODEL_TESTS=1 says to skip them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memd_engine::models::embed::{DIMS, Embed, OnnxEmbedder, RuntimePaths};

/// The model runs with int8 weights; its vectors agree with the fp32 reference to about
/// 0.999, so 0.99 leaves room for CPU-specific kernels without hiding a broken pipeline.
const MIN_COSINE_TO_REFERENCE: f32 = 0.99;

struct Reference {
    text: String,
    vector: Vec<f32>,
}

fn fixture() -> &'static [Reference] {
    static FIXTURE: OnceLock<Vec<Reference>> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/embed_reference.json");
        let raw = std::fs::read_to_string(&path).expect("read embed_reference.json");
        let json: serde_json::Value =
            serde_json::from_str(&raw).expect("parse embed_reference.json");
        let sentences = json["sentences"].as_array().expect("sentences array");
        sentences
            .iter()
            .map(|s| Reference {
                text: s["text"].as_str().expect("text").to_owned(),
                vector: s["vector"]
                    .as_array()
                    .expect("vector")
                    .iter()
                    .map(|x| x.as_f64().expect("number") as f32)
                    .collect(),
            })
            .collect()
    })
}

fn reference(prefix: &str) -> &'static Reference {
    fixture()
        .iter()
        .find(|r| r.text.starts_with(prefix))
        .unwrap_or_else(|| panic!("fixture has no sentence starting with {prefix:?}"))
}

fn skip_requested() -> bool {
    if std::env::var("MEMD_SKIP_MODEL_TESTS").as_deref() == Ok("1") {
        eprintln!("MEMD_SKIP_MODEL_TESTS=1: skipping a test that needs the embedding model");
        return true;
    }
    false
}

/// The runtime's paths; fails the test with the fix when a file is missing.
fn runtime_paths() -> RuntimePaths {
    let paths = RuntimePaths::resolve();
    if let Err(msg) = paths.check() {
        panic!("{msg}\n(set MEMD_SKIP_MODEL_TESTS=1 to skip tests that need the model)");
    }
    paths
}

/// One embedder per test process, shared by all tests (which also run it from several threads).
fn embedder() -> &'static OnnxEmbedder {
    static EMBEDDER: OnceLock<OnnxEmbedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| {
        OnnxEmbedder::load(&runtime_paths(), 2)
            .unwrap_or_else(|e| panic!("loading the embedder: {e:#}"))
    })
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

fn assert_unit_vector(v: &[f32]) {
    assert_eq!(v.len(), DIMS);
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
}

fn assert_matches_reference(text: &str, got: &[f32], want: &[f32]) {
    assert_unit_vector(got);
    let cos = cosine(got, want);
    assert!(
        cos >= MIN_COSINE_TO_REFERENCE,
        "cosine {cos:.4} < {MIN_COSINE_TO_REFERENCE} for {text:?}"
    );
}

#[test]
fn fixture_covers_the_intended_cases() {
    let refs = fixture();
    assert!(refs.len() >= 10);
    assert!(refs.iter().all(|r| r.vector.len() == DIMS));
    assert!(refs.iter().any(|r| r.text == "ok"));
    assert!(refs.iter().any(|r| {
        r.text
            .chars()
            .any(|c| ('\u{3040}'..='\u{30ff}').contains(&c))
    }));
    assert!(
        refs.iter().any(|r| r.text.len() > 1500),
        "needs an input longer than 256 tokens"
    );
}

#[test]
fn each_sentence_alone_matches_the_reference() {
    if skip_requested() {
        return;
    }
    let model = embedder();
    assert_eq!(model.dims(), DIMS);
    for r in fixture() {
        let got = model.embed(&[&r.text]).expect("embed");
        assert_eq!(got.len(), 1);
        assert_matches_reference(&r.text, &got[0], &r.vector);
    }
}

#[test]
fn batched_sentences_match_the_reference_and_keep_input_order() {
    if skip_requested() {
        return;
    }
    let model = embedder();
    // Twice over, reversed the second time: more texts than one session run takes, in an
    // order that differs from the length-sorted one used inside.
    let mut texts: Vec<&str> = fixture().iter().map(|r| r.text.as_str()).collect();
    texts.extend(fixture().iter().rev().map(|r| r.text.as_str()));
    let got = model.embed(&texts).expect("embed batch");
    assert_eq!(got.len(), texts.len());
    for (text, vector) in texts.iter().zip(&got) {
        let r = fixture()
            .iter()
            .find(|r| r.text == *text)
            .expect("known text");
        assert_matches_reference(text, vector, &r.vector);
    }
    let single = model.embed(&[texts[0]]).expect("embed one");
    let padded_vs_alone = cosine(&single[0], &got[0]);
    assert!(
        padded_vs_alone > 0.9999,
        "padding changed a vector: cosine {padded_vs_alone}"
    );
}

#[test]
fn keeping_the_lookup_tables_int8_changes_no_vector() {
    if skip_requested() {
        return;
    }
    // Loading rewrites the model so its int8 token tables stay int8 in memory (gathered, then
    // dequantised); the graph as shipped has ONNX Runtime dequantise the whole table at load.
    // Same products in the same order: the vectors must be identical, not merely close.
    // The matrix weights stay fp32 on both sides: only the tables differ.
    let shipped = OnnxEmbedder::load_as_shipped(&runtime_paths(), 2).expect("load as shipped");
    assert_eq!(shipped.int8_tables(), 0);
    assert_eq!(embedder().int8_tables(), 2, "the token and position tables");
    let tables = OnnxEmbedder::load_with_fp32_matmuls(&runtime_paths(), 2).expect("fp32 matmuls");
    assert_eq!(tables.int8_tables(), 2);
    let texts: Vec<&str> = fixture().iter().map(|r| r.text.as_str()).collect();
    let want = shipped.embed(&texts).expect("embed as shipped");
    let got = tables.embed(&texts).expect("embed");
    for ((text, got), want) in texts.iter().zip(&got).zip(&want) {
        assert_eq!(got, want, "vector changed for {text:?}");
    }
}

#[test]
fn the_matrix_weights_run_as_int8_and_the_vectors_stay_close() {
    if skip_requested() {
        return;
    }
    // Loading states the matrix weights' dequantisation as `DequantizeLinear`, so ONNX Runtime
    // keeps them int8 and runs its int8 kernel (31 MB less than folding them to fp32). The
    // kernel quantises activations in blocks of 16: vectors move, slightly. That they move at
    // all shows the int8 kernel ran (a folded fp32 weight would give identical vectors).
    let fp32 = OnnxEmbedder::load_with_fp32_matmuls(&runtime_paths(), 2).expect("fp32 matmuls");
    assert_eq!((fp32.int8_matmuls(), fp32.int8_tables()), (0, 2));
    if !OnnxEmbedder::int8_matmuls_supported() {
        // No int8 dot-product instructions: the weights stay fp32, the vectors as they were.
        assert_eq!(embedder().int8_matmuls(), 0);
        return;
    }
    assert_eq!(
        embedder().int8_matmuls(),
        36,
        "six matrix weights in each of six layers"
    );
    let texts: Vec<&str> = fixture().iter().map(|r| r.text.as_str()).collect();
    let want = fp32.embed(&texts).expect("embed with fp32 matmuls");
    let got = embedder().embed(&texts).expect("embed");
    let mut moved = 0;
    for ((text, got), want) in texts.iter().zip(&got).zip(&want) {
        let cos = cosine(got, want);
        assert!(
            cos >= 0.998,
            "cosine {cos:.5} to the fp32 product for {text:?}"
        );
        moved += usize::from(got != want);
    }
    assert!(moved > 0, "no vector moved: the int8 kernel did not run");
}

#[test]
fn paraphrases_are_closer_than_unrelated_sentences() {
    if skip_requested() {
        return;
    }
    let fox = reference("The quick brown fox");
    let paraphrase = reference("A fast brown fox");
    let unrelated = reference("The borrow checker");
    let got = embedder()
        .embed(&[&fox.text, &paraphrase.text, &unrelated.text])
        .expect("embed");
    let similar = cosine(&got[0], &got[1]);
    let different = cosine(&got[0], &got[2]);
    assert!(
        similar > different + 0.3,
        "paraphrase {similar:.3} vs unrelated {different:.3}"
    );
}

#[test]
fn text_past_256_tokens_is_ignored() {
    if skip_requested() {
        return;
    }
    let long = fixture()
        .iter()
        .find(|r| r.text.len() > 1500)
        .expect("long sentence");
    let with_tail = format!(
        "{} Tomatoes, basil and garlic make a quick pasta sauce.",
        long.text
    );
    let got = embedder().embed(&[&long.text, &with_tail]).expect("embed");
    let cos = cosine(&got[0], &got[1]);
    assert!(
        cos > 0.9999,
        "the tail past the token limit changed the vector: {cos}"
    );
}

#[test]
fn a_huge_text_gives_the_same_vector_as_its_beginning() {
    if skip_requested() {
        return;
    }
    let sentence = "Retry the flaky upload step before blaming the network. ";
    let beginning = sentence.repeat(40); // well past 256 tokens already
    let huge = sentence.repeat(20_000); // over a megabyte
    let got = embedder().embed(&[&beginning, &huge]).expect("embed");
    let cos = cosine(&got[0], &got[1]);
    assert!(cos > 0.9999, "cosine {cos}");
}

#[test]
fn empty_inputs_are_handled() {
    if skip_requested() {
        return;
    }
    let model = embedder();
    assert!(model.embed(&[]).expect("embed nothing").is_empty());
    let got = model.embed(&[""]).expect("embed empty string");
    assert_unit_vector(&got[0]);
}

#[test]
fn concurrent_callers_get_correct_vectors() {
    if skip_requested() {
        return;
    }
    let model = embedder();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|worker| {
                scope.spawn(move || {
                    for r in fixture().iter().skip(worker).step_by(2) {
                        let got = model.embed(&[&r.text]).expect("embed");
                        assert_matches_reference(&r.text, &got[0], &r.vector);
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().expect("worker panicked");
        }
    });
}

#[test]
fn a_file_that_is_not_onnx_runtime_is_an_error() {
    if skip_requested() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("memd-embed-bad-lib-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let fake_lib = dir.join("libonnxruntime.so");
    std::fs::write(&fake_lib, b"not a shared library").expect("write");
    let paths = RuntimePaths {
        ort_lib: fake_lib.clone(),
        ..runtime_paths()
    };
    let result = OnnxEmbedder::load(&paths, 1);
    let _ = std::fs::remove_dir_all(&dir);
    // Depending on test order this is dlopen's error or "already loaded from the real one";
    // either way it is an error that names the rejected file.
    let err = result.err().expect("loading a fake library must fail");
    assert!(
        format!("{err:#}").contains(&fake_lib.display().to_string()),
        "{err:#}"
    );
}

#[test]
fn a_model_file_that_is_not_onnx_is_an_error() {
    if skip_requested() {
        return;
    }
    embedder(); // the real runtime must be loaded for the model to be the failing part
    let real = runtime_paths();
    let paths = RuntimePaths {
        model: PathBuf::from(&real.tokenizer),
        ..real
    };
    let err = OnnxEmbedder::load(&paths, 1)
        .err()
        .expect("a JSON file is not a model");
    assert!(format!("{err:#}").contains("embedding model"), "{err:#}");
}
