//! all-MiniLM-L6-v2 sentence embeddings through ONNX Runtime (`ort`, loaded with dlopen).
//!
//! Owns the pipeline: tokenize (cut at 256 tokens) → batch by similar length, padded to the
//! batch's longest → ONNX session → attention-masked mean pooling → L2 normalisation.
//! Must never: panic or abort when the library or model is missing, foreign or broken (those
//! are errors), run the session without holding its mutex, or hold it while tokenising.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use anyhow::{Context, Result, anyhow, bail, ensure};
use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::{RunOptions, Session};
use ort::value::TensorRef;
use tokenizers::Encoding;

use super::batch::QueryBatch;
use super::gate::{Gate, Priority};
use super::vocab::{Cut, Vocab};
use super::{DIMS, Embed, RuntimePaths};

/// Inputs are cut to this many tokens (including [CLS] and [SEP]), the sentence-transformers
/// `max_seq_length` of all-MiniLM-L6-v2.
pub const MAX_TOKENS: usize = 256;

/// Texts are cut to this many bytes before tokenising. 256 tokens never need more than about
/// 26 KB (a token per 100-character word at worst), so this only bounds the time spent
/// tokenising huge inputs whose tail would be truncated anyway.
const MAX_INPUT_BYTES: usize = 64 * 1024;

/// Largest number of texts sent to the session in one run. Length-sorted batches of 8 embed
/// about 1.7x more sentences per second than one at a time on 2 cores, larger ones no more;
/// small batches also keep a concurrent caller's wait for the session lock short.
const MAX_BATCH: usize = 8;

const INPUT_IDS: &str = "input_ids";
const ATTENTION_MASK: &str = "attention_mask";
const TOKEN_TYPE_IDS: &str = "token_type_ids";
const HIDDEN_STATE: &str = "last_hidden_state";

/// The ONNX Runtime library can be loaded once per process and ort allows only one
/// `Environment` per process, ever; every embedder shares this one.
static LOADED_RUNTIME: Mutex<Option<(PathBuf, Environment)>> = Mutex::new(None);

/// all-MiniLM-L6-v2 (int8 weights) behind ONNX Runtime. Safe to share between threads: the
/// session runs one batch at a time behind a mutex; tokenising happens outside it.
pub struct OnnxEmbedder {
    session: Gate<Session>,
    run_options: RunModes,
    queries: QueryBatch,
    /// Shared with the late-interaction model (same vocabulary); cut at `MAX_TOKENS`.
    vocab: Vocab,
    /// Pool with the `[CLS]` state instead of the mean (bge models; for studies).
    cls_pooling: bool,
    /// Weights kept int8 by the load-time rewrites (`int8_tables`, `int8_matmul`).
    int8: Rewritten,
    /// Kept so the environment outlives the session (ort only holds a weak reference).
    _environment: Environment,
}

impl OnnxEmbedder {
    /// Loads ONNX Runtime, the model and the tokenizer. `threads` is the number of intra-op
    /// threads per session run; 0 lets ONNX Runtime choose (one per physical core).
    pub fn load(paths: &RuntimePaths, threads: usize) -> Result<Self> {
        Self::load_graph(paths, threads, Weights::Int8)
    }

    /// `load` with the matrix weights dequantised to fp32 at load, as memd did before
    /// `int8_matmul` (exact fp32 products, 31 MB more): the vectors stores made before it
    /// hold, for studies and the tests that compare the two.
    pub fn load_with_fp32_matmuls(paths: &RuntimePaths, threads: usize) -> Result<Self> {
        Self::load_graph(paths, threads, Weights::Int8Tables)
    }

    /// `load` without any rewrite (ONNX Runtime then holds every weight as fp32): the
    /// baseline that proves the table rewrite exact, and for studies.
    pub fn load_as_shipped(paths: &RuntimePaths, threads: usize) -> Result<Self> {
        Self::load_graph(paths, threads, Weights::AsShipped)
    }

