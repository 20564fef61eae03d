//! Tool events on `Core`: the guard before a tool runs, the evidence after it ran.
//!
//! Owns the pre-tool decision (the static rules of `memd-guard` at the levels of `[guards]`,
//! then the learned guardrails: a memory of this project saying this command failed or broke
//! something makes the guard ask, citing it) and recording what tools did. Every decision and
//! every tool result goes in the trace ledger as a digest. Must never store a command, a path
//! or a tool's output in clear, never block a tool on a slow lookup (the learned check is a
//! lexical search, no embedding), and never let a memory that was scored wrong guard anything.

use crate::core::Core;
use crate::error::{ApiError, check_len};
use crate::record::Record;
use crate::search::{self, Query};
use crate::trace::TraceEntry;
use crate::{learn, redact, scope};
use memd_guard::{Action, Level};
use proto::{
    Collection, Outcome, PostToolRequest, PostToolResponse, PreToolRequest, PreToolResponse,
    ToolCall, ToolKind, limits,
};
use std::sync::Arc;

/// Memories a learned-guardrail lookup looks at (the lexical index's best).
const LEARNED_CANDIDATES: usize = 20;
/// Words that mark a sentence as a report of something going wrong. A memory guards a command
/// only when one sentence names the command and one of these.
const FAILURE_CUES: [&str; 16] = [
    "fail",
    "broke",
    "break",
    "crash",
    "corrupt",
    "wipe",
    "lost",
    "destroy",
    "deleted",
    "don't run",
    "do not run",
    "never run",
    "must not",
    "outage",
    "hang",
    "revert",
];

impl Core {
    /// `POST /api/hooks/pre-tool`.
    pub async fn pre_tool(
        self: &Arc<Self>,
        req: &PreToolRequest,
    ) -> Result<PreToolResponse, ApiError> {
        check_tool_request(&req.conversation_id, &req.tool)?;
        let static_verdict = match action_of(&req.tool) {
            Some(action) => memd_guard::assess(&action, &self.cfg.guards.policy()),
            None => memd_guard::Verdict {
                level: Level::Allow,
                rule: None,
                reason: String::new(),
            },
        };
        let mut answer = PreToolResponse {
            decision: static_verdict.level.as_str().to_string(),
            rule: static_verdict.rule.map(str::to_string),
            reason: (static_verdict.level != Level::Allow).then_some(static_verdict.reason),
            memory_id: None,
        };
        let learned_level = self.cfg.guards.learned();
        if static_verdict.level < learned_level
            && let Some(command) = req
                .tool
                .command
                .as_deref()
                .filter(|_| req.tool.kind == ToolKind::Shell)
        {
            let project = self.current_project("project_dir", req.project_dir.as_deref(), None)?;
            if let Some((id, why)) = self.learned_guardrail(command, project.as_deref()) {
                answer = PreToolResponse {
                    decision: learned_level.as_str().to_string(),
                    rule: Some(crate::guards_config::LEARNED.to_string()),
                    reason: Some(why),
                    memory_id: Some(id),
                };
            }
        }
        self.trace.append(&TraceEntry::pre_tool(
            req.conversation_id.trim(),
            &redact::scrub(&subject(&req.tool)).text,
            &answer.decision,
            answer.rule.as_deref(),
            answer.memory_id.as_deref(),
        ));
        Ok(answer)
    }

    /// `POST /api/hooks/post-tool`: recorded in the ledger (as a digest), nothing else yet.
    pub async fn post_tool(&self, req: &PostToolRequest) -> Result<PostToolResponse, ApiError> {
        check_tool_request(&req.conversation_id, &req.tool)?;
        self.trace.append(&TraceEntry::post_tool(
            req.conversation_id.trim(),
            &redact::scrub(&subject(&req.tool)).text,
            kind_word(req.tool.kind),
            req.failed,
            req.exit_code,
        ));
        Ok(PostToolResponse { recorded: true })
    }

    /// The memory (id, the guard's sentence) that says `command` went wrong before, among the
    /// ones visible from `project`; `None` when no memory does.
    fn learned_guardrail(&self, command: &str, project: Option<&str>) -> Option<(String, String)> {
        let signatures = signatures(command);
        if signatures.is_empty() {
            return None;
        }
        let q = Query {
            collections: Some(vec![
                Collection::MemoryBank,
                Collection::Patterns,
                Collection::History,
                Collection::Working,
            ]),
            visibility: scope::Visibility::of_current(project),
            limit: LEARNED_CANDIDATES,
            ..Query::default()
        };
        let ranking = self.ranking();
        let text = signatures.join(" ");
        self.store.read(|s| {
            search::rank(s, &q, &text, None, &ranking, LEARNED_CANDIDATES)
                .into_iter()
                .filter_map(|hit| s.by_key(hit.key))
                .filter(|r| still_trusted(r))
                .find_map(|r| {
                    let sig = signatures.iter().find(|sig| warns_about(&r.content, sig))?;
                    Some((
                        r.id.clone(),
                        format!(
                            "a memory says `{sig}` went wrong here before: \u{201c}{}\u{201d} ({}). \
                             If it no longer holds, score it wrong and this guard goes with it.",
                            one_line(&r.content),
                            r.id
                        ),
                    ))
                })
        })
    }
}

