//! One tokenizer per vocabulary for the whole process, cut to each model's length per call.
//!
//! memd's three models ship the same BERT uncased WordPiece `tokenizer.json`; the files differ
//! only in the truncation and padding they set, which memd replaces anyway. The library's
//! tokenizer holds its 30,522-entry vocabulary twice (token → id and id → token) in small heap
//! blocks, ~6 MB a copy, so files that tokenize alike share one tokenizer here, each model
//! passes its own cut (`Cut`) to `Vocab::encode`, and the vocabulary itself is held compactly
//! (`wordpiece::Pieces`, ~0.7 MB) inside the library's tokenizer.
//!
//! Owns reading `tokenizer.json` files, deciding which tokenize alike (the file with its
//! `truncation` and `padding` blanked, hashed), and encoding with a cut applied exactly where
//! the library applies its own truncation: between tokenising and adding `[CLS]`/`[SEP]`.
//! Must never change the tokens a model gets (the ids, type ids, masks, offsets and words are
//! those of a tokenizer loaded with the cut as its truncation: tested), and never keep a
//! tokenizer alive that no model uses (the cache holds weak references).
//!
//! The shared tokenizer keeps one truncation of its own, `LONGEST`: the library stops
//! tokenising a text once it has that many tokens (a 64 KB prompt is not tokenised whole), and
//! cuts a pair longest first from those capped lengths, so a pair's cut must be `LONGEST` to
//! match what the cross-encoder's own tokenizer did.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use anyhow::{Result, anyhow, ensure};
use sha2::Digest as _;
use tokenizers::utils::truncation::truncate_encodings;
use tokenizers::{
    DecoderWrapper, Encoding, ModelWrapper, NormalizerWrapper, PostProcessor as _,
    PostProcessorWrapper, PreTokenizerWrapper, Tokenizer, TokenizerImpl, TruncationParams,
};

use super::wordpiece::Pieces;

/// The library's tokenizer around memd's compact WordPiece vocabulary (`Pieces`).
type Lean = TokenizerImpl<
    Pieces,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

/// The most tokens any of memd's models reads of one input (the embedder's and the
/// cross-encoder's cut); a `Cut` may not ask for more.
pub(crate) const LONGEST: usize = 256;

/// The tokenizers loaded in this process, by the hash of their file without truncation and
/// padding.
static LOADED: Mutex<Vec<([u8; 32], Weak<Lean>)>> = Mutex::new(Vec::new());

/// A tokenizer without padding, cutting at `LONGEST`, possibly shared with other models.
#[derive(Clone)]
pub(crate) struct Vocab {
    tokenizer: Arc<Lean>,
}

/// How a model cuts its inputs: the truncation its tokenizer would otherwise carry, counted
/// with the special tokens (`max_length` 256 keeps 254 of the text's tokens and `[CLS]`,
/// `[SEP]`).
pub(crate) type Cut = TruncationParams;