    fn load_graph(paths: &RuntimePaths, threads: usize, weights: Weights) -> Result<Self> {
        paths.check().map_err(|msg| anyhow!(msg))?;
        let environment = shared_environment(&paths.ort_lib)?;
        let what = "embedding model";
        let (session, int8) = build_session(&environment, &paths.model, threads, what, weights)?;
        check_model_signature(&session, &paths.model)?;
        let vocab = Vocab::load(&paths.tokenizer)?;
        Ok(Self {
            session: Gate::new(session),
            run_options: RunModes::new()?,
            queries: QueryBatch::default(),
            vocab,
            cls_pooling: false,
            int8,
            _environment: environment,
        })
    }

    /// Pools with the `[CLS]` state (how bge-small-en-v1.5 was trained). For studies: memd's
    /// model is all-MiniLM-L6-v2, mean-pooled.
    pub fn with_cls_pooling(mut self) -> Self {
        self.cls_pooling = true;
        self
    }

    /// How many int8 lookup tables the load kept int8 (2 for memd's model, 0 as shipped).
    pub fn int8_tables(&self) -> usize {
        self.int8.tables
    }

    /// How many matrix weights the load kept int8 (36 for memd's model: six per layer; 0 with
    /// fp32 matmuls, as shipped, or on a CPU without `int8_matmuls_supported`).
    pub fn int8_matmuls(&self) -> usize {
        self.int8.matmuls
    }

    /// Whether this CPU runs int8 matrix weights faster than fp32 ones (int8 dot-product
    /// instructions); without them `load` keeps the matrix weights fp32.
    pub fn int8_matmuls_supported() -> bool {
        super::int8_matmul::cpu_has_int8_dot()
    }

    fn tokenize(&self, text: &str) -> Result<Encoding> {
        // The shipped tokenizer.json cuts at 128; the model was trained for 256.
        let cut = Cut {
            max_length: MAX_TOKENS,
            ..Default::default()
        };
        self.vocab
            .encode(cut_at_char_boundary(text, MAX_INPUT_BYTES), &cut)
            .context("tokenizing text for embedding")
    }

    /// Runs one batch of encodings through the model and returns one unit vector for each.
    fn embed_batch(&self, encodings: &[&Encoding], priority: Priority) -> Result<Vec<Vec<f32>>> {
        let batch = PaddedBatch::new(encodings);
        let shape = [batch.rows, batch.width];
        let mut session = self.session.lock(priority);
        let outputs = session
            .run_with_options(
                ort::inputs![
                    INPUT_IDS => TensorRef::from_array_view((shape, &batch.ids[..]))?,
                    ATTENTION_MASK => TensorRef::from_array_view((shape, &batch.mask[..]))?,
                    TOKEN_TYPE_IDS => TensorRef::from_array_view((shape, &batch.type_ids[..]))?,
                ],
                self.run_options.of(priority),
            )
            .context("running the embedding model")?;
        let hidden = outputs
            .get(HIDDEN_STATE)
            .ok_or_else(|| anyhow!("embedding model returned no `{HIDDEN_STATE}`"))?;
        let (out_shape, states) = hidden.try_extract_tensor::<f32>()?;
        let expected = [batch.rows as i64, batch.width as i64, DIMS as i64];
        ensure!(
            out_shape[..] == expected[..],
            "embedding model returned shape {out_shape:?}, expected {expected:?}"
        );
        if self.cls_pooling {
            return Ok((0..batch.rows)
                .map(|row| {
                    let at = row * batch.width * DIMS;
                    let mut v = states[at..at + DIMS].to_vec();
                    normalise(&mut v);
                    v
                })
                .collect());
        }
        Ok(batch.mean_pool_normalised(states))
    }

    /// One vector per text, in input order, run in length-sorted batches at `priority`.
    fn embed_at(&self, texts: &[&str], priority: Priority) -> Result<Vec<Vec<f32>>> {
        crate::heap::mark_dirty();
        let encodings = texts
            .iter()
            .map(|text| self.tokenize(text))
            .collect::<Result<Vec<_>>>()?;
        // Sorting by length keeps padding, which costs as much as real tokens, small.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut vectors = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(MAX_BATCH) {
            let batch: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            for (&i, vector) in chunk.iter().zip(self.embed_batch(&batch, priority)?) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }
}

impl Embed for OnnxEmbedder {
    fn dims(&self) -> usize {
        DIMS
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_at(texts, Priority::Background)
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.queries.encode(text, MAX_BATCH, |texts| {
            self.embed_at(texts, Priority::Urgent)
        })
    }
}

