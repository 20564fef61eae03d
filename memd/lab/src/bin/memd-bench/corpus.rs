//! Deterministic, realistic-looking text for the benchmark: takeaways a coding agent would store,
//! prompts a developer would type, assistant answers, and Claude Code hook stdin/transcripts.
//!
//! Owns uniqueness (memd drops exact duplicates, so every stored text must differ) and the shape
//! of the hook inputs. Must never depend on the clock or the machine: the same seed gives the
//! same texts, so runs are comparable.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::collections::HashSet;
use std::path::Path;

const SERVICES: &[&str] = &[
    "billing",
    "auth",
    "search",
    "payments",
    "notifications",
    "ingest",
    "gateway",
    "scheduler",
    "reports",
    "inventory",
    "checkout",
    "analytics",
    "profile",
    "media",
    "export",
];
const PARTS: &[&str] = &[
    "staging database",
    "Redis cache",
    "Kafka consumer",
    "CI pipeline",
    "Docker image",
    "schema migration",
    "feature flag",
    "nightly cron job",
    "API client",
    "webhook handler",
    "integration tests",
    "Helm chart",
    "rate limiter",
    "retry queue",
    "TLS certificate",
    "connection pool",
];
const ERRORS: &[&str] = &[
    "ECONNREFUSED",
    "a 502 from the load balancer",
    "deadlock detected",
    "OOMKilled",
    "a stale lockfile",
    "certificate has expired",
    "too many open files",
    "a timeout after 30s",
    "duplicate key value violates unique constraint",
    "permission denied on the socket",
];
const FIXES: &[&str] = &[
    "bump the pool size",
    "run the migration first",
    "clear the build cache",
    "pin the base image",
    "set the env var in the CI secrets",
    "restart the consumer group",
    "regenerate the client from the OpenAPI spec",
    "raise the ulimit in the unit file",
    "use the staging credentials from the vault",
    "add an index on the foreign key",
];
/// Commands the takeaways name (the `tools` phase probes what the guard makes of them).
pub(crate) const TOOLS: &[&str] = &[
    "make migrate",
    "cargo nextest run",
    "npm run build",
    "docker compose up -d",
    "kubectl rollout restart",
    "terraform plan",
    "pytest -x",
    "go generate ./...",
];
const VERBS: &[&str] = &[
    "listens on port",
    "times out after",
    "needs at least",
    "is capped at",
    "retries up to",
];

/// Generator of unique texts; one per benchmark phase, seeded so runs repeat.
pub struct Corpus {
    rng: StdRng,
    seen: HashSet<String>,
    serial: u64,
}

impl Corpus {
    pub fn new(seed: u64) -> Corpus {
        Corpus {
            rng: StdRng::seed_from_u64(seed),
            seen: HashSet::new(),
            serial: 0,
        }
    }

