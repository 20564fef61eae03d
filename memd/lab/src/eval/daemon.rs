//! A `memd serve` process of the evaluation's own, started through `memd-testkit`.
//!
//! Owns only what the evaluation adds: its config text, the embedding runtime passed by path,
//! waiting for the model, anyhow errors and bounded waits on conditions the daemon reports.
//! Must never reuse the user's data directory, config or running daemon (the kit gives every
//! daemon fresh directories) and never synchronise with a bare sleep.

use anyhow::{Context, Result, anyhow, bail};
use memd_engine::embed::RuntimePaths;
use proto::{Client, PostToolRequest, PostToolResponse, ToolCall, ToolKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long start-up (store open, listener, model load) may take.
const START_LIMIT: Duration = Duration::from_secs(120);
/// Pause between polls of a condition; the condition, not the pause, decides.
const POLL_EVERY: Duration = Duration::from_millis(10);

pub(crate) struct SpawnedDaemon {
    inner: memd_testkit::Daemon,
}

impl SpawnedDaemon {
    /// Starts `memd serve` with `config_toml` as its config file and waits until it answers
    /// with the embedding model loaded.
    pub(crate) fn start(memd: &Path, runtime: &RuntimePaths, config_toml: &str) -> Result<Self> {
        runtime.check().map_err(|msg| anyhow!(msg))?;
        let model_dir = runtime
            .model
            .parent()
            .context("the model path has no directory")?;
        let spec = memd_testkit::Spec {
            config_toml: Some(config_toml.to_string()),
            env: vec![
                ("MEMD_ORT_LIB".into(), runtime.ort_lib.display().to_string()),
                ("MEMD_MODEL_DIR".into(), model_dir.display().to_string()),
            ],
            wait_model: true,
            start_limit: START_LIMIT,
            ..memd_testkit::Spec::with_memd(memd.to_path_buf())
        };
        let inner = memd_testkit::Daemon::start(spec).map_err(|e| anyhow!("{e}"))?;
        Ok(SpawnedDaemon { inner })
    }

    pub(crate) fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<R> {
        self.inner.try_post(path, body).map_err(|e| anyhow!("{e}"))
    }

    pub(crate) fn get<R: DeserializeOwned>(&self, path: &str) -> Result<R> {
        self.inner.try_get(path).map_err(|e| anyhow!("{e}"))
    }

    /// Polls `check` until it yields a value; fails after `limit`, naming `what`.
    pub(crate) fn wait_for<T>(
        &self,
        what: &str,
        limit: Duration,
        mut check: impl FnMut() -> Result<Option<T>>,
    ) -> Result<T> {
        let started = Instant::now();
        loop {
            if let Some(v) = check()? {
                return Ok(v);
            }
            if started.elapsed() > limit {
                bail!("timed out after {limit:?} waiting for {what}");
            }
            std::thread::sleep(POLL_EVERY);
        }
    }

    /// Waits until every stored memory has its embedding.
    pub(crate) fn wait_embedded(&self, limit: Duration) -> Result<()> {
        self.inner
            .try_wait_embedded(limit)
            .map(|_| ())
            .map_err(|e| anyhow!("{e}"))
    }

    /// SIGTERM, then waits for the process (the daemon flushes and snapshots on the way out).
    pub(crate) fn stop(mut self) -> Result<()> {
        self.inner.stop().map(|_| ()).map_err(|e| anyhow!("{e}"))
    }
}

/// What the learning scenarios send as a hook would.
impl SpawnedDaemon {
    /// The agent's command for this turn, as its post-tool hook reports it: a failing run, then
    /// the run after its fix (`memd-eval evidence` learns from these alone).
    pub fn run_command(&self, conversation: &str, command: &str, fixed: bool) -> Result<()> {
        for failed in [true, !fixed] {
            let _: PostToolResponse = self.post(
                "/api/hooks/post-tool",
                &PostToolRequest {
                    conversation_id: conversation.into(),
                    client: Client::ClaudeCode,
                    tool: ToolCall {
                        kind: ToolKind::Shell,
                        name: "Bash".into(),
                        command: Some(command.into()),
                        ..ToolCall::default()
                    },
                    exit_code: Some(if failed { 2 } else { 0 }),
                    failed,
                    project_dir: None,
                },
            )?;
        }
        Ok(())
    }
}
