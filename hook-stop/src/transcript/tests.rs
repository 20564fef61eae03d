//! Transcript extraction against a realistic Claude Code JSONL fixture.

use super::*;
use std::io::Write;

const USER_PROMPT: &str = "Thanks, that worked. Now fix the flaky test in tests/cart.rs";
const ASSISTANT: &str = "Let me look at the test.\nThe test read the wall clock; I injected a fixed clock and it passes 500 runs in a row.";

fn fixture_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcript.jsonl")
}

fn fixture() -> String {
    std::fs::read_to_string(fixture_path()).unwrap()
}

#[test]
fn picks_the_last_typed_prompt_and_the_main_chain_answer() {
    let found = read_last_exchange(&fixture_path(), TAIL_BYTES).unwrap();
    assert_eq!(found.user, USER_PROMPT);
    // Thinking, tool_use and sidechain text are left out; text blocks are joined in order.
    assert_eq!(found.assistant, ASSISTANT);
}

#[test]
fn tool_result_only_user_lines_are_not_prompts() {
    let jsonl = concat!(
        r#"{"type":"user","message":{"role":"user","content":"first"}}"#,
        "\n",
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"out"},{"type":"text","text":"note"}]}}"#,
        "\n"
    );
    assert_eq!(last_exchange(jsonl).user, "first");
}

#[test]
fn sidechain_and_meta_lines_are_skipped() {
    let jsonl = concat!(
        r#"{"type":"user","message":{"role":"user","content":"real"},"isSidechain":false}"#,
        "\n",
        r#"{"type":"user","message":{"role":"user","content":"subagent task"},"isSidechain":true}"#,
        "\n",
        r#"{"type":"user","message":{"role":"user","content":"caveat"},"isMeta":true}"#,
        "\n"
    );
    assert_eq!(last_exchange(jsonl).user, "real");
}

#[test]
fn nothing_usable_gives_empty_texts() {
    assert_eq!(last_exchange(""), LastExchange::default());
    assert_eq!(
        last_exchange("garbage\n{\"type\":"),
        LastExchange::default()
    );
    let missing = Path::new("/nonexistent/memd/transcript.jsonl");
    assert!(read_last_exchange(missing, TAIL_BYTES).is_err());
}

/// A transcript bigger than the tail window: `filler` bytes of old assistant lines, then the fixture.
fn big_transcript(filler: usize, before: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(before.as_bytes()).unwrap();
    // Multi-byte characters make it likely that the seek lands inside one.
    let old = r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"ancien résumé — déjà vu"}]},"isSidechain":false}"#;
    let mut written = 0;
    while written < filler {
        writeln!(file, "{old}").unwrap();
        written += old.len() + 1;
    }
    file.write_all(fixture().as_bytes()).unwrap();
    file.flush().unwrap();
    file
}

#[test]
fn reads_only_the_tail_of_a_large_transcript() {
    let file = big_transcript(3 * 1024 * 1024, "");
    assert!(std::fs::metadata(file.path()).unwrap().len() > TAIL_BYTES);
    let found = read_last_exchange(file.path(), TAIL_BYTES).unwrap();
    assert_eq!(found.user, USER_PROMPT);
    assert_eq!(found.assistant, ASSISTANT);
}

#[test]
fn a_prompt_before_the_tail_window_is_not_seen() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(
        file,
        r#"{{"type":"user","message":{{"role":"user","content":"early prompt"}}}}"#
    )
    .unwrap();
    let filler = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"x"}]}}"#;
    while file.as_file().metadata().unwrap().len() <= 3 * 1024 * 1024 {
        for _ in 0..1000 {
            writeln!(file, "{filler}").unwrap();
        }
    }
    file.flush().unwrap();
    // The prompt lies before the last 2 MiB, so a bounded read cannot see it...
    assert_eq!(
        read_last_exchange(file.path(), TAIL_BYTES).unwrap().user,
        ""
    );
    // ...while a window covering the whole file does: the bound is what hid it.
    let whole = read_last_exchange(file.path(), 64 * 1024 * 1024).unwrap();
    assert_eq!(whole.user, "early prompt");
}

#[test]
fn tail_drops_the_line_cut_by_the_seek() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    write!(file, "{{\"first\":1}}\n{{\"second\":2}}\n").unwrap();
    let tail = read_tail(file.path(), 18).unwrap();
    assert_eq!(tail, "{\"second\":2}\n");
}

/// Issue 12: memd waited 500 ms on every stop for a score that was never coming. The stop now
/// says whether this turn called `score_response`; only the last exchange counts.
#[test]
fn a_score_response_call_in_the_last_turn_is_seen() {
    let call = |name: &str| {
        format!(
            r#"{{"type":"assistant","message":{{"role":"assistant","content":[{{"type":"tool_use","id":"t1","name":"{name}","input":{{"outcome":"worked"}}}}]}}}}"#
        )
    };
    let prompt =
        |text: &str| format!(r#"{{"type":"user","message":{{"role":"user","content":"{text}"}}}}"#);
    let answer = r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}"#;
    let scored = [
        prompt("fix it").as_str(),
        &call("mcp__memd__score_response"),
        answer,
    ]
    .join("\n");
    assert!(last_exchange(&scored).score_call);
    let other_tool = [
        prompt("fix it").as_str(),
        &call("mcp__memd__search_memory"),
        answer,
    ]
    .join("\n");
    assert!(!last_exchange(&other_tool).score_call);
    let earlier_turn = [
        prompt("first").as_str(),
        &call("mcp__memd__score_response"),
        answer,
        &prompt("second"),
        answer,
    ]
    .join("\n");
    assert!(
        !last_exchange(&earlier_turn).score_call,
        "an earlier turn's call does not count"
    );
    assert!(!last_exchange(&fixture()).score_call);
}
