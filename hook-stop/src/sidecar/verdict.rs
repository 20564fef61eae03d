//! Reading a scoring model's answer: the text out of a `/chat/completions` body, the JSON object
//! out of the text, and the validated verdict out of the object.
//!
//! Models wrap JSON in ``` fences or prose, so candidates are tried in order: the whole text
//! (fences stripped), the outermost `{...}`, then every `{` from the last one backwards. This module
//! must never accept an outcome outside worked/failed/partial/unknown, nor a memory score for an id
//! that was not asked about.

use serde_json::Value;
use std::collections::BTreeMap;

/// The four exchange outcomes memd understands.
pub const OUTCOMES: [&str; 4] = ["worked", "failed", "partial", "unknown"];
/// `exchange_summary` is cut to this many characters.
pub const MAX_SUMMARY_CHARS: usize = 300;
/// Longest answer text examined (bounds the backwards scan).
const MAX_TEXT_BYTES: usize = 64 * 1024;

/// A usable scoring answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub outcome: String,
    /// Only ids that were asked about, only valid outcomes; may be empty.
    pub memory_scores: BTreeMap<String, String>,
    pub summary: String,
}

/// Why an answer could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerdictError {
    /// No JSON object with an outcome in the text.
    Unparseable,
    /// A JSON object named an outcome that is not one of [`OUTCOMES`].
    InvalidOutcome,
}

impl VerdictError {
    /// The attempt result recorded in the sidecar report.
    pub fn result(self) -> &'static str {
        match self {
            VerdictError::Unparseable => "unparseable",
            VerdictError::InvalidOutcome => "invalid_outcome",
        }
    }
}

/// The model's text from a chat completion body: `choices[0].message.content`, falling back to
/// `reasoning_content` / `reasoning` (reasoning models sometimes answer there).
pub fn answer_text(body: &Value) -> Option<String> {
    let message = &body["choices"][0]["message"];
    ["content", "reasoning_content", "reasoning"]
        .iter()
        .filter_map(|key| message[*key].as_str())
        .find(|text| !text.trim().is_empty())
        .map(str::to_owned)
}

/// Finds and validates the verdict in a model's text.
pub fn parse_verdict(text: &str, memory_ids: &[&str]) -> Result<Verdict, VerdictError> {
    let text = cut_bytes(text, MAX_TEXT_BYTES);
    let mut saw_invalid = false;
    for candidate in candidate_objects(text) {
        match verdict_from(&candidate, memory_ids) {
            Ok(verdict) => return Ok(verdict),
            Err(VerdictError::InvalidOutcome) => saw_invalid = true,
            Err(VerdictError::Unparseable) => {}
        }
    }
    Err(if saw_invalid {
        VerdictError::InvalidOutcome
    } else {
        VerdictError::Unparseable
    })
}

/// JSON objects found in `text`, most likely first.
fn candidate_objects(text: &str) -> impl Iterator<Item = Value> + '_ {
    let whole = std::iter::once(strip_fences(text)).filter_map(parse_object);
    let outermost = outermost_braces(text).and_then(parse_object);
    let from_last = text
        .char_indices()
        .rev()
        .filter(|(_, c)| *c == '{')
        .filter_map(move |(i, _)| first_value_at(&text[i..]));
    whole.chain(outermost).chain(from_last)
}

fn parse_object(text: &str) -> Option<Value> {
    serde_json::from_str::<Value>(text.trim())
        .ok()
        .filter(Value::is_object)
}

/// The first JSON object at the start of `text`, ignoring whatever follows it.
fn first_value_at(text: &str) -> Option<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .next()?
        .ok()
        .filter(Value::is_object)
}

/// `text` without a leading ```lang line and a trailing ``` fence.
fn strip_fences(text: &str) -> &str {
    let mut body = text.trim();
    if let Some(rest) = body.strip_prefix("```") {
        body = rest.split_once('\n').map_or("", |(_, after)| after);
    }
    body.trim_end().strip_suffix("```").unwrap_or(body)
}

/// From the first `{` to the last `}`.
fn outermost_braces(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    (end > start).then(|| &text[start..=end])
}

fn verdict_from(object: &Value, memory_ids: &[&str]) -> Result<Verdict, VerdictError> {
    let raw_outcome = object
        .get("exchange_outcome")
        .or_else(|| object.get("outcome"))
        .ok_or(VerdictError::Unparseable)?;
    let outcome = raw_outcome
        .as_str()
        .and_then(normalize_outcome)
        .ok_or(VerdictError::InvalidOutcome)?;
    let summary = object
        .get("exchange_summary")
        .or_else(|| object.get("summary"))
        .and_then(Value::as_str)
        .map(|s| hookrt::log::truncate_chars(s.trim(), MAX_SUMMARY_CHARS).to_string())
        .unwrap_or_default();
    Ok(Verdict {
        outcome,
        memory_scores: valid_scores(object.get("memory_scores"), memory_ids),
        summary,
    })
}

/// `memory_scores` entries for known ids with valid outcomes; everything else is dropped.
fn valid_scores(scores: Option<&Value>, memory_ids: &[&str]) -> BTreeMap<String, String> {
    let Some(map) = scores.and_then(Value::as_object) else {
        return BTreeMap::new();
    };
    map.iter()
        .filter(|(id, _)| memory_ids.contains(&id.trim()))
        .filter_map(|(id, value)| {
            let outcome = value.as_str().and_then(normalize_outcome)?;
            Some((id.trim().to_string(), outcome))
        })
        .collect()
}

fn normalize_outcome(raw: &str) -> Option<String> {
    let outcome = raw.trim().to_ascii_lowercase();
    OUTCOMES.contains(&outcome.as_str()).then_some(outcome)
}

fn cut_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests;
