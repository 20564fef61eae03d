//! Tool events: the guard before a tool runs, the evidence after it ran.
//!
//! Owns the pre-tool decision (the static rules of `memd-guard` at the levels of `[guards]`,
//! then the learned guardrails: a memory of this project (or a global one) that explicitly
//! forbids this command line makes the guard ask, citing it; see `guardrail`) and recording what tools did. Every decision and
//! every tool result goes in the trace ledger as a digest (and, with `[evidence]` on, to the
//! in-memory `evidence`). Must never store a command, a path or a tool's output in clear,
//! never block a tool on a slow lookup (the learned check is a lexical search, no embedding),
//! and never let a memory that was scored wrong guard anything.

use crate::command::{signatures, tokens};
use crate::config::Config;
use crate::error::{ApiError, check_len};
use crate::ops::evidence::Evidence;
use crate::ops::guardrail;
use crate::ops::registry::Registry;
use crate::record::Record;
use crate::scope::ProjectCache;
use crate::search::{self, Query, Ranking};
use crate::state::Db;
use crate::trace::Trace;
use crate::trace::TraceEntry;
use crate::{learn, redact, scope};
use memd_guard::{Action, Level};
use proto::{
    Collection, PostToolRequest, PostToolResponse, PreToolRequest, PreToolResponse, ToolCall,
    ToolKind, limits,
};

/// Memories a learned-guardrail lookup looks at (the lexical index's best).
const LEARNED_CANDIDATES: usize = 20;
/// Commands longer than the guard reads (`memd_guard::MAX_INPUT`) are asked about whole.
const TOO_LONG: &str = "too_long";

/// What the tool hooks read: the `[guards]` and `[evidence]` settings, the state (learned
/// guardrails), the ledger, the evidence, the project cache.
pub struct Tools<'a> {
    pub cfg: &'a Config,
    pub db: &'a Db,
    pub trace: &'a Trace,
    pub evidence: &'a Evidence,
    pub cache: &'a ProjectCache,
}

impl Tools<'_> {
    fn registry(&self) -> Registry<'_> {
        Registry {
            db: self.db,
            cache: self.cache,
        }
    }

    /// `POST /api/hooks/pre-tool`.
    pub async fn pre_tool(&self, req: &PreToolRequest) -> Result<PreToolResponse, ApiError> {
        let conv = check_tool_request(&req.conversation_id, &req.tool)?;
        if let Some(answer) = too_long(&req.tool) {
            self.record_decision(req, &conv, &answer);
            return Ok(answer);
        }
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
            // A directory memd cannot place must not cost the user's policy: global memories
            // still guard.
            let project = self
                .registry()
                .current_project("project_dir", req.project_dir.as_deref(), Some(&conv))
                .unwrap_or(None);
            if let Some((id, why)) = self.learned_guardrail(command, project.as_deref()) {
                answer = PreToolResponse {
                    decision: learned_level.as_str().to_string(),
                    rule: Some(crate::config::guards::LEARNED.to_string()),
                    reason: Some(why),
                    memory_id: Some(id),
                };
            }
        }
        self.record_decision(req, &conv, &answer);
        Ok(answer)
    }

    /// The ledger line of a decision on a guarded tool (other tools are not decided on).
    fn record_decision(&self, req: &PreToolRequest, conv: &str, answer: &PreToolResponse) {
        if action_of(&req.tool).is_none() {
            return;
        }
        self.trace.append(&TraceEntry::pre_tool(
            conv,
            &redact::scrub(&subject(&req.tool)).text,
            &answer.decision,
            answer.rule.as_deref(),
            answer.memory_id.as_deref(),
        ));
    }

    /// `POST /api/hooks/post-tool`: recorded in the ledger (as a digest) and, with
    /// `[evidence]` on, in the conversation's tool evidence (process memory).
    pub async fn post_tool(&self, req: &PostToolRequest) -> Result<PostToolResponse, ApiError> {
        let conv = check_tool_request(&req.conversation_id, &req.tool)?;
        // Only what can be evidence: commands and edits (reads and searches would flood the
        // ledger and push the hook lines out).
        if !matches!(req.tool.kind, ToolKind::Shell | ToolKind::Edit) {
            return Ok(PostToolResponse { recorded: false });
        }
        if self.cfg.evidence.tracking() {
            self.evidence.tool_result(&conv, &req.tool, req.failed);
        }
        self.trace.append(&TraceEntry::post_tool(
            &conv,
            &redact::scrub(&subject(&req.tool)).text,
            kind_word(req.tool.kind),
            req.failed,
            req.exit_code,
        ));
        Ok(PostToolResponse { recorded: true })
    }

    /// The memory (id, the guard's sentence) that forbids `command`, among the ones visible
    /// from `project`; `None` when no memory does. A teammate's memory (from the shared store,
    /// another role's) counts only with `[guards] learned_from_teammates = true`.
    fn learned_guardrail(&self, command: &str, project: Option<&str>) -> Option<(String, String)> {
        let signatures = signatures(command);
        if signatures.is_empty() {
            return None;
        }
        // Curated memories only: raw exchanges hold debugging chatter, not warnings.
        let q = Query {
            collections: Some(vec![Collection::MemoryBank, Collection::Patterns]),
            visibility: scope::Visibility::of_current(project),
            limit: LEARNED_CANDIDATES,
            ..Query::default()
        };
        let ranking = Ranking::of(&self.cfg.learning);
        let text = signatures.join(" ");
        let teammates = self.cfg.guards.learned_from_teammates;
        self.db.read(|s| {
            let own_role = s.sync().role.clone();
            search::rank(s, &q, &text, None, &ranking, LEARNED_CANDIDATES)
                .into_iter()
                .filter_map(|hit| s.by_key(hit.key))
                .filter(|r| still_trusted(r))
                .filter(|r| teammates || !is_teammates(r, own_role.as_deref()))
                .find_map(|r| {
                    let rules = guardrail::forbidden(&r.content);
                    let rule = signatures.iter().find_map(|sig| {
                        let sig = tokens(sig);
                        rules.iter().find(|f| f.matches(&sig, command))
                    })?;
                    Some((r.id.clone(), reason(r, &rule.shown())))
                })
        })
    }
}