/// A memory the agent can still rely on: not archived, not disputed, and not scored wrong the
/// last time it was used (a guard whose memory was refuted must not keep asking).
fn still_trusted(r: &Record) -> bool {
    !r.archived && !learn::scoring::disputed(r) && r.last_outcome != Some(Outcome::Failed)
}

/// Whether one sentence of `content` names `signature` and reports something going wrong.
pub fn warns_about(content: &str, signature: &str) -> bool {
    let signature = signature.to_lowercase();
    content
        .split(['.', '!', '?', '\n', ';'])
        .map(str::to_lowercase)
        .any(|sentence| {
            sentence.contains(&signature) && FAILURE_CUES.iter().any(|cue| sentence.contains(cue))
        })
}

/// The commands a shell line runs, as `program subcommand` (`cargo clean`, `git push`) or the
/// program alone: what a memory would name. Parsed by `memd-guard` (the guard's own reading of
/// the line: wrappers, `sh -c`, pipelines and subshells included).
pub fn signatures(command: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in memd_guard::commands(command) {
        let program = c.program.as_str();
        if program.is_empty() || !is_name(program) {
            continue;
        }
        let mut operands = c
            .args
            .iter()
            .map(String::as_str)
            .filter(|w| !w.starts_with('-'))
            .take_while(|w| is_name(w));
        let sig = match operands.next() {
            // `npm run build` and `npm run db:reset` are different commands: a script runner's
            // script is part of what the command is.
            Some(sub) if RUNNERS.contains(&(program, sub)) => match operands.next() {
                Some(script) => format!("{program} {sub} {script}"),
                None => format!("{program} {sub}"),
            },
            Some(sub) => format!("{program} {sub}"),
            None => program.to_string(),
        };
        if !out.contains(&sig) {
            out.push(sig);
        }
    }
    out
}

/// Program and verb pairs whose next word names what runs (a package script, a task).
const RUNNERS: [(&str, &str); 6] = [
    ("npm", "run"),
    ("pnpm", "run"),
    ("yarn", "run"),
    ("bun", "run"),
    ("npm", "exec"),
    ("cargo", "run"),
];

/// A word that can be a subcommand or a script name (`clean`, `db:reset`, `build.prod`).
fn is_name(w: &str) -> bool {
    !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_:.".contains(c))
}

fn action_of(tool: &ToolCall) -> Option<Action<'_>> {
    match (tool.kind, &tool.command, &tool.path, &tool.server) {
        (ToolKind::Shell, Some(command), _, _) => Some(Action::Shell { command }),
        (ToolKind::Read, _, Some(path), _) => Some(Action::ReadFile { path }),
        (ToolKind::Mcp, _, _, Some(server)) => Some(Action::Mcp {
            server,
            tool: &tool.name,
        }),
        _ => None,
    }
}

/// What a tool call is about, for the ledger's digest.
fn subject(tool: &ToolCall) -> String {
    tool.command
        .clone()
        .or_else(|| tool.path.clone())
        .unwrap_or_else(|| format!("{} {}", tool.server.as_deref().unwrap_or(""), tool.name))
}

fn kind_word(kind: ToolKind) -> &'static str {
    match kind {
        ToolKind::Shell => "shell",
        ToolKind::Read => "read",
        ToolKind::Edit => "edit",
        ToolKind::Mcp => "mcp",
        ToolKind::Other => "other",
    }
}

fn one_line(content: &str) -> String {
    let flat = content.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

fn check_tool_request(conversation_id: &str, tool: &ToolCall) -> Result<(), ApiError> {
    if conversation_id.trim().is_empty() {
        return Err(ApiError::bad(
            "conversation_id",
            "conversation_id must not be empty",
        ));
    }
    check_len("conversation_id", conversation_id, limits::ID_MAX_CHARS)?;
    check_len("tool.name", &tool.name, limits::ID_MAX_CHARS)?;
    if let Some(c) = &tool.command {
        check_len("tool.command", c, limits::COMMAND_MAX_CHARS)?;
    }
    if let Some(p) = &tool.path {
        check_len("tool.path", p, limits::DIR_MAX_CHARS)?;
    }
    if let Some(s) = &tool.server {
        check_len("tool.server", s, limits::ID_MAX_CHARS)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_name_program_and_subcommand_past_wrappers() {
        assert_eq!(signatures("cargo clean"), ["cargo clean"]);
        assert_eq!(
            signatures("sudo -E env FOO=1 /usr/bin/git push --force origin main && make"),
            ["git push", "make"]
        );
        assert_eq!(signatures("ls -la ./src"), ["ls"]);
        assert_eq!(
            signatures("npm run db:reset -- --force"),
            ["npm run db:reset"]
        );
        assert_eq!(signatures("yarn db:reset"), ["yarn db:reset"]);
        assert!(signatures("").is_empty());
    }

    #[test]
    fn a_warning_needs_the_command_and_a_failure_in_one_sentence() {
        let memory = "Running cargo clean wiped the prebuilt ONNX runtime; rebuild took 40 min.";
        assert!(warns_about(memory, "cargo clean"));
        assert!(!warns_about(
            "We use cargo clean sometimes. The CI failed.",
            "cargo clean"
        ));
        assert!(!warns_about("cargo clean is fine", "cargo clean"));
    }
}