/// Token tensors for one batch, padded on the right to the longest encoding.
pub(super) struct PaddedBatch {
    pub rows: usize,
    pub width: usize,
    pub ids: Vec<i64>,
    pub mask: Vec<i64>,
    pub type_ids: Vec<i64>,
}

impl PaddedBatch {
    pub(super) fn new(encodings: &[&Encoding]) -> Self {
        let rows = encodings.len();
        let width = encodings.iter().map(|e| e.len()).max().unwrap_or(0);
        let mut batch = PaddedBatch {
            rows,
            width,
            ids: vec![0; rows * width],
            mask: vec![0; rows * width],
            type_ids: vec![0; rows * width],
        };
        for (row, encoding) in encodings.iter().enumerate() {
            let start = row * width;
            let widen = |dst: &mut [i64], src: &[u32]| {
                dst.iter_mut()
                    .zip(src)
                    .for_each(|(d, &s)| *d = i64::from(s));
            };
            widen(&mut batch.ids[start..start + width], encoding.get_ids());
            widen(
                &mut batch.mask[start..start + width],
                encoding.get_attention_mask(),
            );
            widen(
                &mut batch.type_ids[start..start + width],
                encoding.get_type_ids(),
            );
        }
        batch
    }

    /// Averages each row's hidden states over its real (unmasked) tokens, then scales the
    /// average to unit length. `states` is `[rows, width, DIMS]`, row-major.
    fn mean_pool_normalised(&self, states: &[f32]) -> Vec<Vec<f32>> {
        (0..self.rows)
            .map(|row| {
                let mut sum = vec![0f32; DIMS];
                for pos in 0..self.width {
                    let at = row * self.width + pos;
                    if self.mask[at] == 0 {
                        continue;
                    }
                    let token = &states[at * DIMS..(at + 1) * DIMS];
                    sum.iter_mut().zip(token).for_each(|(s, x)| *s += x);
                }
                normalise(&mut sum);
                sum
            })
            .collect()
    }
}

/// Scales to unit length. The mean's divisor cancels out, so pooling can skip it.
pub(super) fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

pub(super) fn cut_at_char_boundary(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The options of a session run, by who waits for it. After a background run (embedding new
/// memories, their token states: large batches) ONNX Runtime's CPU arena frees the regions
/// it holds unused instead of keeping the largest run's buffers for the daemon's life. With
/// `heap::tune_for_daemon` those regions are separate mappings, so the pages go back to the
/// system (idle RSS at 10,000 memories 243–249 → 205–207 MB; without the fixed threshold,
/// shrinking alone made it worse, 296 MB, as glibc's heaps kept the freed regions). An urgent
/// run (a query someone waits for: small) keeps them, so the next prompt reuses the pages
/// instead of faulting fresh ones in (shrinking after every run added 8–10 ms to hook-prompt's
/// p99); the next background run gives them back.
pub(super) struct RunModes {
    urgent: RunOptions,
    background: RunOptions,
}

impl RunModes {
    pub(super) fn new() -> Result<RunModes> {
        Ok(RunModes {
            urgent: RunOptions::new()?,
            background: shrinking_run_options()?,
        })
    }

    pub(super) fn of(&self, priority: Priority) -> &RunOptions {
        match priority {
            Priority::Urgent => &self.urgent,
            Priority::Background => &self.background,
        }
    }
}

/// Run options that shrink the CPU arena when the run ends (`RunModes`); the cross-encoder,
/// run for searches only, with passages up to 512 tokens, shrinks after every run.
pub(super) fn shrinking_run_options() -> Result<RunOptions> {
    let mut options = RunOptions::new()?;
    options.set("memory.enable_memory_arena_shrinkage", "cpu:0")?;
    Ok(options)
}

/// Loads the ONNX Runtime library (once per process) and returns the process's environment.
pub(super) fn shared_environment(lib: &Path) -> Result<Environment> {
    let lib = lib
        .canonicalize()
        .with_context(|| format!("ONNX Runtime library {}", lib.display()))?;
    let mut loaded = LOADED_RUNTIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some((loaded_lib, environment)) = loaded.as_ref() {
        ensure!(
            *loaded_lib == lib,
            "ONNX Runtime is already loaded from {} in this process; cannot also load {}",
            loaded_lib.display(),
            lib.display()
        );
        return Ok(environment.clone());
    }
    // ort reports load failures as errors, but has asserts on paths we can't fully rule out
    // (e.g. a library that answers with no API table); turn those into errors too.
    let environment = catch_unwind(AssertUnwindSafe(|| create_environment(&lib)))
        .map_err(|_| anyhow!("ONNX Runtime at {} crashed while loading", lib.display()))??;
    *loaded = Some((lib, environment.clone()));
    Ok(environment)
}

fn create_environment(lib: &Path) -> Result<Environment> {
    let builder = ort::init_from(lib).map_err(|e| {
        anyhow!(
            "cannot load ONNX Runtime 1.31 from {}: {e} (reinstall it with {})",
            lib.display(),
            super::FETCH_COMMAND
        )
    })?;
    builder
        .with_name("memd")
        // ort turns ONNX Runtime's telemetry events on unless told otherwise; memd sends
        // nothing anywhere.
        .with_telemetry(false)
        .build()
        .map_err(|e| anyhow!("cannot create the ONNX Runtime environment: {e}"))
}

/// Which int8 weights `build_session` keeps int8 in memory (the file on disk is never changed).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Weights {
    /// Lookup tables (`int8_tables`) and matrix weights (`int8_matmul`): the embedder.
    Int8,
    /// Lookup tables only: the rerankers, and the embedder as it was before `int8_matmul`.
    Int8Tables,
    /// The graph as shipped: ONNX Runtime folds every dequantised weight into fp32.
    AsShipped,
}

/// How many weights a load rewrote to stay int8.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(super) struct Rewritten {
    pub tables: usize,
    pub matmuls: usize,
}

