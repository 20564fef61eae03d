//! The last real exchange in a Claude Code transcript (`transcript_path`, JSONL).
//!
//! Reads only the tail of the file (2 MiB by default), tolerating a torn last line and lines that
//! are not JSON. The user text is the last `type:"user"` line that is neither a sidechain nor meta
//! and whose content is a string or has text blocks but no `tool_result` block; the assistant text
//! is the text blocks of the main-chain assistant lines after it. This module must never read the
//! whole file into memory, and never fail the hook: a missing file yields nothing.

use serde_json::Value;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// How much of the end of the transcript is read.
pub const TAIL_BYTES: u64 = 2 * 1024 * 1024;

/// The user text and assistant text of the last exchange found (either may be empty), and
/// whether the assistant called memd's `score_response` tool in it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LastExchange {
    pub user: String,
    pub assistant: String,
    pub score_call: bool,
}

/// Reads the last `tail_bytes` of `path` and finds the last exchange in them.
pub fn read_last_exchange(path: &Path, tail_bytes: u64) -> std::io::Result<LastExchange> {
    let tail = read_tail(path, tail_bytes)?;
    Ok(last_exchange(&tail))
}

/// The complete lines among the last `tail_bytes` bytes of the file (a line cut by the seek is
/// dropped; invalid UTF-8 is replaced, so a cut character cannot fail the read).
pub fn read_tail(path: &Path, tail_bytes: u64) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(tail_bytes);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::with_capacity((len - start) as usize);
    file.take(tail_bytes).read_to_end(&mut bytes)?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if start > 0 {
        let first_newline = text.find('\n').map_or(text.len(), |i| i + 1);
        text.drain(..first_newline);
    }
    Ok(text)
}

/// Finds the last exchange in JSONL text.
pub fn last_exchange(jsonl: &str) -> LastExchange {
    // Unparseable lines (a torn last line, stray output) are skipped, not fatal.
    let lines: Vec<Value> = jsonl
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
        .collect();
    let Some(user_at) = lines
        .iter()
        .rposition(|line| user_prompt_text(line).is_some())
    else {
        return LastExchange::default();
    };
    let user = user_prompt_text(&lines[user_at]).unwrap_or_default();
    let answer: Vec<&Value> = lines[user_at + 1..]
        .iter()
        .filter(|line| is_main_chain(line) && line["type"] == "assistant")
        .collect();
    let assistant = answer
        .iter()
        .filter_map(|line| text_blocks(&line["message"]["content"]))
        .collect::<Vec<_>>()
        .join("\n");
    let score_call = answer
        .iter()
        .any(|line| calls_score_response(&line["message"]["content"]));
    LastExchange {
        user,
        assistant,
        score_call,
    }
}

/// A `tool_use` block of memd's `score_response` (Claude Code names MCP tools
/// `mcp__<server>__<tool>`; the server's name is the user's choice).
fn calls_score_response(content: &Value) -> bool {
    content.as_array().is_some_and(|blocks| {
        blocks.iter().any(|b| {
            b["type"] == "tool_use"
                && b["name"].as_str().is_some_and(|n| {
                    n == "score_response"
                        || (n.starts_with("mcp__") && n.ends_with("__score_response"))
                })
        })
    })
}

/// The text of a line if it is a prompt the user typed (not a tool result, sidechain or meta line).
fn user_prompt_text(line: &Value) -> Option<String> {
    if line["type"] != "user" || !is_main_chain(line) || line["isMeta"] == true {
        return None;
    }
    let content = &line["message"]["content"];
    if let Some(text) = content.as_str() {
        return (!text.trim().is_empty()).then(|| text.to_string());
    }
    let blocks = content.as_array()?;
    if blocks.iter().any(|b| b["type"] == "tool_result") {
        return None;
    }
    text_blocks(content)
}

fn is_main_chain(line: &Value) -> bool {
    line["isSidechain"] != true
}

/// The `text` blocks of a content array joined by newlines; `None` when there are none.
fn text_blocks(content: &Value) -> Option<String> {
    let texts: Vec<&str> = content
        .as_array()?
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .filter(|t| !t.trim().is_empty())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

#[cfg(test)]
mod tests;