/// What the user reads: which memory asked, what it says, and how to stop it asking.
fn reason(r: &Record, shown: &str) -> String {
    let whose = match &r.origin {
        // A database role, shown with anything but letters, digits, `_`, `-` and `.` left out.
        Some(o) => format!(
            ", shared by {}",
            o.owner
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || "_-.".contains(*c))
                .take(63)
                .collect::<String>()
        ),
        None => String::new(),
    };
    format!(
        "memory {id}{whose} forbids `{shown}`: \u{201c}{}\u{201d}. To stop it asking, archive \
         {id} (dashboard, or the archive_memory tool) or set learned = \"off\" under [guards]",
        one_line(&r.content),
        id = r.id,
    )
}

/// A memory from the shared store that another role (a teammate) wrote; the user's own from
/// another machine is not.
fn is_teammates(r: &Record, own_role: Option<&str>) -> bool {
    r.origin
        .as_ref()
        .is_some_and(|o| own_role != Some(o.owner.as_str()))
}

/// A memory that still holds: not archived and not disputed (scored wrong three times since it
/// last worked). One failed turn does not disarm a guard: every memory shown in a turn shares
/// the turn's outcome, so a single `failed` says little about the warning itself.
fn still_trusted(r: &Record) -> bool {
    !r.archived && !learn::scoring::disputed(r)
}

/// A command longer than the guard reads cannot be vouched for: ask.
fn too_long(tool: &ToolCall) -> Option<PreToolResponse> {
    let command = tool
        .command
        .as_deref()
        .filter(|_| tool.kind == ToolKind::Shell)?;
    (command.len() > memd_guard::MAX_INPUT).then(|| PreToolResponse {
        decision: "ask".into(),
        rule: Some(TOO_LONG.into()),
        reason: Some(format!(
            "the command is {} KiB, longer than the {} KiB the guard reads",
            command.len() / 1024,
            memd_guard::MAX_INPUT / 1024
        )),
        memory_id: None,
    })
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

/// Checks a tool request; returns its conversation id as memd keeps it.
fn check_tool_request<'a>(
    conversation_id: &'a str,
    tool: &ToolCall,
) -> Result<std::borrow::Cow<'a, str>, ApiError> {
    let conv = crate::ops::context::validate_conversation(conversation_id)?;
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
    Ok(conv)
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
}
