//! The scripted agent every fake model plays, whatever its wire format: a well-behaved coding
//! agent as memd expects one.
//!
//! Within one turn (everything after the user's latest message) it does, in order and once
//! each: load memd's scoring tool if the client defers it (Claude Code's `ToolSearch`), call it
//! when the turn carries memd's scoring request (`<memd-score-required>`: every listed id
//! "worked"), run the command the prompt names in backticks after "run" (e.g.
//! ``run `ls` ``), then answer in text, quoting the last tool result. It never invents a call
//! the request does not offer a tool for. Must stay free of any wire format: the API modules
//! translate [`Turn`] in and [`Action`] out.

use serde_json::{Value, json};

/// memd's scoring request markers (the engine's `context::format`).
pub const SCORE_OPEN: &str = "<memd-score-required>";
pub const SCORE_CLOSE: &str = "</memd-score-required>";
/// The suffix of memd's scoring tool under every client's naming (`mcp__memd__score_response`).
pub const SCORE_TOOL: &str = "score_response";

/// A tool call made earlier in the current turn, with its result when the client sent one.
#[derive(Debug, Clone)]
pub struct Call {
    pub name: String,
    pub input: Value,
    pub result: Option<String>,
}

/// The conversation as the agent needs it.
#[derive(Debug, Clone, Default)]
pub struct Turn {
    /// Every text the current turn carries (the prompt and what hooks added to it).
    pub text: String,
    /// Tool calls since the user's latest message.
    pub calls: Vec<Call>,
    /// Tools whose schemas the request carries.
    pub tools: Vec<String>,
    /// Tools the client says exist but must be loaded first (by `ToolSearch`).
    pub deferred: Vec<String>,
}

/// What the agent does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Say(String),
    /// Load deferred tools (Claude Code: `ToolSearch` with `select:<name>`).
    Load {
        tool: String,
    },
    /// Call a tool the request offers, by its full name.
    Call {
        name: String,
        input: Value,
    },
    /// Run a shell command with the client's shell tool.
    Shell {
        command: String,
    },
}

/// The full name of the first offered tool ending in `suffix`.
fn find<'a>(names: &'a [String], suffix: &str) -> Option<&'a String> {
    names.iter().find(|n| n.ends_with(suffix))
}

fn called(turn: &Turn, pred: impl Fn(&Call) -> bool) -> bool {
    turn.calls.iter().any(pred)
}

/// The next step of the script.
pub fn decide(turn: &Turn, shell_tool: &str, load_tool: Option<&str>) -> Action {
    if let Some(ids) = score_ids(&turn.text) {
        let scored = called(turn, |c| c.name.ends_with(SCORE_TOOL));
        if !scored {
            if let Some(name) = find(&turn.tools, SCORE_TOOL) {
                return Action::Call {
                    name: name.clone(),
                    input: score_arguments(&ids),
                };
            }
            let loaded = load_tool.is_some_and(|l| called(turn, |c| c.name == l));
            if let (Some(name), Some(_), false) =
                (find(&turn.deferred, SCORE_TOOL), load_tool, loaded)
            {
                return Action::Load { tool: name.clone() };
            }
        }
    }
    if let Some(command) = requested_command(&turn.text)
        && !called(turn, |c| c.name == shell_tool)
    {
        return Action::Shell { command };
    }
    let last = turn.calls.last().and_then(|c| c.result.clone());
    Action::Say(match last {
        Some(result) => format!("Done. The last tool said: {}", clip(&result, 400)),
        None => "Done: nothing needed a tool.".to_string(),
    })
}

/// The ids memd's scoring request lists (`Some(vec![])` for an exchange without memories).
pub fn score_ids(text: &str) -> Option<Vec<String>> {
    // The last complete block: instructions that merely name the marker do not count.
    let end = text.rfind(SCORE_CLOSE)?;
    let start = text[..end].rfind(SCORE_OPEN)?;
    let block = &text[start..end];
    // Ids sit in `"<id>": "___"` lines; the text may arrive JSON-escaped (`\"`).
    // Every piece but the last ends where an id's placeholder begins.
    let mut pieces: Vec<&str> = block.split("___").collect();
    pieces.pop();
    let ids = pieces
        .into_iter()
        .filter_map(|before| {
            let before = before.trim_end_matches(['"', '\\', ':', ' ']);
            let id: String = before
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            let id: String = id.chars().rev().collect();
            (!id.is_empty()).then_some(id)
        })
        .collect();
    Some(ids)
}

/// `score_response` arguments: the exchange and every listed memory worked.
pub fn score_arguments(ids: &[String]) -> Value {
    let scores: serde_json::Map<String, Value> =
        ids.iter().map(|id| (id.clone(), json!("worked"))).collect();
    json!({"outcome": "worked", "memory_scores": scores})
}

/// The command after "run" in backticks, if the prompt asks for one.
pub fn requested_command(text: &str) -> Option<String> {
    let at = text.find("run `")? + "run `".len();
    let rest = &text[at..];
    let end = rest.find('`')?;
    Some(rest[..end].to_string()).filter(|c| !c.trim().is_empty())
}

fn clip(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(text: &str) -> Turn {
        Turn {
            text: text.into(),
            tools: vec!["Bash".into(), "ToolSearch".into()],
            deferred: vec!["mcp__memd__score_response".into()],
            ..Turn::default()
        }
    }

    #[test]
    fn scoring_ids_are_read_plain_and_escaped() {
        let block = "<memd-score-required>\nCall score_response(\n    memory_scores={\n        \"working_ab12\": \"___\",\n        \"patterns_cd\": \"___\"\n    }\n)</memd-score-required>";
        assert_eq!(
            score_ids(block).unwrap(),
            vec!["working_ab12".to_string(), "patterns_cd".to_string()]
        );
        let escaped = serde_json::to_string(block).unwrap();
        assert_eq!(score_ids(&escaped).unwrap().len(), 2);
        assert_eq!(score_ids("no block"), None);
        assert_eq!(
            score_ids("call it when a <memd-score-required> block appears"),
            None
        );
    }

    #[test]
    fn a_deferred_scoring_tool_is_loaded_then_called_then_the_command_runs() {
        let mut t = turn("<memd-score-required>\"m_1\": \"___\"</memd-score-required> run `ls /`");
        assert_eq!(
            decide(&t, "Bash", Some("ToolSearch")),
            Action::Load {
                tool: "mcp__memd__score_response".into()
            }
        );
        t.calls.push(Call {
            name: "ToolSearch".into(),
            input: json!({}),
            result: Some("loaded".into()),
        });
        t.tools.push("mcp__memd__score_response".into());
        let Action::Call { name, input } = decide(&t, "Bash", Some("ToolSearch")) else {
            panic!("expected the score call")
        };
        assert_eq!(name, "mcp__memd__score_response");
        assert_eq!(input["memory_scores"]["m_1"], "worked");
        t.calls.push(Call {
            name,
            input,
            result: Some("scored".into()),
        });
        assert_eq!(
            decide(&t, "Bash", Some("ToolSearch")),
            Action::Shell {
                command: "ls /".into()
            }
        );
        t.calls.push(Call {
            name: "Bash".into(),
            input: json!({}),
            result: Some("denied: memd guard".into()),
        });
        let Action::Say(text) = decide(&t, "Bash", Some("ToolSearch")) else {
            panic!("expected the answer")
        };
        assert!(text.contains("denied: memd guard"));
    }
}
