//! The `tools` phase: what the tool-event hooks cost a Claude Code user per tool call, per size,
//! and whether they answered what they must.
//!
//! Owns the store (built offline like the `dashboard` phase's, then `FACTS` added through the
//! API: memory-bank facts of the bench's project that warn about commands), the mixes of tool
//! calls with the answer each must get, timing the real static hooks on Claude Code's
//! `PreToolUse` (`hook-prompt`) and `PostToolUse` / `PostToolUseFailure` (`hook-stop`) stdin with
//! `hooks::run_hook`, and the checks afterwards: every answer as expected, one ledger line per
//! call with the same decision (memd answered, not the hook's offline rules), no new hook-log
//! line, and none of the commands the corpus' working memories name questioned (only curated
//! memories guard). Must never time anything but the hook processes, never report a figure whose
//! runs answered wrong without failing the phase, and never call the guard's endpoints for a
//! timed figure (the probe of the corpus' commands goes through the API, untimed).

use super::Bench;
use crate::corpus::{self, Corpus};
use crate::daemon::{Daemon, Instance};
use crate::hooks::{self, THINK_TIME};
use crate::report::{Figure, Samples, Stat, Target, size_label};
use anyhow::{Context, Result, anyhow, bail};
use memd_engine::trace::{TRACE_FILE, TraceEntry, TraceEvent};
use proto::{
    Client, MemoryBankAdd, MemoryBankResponse, PreToolRequest, PreToolResponse, ToolCall, ToolKind,
};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// Most hook runs per figure (`--queries` bounds it further).
const MAX_RUNS: usize = 300;
/// Calls per conversation: a session makes many tool calls.
const CALLS_PER_SESSION: usize = 10;
/// The longest embedding (and token states) may take after a start or the facts.
const SETTLE_LIMIT: Duration = Duration::from_secs(1800);

/// Memory-bank facts of the bench's project, each explicitly forbidding one command line
/// ("Never run X …: what it did"): what the learned guardrail looks for.
const FACTS: [&str; 20] = [
    "Never run cargo clean here: it wiped the prebuilt ONNX runtime in target/, and the rebuild took 40 minutes.",
    "Never run git clean -fdx: it deleted the untracked .env and the local TLS certificates, which are not in the repository.",
    "Do not run docker system prune -af on this machine: it wiped the cached base images and the offline build failed for a day.",
    "Never run terraform destroy in this directory: it took down the shared staging workspace.",
    "Never run kubectl delete namespace on the dev cluster: it deleted everyone's preview environments.",
    "Never run redis-cli flushall against the shared cache: it logged everybody out.",
    "Never run npm audit fix --force here: it broke the React build by jumping two major versions.",
    "Do not run cargo update here: a minor tokio bump changed the runtime builder, so pin versions instead.",
    "Never run git stash drop in this repository: it lost a day of uncommitted work; apply stashes instead.",
    "Do not run make distclean in this repository: it removes the vendored protobuf sources.",
    "Never run helm uninstall on the shared cluster: it destroyed the ingress controller and its certificates.",
    "Never run rustup update on this machine: it broke the pinned nightly toolchain that the SIMD crate needs.",
    "Never run brew upgrade here: it broke the OpenSSL linkage of the local Postgres.",
    "Never run poetry lock outside the VPN: without the mirror it hangs on the private index.",
    "Never run systemctl restart postgresql on the dev box: it took down the database for the whole team.",
    "Never run docker volume prune here: it deleted the local Postgres volume with a week of fixtures.",
    "Never run git rebase --root: it corrupted the signed history once; rebase only feature branches.",
    "Never run npx prisma migrate reset here: it wiped the staging database because DATABASE_URL pointed there.",
    "Never run go clean -modcache: it broke offline builds because the module proxy is not reachable from CI.",
    "Never run yarn upgrade here: it broke the lockfile and the CI install failed afterwards.",
];

/// What the guard must answer a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// memd does not object: the hook prints nothing.
    Nothing,
    /// A static rule at its default level: `deny`.
    Deny,
    /// The learned guardrail of `FACTS[i]`: `ask`, citing that fact.
    Learned(usize),
}

