//! Before a client compacts a conversation (`POST /api/hooks/pre-compact`, Claude Code's
//! `PreCompact`): one working memory that digests the conversation's exchanges since its last
//! digest, so what the conversation established is kept in memd's own words when the model's
//! context is cut.
//!
//! Owns which exchanges a digest covers (this conversation's, stored after the last digest's
//! `covers_until`) and the digest's text: per exchange, the summary the agent or the sidecar
//! wrote when it scored it (the summary path of record-outcome), else the gist of the stored
//! exchange; the turn still in progress; what the user asked the compaction to keep. Must never
//! call a model, never store a digest of nothing, and never store text that was not scrubbed.

use super::{format, validate_conversation};
use crate::clock;
use crate::core::Core;
use crate::error::{ApiError, check_len};
use crate::record::Record;
use crate::redact;
use crate::state::MemState;
use crate::state::ops::{Op, Output};
use proto::{Collection, PreCompactRequest, PreCompactResponse, Value, limits};
use std::collections::HashMap;
use std::sync::Arc;

/// `metadata.memory_type` of a digest.
pub const DIGEST_TYPE: &str = "session_digest";
/// A digest's text is at most this long: the most recent exchanges are kept.
pub const DIGEST_MAX_CHARS: usize = 2_000;
/// `metadata.covers_until`: the creation time of the newest exchange a digest covers.
const COVERS_UNTIL: &str = "covers_until";
/// The gist of an exchange without a summary: this much of each side.
const GIST_USER_CHARS: usize = 160;
const GIST_ASSISTANT_CHARS: usize = 240;
/// The user's compaction instructions and the prompt in progress, cut to this.
const NOTE_CHARS: usize = 200;

/// What a digest is made of, read under one store read.
#[derive(Debug, Default, PartialEq)]
pub struct Segment {
    /// One line per exchange, oldest first.
    pub lines: Vec<String>,
    /// The prompt of a turn whose stop has not come (an automatic compaction mid-turn).
    pub in_progress: Option<String>,
    /// Creation time of the newest exchange covered.
    pub covers_until: i64,
}

/// `POST /api/hooks/pre-compact`.
pub async fn pre_compact(
    core: &Arc<Core>,
    req: &PreCompactRequest,
) -> Result<PreCompactResponse, ApiError> {
    let conv = validate_conversation(&req.conversation_id)?.to_string();
    let trigger = req.trigger.trim();
    if !matches!(trigger, "" | "manual" | "auto") {
        return Err(ApiError::bad(
            "trigger",
            format!(
                "trigger must be manual or auto (got {:?})",
                format::clip(trigger, 40)
            ),
        ));
    }
    let focus = req.custom_instructions.as_deref().unwrap_or("").trim();
    check_len("custom_instructions", focus, limits::EXCHANGE_MAX_CHARS)?;
    core.settle().await;
    let project = match core.conversation_project(&conv) {
        Some(p) => Some(p),
        None => core.current_project("project_dir", req.project_dir.as_deref(), None)?,
    };
    let segment = core.store.read(|s| segment(s, &conv));
    let Some(text) = digest_text(&segment, trigger, focus) else {
        return Ok(PreCompactResponse::default());
    };
    let now = clock::now_ms();
    let mut rec = Core::new_record(Collection::Working, redact::scrub(&text).text, now);
    rec.project = project;
    let meta = &mut rec.metadata;
    meta.insert("memory_type".into(), Value::from(DIGEST_TYPE));
    meta.insert("conversation_id".into(), Value::from(conv.as_str()));
    meta.insert(
        COVERS_UNTIL.into(),
        Value::from(segment.covers_until as f64),
    );
    if !trigger.is_empty() {
        meta.insert("trigger".into(), Value::from(trigger));
    }
    let doc_id = match core.commit_one(Op::Insert(Box::new(rec))).await? {
        Output::Inserted { id, .. } | Output::Duplicate { id } => id,
        other => {
            return Err(ApiError::internal(format!(
                "unexpected store answer {other:?}"
            )));
        }
    };
    Ok(PreCompactResponse {
        stored: true,
        doc_id,
        exchanges: segment.lines.len(),
    })
}

fn memory_type(r: &Record) -> Option<&str> {
    r.metadata.get("memory_type").and_then(Value::as_str)
}

fn of_conversation(r: &Record, conv: &str) -> bool {
    r.metadata.get("conversation_id").and_then(Value::as_str) == Some(conv)
}