impl Vocab {
    /// The tokenizer in `path`, shared with any model already holding one that tokenizes alike.
    pub(crate) fn load(path: &Path) -> Result<Vocab> {
        let fail =
            |e: &dyn std::fmt::Display| anyhow!("cannot load tokenizer {}: {e}", path.display());
        let bytes = std::fs::read(path).map_err(|e| fail(&e))?;
        let mut json: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| fail(&e))?;
        let fields = json
            .as_object_mut()
            .ok_or_else(|| fail(&"not a JSON object"))?;
        fields.insert("truncation".into(), serde_json::Value::Null);
        fields.insert("padding".into(), serde_json::Value::Null);
        let key: [u8; 32] = sha2::Sha256::digest(json.to_string().as_bytes()).into();
        let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
        loaded.retain(|(_, t)| t.strong_count() > 0);
        if let Some(tokenizer) = loaded
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|e| e.1.upgrade())
        {
            return Ok(Vocab { tokenizer });
        }
        let library: Tokenizer = serde_json::from_value(json).map_err(|e| fail(&e))?;
        let mut tokenizer = lean(&library).map_err(|e| fail(&e))?;
        drop(library);
        let longest = TruncationParams {
            max_length: LONGEST,
            ..Default::default()
        };
        tokenizer
            .with_truncation(Some(longest))
            .map_err(|e| fail(&e))?;
        let tokenizer = Arc::new(tokenizer);
        loaded.push((key, Arc::downgrade(&tokenizer)));
        Ok(Vocab { tokenizer })
    }

    /// `text`'s encoding with `[CLS]`/`[SEP]`, cut to `cut`.
    pub(crate) fn encode(&self, text: &str, cut: &Cut) -> Result<Encoding> {
        let encoding = self.bare(text)?;
        let (encoding, _) = self.truncate(encoding, None, cut)?;
        self.finish(encoding, None)
    }

    /// A pair's encoding (`[CLS] a [SEP] b [SEP]`, `b` with type id 1), cut to `cut`.
    pub(crate) fn encode_pair(&self, a: &str, b: &str, cut: &Cut) -> Result<Encoding> {
        let (a, b) = (self.bare(a)?, self.bare(b)?);
        let (a, b) = self.truncate(a, Some(b), cut)?;
        self.finish(a, b)
    }

    /// The vocabulary entry of `id` (`None` when out of range).
    pub(crate) fn id_to_token(&self, id: u32) -> Option<String> {
        self.tokenizer.id_to_token(id)
    }

    /// Whether both use one tokenizer in memory.
    #[cfg(test)]
    pub(crate) fn is_shared_with(&self, other: &Vocab) -> bool {
        Arc::ptr_eq(&self.tokenizer, &other.tokenizer)
    }

    /// The text's tokens without special tokens, at most `LONGEST`.
    fn bare(&self, text: &str) -> Result<Encoding> {
        self.tokenizer
            .encode(text, false)
            .map_err(|e| anyhow!("tokenizing: {e}"))
    }

    /// As the library truncates: `cut.max_length` less the special tokens that will be added.
    fn truncate(
        &self,
        a: Encoding,
        b: Option<Encoding>,
        cut: &Cut,
    ) -> Result<(Encoding, Option<Encoding>)> {
        ensure!(
            cut.max_length <= LONGEST,
            "a cut of {} tokens is over the tokenizer's limit of {LONGEST}",
            cut.max_length
        );
        let added = self
            .tokenizer
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(b.is_some()));
        let params = Cut {
            max_length: cut.max_length.saturating_sub(added),
            ..*cut
        };
        truncate_encodings(a, b, &params).map_err(|e| anyhow!("cutting tokens: {e}"))
    }

    /// Adds the special tokens (the tokenizer's own truncation, `LONGEST`, cuts nothing more;
    /// it has no padding).
    fn finish(&self, a: Encoding, b: Option<Encoding>) -> Result<Encoding> {
        self.tokenizer
            .post_process(a, b, true)
            .map_err(|e| anyhow!("adding special tokens: {e}"))
    }
}

/// `library` with its WordPiece vocabulary held as `Pieces`: the same normalizer,
/// pre-tokenizer, added tokens, post-processor and decoder.
fn lean(library: &Tokenizer) -> Result<Lean> {
    let ModelWrapper::WordPiece(wordpiece) = library.get_model() else {
        return Err(anyhow!("not a WordPiece tokenizer"));
    };
    let mut lean = Lean::new(Pieces::from_library(wordpiece)?);
    lean.with_normalizer(library.get_normalizer().cloned())
        .map_err(|e| anyhow!("{e}"))?;
    lean.with_pre_tokenizer(library.get_pre_tokenizer().cloned())
        .with_post_processor(library.get_post_processor().cloned())
        .with_decoder(library.get_decoder().cloned())
        .with_added_vocabulary(library.get_added_vocabulary().clone());
    Ok(lean)
}

#[cfg(test)]
#[path = "vocab_tests.rs"]
mod tests;
