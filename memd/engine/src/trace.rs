//! The trace ledger: an append-only JSONL record of what the hooks did, per conversation.
//!
//! Owns `<data dir>/logs/trace.jsonl` (rotated to `trace.jsonl.1` at a size cap), the shape of
//! one line ([`TraceEntry`]) and reading lines back for `memd trace`. Each line says which hook
//! event ran for which conversation, which memory ids were injected or scored, the outcome, and
//! SHA-256 digests of the prompt and of the injected context, so a user can check afterwards
//! what memd put in front of the model without the ledger holding any of it.
//!
//! Must never: store prompt, response, memory or context text (only ids, outcome words and
//! digests; the digests are taken of the redacted text, so a guessed secret cannot be confirmed
//! against them), rewrite or reorder earlier lines, or fail a request: a ledger that cannot be
//! written (full disk, read-only logs dir) is skipped silently by [`Trace::append`].

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// File name of the live ledger inside the logs directory.
pub const TRACE_FILE: &str = "trace.jsonl";
/// The note of a get-context line written at a session start.
pub const SESSION_START: &str = "session_start";
/// Size at which the live ledger moves to `trace.jsonl.1` (the previous `.1` is dropped).
pub const DEFAULT_CAP_BYTES: u64 = 4 * 1024 * 1024;
/// Ids kept per list in one entry: a line stays small even if a caller passes many.
const MAX_IDS: usize = 100;
/// Longest id or word copied into a line (ids are at most 200 characters on the wire).
const MAX_FIELD_CHARS: usize = 200;

/// Which hook step an entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceEvent {
    /// `POST /api/hooks/get-context`: a prompt and the context injected for it.
    GetContext,
    /// `POST /api/hooks/stop`: a finished exchange stored.
    Stop,
    /// `POST /api/record-outcome`: an exchange and its memories scored.
    RecordOutcome,
    /// `POST /api/sidecar/report`: what a sidecar run did.
    Sidecar,
    /// `POST /api/hooks/pre-tool`: the guard's decision on a tool call.
    PreTool,
    /// `POST /api/hooks/post-tool`: what a tool did (ok, failed, exit code).
    PostTool,
}

impl TraceEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceEvent::GetContext => "get-context",
            TraceEvent::Stop => "stop",
            TraceEvent::RecordOutcome => "record-outcome",
            TraceEvent::Sidecar => "sidecar",
            TraceEvent::PreTool => "pre-tool",
            TraceEvent::PostTool => "post-tool",
        }
    }
}