impl Expect {
    fn decision(self) -> &'static str {
        match self {
            Expect::Nothing => "allow",
            Expect::Deny => "deny",
            Expect::Learned(_) => "ask",
        }
    }
}

/// The `Bash` mix, in the order it rotates: 16 everyday commands, 6 catastrophic ones, 8 that
/// name a fact.
const SHELL_MIX: [(&str, Expect); 30] = [
    ("git status", Expect::Nothing),
    ("cargo build --release", Expect::Nothing),
    ("rm -rf /", Expect::Deny),
    ("cargo clean -p memd", Expect::Learned(0)),
    ("git diff HEAD~1", Expect::Nothing),
    ("ls -la", Expect::Nothing),
    ("git push -f origin main", Expect::Deny),
    ("cargo test -p memd-engine", Expect::Nothing),
    ("git clean -fdx", Expect::Learned(1)),
    ("rm -rf ./target", Expect::Nothing),
    ("git log --oneline -20", Expect::Nothing),
    ("dd if=/dev/zero of=/dev/sda bs=1M", Expect::Deny),
    ("docker system prune -af", Expect::Learned(2)),
    ("npm install", Expect::Nothing),
    ("grep -rn TODO src", Expect::Nothing),
    ("git stash drop", Expect::Learned(8)),
    (
        "git push --force-with-lease origin feature",
        Expect::Nothing,
    ),
    (r#"psql -c "DROP DATABASE prod""#, Expect::Deny),
    ("cargo clippy --all-targets -- -D warnings", Expect::Nothing),
    ("helm uninstall ingress-nginx", Expect::Learned(10)),
    ("docker ps -a", Expect::Nothing),
    ("kubectl get pods -A", Expect::Nothing),
    (":(){ :|:& };:", Expect::Deny),
    ("cargo update -p tokio", Expect::Learned(7)),
    ("cat Cargo.toml", Expect::Nothing),
    (
        r#"git commit -m "fix: retry the billing webhook""#,
        Expect::Nothing,
    ),
    ("make distclean", Expect::Learned(9)),
    ("mkfs.ext4 /dev/sdb1", Expect::Deny),
    ("python3 manage.py check", Expect::Nothing),
    ("npx prisma migrate reset --force", Expect::Learned(17)),
];

/// Files `Read` rotates through, relative to the project (a secrets file among them: at the
/// default `secret_read = "off"` it passes too).
const READS: [&str; 5] = [
    "src/main.rs",
    "Cargo.toml",
    "src/billing/webhook.rs",
    ".env",
    "README.md",
];

/// MCP tools the `mcp__…` figure rotates through: an unknown server (`mcp_unapproved` is off by
/// default) and memd's own.
const MCP_TOOLS: [&str; 2] = ["mcp__x__y", "mcp__memd__search_memory"];

/// One timed hook run and what it answered.
struct Run {
    ms: f64,
    expect: Expect,
    /// `(permissionDecision, permissionDecisionReason)`; `None` when the hook printed nothing.
    answer: Option<(String, String)>,
}

/// Where one figure's runs go.
#[derive(Default)]
struct Runs(Vec<Run>);

impl Runs {
    fn samples(&self, class: Option<&str>) -> Samples {
        Samples(
            self.0
                .iter()
                .filter(|r| class.is_none_or(|c| r.expect.decision() == c))
                .map(|r| r.ms)
                .collect(),
        )
    }
}

impl Bench {
    pub fn tools(&mut self) -> Result<()> {
        let mut sizes = self.opts.sizes.clone();
        sizes.sort_unstable();
        sizes.dedup();
        for size in sizes {
            self.tools_size(size)?;
            self.save()?;
        }
        Ok(())
    }

    fn tools_size(&mut self, size: usize) -> Result<()> {
        let started = Instant::now();
        let mut corpus = Corpus::new(self.seed + 11_000 + size as u64);
        println!("--- tools, {} ---", size_label(size));
        let (inst, d, label, b) =
            self.offline_store("tools", size, &mut corpus, self.seed + 11_001, SETTLE_LIMIT)?;
        let cwd = hooks::project_dir(&inst)?;
        let fact_ids = add_facts(&d, &cwd)?;
        d.wait_embedded(SETTLE_LIMIT)?;
        let questioned = probe_corpus_commands(&d, &cwd)?;
        let n = d.memory_count()?;
        let at = format!(
            "{n} memories ({size} built offline: {} real vectors, {} synthetic; {} memory-bank \
             facts of the project warning about commands, through the API)",
            b.real,
            b.synthetic,
            FACTS.len()
        );

        let runs = self.opts.queries.min(MAX_RUNS);
        let prompt_bin = self.hook_dir.join("hook-prompt");
        let stop_bin = self.hook_dir.join("hook-stop");
        let env = inst.env();
        let transcript = inst.root.join("transcripts").join("tools.jsonl");
        let log_before = log_len(&inst);
        let tag = format!("bench-tools-{label}");
        let pre = |kind: &str, i: usize, tool: &str, input: Value| -> Result<(f64, String)> {
            let stdin = json!({
                "session_id": format!("{tag}-{kind}-{:03}", i / CALLS_PER_SESSION),
                "transcript_path": transcript,
                "cwd": cwd,
                "permission_mode": "default",
                "hook_event_name": "PreToolUse",
                "tool_name": tool,
                "tool_input": input,
                "tool_use_id": format!("toolu_{kind}_{i:05}"),
            });
            std::thread::sleep(THINK_TIME);
            hooks::run_hook(&prompt_bin, stdin.to_string().as_bytes(), &env)
        };

        let mut shell = Runs::default();
        for i in 0..runs {
            let (command, expect) = SHELL_MIX[i % SHELL_MIX.len()];
            let input = json!({"command": command, "description": "run it"});
            let (ms, stdout) = pre("shell", i, "Bash", input)?;
            shell.0.push(Run {
                ms,
                expect,
                answer: parse_answer(&stdout)?,
            });
        }
        let mut read = Runs::default();
        for i in 0..runs {
            let path = format!("{cwd}/{}", READS[i % READS.len()]);
            let (ms, stdout) = pre("read", i, "Read", json!({"file_path": path}))?;
            read.0.push(Run {
                ms,
                expect: Expect::Nothing,
                answer: parse_answer(&stdout)?,
            });
        }
        let mut mcp = Runs::default();
        for i in 0..runs {
            let tool = MCP_TOOLS[i % MCP_TOOLS.len()];
            let (ms, stdout) = pre("mcp", i, tool, json!({"query": "billing webhook retries"}))?;
            mcp.0.push(Run {
                ms,
                expect: Expect::Nothing,
                answer: parse_answer(&stdout)?,
            });
        }
        // After a tool ran: the commands of the mix that run (not the denied ones), in Claude
        // Code's shapes: `PostToolUse` after a success (no exit code in its response), every
        // fourth a `PostToolUseFailure` (an `error` text).
        let ran: Vec<&str> = SHELL_MIX
            .iter()
            .filter(|(_, e)| *e != Expect::Deny)
            .map(|(c, _)| *c)
            .collect();
        let mut post = Samples::default();
        let mut post_notes = Vec::with_capacity(runs);
        let mut post_printed = 0usize;
        for i in 0..runs {
            let command = ran[i % ran.len()];
            let mut stdin = json!({
                "session_id": format!("{tag}-post-{:03}", i / CALLS_PER_SESSION),
                "transcript_path": transcript,
                "cwd": cwd,
                "permission_mode": "default",
                "tool_name": "Bash",
                "tool_input": {"command": command, "description": "run it"},
                "tool_use_id": format!("toolu_post_{i:05}"),
            });
            if i % 4 == 3 {
                stdin["hook_event_name"] = json!("PostToolUseFailure");
                stdin["error"] = json!("Exit code 1: error: the step failed");
                post_notes.push("shell:failed");
            } else {
                stdin["hook_event_name"] = json!("PostToolUse");
                stdin["tool_response"] = json!({
                    "stdout": "done\n", "stderr": "", "interrupted": false, "isImage": false
                });
                post_notes.push("shell:ok");
            }
            std::thread::sleep(THINK_TIME);
            let (ms, out) = hooks::run_hook(&stop_bin, stdin.to_string().as_bytes(), &env)?;
            if !out.trim().is_empty() {
                post_printed += 1;
            }
            post.0.push(ms);
        }

        // The checks: answers, ledger, hook log.
        let mut problems: Vec<String> = Vec::new();
        for (what, runs) in [("Bash", &shell), ("Read", &read), ("mcp", &mcp)] {
            for (i, r) in runs.0.iter().enumerate() {
                if let Some(p) = wrong_answer(r, &fact_ids) {
                    problems.push(format!("{what} run {i}: {p}"));
                }
            }
        }
        for q in &questioned {
            problems.push(format!(
                "a command the corpus' working memories name was questioned: {q}"
            ));
        }
        if post_printed > 0 {
            problems.push(format!(
                "hook-stop printed something on {post_printed} runs after a tool (Claude Code must get nothing)"
            ));
        }
        let ledger = ledger_lines(&inst.data_dir(), &format!("{tag}-"))?;
        let decided: Vec<&Run> = shell.0.iter().chain(&read.0).chain(&mcp.0).collect();
        problems.extend(check_ledger(&ledger, &decided, &post_notes, &fact_ids));
        let log_after = log_len(&inst);
        if log_after != log_before {
            let text = std::fs::read_to_string(hooks::hook_log(&inst)).unwrap_or_default();
            problems.push(format!("the hook log grew during the runs:\n{text}"));
        }

        let counts = |e: fn(&Expect) -> bool| SHELL_MIX.iter().filter(|(_, x)| e(x)).count();
        let mix = format!(
            "rotating mix of {} commands: {} everyday (must print nothing: p50 {:.1} ms), {} \
             catastrophic (must deny, static rules only: p50 {:.1} ms), {} naming a fact (must \
             ask, citing it: p50 {:.1} ms)",
            SHELL_MIX.len(),
            counts(|e| *e == Expect::Nothing),
            shell.samples(Some("allow")).percentile(0.5),
            counts(|e| *e == Expect::Deny),
            shell.samples(Some("deny")).percentile(0.5),
            counts(|e| matches!(e, Expect::Learned(_))),
            shell.samples(Some("ask")).percentile(0.5),
        );
        let how = format!(
            "static binary, spawn → exit, Claude Code stdin, {CALLS_PER_SESSION} calls per \
             session, {} ms idle before each run, default [guards]",
            THINK_TIME.as_millis()
        );
        let verdict = if problems.is_empty() {
            "every answer as expected and in the ledger, hook log clean".to_string()
        } else {
            format!("{} check(s) FAILED (see tools.checks)", problems.len())
        };
        self.report.add(
            Figure::latency(&format!("tools.pre_tool.{label}"), &shell.samples(None)).with_note(
                format!("{at}; hook-prompt PreToolUse Bash, {how}; {mix}; {verdict}"),
            ),
        );
        self.report.add(
            Figure::latency(&format!("tools.pre_tool_read.{label}"), &read.samples(None))
                .with_note(format!(
                    "{at}; hook-prompt PreToolUse Read, {how}; {} project files in turn (one \
                     of them .env: secret_read is off by default), every answer nothing; {verdict}",
                    READS.len()
                )),
        );
        self.report.add(
            Figure::latency(&format!("tools.pre_tool_mcp.{label}"), &mcp.samples(None)).with_note(
                format!(
                    "{at}; hook-prompt PreToolUse {}, {how}; every answer nothing \
                     (mcp_unapproved is off by default); {verdict}",
                    MCP_TOOLS.join(" / ")
                ),
            ),
        );
        self.report.add(
            Figure::latency(&format!("tools.post_tool.{label}"), &post).with_note(format!(
                "{at}; hook-stop after Bash, {how}; the {} commands of the mix that run (not \
                 the denied ones): PostToolUse (stdout, no exit code, as Claude Code sends it), \
                 every fourth PostToolUseFailure (an error text); prints nothing, posts the \
                 evidence; {verdict}",
                ran.len()
            )),
        );
        let mut checks = Figure::value(
            &format!("tools.checks.{label}"),
            "count",
            problems.len() as f64,
        )
        .with_target(Target::at_most(Stat::Value, 0.0));
        checks = checks.with_note(match problems.first() {
            None => format!(
                "wrong answers, ledger mismatches and hook-log lines over {} PreToolUse and \
                 {} PostToolUse(Failure) runs: none",
                decided.len(),
                post.len()
            ),
            Some(first) => format!("first: {first}"),
        });
        self.report.add(checks);
        self.report.note(format!(
            "tools {label}: store built offline ({} real embeddings, {} synthetic vectors) plus \
             {} memory-bank facts through the API; untimed probe through POST \
             /api/hooks/pre-tool of the {} commands the corpus' working memories name (\"Run \
             `make migrate` before …, otherwise it fails\"): {} questioned; whole size took \
             {:.0} s",
            b.real,
            b.synthetic,
            FACTS.len(),
            corpus::TOOLS.len(),
            questioned.len(),
            started.elapsed().as_secs_f64()
        ));
        d.stop()?;
        if !problems.is_empty() {
            for p in &problems {
                eprintln!("  {p}");
            }
            bail!("{} tool-event check(s) failed", problems.len());
        }
        Ok(())
    }
}

/// Adds `FACTS` to the memory bank of the project in `cwd`; returns their ids in order.
fn add_facts(d: &Daemon, cwd: &str) -> Result<Vec<String>> {
    let mut ids = Vec::with_capacity(FACTS.len());
    for fact in FACTS {
        let req = MemoryBankAdd {
            content: fact.to_string(),
            cwd: Some(cwd.to_string()),
            ..MemoryBankAdd::default()
        };
        let r: MemoryBankResponse = d.client.post("/api/memory-bank/add", &req)?;
        if !r.success || r.duplicate {
            bail!("memory-bank add of {fact:?} stored nothing: {r:?}");
        }
        if r.project.is_none() {
            bail!("memory-bank add of {fact:?} was stored global: the project did not resolve");
        }
        ids.push(r.doc_id);
    }
    Ok(ids)
}

/// The commands the corpus' working memories name ("Run `npm run build` before touching …,
/// otherwise it fails with …") that the guard questions, through the API, untimed, each as
/// `` `command` decision:rule (reason) ``. Working memories are raw exchanges: none may guard.
fn probe_corpus_commands(d: &Daemon, cwd: &str) -> Result<Vec<String>> {
    let mut questioned = Vec::new();
    for command in corpus::TOOLS {
        let req = PreToolRequest {
            conversation_id: "bench-tools-probe".into(),
            client: Client::ClaudeCode,
            tool: ToolCall {
                kind: ToolKind::Shell,
                name: "Bash".into(),
                command: Some(command.to_string()),
                ..ToolCall::default()
            },
            project_dir: Some(cwd.to_string()),
        };
        let r: PreToolResponse = d.client.post("/api/hooks/pre-tool", &req)?;
        if r.decision != "allow" {
            questioned.push(format!(
                "`{command}` {}:{} ({})",
                r.decision,
                r.rule.as_deref().unwrap_or("-"),
                r.reason.as_deref().unwrap_or("")
            ));
        }
    }
    Ok(questioned)
}

/// Claude Code's decision from the hook's stdout; `None` when it printed nothing.
fn parse_answer(stdout: &str) -> Result<Option<(String, String)>> {
    if stdout.trim().is_empty() {
        return Ok(None);
    }
    let v: Value = serde_json::from_str(stdout.trim())
        .with_context(|| format!("hook-prompt printed something not JSON: {stdout:?}"))?;
    let h = &v["hookSpecificOutput"];
    let field = |k: &str| {
        h[k].as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("hook-prompt's answer has no {k}: {stdout}"))
    };
    if field("hookEventName")? != "PreToolUse" {
        bail!("hook-prompt answered another event: {stdout}");
    }
    Ok(Some((
        field("permissionDecision")?,
        field("permissionDecisionReason")?,
    )))
}

