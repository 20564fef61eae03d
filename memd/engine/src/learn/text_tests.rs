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
}
