//! The OpenAI Responses API as Codex CLI calls it: `POST /v1/responses` streamed as SSE
//! (`response.created`, `response.output_item.added` / `.done`, `response.completed`), errors
//! as `{"error":{"message","type","param","code"}}`.
//!
//! Owns reading the request's `input` items into the agent's [`Turn`] (the current turn starts
//! after the latest assistant item the user answered) and writing the agent's action back as a
//! `message` or `function_call` item. Codex offers no deferred tools, so nothing is loaded.
//! Must never depend on anything but the request it answers.

use super::agent::{self, Action, Call, Turn};
use super::{Reply, Request, WireApi};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// Between a namespace and a tool's name in the agent's view (`mcp__memd::score_response`);
/// on the wire they are the call's `namespace` and `name`.
const NS: &str = "::";
/// Codex's shell tools, newest first, with how each takes the command.
const SHELL_TOOLS: [&str; 3] = ["exec_command", "shell_command", "shell"];

#[derive(Default)]
pub struct Responses {
    ids: AtomicU64,
}

impl WireApi for Responses {
    fn reply(&self, req: &Request) -> Reply {
        match (req.method.as_str(), req.path()) {
            ("POST", "/v1/responses") => self.respond(req),
            (_, path) => error(
                404,
                "invalid_request_error",
                &format!("Invalid URL ({path})"),
            ),
        }
    }
}

fn error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::Json {
        status,
        body: json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
    }
}

impl Responses {
    fn respond(&self, req: &Request) -> Reply {
        let Some(input) = req.body.get("input").and_then(Value::as_array) else {
            return error(
                400,
                "invalid_request_error",
                "Missing required parameter: 'input'.",
            );
        };
        if req.body.get("stream").and_then(Value::as_bool) != Some(true) {
            return error(
                400,
                "invalid_request_error",
                "this stand-in only streams ('stream': true)",
            );
        }
        let turn = read_turn(&req.body, input);
        let shell = SHELL_TOOLS
            .into_iter()
            .find(|t| turn.tools.iter().any(|n| n == t))
            .unwrap_or(SHELL_TOOLS[0]);
        let action = agent::decide(&turn, shell, None);
        let n = self.ids.fetch_add(1, Ordering::SeqCst);
        let item = item_for(action, shell, n);
        let id = format!("resp_fake{n}");
        let usage_in = super::anthropic::estimate_tokens(req.body_bytes);
        let events = vec![
            json!({"type": "response.created", "response": {"id": id, "status": "in_progress"}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            json!({"type": "response.completed", "response": {"id": id, "status": "completed",
                "usage": {"input_tokens": usage_in, "input_tokens_details": null,
                    "output_tokens": 10, "output_tokens_details": null,
                    "total_tokens": usage_in + 10}}}),
        ];
        Reply::Sse {
            events: events
                .into_iter()
                .map(|e| (e["type"].as_str().unwrap_or("").to_string(), e))
                .collect(),
        }
    }
}

fn item_for(action: Action, shell: &str, n: u64) -> Value {
    let call = |name: &str, arguments: Value| {
        let mut item = json!({"type": "function_call", "id": format!("fc_fake{n}"),
            "call_id": format!("call_fake{n}"), "arguments": arguments.to_string(),
            "status": "completed"});
        match name.split_once(NS) {
            Some((namespace, tool)) => {
                item["namespace"] = namespace.into();
                item["name"] = tool.into();
            }
            None => item["name"] = name.into(),
        }
        item
    };
    match action {
        Action::Say(text) | Action::Load { tool: text } => json!({"type": "message",
            "id": format!("msg_fake{n}"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
        Action::Call { name, input } => call(&name, input),
        Action::Shell { command } => call(
            shell,
            match shell {
                "exec_command" => json!({"cmd": command}),
                "shell_command" => json!({"command": command}),
                _ => json!({"command": ["bash", "-lc", command]}),
            },
        ),
    }
}

/// Text of a message item's content parts.
fn message_text(item: &Value) -> String {
    match &item["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// An output item of an earlier answer, or a fresh user message.
fn is_model_item(item: &Value) -> bool {
    item["role"] == "assistant" || item["type"] == "function_call" || item["type"] == "reasoning"
}

fn turn_start(input: &[Value]) -> usize {
    let fresh_prompt = |i: &Value| i["type"] == "message" && i["role"] == "user";
    (0..input.len())
        .rev()
        .find(|&i| is_model_item(&input[i]) && input.get(i + 1).is_some_and(fresh_prompt))
        .map_or(0, |i| i + 1)
}

/// Tool names the request offers; a namespace's tools as `<namespace>::<tool>`.
fn tool_names(tools: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for t in tools {
        let name = t["name"].as_str().unwrap_or("");
        match t["type"].as_str() {
            Some("namespace") => {
                for inner in t["tools"].as_array().into_iter().flatten() {
                    out.push(format!(
                        "{name}{NS}{}",
                        inner["name"].as_str().unwrap_or("")
                    ));
                }
            }
            _ if !name.is_empty() => out.push(name.to_string()),
            _ => {}
        }
    }
    out
}

pub fn read_turn(body: &Value, input: &[Value]) -> Turn {
    let mut turn = Turn {
        tools: tool_names(body["tools"].as_array().map_or(&[][..], |t| t)),
        ..Turn::default()
    };
    for item in &input[turn_start(input)..] {
        match item["type"].as_str() {
            Some("message") => {
                turn.text.push_str(&message_text(item));
                turn.text.push('\n');
            }
            Some("function_call") => turn.calls.push(Call {
                name: match item["namespace"].as_str() {
                    Some(ns) => format!("{ns}{NS}{}", item["name"].as_str().unwrap_or("")),
                    None => item["name"].as_str().unwrap_or("").to_string(),
                },
                input: serde_json::from_str(item["arguments"].as_str().unwrap_or("{}"))
                    .unwrap_or(Value::Null),
                result: None,
            }),
            Some("function_call_output") => {
                let output = match &item["output"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                turn.text.push_str(&output);
                if let Some(call) = turn.calls.iter_mut().rev().find(|c| c.result.is_none()) {
                    call.result = Some(output);
                }
            }
            _ => {}
        }
    }
    turn
}
