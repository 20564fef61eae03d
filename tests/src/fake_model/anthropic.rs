//! The Anthropic Messages API as Claude Code calls it: `POST /v1/messages` (streamed as SSE
//! when `stream` is set), `POST /v1/messages/count_tokens`, errors as
//! `{"type":"error","error":{"type","message"}}`.
//!
//! Owns reading a Messages request into the agent's [`Turn`] (the current turn starts at the
//! latest user message that is not only tool results; deferred tools are the ones the request
//! lists for `ToolSearch` or marks `defer_loading`) and writing the agent's action back as a
//! text or `tool_use` block. Must never depend on anything but the request it answers.

use super::agent::{self, Action, Call, Turn};
use super::{Reply, Request, WireApi};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// Claude Code's tools the agent uses.
pub const SHELL_TOOL: &str = "Bash";
pub const LOAD_TOOL: &str = "ToolSearch";
/// The sentence before Claude Code's list of deferred tool names.
const DEFERRED_LIST: &str = "deferred tools are now available via ToolSearch";

#[derive(Default)]
pub struct Messages {
    ids: AtomicU64,
}

impl WireApi for Messages {
    fn reply(&self, req: &Request) -> Reply {
        match (req.method.as_str(), req.path()) {
            ("POST", "/v1/messages") => self.messages(req),
            ("POST", "/v1/messages/count_tokens") => Reply::Json {
                status: 200,
                body: json!({"input_tokens": estimate_tokens(req.body_bytes)}),
            },
            (_, path) => error(404, "not_found_error", &format!("no route for {path}")),
        }
    }
}

fn error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::Json {
        status,
        body: json!({"type": "error", "error": {"type": kind, "message": message}}),
    }
}

/// Tokens are estimated at 4 bytes each: no tokenizer ships with the tests.
pub fn estimate_tokens(bytes: usize) -> usize {
    bytes.div_ceil(4)
}

impl Messages {
    fn messages(&self, req: &Request) -> Reply {
        let Some(messages) = req.body.get("messages").and_then(Value::as_array) else {
            return error(400, "invalid_request_error", "messages: Field required");
        };
        if req.body.get("model").and_then(Value::as_str).is_none() {
            return error(400, "invalid_request_error", "model: Field required");
        }
        let turn = read_turn(&req.body, messages);
        let action = agent::decide(&turn, SHELL_TOOL, Some(LOAD_TOOL));
        let n = self.ids.fetch_add(1, Ordering::SeqCst);
        let (block, stop) = block_for(action, n);
        let model = req.body["model"].clone();
        let usage_in = estimate_tokens(req.body_bytes);
        if req.body.get("stream").and_then(Value::as_bool) == Some(true) {
            Reply::Sse {
                events: stream(&format!("msg_fake{n}"), model, block, stop, usage_in),
            }
        } else {
            Reply::Json {
                status: 200,
                body: json!({"id": format!("msg_fake{n}"), "type": "message", "role": "assistant",
                    "model": model, "content": [block], "stop_reason": stop, "stop_sequence": null,
                    "usage": {"input_tokens": usage_in, "output_tokens": 10}}),
            }
        }
    }
}

/// The content block and stop reason for `action`.
fn block_for(action: Action, n: u64) -> (Value, &'static str) {
    let tool = |name: &str, input: Value| {
        let block = json!({"type": "tool_use", "id": format!("toolu_fake{n}"), "name": name, "input": input});
        (block, "tool_use")
    };
    match action {
        Action::Say(text) => (json!({"type": "text", "text": text}), "end_turn"),
        Action::Load { tool: name } => tool(
            LOAD_TOOL,
            json!({"query": format!("select:{name}"), "max_results": 5}),
        ),
        Action::Call { name, input } => tool(&name, input),
        Action::Shell { command } => tool(
            SHELL_TOOL,
            json!({"command": command, "description": "Run the requested command"}),
        ),
    }
}

/// The SSE events of one streamed message holding `block`.
fn stream(
    id: &str,
    model: Value,
    block: Value,
    stop: &str,
    usage_in: usize,
) -> Vec<(String, Value)> {
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": usage_in, "output_tokens": 1}}}),
    )];
    let (start, delta) = if block["type"] == "text" {
        (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": block["text"]}),
        )
    } else {
        (
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
            json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
        )
    };
    events.push((
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": start}),
    ));
    events.push((
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    ));
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 10}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
        .into_iter()
        .map(|(e, d)| (e.to_string(), d))
        .collect()
}

/// Blocks of a message's `content` (a bare string is one text block).
fn blocks(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    }
}

/// Text of a tool result's content (a string or text blocks).
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Where the current turn starts: after the latest assistant message that the user answered
/// with something besides tool results (hooks may add messages of their own to a prompt).
fn turn_start(messages: &[Value]) -> usize {
    let fresh_prompt =
        |m: &Value| m["role"] == "user" && !blocks(m).iter().any(|b| b["type"] == "tool_result");
    (0..messages.len())
        .rev()
        .find(|&i| {
            messages[i]["role"] == "assistant" && messages.get(i + 1).is_some_and(fresh_prompt)
        })
        .map_or(0, |i| i + 1)
}

pub fn read_turn(body: &Value, messages: &[Value]) -> Turn {
    let start = turn_start(messages);
    let mut turn = Turn::default();
    let mut loaded = Vec::new();
    for m in &messages[start..] {
        for b in blocks(m) {
            match b["type"].as_str() {
                Some("text") => {
                    let text = b["text"].as_str().unwrap_or("");
                    turn.deferred.extend(deferred_names(text));
                    turn.text.push_str(text);
                    turn.text.push('\n');
                }
                Some("tool_use") => turn.calls.push(Call {
                    name: b["name"].as_str().unwrap_or("").to_string(),
                    input: b["input"].clone(),
                    result: None,
                }),
                Some("tool_result") => {
                    let content = &b["content"];
                    if let Some(refs) = content.as_array() {
                        loaded.extend(
                            refs.iter()
                                .filter_map(|r| r["tool_name"].as_str())
                                .map(str::to_string),
                        );
                    }
                    let text = result_text(content);
                    turn.text.push_str(&text);
                    if let Some(call) = turn.calls.iter_mut().rev().find(|c| c.result.is_none()) {
                        call.result = Some(text);
                    }
                }
                _ => {}
            }
        }
    }
    // Deferred names are also listed before the turn (in the first messages).
    for m in &messages[..start] {
        for b in blocks(m) {
            turn.deferred
                .extend(deferred_names(b["text"].as_str().unwrap_or("")));
        }
    }
    for t in body["tools"].as_array().into_iter().flatten() {
        let name = t["name"].as_str().unwrap_or("").to_string();
        if t["defer_loading"] == true {
            turn.deferred.push(name);
        } else {
            turn.tools.push(name);
        }
    }
    // A deferred tool loaded by ToolSearch in this turn can be called now.
    for name in loaded {
        if !turn.tools.contains(&name) {
            turn.tools.push(name);
        }
    }
    turn
}

/// The names in Claude Code's "deferred tools are now available" list inside `text`.
fn deferred_names(text: &str) -> Vec<String> {
    let Some(at) = text.find(DEFERRED_LIST) else {
        return Vec::new();
    };
    text[at..]
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .filter(|l| !l.contains(' '))
        .collect()
}
