//! The OpenAI Chat Completions API as OpenCode's `@ai-sdk/openai-compatible` provider calls
//! it: `POST /v1/chat/completions` streamed as SSE `data:` chunks (`chat.completion.chunk`,
//! the answer's text or its `tool_calls`, then `finish_reason`), errors as
//! `{"error":{"message","type"}}`.
//!
//! Owns reading `messages` into the agent's [`Turn`]: the current turn starts at the latest
//! user message, and the system messages memd wrote (KNOWN CONTEXT, the scoring request) are
//! part of it, since OpenCode's plugin puts them in the system prompt. OpenCode's own system
//! prompt is left out: its examples must not read as the user's request. A call the request
//! offers no tool for becomes a plain answer (OpenCode's title request has no tools). Must
//! never depend on anything but the request it answers.

use super::agent::{self, Action, Call, Turn};
use super::{Reply, Request, WireApi};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// OpenCode's shell tool.
pub const SHELL_TOOL: &str = "bash";
/// Markers of the system text memd's plugin adds.
const MEMD_MARKERS: [&str; 2] = ["KNOWN CONTEXT", agent::SCORE_OPEN];

#[derive(Default)]
pub struct ChatCompletions {
    ids: AtomicU64,
}

impl WireApi for ChatCompletions {
    fn reply(&self, req: &Request) -> Reply {
        match (req.method.as_str(), req.path()) {
            ("POST", "/v1/chat/completions") => self.respond(req),
            ("GET", "/v1/models") => Reply::Json {
                status: 200,
                body: json!({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}),
            },
            (_, path) => error(404, &format!("Invalid URL ({path})")),
        }
    }
}

fn error(status: u16, message: &str) -> Reply {
    Reply::Json {
        status,
        body: json!({"error": {"message": message, "type": "invalid_request_error"}}),
    }
}

impl ChatCompletions {
    fn respond(&self, req: &Request) -> Reply {
        let Some(messages) = req.body.get("messages").and_then(Value::as_array) else {
            return error(400, "Missing required parameter: 'messages'.");
        };
        if req.body.get("stream").and_then(Value::as_bool) != Some(true) {
            return error(400, "this stand-in only streams ('stream': true)");
        }
        let turn = read_turn(&req.body, messages);
        let action = match agent::decide(&turn, SHELL_TOOL, None) {
            Action::Shell { .. } | Action::Call { .. } | Action::Load { .. }
                if turn.tools.is_empty() =>
            {
                Action::Say("Done.".into())
            }
            other => other,
        };
        let n = self.ids.fetch_add(1, Ordering::SeqCst);
        let chunk = |delta: Value, finish: Value| {
            (
                String::new(),
                json!({"id": format!("chatcmpl-fake{n}"), "object": "chat.completion.chunk",
                    "created": 1_790_000_000u64, "model": "fake-model",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
            )
        };
        let (delta, finish) = match action {
            Action::Say(text) | Action::Load { tool: text } => {
                (json!({"role": "assistant", "content": text}), "stop")
            }
            Action::Call { name, input } => (tool_call(n, &name, &input), "tool_calls"),
            Action::Shell { command } => (
                tool_call(
                    n,
                    SHELL_TOOL,
                    &json!({"command": command, "description": "run the requested command"}),
                ),
                "tool_calls",
            ),
        };
        let usage_in = super::anthropic::estimate_tokens(req.body_bytes);
        let mut last = chunk(json!({}), json!(finish));
        last.1["usage"] = json!({"prompt_tokens": usage_in, "completion_tokens": 10,
            "total_tokens": usage_in + 10});
        Reply::Sse {
            events: vec![chunk(delta, Value::Null), last],
        }
    }
}

fn tool_call(n: u64, name: &str, input: &Value) -> Value {
    json!({"role": "assistant", "tool_calls": [{"index": 0, "id": format!("call_fake{n}"),
        "type": "function", "function": {"name": name, "arguments": input.to_string()}}]})
}

/// A message's text, whether `content` is a string or a list of parts.
fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

pub fn read_turn(body: &Value, messages: &[Value]) -> Turn {
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    let mut turn = Turn {
        tools,
        ..Turn::default()
    };
    let start = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    for m in &messages[start..] {
        match m["role"].as_str() {
            Some("user") => {
                turn.text.push_str(&content_text(m));
                turn.text.push('\n');
            }
            Some("assistant") => {
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    turn.calls.push(Call {
                        name: c["function"]["name"].as_str().unwrap_or("").to_string(),
                        input: serde_json::from_str(
                            c["function"]["arguments"].as_str().unwrap_or("{}"),
                        )
                        .unwrap_or(Value::Null),
                        result: None,
                    });
                }
            }
            Some("tool") => {
                let output = content_text(m);
                turn.text.push_str(&output);
                turn.text.push('\n');
                if let Some(call) = turn.calls.iter_mut().find(|c| c.result.is_none()) {
                    call.result = Some(output);
                }
            }
            _ => {}
        }
    }
    // memd's system text after the turn's own: the prompt's command is found first.
    for m in messages.iter().filter(|m| m["role"] == "system") {
        let text = content_text(m);
        if MEMD_MARKERS.iter().any(|k| text.contains(k)) {
            turn.text.push_str(&text);
            turn.text.push('\n');
        }
    }
    turn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memd_system_text_joins_the_turn_and_opencodes_own_does_not() {
        let body = json!({"tools": [{"type": "function", "function": {"name": "bash"}},
            {"type": "function", "function": {"name": "memd_score_response"}}]});
        let messages = vec![
            json!({"role": "system", "content": "You are opencode. Example: run `npm test`."}),
            json!({"role": "system", "content": "<memd-score-required>\"m_1\": \"___\"</memd-score-required>"}),
            json!({"role": "user", "content": "Thanks"}),
        ];
        let turn = read_turn(&body, &messages);
        assert!(turn.text.contains("memd-score-required"));
        assert!(!turn.text.contains("npm test"));
        let Action::Call { name, .. } = agent::decide(&turn, SHELL_TOOL, None) else {
            panic!("expected the score call")
        };
        assert_eq!(name, "memd_score_response");
    }
}
