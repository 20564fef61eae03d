//! The prompt path's floor, measured in the same run as `hook_prompt`: what no daemon can avoid
//! (spawning the hook, the identity check, the smallest round trip) plus what the prompt itself
//! costs to encode (its embedding beside its late-interaction states, the two models run in
//! parallel as the daemon runs them).
//!
//! Owns the floor's figures and the ratio of `hook_prompt` to it. The spawn part goes through
//! the real static hook (a `PreToolUse` for `Read`: the hook proves the daemon's identity and
//! makes one small call); the encoding part loads the same models in this process, with the
//! daemon's thread count, between hook runs (so it never competes with a request). Must never
//! time the bench's own bookkeeping.

use super::corpus::Corpus;
use super::daemon::{Daemon, Instance};
use super::hooks::{self, THINK_TIME};
use super::report::Samples;
use anyhow::{Context, Result};
use memd_engine::models::embed::{Embed, LateInteraction, OnnxEmbedder, RuntimePaths};
use serde_json::json;
use std::path::Path;
use std::time::Instant;

/// Untimed encodings before the timed ones (ONNX Runtime's first runs allocate).
const WARM_UP: usize = 5;

/// The floor's two parts.
pub struct Floor {
    /// hook-prompt spawn → exit for a `PreToolUse` `Read`: identity check + one small call.
    pub spawn: Samples,
    /// The query's encodings, in parallel (the embedding alone without reranking).
    pub encode: Samples,
}

impl Floor {
    /// p50 of each part, added.
    pub fn p50(&self) -> f64 {
        self.spawn.percentile(0.5) + self.encode.percentile(0.5)
    }
}

/// `runs` of each part; `rerank`: the daemon reranks, so the late-interaction encoding runs
/// beside the embedding.
pub fn measure(
    d: &Daemon,
    inst: &Instance,
    hook_dir: &Path,
    runs: usize,
    corpus: &mut Corpus,
    rerank: bool,
) -> Result<Floor> {
    let models = Models::load(&inst.runtime_dir, rerank)?;
    let prompts: Vec<String> = (0..runs + WARM_UP).map(|_| corpus.prompt()).collect();
    for p in &prompts[..WARM_UP] {
        models.encode(p)?;
    }
    let hook = hook_dir.join("hook-prompt");
    let env = inst.env();
    let cwd = hooks::project_dir(inst)?;
    let mut floor = Floor {
        spawn: Samples::default(),
        encode: Samples::default(),
    };
    for (i, p) in prompts[WARM_UP..].iter().enumerate() {
        d.wait_embedded(std::time::Duration::from_secs(600))?;
        std::thread::sleep(THINK_TIME);
        let stdin = json!({
            "session_id": format!("bench-floor-{i:05}"),
            "cwd": cwd,
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": format!("{cwd}/README.md")},
            "tool_use_id": format!("toolu_floor_{i:05}"),
        });
        let (ms, _) = hooks::run_hook(&hook, stdin.to_string().as_bytes(), &env)?;
        floor.spawn.0.push(ms);
        std::thread::sleep(THINK_TIME);
        floor.encode.push(models.encode(p)?);
    }
    Ok(floor)
}

/// The daemon's query models, loaded the way it loads them.
struct Models {
    embedder: OnnxEmbedder,
    late: Option<LateInteraction>,
}

impl Models {
    fn load(runtime_dir: &Path, rerank: bool) -> Result<Models> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let paths = RuntimePaths::in_runtime_dir(runtime_dir);
        let embedder = OnnxEmbedder::load(&paths, threads).context("loading the embedder")?;
        let late = match rerank {
            true => {
                let dir = memd_engine::models::embed::late_interaction_dir_in(runtime_dir);
                let model = LateInteraction::load(&paths.ort_lib, &dir, threads)
                    .context("loading the late-interaction model")?;
                Some(model)
            }
            false => None,
        };
        Ok(Models { embedder, late })
    }

    /// Both encodings of `text` in parallel; the wall time of the slower.
    fn encode(&self, text: &str) -> Result<std::time::Duration> {
        let start = Instant::now();
        std::thread::scope(|scope| -> Result<()> {
            let late = self
                .late
                .as_ref()
                .map(|m| scope.spawn(move || m.encode_query(text).map(drop)));
            self.embedder.embed(&[text])?;
            if let Some(h) = late {
                h.join()
                    .map_err(|_| anyhow::anyhow!("late-interaction encoding panicked"))??;
            }
            Ok(())
        })?;
        Ok(start.elapsed())
    }
}