/// The model's bytes with the rewrites `weights` asks for, or `None` when nothing applies (the
/// session then loads the file itself).
fn rewrite_weights(model: &Path, weights: Weights) -> Option<(Vec<u8>, Rewritten)> {
    if weights == Weights::AsShipped {
        return None;
    }
    let mut bytes = std::fs::read(model).ok()?;
    let mut done = Rewritten::default();
    if let Some((out, n)) = super::int8_tables::rewrite(&bytes) {
        (bytes, done.tables) = (out, n);
    }
    if weights == Weights::Int8
        && super::int8_matmul::cpu_has_int8_dot()
        && let Some((out, n)) = super::int8_matmul::rewrite(&bytes)
    {
        (bytes, done.matmuls) = (out, n);
    }
    (done != Rewritten::default()).then_some((bytes, done))
}

/// The session, and how many int8 weights it keeps int8. `what` names the model in
/// errors ("embedding model", "reranker model").
pub(super) fn build_session(
    environment: &Environment,
    model: &Path,
    threads: usize,
    what: &str,
    weights: Weights,
) -> Result<(Session, Rewritten)> {
    let rewritten = rewrite_weights(model, weights);
    let build = || -> ort::Result<Session> {
        let mut builder = Session::builder(environment)?
            .with_optimization_level(GraphOptimizationLevel::Level3)?
            .with_intra_threads(threads)?
            .with_inter_threads(1)?
            // memd is a mostly idle daemon on machines shared with builds: pool threads must
            // sleep between requests instead of spinning on a core.
            .with_intra_op_spinning(false)?;
        if weights == Weights::Int8 {
            // What `int8_matmul` relies on, stated rather than left to defaults: a
            // `DequantizeLinear` → `MatMul` becomes the int8 kernel (accuracy level 4),
            // quantising activations in blocks of 16. ONNX Runtime's default blocks of 32 cost
            // LoCoMo's shipped R@10 0.007; 16 keeps every figure within 0.005 for 3.6 MB more.
            builder = builder
                .with_config_entry("session.qdq_matmulnbits_accuracy_level", "4")?
                .with_config_entry("session.qdq_matmulnbits_block_size", "16")?;
        }
        // ONNX Runtime's CPU arena stays on; background runs give back what they grew
        // (`RunModes`, `shrinking_run_options`). Without the arena, memd-bench's idle RSS at 1k memories measured
        // 404 MB instead of 276 MB (glibc's dynamic threshold then kept the freed buffers
        // in its heaps).
        match &rewritten {
            Some((bytes, _)) => builder.commit_from_memory(bytes),
            None => builder.commit_from_file(model),
        }
    };
    let session =
        build().map_err(|e| anyhow!("cannot load the {what} {}: {e}", model.display()))?;
    Ok((
        session,
        rewritten.map_or_else(Rewritten::default, |(_, n)| n),
    ))
}

