//! Book ingestion: extraction from .txt/.md/.pdf fixtures, error cases, chunk boundaries and
//! overlap, Markdown headings, Unicode safety, duplicate fingerprints and chunking throughput.

use memd_engine::ops::ingest::{
    Chunk, DEFAULT_OVERLAP_CHARS, DEFAULT_TARGET_CHARS, IngestError, MAX_BYTES, chunk,
    content_fingerprint, extract_text,
};
use std::time::Instant;

const SAMPLE_MD: &str = include_str!("fixtures/sample.md");
const SAMPLE_TXT: &[u8] = include_bytes!("fixtures/sample.txt");
/// Written by `install/gen_sample_pdf.py`: two pages, the second one Flate-compressed.
const SAMPLE_PDF: &[u8] = include_bytes!("fixtures/sample.pdf");

fn chars(text: &str) -> Vec<char> {
    text.chars().collect()
}

/// Properties every chunking must have; `strict_words` also requires cuts between words.
fn check_chunks(text: &str, chunks: &[Chunk], target: usize, overlap: usize, strict_words: bool) {
    let all = chars(text);
    let is_break = |i: usize| {
        i == 0
            || i >= all.len()
            || all[i - 1].is_whitespace()
            || all[i].is_whitespace()
            || is_cjk(all[i - 1])
            || is_cjk(all[i])
    };
    let mut covered = vec![false; all.len()];
    let mut previous_end: Option<usize> = None;
    for (i, c) in chunks.iter().enumerate() {
        let len = c.text.chars().count();
        assert_eq!(c.index, i);
        assert!(
            len > 0 && len <= target.max(1),
            "chunk {i} has {len} chars (target {target})"
        );
        let slice: String = all[c.start_char..c.start_char + len].iter().collect();
        assert_eq!(
            slice, c.text,
            "chunk {i} text does not match its start_char"
        );
        assert_eq!(c.text.trim(), c.text, "chunk {i} has edge whitespace");
        if let Some(end) = previous_end {
            assert!(
                c.start_char > chunks[i - 1].start_char,
                "chunk {i} does not advance"
            );
            let repeated = end.saturating_sub(c.start_char);
            assert!(
                repeated <= overlap,
                "chunk {i} repeats {repeated} chars (overlap {overlap})"
            );
        }
        if strict_words {
            assert!(
                is_break(c.start_char),
                "chunk {i} starts inside a word: {:?}",
                c.text
            );
            assert!(
                is_break(c.start_char + len),
                "chunk {i} ends inside a word: {:?}",
                c.text
            );
        }
        covered[c.start_char..c.start_char + len]
            .iter_mut()
            .for_each(|x| *x = true);
        previous_end = Some(c.start_char + len);
    }
    for (i, ch) in all.iter().enumerate() {
        assert!(
            covered[i] || ch.is_whitespace(),
            "char {i} ({ch:?}) is in no chunk"
        );
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3000..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF)
}

fn prose(sentences: usize) -> String {
    let words = [
        "harbour", "lamp", "keeper", "tide", "storm", "wick", "gauge", "boat", "bell",
    ];
    let mut out = String::new();
    for s in 0..sentences {
        let len = 6 + s % 9;
        let sentence: Vec<&str> = (0..len)
            .map(|w| words[(s * 7 + w * 3) % words.len()])
            .collect();
        out.push_str(&sentence.join(" "));
        out.push_str(if s % 5 == 4 { ".\n\n" } else { ". " });
    }
    out
}

#[test]
fn txt_fixture_is_read_with_unix_line_endings() {
    let text = extract_text("ferryman.TXT", SAMPLE_TXT).expect("txt");
    assert!(!text.contains('\r'));
    assert!(text.starts_with("The Ferryman\n\nEvery morning"));
    assert!(text.contains("small brass bell"));
}

#[test]
fn markdown_fixture_keeps_headings_and_code() {
    let text = extract_text("handbook.md", SAMPLE_MD.as_bytes()).expect("md");
    assert_eq!(text, SAMPLE_MD);
    let bom = [b"\xEF\xBB\xBF".as_slice(), SAMPLE_MD.as_bytes()].concat();
    assert_eq!(
        extract_text("handbook.markdown", &bom).expect("md with BOM"),
        SAMPLE_MD
    );
}

