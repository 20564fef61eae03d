//! The Gemini API as Gemini CLI calls it through `GOOGLE_GEMINI_BASE_URL`:
//! `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` (SSE `data:` chunks of
//! `GenerateContentResponse`), `:generateContent` for its own helper requests (JSON, often
//! with a `responseSchema` the answer must fit) and `:countTokens`; errors as
//! `{"error":{"code","message","status"}}`.
//!
//! Owns reading `contents` into the agent's [`Turn`] (the turn starts at the latest user
//! content that carries text, where `BeforeAgent` context is appended, HTML-escaped) and writing the agent's
//! action back as a `text` or `functionCall` part. Must never depend on anything but the
//! request it answers.

use super::agent::{self, Action, Call, Turn};
use super::{Reply, Request, WireApi};
use serde_json::{Map, Value, json};

/// Gemini CLI's shell tool.
pub const SHELL_TOOL: &str = "run_shell_command";

#[derive(Default)]
pub struct Gemini;

impl WireApi for Gemini {
    fn reply(&self, req: &Request) -> Reply {
        let path = req.path();
        let method = path.rsplit_once(':').map(|(_, m)| m).unwrap_or("");
        match (req.method.as_str(), method) {
            ("POST", "streamGenerateContent") => stream(req),
            ("POST", "generateContent") => Reply::Json {
                status: 200,
                body: answer(req),
            },
            ("POST", "countTokens") => Reply::Json {
                status: 200,
                body: json!({"totalTokens": super::anthropic::estimate_tokens(req.body_bytes)}),
            },
            _ => Reply::Json {
                status: 404,
                body: json!({"error": {"code": 404, "message": format!("no route {path}"),
                    "status": "NOT_FOUND"}}),
            },
        }
    }
}

fn stream(req: &Request) -> Reply {
    Reply::Sse {
        events: vec![(String::new(), answer(req))],
    }
}

/// One `GenerateContentResponse`: the agent's step, or JSON fitting the requested schema.
fn answer(req: &Request) -> Value {
    let config = &req.body["generationConfig"];
    let schema = config
        .get("responseJsonSchema")
        .or_else(|| config.get("responseSchema"));
    let part = match schema {
        Some(schema) => json!({"text": fill(schema).to_string()}),
        None => {
            let turn = read_turn(&req.body);
            match agent::decide(&turn, SHELL_TOOL, None) {
                Action::Say(text) | Action::Load { tool: text } => json!({"text": text}),
                Action::Call { name, input } if turn.tools.contains(&name) => {
                    json!({"functionCall": {"name": name, "args": input}})
                }
                Action::Shell { command } if turn.tools.iter().any(|t| t == SHELL_TOOL) => {
                    json!({"functionCall": {"name": SHELL_TOOL, "args": {"command": command}}})
                }
                _ => json!({"text": "Done."}),
            }
        }
    };
    let tokens = super::anthropic::estimate_tokens(req.body_bytes);
    json!({"candidates": [{"content": {"role": "model", "parts": [part]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": tokens, "candidatesTokenCount": 10,
            "totalTokenCount": tokens + 10},
        "modelVersion": "fake-gemini"})
}

/// A value fitting a (JSON or OpenAPI-style) schema: the first enum value, "user" for a
/// speaker, empty text otherwise.
fn fill(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    let kind = schema["type"]
        .as_str()
        .unwrap_or("object")
        .to_ascii_lowercase();
    match kind.as_str() {
        "object" => {
            let mut out = Map::new();
            for (k, v) in schema["properties"].as_object().into_iter().flatten() {
                let value = match k.as_str() {
                    "next_speaker" => json!("user"),
                    _ => fill(v),
                };
                out.insert(k.clone(), value);
            }
            Value::Object(out)
        }
        "array" => json!([]),
        "boolean" => json!(false),
        "number" | "integer" => json!(0),
        _ => json!(""),
    }
}

fn part_texts(content: &Value) -> Vec<&str> {
    content["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

pub fn read_turn(body: &Value) -> Turn {
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| {
            t["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .collect();
    let mut turn = Turn {
        tools,
        ..Turn::default()
    };
    let contents = body["contents"].as_array().map_or(&[][..], |c| c);
    let start = contents
        .iter()
        .rposition(|c| c["role"] == "user" && !part_texts(c).is_empty())
        .unwrap_or(0);
    for c in &contents[start..] {
        for p in c["parts"].as_array().into_iter().flatten() {
            if let Some(text) = p["text"].as_str()
                && c["role"] == "user"
            {
                // Gemini CLI escapes `<` and `>` in hook context (`&lt;memd-score-required&gt;`);
                // a model reads the entities as the characters.
                let text = text
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&");
                turn.text.push_str(&text);
                turn.text.push('\n');
            }
            if let Some(call) = p.get("functionCall") {
                turn.calls.push(Call {
                    name: call["name"].as_str().unwrap_or("").to_string(),
                    input: call["args"].clone(),
                    result: None,
                });
            }
            if let Some(resp) = p.get("functionResponse") {
                let output = resp["response"].to_string();
                turn.text.push_str(&output);
                turn.text.push('\n');
                let name = resp["name"].as_str().unwrap_or("");
                if let Some(call) = turn
                    .calls
                    .iter_mut()
                    .find(|c| c.result.is_none() && c.name == name)
                {
                    call.result = Some(output);
                }
            }
        }
    }
    turn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_answers_fit_and_the_shell_is_called_once() {
        let next = json!({"type": "OBJECT", "properties": {"reasoning": {"type": "STRING"},
            "next_speaker": {"type": "STRING", "enum": ["user", "model"]}}});
        assert_eq!(
            fill(&next),
            json!({"reasoning": "", "next_speaker": "user"})
        );
        let body = json!({"tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}],
        "contents": [
            {"role": "user", "parts": [{"text": "run `ls /`"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "ls /"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"error": "memd guard: no"}}}]}
        ]});
        let turn = read_turn(&body);
        assert_eq!(turn.calls.len(), 1);
        let Action::Say(text) = agent::decide(&turn, SHELL_TOOL, None) else {
            panic!("expected the answer")
        };
        assert!(text.contains("memd guard"));
    }
}
