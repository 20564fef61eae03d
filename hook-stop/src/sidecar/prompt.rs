//! The scoring prompt sent to the sidecar model.
//!
//! It shows the previous exchange, the user's follow-up (the signal the outcome is judged from)
//! and the memories that were injected, and asks for one JSON object. This module must never put
//! anything but the exchange, the follow-up and memory ids/contents into the prompt (no paths,
//! tokens or configuration), and must keep each text bounded.

use proto::SidecarData;

/// Each side of the exchange, and the follow-up, is cut to this many characters.
pub const MAX_EXCHANGE_CHARS: usize = 8000;
/// Each memory's content is cut to this many characters.
pub const MAX_MEMORY_CHARS: usize = 1000;

const SYSTEM: &str = "You grade conversations for memd, a memory system for AI coding assistants. \
Reply with exactly one JSON object and nothing else: no prose, no code fences.";

/// `(system, user)` messages for scoring `data`.
pub fn messages(data: &SidecarData) -> (String, String) {
    (SYSTEM.to_string(), user_message(data))
}

fn user_message(data: &SidecarData) -> String {
    let mut text = String::with_capacity(4096);
    text.push_str(
        "Judge how the previous exchange between a user and an AI coding assistant went, \
using the user's follow-up message as the evidence.\n\n",
    );
    text.push_str("<previous_exchange>\nUSER:\n");
    text.push_str(cut(&data.exchange.user, MAX_EXCHANGE_CHARS));
    text.push_str("\n\nASSISTANT:\n");
    text.push_str(cut(&data.exchange.assistant, MAX_EXCHANGE_CHARS));
    text.push_str("\n</previous_exchange>\n\n<follow_up>\n");
    text.push_str(cut(&data.current_user_message, MAX_EXCHANGE_CHARS));
    text.push_str("\n</follow_up>\n\n");
    if !data.memories.is_empty() {
        text.push_str(
            "<memories>\nStored memories the assistant was shown before answering. Score each \
one; do not repeat their content in the summary.\n",
        );
        for memory in &data.memories {
            text.push_str(&format!(
                "- {}: {}\n",
                memory.id,
                serde_json::Value::from(cut(&memory.content, MAX_MEMORY_CHARS))
            ));
        }
        text.push_str("</memories>\n\n");
    }
    text.push_str(RULES);
    text
}

const RULES: &str = "exchange_outcome, judged from the follow-up:
- worked: the user confirmed it, was satisfied, or moved on to something else
- failed: the user corrected the assistant, was frustrated, or asked for a redo
- partial: it helped but was incomplete or needed adjusting
- unknown: no clear signal either way

memory_scores, one entry per memory id listed above:
- failed: only if the memory misled the answer (the answer relied on it and the exchange failed)
- worked: the answer used the memory and the exchange worked
- partial: the answer used the memory and the exchange partly worked
- unknown: the memory was not used, was off topic, or you are not sure

exchange_summary: at most 300 characters saying what was asked and what changed.

Answer with ONLY this JSON object:
{\"exchange_outcome\": \"worked|failed|partial|unknown\", \"memory_scores\": {\"<id>\": \"<outcome>\"}, \"exchange_summary\": \"<at most 300 characters>\"}";

fn cut(text: &str, max: usize) -> &str {
    hookrt::log::truncate_chars(text, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::{ExchangeText, SidecarMemory};

    fn data() -> SidecarData {
        SidecarData {
            conversation_id: "conv-1".into(),
            exchange: ExchangeText {
                user: "u".repeat(9000),
                assistant: "Set the cost to 12.".into(),
            },
            memories: vec![SidecarMemory {
                id: "patterns_a1".into(),
                content: "bcrypt \"cost\" must match stored hashes".into(),
            }],
            current_user_message: "thanks, works".into(),
            ..SidecarData::default()
        }
    }

    #[test]
    fn prompt_carries_exchange_follow_up_and_memories() {
        let (system, user) = messages(&data());
        assert!(system.contains("memd"));
        assert!(user.contains("ASSISTANT:\nSet the cost to 12."));
        assert!(user.contains("<follow_up>\nthanks, works\n</follow_up>"));
        assert!(user.contains(r#"- patterns_a1: "bcrypt \"cost\" must match stored hashes""#));
        assert!(user.contains("failed: only if the memory misled"));
        assert!(user.ends_with('}'));
    }

    #[test]
    fn exchange_text_is_cut_at_8000_chars() {
        let (_, user) = messages(&data());
        assert!(user.contains(&"u".repeat(MAX_EXCHANGE_CHARS)));
        assert!(!user.contains(&"u".repeat(MAX_EXCHANGE_CHARS + 1)));
    }

    #[test]
    fn no_memories_block_without_memories() {
        let mut d = data();
        d.memories.clear();
        assert!(!messages(&d).1.contains("<memories>"));
    }
}