/// A model directory's parts (`model.onnx`, `tokenizer.json`), as the rerankers load them.
pub(super) struct ModelDir {
    pub environment: Environment,
    pub session: Session,
    pub vocab: Vocab,
}

/// Loads `dir`'s model on `ort_lib`, checks it has the output `output`, and loads its
/// tokenizer (`Vocab`: the caller cuts per call). `what` names the model in errors
/// ("reranker", "late-interaction").
pub(super) fn load_model_dir(
    ort_lib: &Path,
    dir: &Path,
    threads: usize,
    what: &str,
    output: &str,
) -> Result<ModelDir> {
    let model = dir.join("model.onnx");
    let tokenizer_file = dir.join("tokenizer.json");
    for (part, path) in [("model", &model), ("tokenizer", &tokenizer_file)] {
        ensure!(
            path.is_file(),
            "missing {what} {part}: {} (fix: run `{}`)",
            path.display(),
            super::FETCH_COMMAND
        );
    }
    let environment = shared_environment(ort_lib)?;
    let (session, _) = build_session(
        &environment,
        &model,
        threads,
        &format!("{what} model"),
        Weights::Int8Tables,
    )?;
    ensure!(
        session.outputs().iter().any(|o| o.name() == output),
        "{what} model {} has no `{output}` output",
        model.display()
    );
    Ok(ModelDir {
        environment,
        session,
        vocab: Vocab::load(&tokenizer_file)?,
    })
}

/// Rejects a model that isn't a BERT-style encoder with the inputs and output we feed and read.
fn check_model_signature(session: &Session, model: &Path) -> Result<()> {
    let inputs: Vec<&str> = session.inputs().iter().map(|i| i.name()).collect();
    for name in [INPUT_IDS, ATTENTION_MASK, TOKEN_TYPE_IDS] {
        ensure!(
            inputs.contains(&name),
            "embedding model {} has inputs {inputs:?}, expected `{name}`",
            model.display()
        );
    }
    if !session.outputs().iter().any(|o| o.name() == HIDDEN_STATE) {
        bail!(
            "embedding model {} has no `{HIDDEN_STATE}` output",
            model.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_short_text_and_respects_char_boundaries() {
        assert_eq!(cut_at_char_boundary("abc", 10), "abc");
        assert_eq!(cut_at_char_boundary("abc", 2), "ab");
        // "é" is two bytes: cutting inside it backs off to before it.
        assert_eq!(cut_at_char_boundary("aé", 2), "a");
        assert_eq!(cut_at_char_boundary("東京", 4), "東");
    }

    #[test]
    fn normalise_gives_unit_length_and_leaves_zero_alone() {
        let mut v = vec![3.0, 4.0];
        normalise(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut zero = vec![0.0; 3];
        normalise(&mut zero);
        assert_eq!(zero, vec![0.0; 3]);
    }

    #[test]
    fn pooling_ignores_padded_positions() {
        // Two rows, width 2; row 1's second position is padding with huge values.
        let batch = PaddedBatch {
            rows: 2,
            width: 2,
            ids: vec![1, 2, 3, 0],
            mask: vec![1, 1, 1, 0],
            type_ids: vec![0; 4],
        };
        let mut states = vec![0f32; 2 * 2 * DIMS];
        states[0] = 1.0; // row 0, pos 0, dim 0
        states[DIMS + 1] = 1.0; // row 0, pos 1, dim 1
        states[2 * DIMS + 2] = 2.0; // row 1, pos 0, dim 2
        states[3 * DIMS..4 * DIMS].fill(1000.0); // row 1, pos 1: padding
        let pooled = batch.mean_pool_normalised(&states);
        let half = 1.0 / 2f32.sqrt();
        assert!((pooled[0][0] - half).abs() < 1e-6 && (pooled[0][1] - half).abs() < 1e-6);
        assert_eq!(pooled[1][2], 1.0);
        assert_eq!(pooled[1].iter().filter(|&&x| x != 0.0).count(), 1);
    }
}