/// One ledger line. Every text-derived field is a digest; the rest are ids and short words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceEntry {
    /// RFC 3339, UTC.
    pub ts: String,
    pub event: TraceEvent,
    pub conversation_id: String,
    /// Memory ids put in front of the model (get-context).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injected: Vec<String>,
    /// Memory ids whose scores changed (record-outcome).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scored: Vec<String>,
    /// `worked` | `failed` | `partial` | `unknown` (record-outcome, a successful sidecar run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The working-memory id of the stored exchange (stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc_id: Option<String>,
    /// `sha256:<hex>` of the redacted prompt (get-context) or user message (stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_sha256: Option<String>,
    /// `sha256:<hex>` of the injected context exactly as the hook received it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_sha256: Option<String>,
    /// A short machine word about the result: `needs_sidecar`, `already_scored`, `agent`,
    /// `sidecar`, `unscored`, `3_attempts`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl TraceEntry {
    pub(crate) fn new(event: TraceEvent, conversation_id: &str) -> TraceEntry {
        TraceEntry {
            ts: crate::clock::rfc3339(crate::clock::now_ms()),
            event,
            // Callers pass ids already made safe; this keeps any other caller from leaking one.
            conversation_id: clip(&crate::redact::safe_id(conversation_id)),
            injected: Vec::new(),
            scored: Vec::new(),
            outcome: None,
            doc_id: None,
            prompt_sha256: None,
            context_sha256: None,
            note: None,
        }
    }

    /// A prompt (already redacted) and the context injected for it; at a session start (no
    /// prompt: the client asked for context as a conversation opens) the note says
    /// [`SESSION_START`].
    pub fn get_context(
        conversation_id: &str,
        redacted_prompt: &str,
        injected: &[String],
        context: &str,
        session_start: bool,
    ) -> TraceEntry {
        TraceEntry {
            injected: ids(injected),
            prompt_sha256: Some(sha256_tag(redacted_prompt)),
            context_sha256: (!context.is_empty()).then(|| sha256_tag(context)),
            note: session_start.then(|| SESSION_START.to_string()),
            ..TraceEntry::new(TraceEvent::GetContext, conversation_id)
        }
    }

    /// A get-context line of a session start, not of a prompt.
    pub fn is_session_start(&self) -> bool {
        self.event == TraceEvent::GetContext && self.note.as_deref() == Some(SESSION_START)
    }

    /// A stored exchange; `redacted_user` is the user side as memd stored it.
    pub fn stop(
        conversation_id: &str,
        doc_id: &str,
        redacted_user: &str,
        needs_sidecar: bool,
    ) -> TraceEntry {
        TraceEntry {
            doc_id: Some(clip(doc_id)),
            prompt_sha256: Some(sha256_tag(redacted_user)),
            note: needs_sidecar.then(|| "needs_sidecar".to_string()),
            ..TraceEntry::new(TraceEvent::Stop, conversation_id)
        }
    }

    /// An outcome recorded for a conversation's exchange. `scored` is empty and `note` is
    /// `already_scored` when the exchange had been scored before.
    pub fn record_outcome(
        conversation_id: &str,
        outcome: &str,
        scored: &[String],
        source: Option<&str>,
        already_scored: bool,
    ) -> TraceEntry {
        let note = if already_scored {
            Some("already_scored".to_string())
        } else {
            source.map(source_word)
        };
        TraceEntry {
            scored: ids(scored),
            outcome: Some(outcome_word(outcome)),
            note,
            ..TraceEntry::new(TraceEvent::RecordOutcome, conversation_id)
        }
    }

    /// A guard decision: `prompt_sha256` is the digest of the redacted command (or path, or
    /// MCP tool), `note` is `<decision>` or `<decision>:<rule>`, `injected` the memory a learned
    /// guardrail cited.
    pub fn pre_tool(
        conversation_id: &str,
        redacted_subject: &str,
        decision: &str,
        rule: Option<&str>,
        memory: Option<&str>,
    ) -> TraceEntry {
        TraceEntry {
            prompt_sha256: Some(sha256_tag(redacted_subject)),
            note: Some(match rule {
                Some(r) => clip(&format!("{decision}:{r}")),
                None => clip(decision),
            }),
            injected: memory.map(|m| vec![clip(m)]).unwrap_or_default(),
            ..TraceEntry::new(TraceEvent::PreTool, conversation_id)
        }
    }

    /// A tool that ran: `note` is `<kind>:ok`, `<kind>:failed` or `<kind>:exit:<code>`.
    pub fn post_tool(
        conversation_id: &str,
        redacted_subject: &str,
        kind: &str,
        failed: bool,
        exit_code: Option<i32>,
    ) -> TraceEntry {
        let result = match (exit_code, failed) {
            (Some(code), _) if code != 0 => format!("exit:{code}"),
            (_, true) => "failed".to_string(),
            _ => "ok".to_string(),
        };
        TraceEntry {
            prompt_sha256: Some(sha256_tag(redacted_subject)),
            note: Some(clip(&format!("{kind}:{result}"))),
            ..TraceEntry::new(TraceEvent::PostTool, conversation_id)
        }
    }

    /// A sidecar run as `hook-stop` reported it.
    pub fn sidecar(conversation_id: &str, scored: bool, attempts: usize) -> TraceEntry {
        let note = if scored {
            format!("scored_after_{attempts}_attempts")
        } else {
            format!("unscored_after_{attempts}_attempts")
        };
        TraceEntry {
            note: Some(note),
            ..TraceEntry::new(TraceEvent::Sidecar, conversation_id)
        }
    }

    /// One human-readable line for `memd trace` (still no content: ids and digests only).
    pub fn display_line(&self) -> String {
        let mut line = format!(
            "{} {:<14} {}",
            self.ts,
            self.event.as_str(),
            self.conversation_id
        );
        let mut push = |label: &str, value: &str| {
            line.push_str(&format!(" {label}={value}"));
        };
        if !self.injected.is_empty() {
            push("injected", &self.injected.join(","));
        }
        if !self.scored.is_empty() {
            push("scored", &self.scored.join(","));
        }
        for (label, value) in [
            ("outcome", &self.outcome),
            ("doc", &self.doc_id),
            ("prompt", &self.prompt_sha256),
            ("context", &self.context_sha256),
            ("note", &self.note),
        ] {
            if let Some(v) = value {
                push(label, &short_digest(v));
            }
        }
        line
    }
}