/// The conversation's exchanges since its last digest, each as its summary or its gist.
pub fn segment(s: &MemState, conv: &str) -> Segment {
    let mine: Vec<&Record> = s.records().filter(|r| of_conversation(r, conv)).collect();
    let since = mine
        .iter()
        .filter(|r| memory_type(r) == Some(DIGEST_TYPE))
        .filter_map(|r| r.metadata.get(COVERS_UNTIL).and_then(Value::as_f64))
        .map(|at| at as i64)
        .max()
        .unwrap_or(0);
    // record-outcome links a summary to the exchange it scored (`exchange_id`).
    let summaries: HashMap<&str, &str> = mine
        .iter()
        .filter(|r| memory_type(r) == Some("exchange_summary"))
        .filter_map(|r| {
            let of = r.metadata.get("exchange_id").and_then(Value::as_str)?;
            Some((of, r.content.as_str()))
        })
        .collect();
    let mut exchanges: Vec<&Record> = mine
        .into_iter()
        .filter(|r| memory_type(r) == Some("exchange") && r.created_at > since)
        .collect();
    exchanges.sort_by_key(|r| (r.created_at, r.key));
    let summary_of = |r: &Record| {
        std::iter::once(&r.id)
            .chain(&r.former_ids)
            .find_map(|id| summaries.get(id.as_str()).copied())
    };
    let lines = exchanges
        .iter()
        .map(|r| match summary_of(r) {
            Some(summary) => format::clip(summary.trim(), GIST_USER_CHARS + GIST_ASSISTANT_CHARS),
            None => gist(&r.content),
        })
        .collect();
    let in_progress = s
        .sessions
        .get(conv)
        .filter(|c| c.awaiting_stop && !c.current_prompt.trim().is_empty())
        .map(|c| format::clip(c.current_prompt.trim(), NOTE_CHARS));
    Segment {
        lines,
        in_progress,
        covers_until: exchanges.last().map_or(since, |r| r.created_at),
    }
}

/// A stored exchange (`User: …\nAssistant: …`) in one line.
fn gist(content: &str) -> String {
    let (user, assistant) = content.split_once("\nAssistant: ").unwrap_or((content, ""));
    let user = user.strip_prefix("User: ").unwrap_or(user);
    let one_line =
        |t: &str, max| format::clip(&t.split_whitespace().collect::<Vec<_>>().join(" "), max);
    let user = one_line(user, GIST_USER_CHARS);
    match one_line(assistant, GIST_ASSISTANT_CHARS) {
        a if a.is_empty() => format!("Asked: {user}"),
        a => format!("Asked: {user} → {a}"),
    }
}

/// The digest's text, or `None` when the segment holds nothing. Lines that do not fit
/// [`DIGEST_MAX_CHARS`] are dropped oldest first, and counted.
pub fn digest_text(segment: &Segment, trigger: &str, focus: &str) -> Option<String> {
    if segment.lines.is_empty() && segment.in_progress.is_none() {
        return None;
    }
    let how = match trigger {
        "auto" => "automatic compaction",
        "manual" => "/compact",
        _ => "compaction",
    };
    let head = format!(
        "Conversation digest before {how} ({} exchange{}):",
        segment.lines.len(),
        if segment.lines.len() == 1 { "" } else { "s" }
    );
    let mut tail = Vec::new();
    if let Some(p) = &segment.in_progress {
        tail.push(format!("In progress: {p}"));
    }
    if !focus.is_empty() {
        tail.push(format!(
            "Asked to keep: {}",
            format::clip(focus, NOTE_CHARS)
        ));
    }
    let fixed: usize =
        head.chars().count() + tail.iter().map(|t| t.chars().count() + 1).sum::<usize>();
    let mut room = DIGEST_MAX_CHARS.saturating_sub(fixed + 40);
    let mut kept: Vec<String> = Vec::new();
    for line in segment.lines.iter().rev() {
        let cost = line.chars().count() + 3;
        if cost > room {
            break;
        }
        room -= cost;
        kept.push(format!("- {line}"));
    }
    kept.reverse();
    let dropped = segment.lines.len() - kept.len();
    let mut out = vec![head];
    if dropped > 0 {
        out.push(format!("- ({dropped} earlier exchanges left out)"));
    }
    out.extend(kept);
    out.extend(tail);
    Some(out.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(lines: &[&str], in_progress: Option<&str>) -> Segment {
        Segment {
            lines: lines.iter().map(|l| l.to_string()).collect(),
            in_progress: in_progress.map(str::to_string),
            covers_until: 0,
        }
    }

    #[test]
    fn nothing_to_digest_stores_nothing() {
        assert_eq!(digest_text(&seg(&[], None), "manual", "keep the API"), None);
    }

    #[test]
    fn digest_lists_exchanges_in_order_then_the_turn_in_progress_and_the_focus() {
        let text = digest_text(
            &seg(&["Asked: a → b", "fixed the build"], Some("now deploy")),
            "auto",
            "the deploy steps",
        )
        .unwrap();
        assert_eq!(
            text,
            "Conversation digest before automatic compaction (2 exchanges):\n\
             - Asked: a → b\n- fixed the build\nIn progress: now deploy\n\
             Asked to keep: the deploy steps"
        );
    }

    #[test]
    fn a_long_segment_keeps_the_newest_exchanges_within_the_limit() {
        let lines: Vec<String> = (0..40)
            .map(|i| format!("exchange {i} {}", "x".repeat(90)))
            .collect();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let text = digest_text(&seg(&refs, None), "manual", "").unwrap();
        assert!(text.chars().count() <= DIGEST_MAX_CHARS, "{}", text.len());
        assert!(text.contains("exchange 39 "), "the newest is kept");
        assert!(!text.contains("exchange 0 "), "the oldest is dropped");
        assert!(text.contains("earlier exchanges left out"), "{text}");
    }

    #[test]
    fn gist_is_one_line_of_each_side() {
        assert_eq!(
            gist("User: How does it\ndeploy?\nAssistant: With `make ship`.\nThen tag."),
            "Asked: How does it deploy? → With `make ship`. Then tag."
        );
        assert_eq!(gist("User: only a question"), "Asked: only a question");
    }
}