/// What is wrong with a run's answer, if anything.
fn wrong_answer(r: &Run, fact_ids: &[String]) -> Option<String> {
    match (r.expect, &r.answer) {
        (Expect::Nothing, None) => None,
        (Expect::Nothing, Some((d, why))) => Some(format!("expected nothing, got {d}: {why}")),
        (e, None) => Some(format!(
            "expected {}, the hook printed nothing",
            e.decision()
        )),
        (e, Some((d, why))) if d != e.decision() => {
            Some(format!("expected {}, got {d}: {why}", e.decision()))
        }
        (_, Some((_, why))) if why.contains("memd did not answer") => {
            Some(format!("decided by the hook alone: {why}"))
        }
        (Expect::Learned(i), Some((_, why))) if !why.contains(&fact_ids[i]) => Some(format!(
            "expected a citation of {}, got: {why}",
            fact_ids[i]
        )),
        _ => None,
    }
}

/// The ledger's pre-tool and post-tool lines of conversations starting with `prefix`, in order.
fn ledger_lines(data_dir: &Path, prefix: &str) -> Result<Vec<TraceEntry>> {
    let logs = data_dir.join("logs");
    let mut out = Vec::new();
    // The rotated file holds the older lines.
    for name in [format!("{TRACE_FILE}.1"), TRACE_FILE.to_string()] {
        let Ok(text) = std::fs::read_to_string(logs.join(name)) else {
            continue;
        };
        out.extend(
            text.lines()
                .filter_map(|l| serde_json::from_str::<TraceEntry>(l).ok())
                .filter(|e| e.conversation_id.starts_with(prefix))
                .filter(|e| matches!(e.event, TraceEvent::PreTool | TraceEvent::PostTool)),
        );
    }
    Ok(out)
}