/// `sha256:<64 hex>` of `text`.
pub fn sha256_tag(text: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
}

/// Digests are shown to 16 hex digits on a terminal; other values unchanged.
fn short_digest(value: &str) -> String {
    match value.strip_prefix("sha256:") {
        Some(h) if h.len() > 16 => format!("sha256:{}", &h[..16]),
        _ => value.to_string(),
    }
}

fn clip(s: &str) -> String {
    s.chars().take(MAX_FIELD_CHARS).collect()
}

/// Outcome and source words come from requests: only known words reach the ledger, so a caller
/// cannot smuggle text into it through them.
fn outcome_word(s: &str) -> String {
    proto::Outcome::parse(s)
        .map_or("other", |o| o.as_str())
        .to_string()
}

fn source_word(s: &str) -> String {
    let s = s.trim().to_ascii_lowercase();
    match s.as_str() {
        "agent" | "sidecar" | "mcp" | "hook" | "cli" | "evidence" => s,
        _ => "other".to_string(),
    }
}

fn ids(list: &[String]) -> Vec<String> {
    list.iter().take(MAX_IDS).map(|id| clip(id)).collect()
}

/// The ledger file pair and the lock that keeps appends and rotation in one order.
pub struct Trace {
    path: PathBuf,
    cap_bytes: u64,
    write: Mutex<()>,
}

impl Trace {
    /// The ledger in `logs_dir` (`<data dir>/logs`), rotated at [`DEFAULT_CAP_BYTES`].
    pub fn open(logs_dir: &Path) -> Trace {
        Trace::with_cap(logs_dir.join(TRACE_FILE), DEFAULT_CAP_BYTES)
    }

    /// A ledger at `path` rotated once it reaches `cap_bytes`.
    pub fn with_cap(path: PathBuf, cap_bytes: u64) -> Trace {
        Trace {
            path,
            cap_bytes: cap_bytes.max(1),
            write: Mutex::new(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The rotated file (`trace.jsonl.1`).
    pub fn rotated_path(&self) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(".1");
        PathBuf::from(name)
    }

    /// Appends one line; a failure is ignored (the ledger must never fail a hook request).
    pub fn append(&self, entry: &TraceEntry) {
        let _ = self.try_append(entry);
    }

    /// Appends one line, rotating first when the live file is at its cap.
    pub fn try_append(&self, entry: &TraceEntry) -> io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(io::Error::other)?;
        line.push(b'\n');
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir)?;
        }
        self.rotate_if_full()?;
        let mut file = open_append(&self.path)?;
        // One write per line: readers (and a second daemon's `memd trace`) never see half a line
        // mixed with another.
        file.write_all(&line)
    }

    fn rotate_if_full(&self) -> io::Result<()> {
        match fs::metadata(&self.path) {
            Ok(meta) if meta.len() >= self.cap_bytes => fs::rename(&self.path, self.rotated_path()),
            _ => Ok(()),
        }
    }

    /// The newest `limit` entries (of `conversation` when given), oldest first. Lines that do
    /// not parse (a torn last line after a crash, a foreign edit) are skipped.
    pub fn read(&self, conversation: Option<&str>, limit: usize) -> Vec<TraceEntry> {
        let mut out = Vec::new();
        for path in [self.rotated_path(), self.path.clone()] {
            let Ok(file) = File::open(&path) else {
                continue;
            };
            for line in BufReader::new(file).split(b'\n').map_while(Result::ok) {
                let Ok(entry) = serde_json::from_slice::<TraceEntry>(&line) else {
                    continue;
                };
                if conversation.is_none_or(|c| entry.conversation_id == c) {
                    out.push(entry);
                }
            }
        }
        let skip = out.len().saturating_sub(limit);
        out.split_off(skip)
    }
}

pub(crate) fn open_append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;
