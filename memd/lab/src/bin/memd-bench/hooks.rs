//! Wall time of the real hook processes (spawn → exit), fed Claude Code's stdin JSON.
//!
//! Owns the hook run loop and its checks. A hook exits 0 even when it could not reach memd, so
//! a fast run proves nothing by itself: this module checks afterwards that every stop stored its
//! exchange, that no run left a failure line in the hook log, and counts prompts that got
//! context. Must never time the bench's own bookkeeping (transcript writes happen untimed).

use super::corpus::{self, Corpus};
use super::daemon::{Daemon, Instance};
use super::report::Samples;
use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A repository inside the bench's temp dir: the hooks run "in" it, so every prompt pays for
/// project resolution as a user's would (the daemon caches it per directory).
pub(crate) fn project_dir(inst: &Instance) -> Result<String> {
    let root = inst.root.join("project");
    std::fs::create_dir_all(root.join(".git"))?;
    std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n")?;
    std::fs::write(
        root.join(".git/config"),
        "[remote \"origin\"]\n\turl = git@github.com:acme/bench.git\n",
    )?;
    root.to_str()
        .map(str::to_string)
        .context("the bench's temp dir is not UTF-8")
}

/// What the hook runs measured.
#[derive(Default)]
pub struct HookRuns {
    pub prompt: Samples,
    pub stop: Samples,
    /// Prompt runs that printed context (KNOWN CONTEXT and/or a scoring prompt).
    pub with_context: usize,
}

/// Runs `hook` with `stdin`; returns (wall time, stdout). Non-zero exit is an error.
pub(crate) fn run_hook(
    hook: &Path,
    stdin: &[u8],
    env: &[(String, String)],
) -> Result<(f64, String)> {
    let mut cmd = Command::new(hook);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env_remove("CURSOR_VERSION")
        .env_remove("MEMD_URL")
        .env_remove("MEMD_PORT")
        .env_remove("MEMD_HOOK_DEADLINE_MS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("spawning {}", hook.display()))?;
    if let Some(mut sin) = child.stdin.take() {
        sin.write_all(stdin)?;
    }
    let out = child.wait_with_output()?;
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    if !out.status.success() {
        bail!("{} exited with {}", hook.display(), out.status);
    }
    Ok((ms, String::from_utf8_lossy(&out.stdout).into_owned()))
}

pub(crate) fn hook_log(inst: &Instance) -> PathBuf {
    inst.data_dir().join("logs").join("hooks.log")
}

/// Idle time before each hook run. A user's prompt follows seconds of reading and a stop
/// follows seconds of generation; by then the daemon's embedding threads have gone back to
/// sleep. Without the pause, each run would share the CPU with the tail of the previous
/// request's work, which no user sees. The mixed-load phase measures back-to-back traffic.
pub(crate) const THINK_TIME: Duration = Duration::from_millis(50);

/// `runs` turns, each a new Claude Code conversation: hook-prompt, then hook-stop. A new
/// conversation never has an unscored previous exchange, so the stop never waits for a score
/// or asks for a sidecar: what is timed is the hook's own path. Each prompt starts on an idle
/// daemon (the previous exchange already embedded, then [`THINK_TIME`]).
pub fn run(
    d: &Daemon,
    inst: &Instance,
    hook_dir: &Path,
    runs: usize,
    corpus: &mut Corpus,
    tag: &str,
) -> Result<HookRuns> {
    let user = User::new(d, inst, hook_dir)?;
    let mut out = HookRuns {
        prompt: Samples::default(),
        stop: Samples::default(),
        with_context: 0,
    };
    for i in 0..runs {
        let prompt = corpus.prompt();
        let answer = corpus.answer(&prompt);
        user.turn(
            d,
            &format!("bench-hook-{tag}-{i:05}"),
            &prompt,
            &answer,
            &mut out,
        )?;
    }
    user.check(d, runs, out)
}

/// One daemon's hook user: the binaries, the environment and the project the hooks run in,
/// and what the daemon held before the first turn (for `check`).
pub struct User {
    prompt_bin: PathBuf,
    stop_bin: PathBuf,
    env: Vec<(String, String)>,
    transcripts: PathBuf,
    cwd: String,
    log: PathBuf,
    log_before: u64,
    stored_before: usize,
}

impl User {
    pub fn new(d: &Daemon, inst: &Instance, hook_dir: &Path) -> Result<User> {
        let transcripts = inst.root.join("transcripts");
        std::fs::create_dir_all(&transcripts)?;
        let log = hook_log(inst);
        Ok(User {
            prompt_bin: hook_dir.join("hook-prompt"),
            stop_bin: hook_dir.join("hook-stop"),
            env: inst.env(),
            transcripts,
            cwd: project_dir(inst)?,
            log_before: std::fs::metadata(&log).map_or(0, |m| m.len()),
            log,
            stored_before: d.memory_count()?,
        })
    }

    /// One turn in the new conversation `session`: `prompt` through hook-prompt, `answer`
    /// through hook-stop; both timed into `out`.
    pub fn turn(
        &self,
        d: &Daemon,
        session: &str,
        prompt: &str,
        answer: &str,
        out: &mut HookRuns,
    ) -> Result<()> {
        let transcript = self.transcripts.join(format!("{session}.jsonl"));
        // The previous stop queued its exchange for embedding; a user's next prompt comes
        // seconds later, when that is done. Untimed.
        d.wait_embedded(Duration::from_secs(600))?;
        std::thread::sleep(THINK_TIME);
        let stdin = corpus::claude_prompt_stdin(session, prompt, &transcript, &self.cwd);
        let (ms, stdout) = run_hook(&self.prompt_bin, &stdin, &self.env)?;
        out.prompt.0.push(ms);
        if stdout.contains("additionalContext") {
            out.with_context += 1;
        }
        corpus::append_transcript_turn(&transcript, session, prompt, answer)?;
        std::thread::sleep(THINK_TIME);
        let stdin = corpus::claude_stop_stdin(session, answer, &transcript, &self.cwd);
        let (ms, stdout) = run_hook(&self.stop_bin, &stdin, &self.env)?;
        if !stdout.trim().is_empty() {
            bail!("hook-stop printed {stdout:?}: it must stay silent for Claude Code");
        }
        out.stop.0.push(ms);
        Ok(())
    }

    /// After `runs` turns into `out`: every stop stored its exchange and no hook logged a
    /// failure; returns `out`.
    pub fn check(&self, d: &Daemon, runs: usize, out: HookRuns) -> Result<HookRuns> {
        let log_after = std::fs::metadata(&self.log).map_or(0, |m| m.len());
        if log_after != self.log_before {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            bail!("hooks logged failures during the run:\n{text}");
        }
        let stored = d.memory_count()? - self.stored_before;
        if stored < runs {
            bail!("only {stored} of {runs} hook-stop runs stored their exchange");
        }
        Ok(out)
    }
}