    fn pick(&mut self, list: &'static [&'static str]) -> &'static str {
        list[self.rng.random_range(0..list.len())]
    }

    /// A key takeaway (80–300 characters), never returned twice by this generator.
    pub fn takeaway(&mut self) -> String {
        loop {
            let text = self.takeaway_candidate();
            if self.seen.insert(text.clone()) {
                return text;
            }
        }
    }

    fn takeaway_candidate(&mut self) -> String {
        let (svc, part, err, fix, tool, verb) = (
            self.pick(SERVICES),
            self.pick(PARTS),
            self.pick(ERRORS),
            self.pick(FIXES),
            self.pick(TOOLS),
            self.pick(VERBS),
        );
        let n: u32 = self.rng.random_range(2..65_000);
        let ticket: u32 = self.rng.random_range(100..9_999);
        match self.rng.random_range(0..6) {
            0 => format!(
                "The {svc} {part} {verb} {n}; the default in the README is wrong (see ticket {ticket})."
            ),
            1 => format!(
                "Run `{tool}` before touching the {svc} {part}, otherwise it fails with {err}. Learned in ticket {ticket}."
            ),
            2 => format!(
                "When the {svc} {part} fails with {err}, {fix}; retrying alone does not help (ticket {ticket}, {n} affected requests)."
            ),
            3 => format!(
                "User prefers to {fix} rather than patching the {svc} {part} by hand; confirmed after {err} in ticket {ticket}."
            ),
            4 => format!(
                "For {svc}, the {part} is owned by the platform team; ask in #{svc}-dev before changing it. Build {n} broke because of {err}."
            ),
            _ => format!(
                "Fix for {err} in the {svc} {part}: {fix}, then `{tool}`. Took {n} ms per request before the fix (ticket {ticket})."
            ),
        }
    }

    /// A prompt a developer might type (unique), 60–400 characters.
    pub fn prompt(&mut self) -> String {
        loop {
            let text = self.prompt_candidate();
            if self.seen.insert(text.clone()) {
                return text;
            }
        }
    }

    fn prompt_candidate(&mut self) -> String {
        let (svc, part, err, tool) = (
            self.pick(SERVICES),
            self.pick(PARTS),
            self.pick(ERRORS),
            self.pick(TOOLS),
        );
        self.serial += 1;
        let line: u32 = self.rng.random_range(10..900);
        let head = match self.rng.random_range(0..5) {
            0 => format!("Why does the {svc} {part} fail with {err}?"),
            1 => format!("How do I run the {svc} {part} locally? `{tool}` gives {err}."),
            2 => format!("Which settings does the {svc} {part} need in staging?"),
            3 => format!("The {svc} {part} broke again after my change, can you look?"),
            _ => format!("Refactor the {svc} {part} so it stops failing with {err}."),
        };
        match self.rng.random_range(0..3) {
            0 => head,
            1 => format!("{head} I changed src/{svc}/mod.rs around line {line}."),
            _ => format!(
                "{head} Context: this started after the last deploy, the logs show {err} \
                 about {line} times per hour and `{tool}` did not help. Please check \
                 src/{svc}/{} first.",
                part.replace(' ', "_")
            ),
        }
    }

    /// A short search query, as an agent would pass to search (unique).
    pub fn query(&mut self) -> String {
        loop {
            let (svc, part, err, tool) = (
                self.pick(SERVICES),
                self.pick(PARTS),
                self.pick(ERRORS),
                self.pick(TOOLS),
            );
            let text = match self.rng.random_range(0..4) {
                0 => format!("{svc} {part} {err}"),
                1 => format!("how to fix {err} in the {svc} {part}"),
                2 => format!("{svc} {part} settings staging"),
                _ => format!("`{tool}` fails for {svc} {part}"),
            };
            if self.seen.insert(text.clone()) {
                return text;
            }
        }
    }

    /// A plausible assistant answer (200–700 characters).
    pub fn answer(&mut self, prompt: &str) -> String {
        let (fix, tool, part) = (self.pick(FIXES), self.pick(TOOLS), self.pick(PARTS));
        let files: u32 = self.rng.random_range(1..6);
        let topic: String = prompt.chars().take(80).collect();
        format!(
            "I looked into it (\"{topic}\"). The root cause is in the {part}: the config is read \
             before the environment is loaded, so the fallback value wins. I changed {files} file(s) \
             to {fix}, and added a regression test. Verified with `{tool}`: all tests pass. \
             If this comes back, check the {part} settings first."
        )
    }
}

/// Claude Code `UserPromptSubmit` hook input.
pub fn claude_prompt_stdin(session: &str, prompt: &str, transcript: &Path, cwd: &str) -> Vec<u8> {
    json!({
        "session_id": session,
        "transcript_path": transcript,
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    })
    .to_string()
    .into_bytes()
}

/// Claude Code `Stop` hook input.
pub fn claude_stop_stdin(session: &str, answer: &str, transcript: &Path, cwd: &str) -> Vec<u8> {
    json!({
        "session_id": session,
        "transcript_path": transcript,
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": false,
        "last_assistant_message": answer,
    })
    .to_string()
    .into_bytes()
}

/// Appends one user line and one assistant line in Claude Code's transcript format.
pub fn append_transcript_turn(
    transcript: &Path,
    session: &str,
    user: &str,
    assistant: &str,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(transcript)?;
    let user_line = json!({
        "type": "user", "sessionId": session, "isSidechain": false, "uuid": "u",
        "message": {"role": "user", "content": user},
    });
    let assistant_line = json!({
        "type": "assistant", "sessionId": session, "uuid": "a",
        "message": {"role": "assistant", "content": [{"type": "text", "text": assistant}]},
    });
    writeln!(f, "{user_line}\n{assistant_line}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_unique_and_repeatable() {
        let mut a = Corpus::new(7);
        let texts: Vec<String> = (0..2000).map(|_| a.takeaway()).collect();
        let distinct: HashSet<&String> = texts.iter().collect();
        assert_eq!(distinct.len(), texts.len());
        let mut b = Corpus::new(7);
        assert_eq!(b.takeaway(), texts[0]);
        assert!(texts.iter().all(|t| t.len() >= 60 && t.len() <= 600));
    }
}
