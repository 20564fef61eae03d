//! How tool answers read: search result lists, one memory in full, and tool errors.
//!
//! Owns the text of MCP answers (the model reads these, not JSON). Must never drop a memory's
//! id from a line: ids are how the agent looks memories up and scores them.

use memd_engine::error::ApiError;
use memd_engine::ops::context::format::clip;
use proto::{Collection, MemoryView};

/// A search result's text is cut here; `search_memory(id=...)` returns all of it.
const RESULT_CHARS: usize = 800;

/// `2d, s:0.72, w:0.68, 8 uses, [YY~N]`, `5d, imp:0.9, conf:0.8` or `2d, reference`.
pub fn signals(m: &MemoryView) -> String {
    let mut t = outcome_signals(m);
    if m.disputed {
        t.push_str(&format!(", {}", DISPUTED));
    }
    t
}

/// What a reader must do with a disputed memory, in one phrase.
pub const DISPUTED: &str = "DISPUTED: failed 3 times since it last worked; verify it, then update_memory or archive_memory";

fn outcome_signals(m: &MemoryView) -> String {
    match Collection::parse(&m.collection) {
        Some(Collection::MemoryBank) => {
            let mut t = format!(
                "{}, imp:{:.1}, conf:{:.1}",
                m.age,
                m.importance.unwrap_or(0.7),
                m.confidence.unwrap_or(0.7)
            );
            if m.uses > 0 {
                t.push_str(&format!(", w:{:.2}, {}", m.wilson_score, uses(m.uses)));
            }
            t
        }
        Some(Collection::Books) => format!("{}, reference", m.age),
        _ if m.uses == 0 => format!("{}, s:{:.2}, not scored yet", m.age, m.score),
        _ => {
            let mut t = format!(
                "{}, s:{:.2}, w:{:.2}, {}",
                m.age,
                m.score,
                m.wilson_score,
                uses(m.uses)
            );
            if !m.outcome_history.is_empty() {
                t.push_str(&format!(", {}", m.outcome_history));
            }
            t
        }
    }
}

fn uses(n: u32) -> String {
    if n == 1 {
        "1 use".into()
    } else {
        format!("{n} uses")
    }
}

/// `1. [patterns] (2d, s:0.72, w:0.68, 8 uses, [YY~N]) [id:patterns_…] text`
pub fn result_line(rank: usize, m: &MemoryView) -> String {
    let mut text = clip(m.content.trim(), RESULT_CHARS);
    if text.chars().count() < m.content.trim().chars().count() {
        text.push_str(" (cut; search_memory(id=...) shows all)");
    }
    format!(
        "{rank}. [{}] ({}) [id:{}] {}",
        m.collection,
        signals(m),
        m.id,
        text
    )
}

/// The result lines under `header`. A memory from a project other than the caller's
/// (`current`; only `project: "all"` or another id finds one) says where it comes from, so the
/// agent does not take another repository's command for this one's.
pub fn result_list(header: &str, results: &[MemoryView], current: Option<&str>) -> String {
    let mut out = String::from(header);
    for (i, m) in results.iter().enumerate() {
        out.push('\n');
        out.push_str(&result_line(i + 1, m));
        if let Some(p) = m.project.as_deref().filter(|p| Some(*p) != current) {
            out.push_str(&format!(" (from project {p})"));
        }
    }
    out
}

/// One memory with everything memd knows about it (the `id=` lookup).
pub fn full_memory(m: &MemoryView) -> String {
    let mut out = format!("[{}] [id:{}]\n{}\n", m.collection, m.id, m.content.trim());
    let ago = if m.age == "now" {
        "just now".to_string()
    } else {
        format!("{} ago", m.age)
    };
    out.push_str(&format!("\ncreated: {} ({ago})", m.created_at));
    match &m.project {
        Some(p) => out.push_str(&format!("\nproject: {p}")),
        None => out.push_str("\nscope: global (every project)"),
    }
    match Collection::parse(&m.collection) {
        Some(Collection::MemoryBank) => {
            out.push_str(&format!(
                "\nimportance: {:.2}, confidence: {:.2}",
                m.importance.unwrap_or(0.7),
                m.confidence.unwrap_or(0.7)
            ));
            if !m.tags.is_empty() {
                out.push_str(&format!("\ntags: {}", m.tags.join(", ")));
            }
            out.push_str(&format!(
                "\nuses: {}, wilson: {:.2}",
                m.uses, m.wilson_score
            ));
        }
        Some(Collection::Books) => out.push_str("\nreference document (not scored)"),
        _ => {
            out.push_str(&format!(
                "\nscore: {:.2}, wilson: {:.2}, learned: {:.2}, {}, successes: {}",
                m.score,
                m.wilson_score,
                m.learned_score,
                uses(m.uses),
                m.success_count
            ));
            if !m.last_outcome.is_empty() {
                out.push_str(&format!(
                    "\nlast outcome: {}, history: {}",
                    m.last_outcome, m.outcome_history
                ));
            }
        }
    }
    if !m.metadata.is_empty()
        && let Ok(meta) = serde_json::to_string(&m.metadata)
    {
        out.push_str(&format!("\nmetadata: {meta}"));
    }
    out
}

