use super::text::*;

#[test]
fn stopword_list_is_sorted_for_binary_search() {
    assert!(stopwords_sorted());
}

#[test]
fn concepts_drop_stopwords_short_words_and_numbers() {
    let concepts = extract_concepts("How do I fix the Docker build on CI? It is 2024 and ok");
    assert_eq!(
        concepts,
        ["fix", "docker", "build", "docker build"],
        "bigrams need adjacency"
    );
}

#[test]
fn concepts_rank_by_frequency_then_position() {
    let concepts = extract_concepts("serde json; tokio runtime, serde derive, serde again, tokio");
    assert_eq!(&concepts[..3], ["serde", "tokio", "json"]);
}

#[test]
fn concepts_are_capped_with_at_most_two_bigrams() {
    let text = "alpha beta gamma delta epsilon zeta theta iota kappa lambda omicron sigma";
    let concepts = extract_concepts(text);
    assert_eq!(concepts.len(), MAX_CONCEPTS);
    let bigrams = concepts.iter().filter(|c| c.contains(' ')).count();
    assert_eq!(bigrams, MAX_BIGRAMS);
    assert_eq!(concepts[0], "alpha");
    assert_eq!(concepts[6], "alpha beta");
}

#[test]
fn short_texts_fill_with_bigrams() {
    let concepts = extract_concepts("rust async rust async rust");
    assert_eq!(concepts, ["rust", "async", "rust async", "async rust"]);
}

#[test]
fn concept_extraction_is_deterministic_and_safe() {
    let text = "Ünïcödé Straße: naïve café — 東京 データベース 😀 rust_lang r2d2";
    let first = extract_concepts(text);
    for _ in 0..5 {
        assert_eq!(extract_concepts(text), first);
    }
    assert!(first.contains(&"straße".to_string()));
    assert!(first.contains(&"rust_lang".to_string()));
    assert!(extract_concepts("").is_empty());
    assert!(extract_concepts("the and of to a").is_empty());
}

#[test]
fn huge_input_is_bounded() {
    let huge = "word ".repeat(200_000) + "tailconcept";
    let concepts = extract_concepts(&huge);
    assert_eq!(concepts, ["word"], "text past MAX_SCAN_CHARS is not read");
    assert!(extract_entities(&"Zed ".repeat(100_000)).len() <= 1);
}

#[test]
fn entities_cover_paths_identifiers_acronyms_and_names() {
    let text = "Alice moved src/main.rs to ~/.config/memd, uses snake_case and camelCase \
                names, std::fs and serde_json, JWT auth, TypeScript and Python. The end.";
    let entities = extract_entities(text);
    for expected in [
        "alice",
        "src/main.rs",
        "~/.config/memd",
        "snake_case",
        "camelcase",
        "std::fs",
        "serde_json",
        "jwt",
        "typescript",
        "python",
    ] {
        assert!(
            entities.contains(&expected.to_string()),
            "{expected} in {entities:?}"
        );
    }
    for absent in ["the", "end", "moved", "names", "auth"] {
        assert!(
            !entities.contains(&absent.to_string()),
            "{absent} in {entities:?}"
        );
    }
}

#[test]
fn entities_reject_false_paths_numbers_and_roles() {
    let entities = extract_entities("and/or client/server 3.14 1.2.3 User I OK (Rust).");
    assert_eq!(entities, ["rust"]);
}

#[test]
fn entities_are_deduplicated_ordered_and_capped() {
    assert_eq!(extract_entities("Rust rust RUST Go Rust"), ["rust", "go"]);
    let many: String = (0..40).map(|i| format!("Name{i} ")).collect();
    let entities = extract_entities(&many);
    assert_eq!(entities.len(), MAX_ENTITIES);
    assert_eq!(entities[0], "name0");
    assert_eq!(entities, extract_entities(&many));
}

#[test]
fn context_types() {
    assert_eq!(
        detect_context_type("Getting a panic with a stack traceback, please fix"),
        "debugging"
    );
    assert_eq!(
        detect_context_type("deploy the docker container to kubernetes"),
        "devops"
    );
    assert_eq!(
        detect_context_type("refactor this function into a struct"),
        "coding"
    );
    assert_eq!(detect_context_type("proofread my blog draft"), "writing");
    assert_eq!(detect_context_type("what should I cook tonight"), "general");
    assert_eq!(detect_context_type(""), "general");
    for text in ["fix deploy", "fix", "deploy code"] {
        assert!(CONTEXT_TYPES.contains(&detect_context_type(text)));
    }
    // A tie goes to the earlier type in the fixed order.
    assert_eq!(detect_context_type("fix the deploy"), "debugging");
    assert_eq!(detect_context_type("deploy code"), "devops");
}