#[test]
fn pdf_fixture_yields_the_text_of_both_pages() {
    let text = extract_text("lighthouse.pdf", SAMPLE_PDF).expect("pdf");
    for line in [
        "Chapter One: The Lighthouse Keeper",
        "He trimmed the wick and polished the great lens.",
        "Chapter Two: The Storm",
        "By morning the fishing boats were safely home.",
    ] {
        assert!(text.contains(line), "missing {line:?} in {text:?}");
    }
    assert_eq!(text.trim(), text);
    assert!(!text.contains("\n\n\n"));
}

#[test]
fn broken_pdfs_are_errors_not_panics() {
    let not_pdf = extract_text("book.pdf", b"plain text pretending to be a PDF");
    assert!(matches!(not_pdf, Err(IngestError::Pdf(_))), "{not_pdf:?}");
    let garbage = extract_text(
        "book.pdf",
        b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage",
    );
    assert!(matches!(garbage, Err(IngestError::Pdf(_))), "{garbage:?}");
    for cut in (0..SAMPLE_PDF.len()).step_by(97) {
        match extract_text("cut.pdf", &SAMPLE_PDF[..cut]) {
            Ok(text) => assert!(!text.trim().is_empty()),
            Err(e) => assert!(
                matches!(e, IngestError::Pdf(_) | IngestError::Empty),
                "{e:?}"
            ),
        }
    }
}

#[test]
fn size_limit_is_enforced_with_a_clear_message() {
    let at_limit = vec![b'a'; MAX_BYTES];
    assert_eq!(
        extract_text("big.txt", &at_limit).map(|t| t.len()),
        Ok(MAX_BYTES)
    );
    let over = vec![b'a'; MAX_BYTES + 1];
    let err = extract_text("big.txt", &over).unwrap_err();
    assert_eq!(
        err,
        IngestError::TooLarge {
            bytes: MAX_BYTES + 1,
            limit: MAX_BYTES
        }
    );
    let message = err.to_string();
    assert!(
        message.contains("10 MB") && message.contains("10485761 bytes"),
        "{message}"
    );
    // The limit is checked before anything is parsed.
    let over_pdf = extract_text("big.pdf", &over).unwrap_err();
    assert!(matches!(over_pdf, IngestError::TooLarge { .. }));
}

#[test]
fn other_errors_name_the_problem() {
    let docx = extract_text("notes.docx", b"PK\x03\x04").unwrap_err();
    assert_eq!(docx, IngestError::UnsupportedType("docx".into()));
    assert!(docx.to_string().contains(".docx") && docx.to_string().contains(".pdf"));
    let bare = extract_text("README", b"hello").unwrap_err();
    assert!(bare.to_string().contains("no extension"), "{bare}");
    assert_eq!(
        extract_text("latin1.txt", b"caf\xe9"),
        Err(IngestError::NotUtf8)
    );
    assert_eq!(
        extract_text("blank.md", b" \n\t\r\n "),
        Err(IngestError::Empty)
    );
    assert!(IngestError::NotUtf8.to_string().contains("UTF-8"));
    assert!(IngestError::Pdf("xref".into()).to_string().contains("xref"));
}

#[test]
fn default_chunking_covers_prose_and_respects_size_and_overlap() {
    let text = prose(400);
    let chunks = chunk(&text, DEFAULT_TARGET_CHARS, DEFAULT_OVERLAP_CHARS);
    assert!(chunks.len() > 10);
    check_chunks(
        &text,
        &chunks,
        DEFAULT_TARGET_CHARS,
        DEFAULT_OVERLAP_CHARS,
        true,
    );
    // Later chunks begin with the tail of the previous one.
    let overlapping = chunks
        .windows(2)
        .filter(|w| w[1].start_char < w[0].start_char + w[0].text.chars().count());
    assert!(overlapping.count() >= chunks.len() / 2);
    // Windows with a paragraph break in their second half end on it.
    for c in &chunks[..chunks.len() - 1] {
        assert!(
            c.text.ends_with('.'),
            "chunk does not end at a sentence: {:?}",
            c.text
        );
    }
}

#[test]
fn many_sizes_and_overlaps_keep_every_property() {
    let texts = [prose(60), SAMPLE_MD.to_owned(), "word ".repeat(500)];
    for text in &texts {
        for (target, overlap) in [
            (50, 10),
            (120, 60),
            (200, 0),
            (333, 100),
            (1000, 200),
            (4000, 500),
        ] {
            let chunks = chunk(text, target, overlap);
            check_chunks(text, &chunks, target, overlap, true);
            assert_eq!(chunks, chunk(text, target, overlap), "not deterministic");
        }
    }
}