/// Problems between the ledger and the runs: one pre-tool line per decision, in the order
/// run, with the same decision (and the cited fact), then one post-tool line per evidence.
fn check_ledger(
    ledger: &[TraceEntry],
    decided: &[&Run],
    post_notes: &[&str],
    fact_ids: &[String],
) -> Vec<String> {
    let pre: Vec<&TraceEntry> = ledger
        .iter()
        .filter(|e| e.event == TraceEvent::PreTool)
        .collect();
    let post: Vec<&TraceEntry> = ledger
        .iter()
        .filter(|e| e.event == TraceEvent::PostTool)
        .collect();
    let mut problems = Vec::new();
    if pre.len() != decided.len() {
        problems.push(format!(
            "the ledger has {} pre-tool lines for {} PreToolUse runs",
            pre.len(),
            decided.len()
        ));
    }
    for (i, (line, run)) in pre.iter().zip(decided).enumerate() {
        let note = line.note.as_deref().unwrap_or("");
        let decision = note.split(':').next().unwrap_or("");
        let got = run.answer.as_ref().map_or("allow", |(d, _)| d.as_str());
        if decision != got {
            problems.push(format!(
                "pre-tool line {i} says {note:?}, the hook printed {got}"
            ));
        }
        if let Expect::Learned(f) = run.expect
            && line.injected.first() != Some(&fact_ids[f])
        {
            problems.push(format!(
                "pre-tool line {i} cites {:?}, expected {}",
                line.injected, fact_ids[f]
            ));
        }
    }
    if post.len() != post_notes.len() {
        problems.push(format!(
            "the ledger has {} post-tool lines for {} PostToolUse runs",
            post.len(),
            post_notes.len()
        ));
    }
    for (i, (line, want)) in post.iter().zip(post_notes).enumerate() {
        if line.note.as_deref() != Some(*want) {
            problems.push(format!(
                "post-tool line {i} says {:?}, expected {want:?}",
                line.note
            ));
        }
    }
    problems
}

fn log_len(inst: &Instance) -> u64 {
    std::fs::metadata(hooks::hook_log(inst)).map_or(0, |m| m.len())
}