/// A tool error as the model reads it. `renames` maps API field names to argument names where
/// they differ (e.g. `metadata_filters` → `metadata`).
pub fn error_text(e: &ApiError, renames: &[(&str, &str)]) -> String {
    let rename = |text: &str| {
        renames
            .iter()
            .fold(text.to_string(), |t, (api, arg)| t.replace(api, arg))
    };
    use memd_engine::error::ErrorKind::*;
    match (e.field.as_deref(), e.kind) {
        (Some(f), _) => {
            // ApiError messages name their field; say it once, in the tool's own terms.
            let message = e
                .message
                .strip_prefix(&format!("{f}: "))
                .unwrap_or(&e.message);
            format!("Invalid argument `{}`: {}", rename(f), rename(message))
        }
        (None, BadInput | NotFound | Conflict | TooLarge | Refused) => e.message.clone(),
        (None, Unavailable) => format!("memd is temporarily unavailable: {}", e.message),
        (None, _) => format!("memd could not do this: {}", e.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(collection: &str, uses: u32) -> MemoryView {
        MemoryView {
            id: format!("{collection}_0123456789ab"),
            collection: collection.into(),
            content: "The staging database listens on port 5433".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            age: "2d".into(),
            score: 0.72,
            wilson_score: 0.68,
            uses,
            success_count: 6.0,
            learned_score: 0.71,
            last_outcome: "worked".into(),
            outcome_history: "[YY~N]".into(),
            tags: vec![],
            disputed: false,
            archived: false,
            project: None,
            importance: None,
            confidence: None,
            embedding_similarity: None,
            final_rank_score: None,
            rerank_score: None,
            shared: false,
            owner: None,
            metadata: Default::default(),
        }
    }

    #[test]
    fn results_from_another_project_say_so() {
        let mut here = mem("patterns", 8);
        here.project = Some("github.com/acme/shop".into());
        let mut there = mem("memory_bank", 0);
        there.project = Some("gitlab.com/acme/blog".into());
        let global = mem("working", 0);
        let text = result_list(
            "Found 3 memories:",
            &[here, there, global],
            Some("github.com/acme/shop"),
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(!lines[1].contains("from project"), "{text}");
        assert!(
            lines[2].ends_with("(from project gitlab.com/acme/blog)"),
            "{text}"
        );
        assert!(!lines[3].contains("from project"), "{text}");
    }

    #[test]
    fn result_lines_follow_the_documented_shape() {
        assert_eq!(
            result_line(1, &mem("patterns", 8)),
            "1. [patterns] (2d, s:0.72, w:0.68, 8 uses, [YY~N]) [id:patterns_0123456789ab] The staging database listens on port 5433"
        );
        let mut bank = mem("memory_bank", 0);
        bank.importance = Some(0.9);
        bank.confidence = Some(0.8);
        assert!(
            result_line(2, &bank).starts_with(
                "2. [memory_bank] (2d, imp:0.9, conf:0.8) [id:memory_bank_0123456789ab]"
            )
        );
        assert!(result_line(3, &mem("working", 0)).contains("(2d, s:0.72, not scored yet)"));
        assert!(result_line(4, &mem("books", 0)).contains("(2d, reference)"));
    }

    #[test]
    fn long_results_are_cut_and_say_so() {
        let mut m = mem("history", 1);
        m.content = "word ".repeat(500);
        let line = result_line(1, &m);
        assert!(line.chars().count() < 1000);
        assert!(line.contains("search_memory(id=...) shows all"));
        assert!(line.contains("1 use,"), "{line}");
    }

    #[test]
    fn errors_name_the_argument_as_the_tool_calls_it() {
        let e = ApiError::bad("metadata_filters", "unknown operator \"$x\" on \"a\"");
        assert_eq!(
            error_text(&e, &[("metadata_filters", "metadata")]),
            "Invalid argument `metadata`: unknown operator \"$x\" on \"a\""
        );
        assert_eq!(
            error_text(&ApiError::internal("disk on fire"), &[]),
            "memd could not do this: disk on fire"
        );
    }
}
