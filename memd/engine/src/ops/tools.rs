//! Tool events: the guard before a tool runs, the evidence after it ran.
//!
//! Owns the pre-tool decision (the static rules of `memd-guard` at the levels of `[guards]`,
//! then the learned guardrails: a memory of this project saying this command failed or broke
//! something makes the guard ask, citing it) and recording what tools did. Every decision and
//! every tool result goes in the trace ledger as a digest (and, with `[evidence]` on, to the
//! in-memory `evidence`). Must never store a command, a path or a tool's output in clear,
//! never block a tool on a slow lookup (the learned check is a lexical search, no embedding),
//! and never let a memory that was scored wrong guard anything.

use crate::command::{is_ubiquitous, signatures, tokens};
use crate::config::Config;
use crate::error::{ApiError, check_len};
use crate::ops::evidence::Evidence;
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
/// What makes a sentence a warning about a command: it forbids running it, or says running it
/// destroyed something. Plain "failed" or "error" is not enough ("cargo test failed on CI" is
/// a fact about a test, not a reason to ask before every test run).
const PROHIBITIONS: [&str; 7] = [
    "never run",
    "don't run",
    "do not run",
    "must not run",
    "avoid running",
    "never use",
    "do not use",
];
const DESTROYED: [&str; 12] = [
    "wiped",
    "deleted",
    "destroyed",
    "corrupted",
    "lost",
    "dropped",
    "erased",
    "overwrote",
    "overwritten",
    "broke",
    "bricked",
    "took down",
];
/// Words that turn a sentence around ("never breaks anything", "is safe").
const REASSURANCES: [&str; 5] = ["is safe", "are safe", "never breaks", "harmless", "no harm"];
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

    /// The memory (id, the guard's sentence) that says `command` went wrong before, among the
    /// ones visible from `project`; `None` when no memory does.
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
        self.db.read(|s| {
            search::rank(s, &q, &text, None, &ranking, LEARNED_CANDIDATES)
                .into_iter()
                .filter_map(|hit| s.by_key(hit.key))
                .filter(|r| still_trusted(r))
                .find_map(|r| {
                    let sig = signatures.iter().find(|sig| warns_about(&r.content, sig))?;
                    Some((
                        r.id.clone(),
                        format!(
                            "a memory warns about `{sig}`: \u{201c}{}\u{201d} ({})",
                            one_line(&r.content),
                            r.id
                        ),
                    ))
                })
        })
    }
}

/// A memory that still holds: not archived and not disputed (scored wrong three times since it
/// last worked). One failed turn does not disarm a guard: every memory shown in a turn shares
/// the turn's outcome, so a single `failed` says little about the warning itself.
fn still_trusted(r: &Record) -> bool {
    !r.archived && !learn::scoring::disputed(r)
}

/// Whether one sentence of `content` names `signature` (as whole words) and forbids it or says
/// it destroyed something, without reassuring in the same breath. A one-word signature counts
/// only for a program that is not everywhere (`cd` or `git` alone guard nothing).
pub fn warns_about(content: &str, signature: &str) -> bool {
    let sig: Vec<String> = tokens(signature);
    if sig.is_empty() || (sig.len() == 1 && is_ubiquitous(&sig[0])) {
        return false;
    }
    content
        .split(['.', '!', '?', '\n', ';'])
        .map(str::to_lowercase)
        .any(|sentence| {
            let words = tokens(&sentence);
            let named = words.windows(sig.len()).any(|w| w == sig.as_slice());
            let warns = PROHIBITIONS.iter().any(|p| sentence.contains(p))
                || DESTROYED.iter().any(|d| {
                    if d.contains(' ') {
                        sentence.contains(d)
                    } else {
                        words.iter().any(|w| w == d)
                    }
                });
            named && warns && !REASSURANCES.iter().any(|r| sentence.contains(r))
        })
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

    #[test]
    fn a_warning_names_the_command_and_forbids_it_or_reports_damage() {
        let memory = "Running cargo clean wiped the prebuilt ONNX runtime; rebuild took 40 min.";
        assert!(warns_about(memory, "cargo clean"));
        assert!(warns_about(
            "Never run npm run db:reset outside docker",
            "npm run db:reset"
        ));
        assert!(!warns_about(
            "We use cargo clean sometimes. It wiped nothing.",
            "cargo cleanup"
        ));
        assert!(!warns_about(
            "We use cargo clean sometimes. The cache was wiped.",
            "cargo clean"
        ));
        // What the first version got wrong: plain failures, substrings, common programs.
        assert!(!warns_about(
            "cargo test failed on CI because of flaky network",
            "cargo test"
        ));
        assert!(!warns_about(
            "The CI/CD pipeline failed and broke the deploy",
            "cd"
        ));
        assert!(!warns_about("git push changes the remote", "git push"));
        assert!(!warns_about(
            "git status is safe, it never breaks anything",
            "git status"
        ));
        assert!(!warns_about("the good path deleted nothing", "go"));
        assert!(!warns_about("the goal: it deleted the branch", "go"));
    }
}