#[test]
fn markdown_headings_start_chunks() {
    let chunks = chunk(SAMPLE_MD, DEFAULT_TARGET_CHARS, DEFAULT_OVERLAP_CHARS);
    check_chunks(
        SAMPLE_MD,
        &chunks,
        DEFAULT_TARGET_CHARS,
        DEFAULT_OVERLAP_CHARS,
        true,
    );
    let starts: Vec<&str> = chunks
        .iter()
        .map(|c| c.text.lines().next().unwrap_or(""))
        .collect();
    assert_eq!(
        starts,
        [
            "# The Tidekeeper's Handbook",
            "## Chapter 2: Lamps and Signals",
            "### Signals at a glance",
            "## Chapter 3: Storms",
        ],
        "{chunks:#?}"
    );
    // The title stays with the first chapter, and the fenced `# comment` is not a heading.
    assert!(chunks[0].text.contains("## Chapter 1: Reading the Water"));
    assert!(chunks[1].text.contains("# this is a shell comment"));
}

#[test]
fn a_word_longer_than_a_chunk_is_cut_and_nothing_else_is() {
    let text = format!(
        "short words first {} and short words after",
        "x".repeat(2500)
    );
    let chunks = chunk(&text, 1000, 200);
    check_chunks(&text, &chunks, 1000, 200, false);
    assert_eq!(chunks[0].text, "short words first");
    assert!(chunks.iter().any(|c| c.text == "x".repeat(1000)));
    assert!(
        chunks
            .last()
            .is_some_and(|c| c.text.ends_with("and short words after"))
    );
}

#[test]
fn unicode_text_never_splits_a_character() {
    let samples = [
        "日本語の文章です。句読点で区切られています。長い文章を分割するテストです。".repeat(40),
        "Emoji 🚀🔥 mixed with naïve café text — and ümlauts. ".repeat(60),
        "한국어 문장도 공백으로 나뉩니다. ".repeat(80),
        "👨‍👩‍👧‍👦".repeat(300),
        "x\u{301}".repeat(700),
    ];
    for text in &samples {
        for (target, overlap) in [(1, 0), (7, 3), (64, 16), (1000, 200)] {
            let chunks = chunk(text, target, overlap);
            check_chunks(text, &chunks, target, overlap, false);
        }
    }
    let cjk = &samples[0];
    check_chunks(cjk, &chunk(cjk, 50, 10), 50, 10, true);
}

#[test]
fn tiny_and_degenerate_inputs() {
    assert!(chunk("", 1000, 200).is_empty());
    assert!(chunk(" \n\t ", 1000, 200).is_empty());
    let one = chunk("a", 1000, 200);
    assert_eq!(
        one,
        vec![Chunk {
            index: 0,
            text: "a".into(),
            start_char: 0
        }]
    );
    let padded = chunk("\n\n  hello world  \n", 1000, 200);
    assert_eq!(
        padded,
        vec![Chunk {
            index: 0,
            text: "hello world".into(),
            start_char: 4
        }]
    );
    // A zero target is treated as one character; an overlap beyond half the target is clamped.
    let zero = chunk("ab cd", 0, 50);
    assert_eq!(
        zero.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c", "d"]
    );
}

#[test]
fn fingerprint_ignores_layout_but_not_content() {
    let a = content_fingerprint("The keeper\n\n  climbed the stairs. ");
    let b = content_fingerprint("The keeper climbed\tthe stairs.");
    let c = content_fingerprint("The keeper climbed the stairs!");
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), 64);
    assert!(a.bytes().all(|x| x.is_ascii_hexdigit()));
    assert_eq!(
        content_fingerprint(""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}

#[test]
fn chunking_throughput_on_a_large_book() {
    let text = prose(40_000);
    let start = Instant::now();
    let chunks = chunk(&text, DEFAULT_TARGET_CHARS, DEFAULT_OVERLAP_CHARS);
    let secs = start.elapsed().as_secs_f64();
    check_chunks(
        &text,
        &chunks,
        DEFAULT_TARGET_CHARS,
        DEFAULT_OVERLAP_CHARS,
        true,
    );
    println!(
        "chunk: {} bytes -> {} chunks in {:.1} ms = {:.1} MB/s",
        text.len(),
        chunks.len(),
        secs * 1e3,
        text.len() as f64 / secs / 1e6
    );
}
