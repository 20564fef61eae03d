//! A WordPiece vocabulary kept in three flat arrays instead of two maps of strings.
//!
//! The tokenizers library's WordPiece holds its 30,522 entries twice (token → id and id →
//! token), every token its own heap block: ~6 MB resident for the one tokenizer the three
//! models share (bench/EVAL.md section 19). `Pieces` holds every token once, in one string, with
//! an index by text over the ids: ~0.7 MB. It splits a word exactly as the library's WordPiece
//! does (greedy longest match from the left, continuations prefixed `##`, a word that cannot be
//! split or is too long becomes the unknown token), so the library's normalizer,
//! pre-tokenizer, added tokens and post-processor run around it unchanged.
//!
//! Owns the vocabulary's layout and WordPiece's split. Must never give other tokens than the
//! library's WordPiece for the same vocabulary (tested against it, on the shipped files), nor
//! accept a vocabulary it cannot hold exactly (ids that are not 0..n, a missing unknown token):
//! those are load errors.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, ensure};
use hashbrown::HashTable;
use tokenizers::models::wordpiece::{WordPiece, WordPieceTrainer};
use tokenizers::{Model, Token};

/// A WordPiece model over one shared string of its tokens.
pub(crate) struct Pieces {
    /// Every token, in id order, back to back.
    text: String,
    /// Where token `id` ends in `text` (it starts where `id - 1` ends).
    ends: Vec<u32>,
    /// The ids, found by their token's text.
    index: HashTable<u32>,
    hasher: RandomState,
    unknown: u32,
    unknown_token: String,
    prefix: String,
    max_chars: usize,
}

impl Pieces {
    /// The same vocabulary and settings as `library`'s.
    pub(crate) fn from_library(library: &WordPiece) -> Result<Pieces> {
        let vocab = library.get_vocab();
        let mut by_id: Vec<Option<&str>> = vec![None; vocab.len()];
        for (token, &id) in &vocab {
            let slot = by_id
                .get_mut(id as usize)
                .ok_or_else(|| anyhow!("vocabulary id {id} is over its size {}", vocab.len()))?;
            *slot = Some(token);
        }
        let size: usize = vocab.keys().map(String::len).sum();
        ensure!(
            u32::try_from(size).is_ok(),
            "vocabulary of {size} bytes is over the limit of 4 GiB"
        );
        let mut pieces = Pieces {
            text: String::with_capacity(size),
            ends: Vec::with_capacity(vocab.len()),
            index: HashTable::with_capacity(vocab.len()),
            hasher: RandomState::new(),
            unknown: 0,
            unknown_token: library.unk_token.clone(),
            prefix: library.continuing_subword_prefix.clone(),
            max_chars: library.max_input_chars_per_word,
        };
        for (id, token) in (0u32..).zip(by_id) {
            // n entries into n slots: an empty one means an id was repeated.
            let token = token.ok_or_else(|| anyhow!("vocabulary has no token of id {id}"))?;
            pieces.text.push_str(token);
            pieces.ends.push(pieces.text.len() as u32);
            let hash = pieces.hasher.hash_one(token);
            pieces.index.insert_unique(hash, id, |&i| {
                pieces
                    .hasher
                    .hash_one(token_of(&pieces.text, &pieces.ends, i))
            });
        }
        pieces.unknown = pieces
            .token_to_id(&pieces.unknown_token)
            .ok_or_else(|| anyhow!("vocabulary has no unknown token {}", library.unk_token))?;
        Ok(pieces)
    }

    /// Heap bytes held.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.text.capacity()
            + self.ends.capacity() * size_of::<u32>()
            + self.index.allocation_size()
    }

    fn id(&self, token: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(token);
        self.index
            .find(hash, |&i| token_of(&self.text, &self.ends, i) == token)
            .copied()
    }

    fn token(&self, id: u32) -> Option<&str> {
        ((id as usize) < self.ends.len()).then(|| token_of(&self.text, &self.ends, id))
    }

    fn unknown(&self, word: &str) -> Vec<Token> {
        vec![Token::new(
            self.unknown,
            self.unknown_token.clone(),
            (0, word.len()),
        )]
    }

    /// The longest vocabulary entry `word[start..]` begins with (`##`-prefixed after the
    /// word's first piece): its id and its end in `word`; its text is left in `key`.
    fn longest(&self, word: &str, start: usize, key: &mut String) -> Option<(u32, usize)> {
        let mut end = word.len();
        while end > start {
            key.clear();
            if start > 0 {
                key.push_str(&self.prefix);
            }
            key.push_str(&word[start..end]);
            if let Some(id) = self.id(key) {
                return Some((id, end));
            }
            end = word[..end]
                .char_indices()
                .next_back()
                .map_or(start, |(i, _)| i);
        }
        None
    }
}

fn token_of<'a>(text: &'a str, ends: &[u32], id: u32) -> &'a str {
    let end = ends[id as usize] as usize;
    let start = id.checked_sub(1).map_or(0, |p| ends[p as usize] as usize);
    &text[start..end]
}

impl Model for Pieces {
    type Trainer = WordPieceTrainer;

    fn tokenize(&self, word: &str) -> tokenizers::Result<Vec<Token>> {
        if word.chars().count() > self.max_chars {
            return Ok(self.unknown(word));
        }
        let (mut tokens, mut key, mut start) = (Vec::new(), String::new(), 0);
        while start < word.len() {
            let Some((id, end)) = self.longest(word, start, &mut key) else {
                return Ok(self.unknown(word));
            };
            tokens.push(Token::new(id, key.clone(), (start, end)));
            start = end;
        }
        Ok(tokens)
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.id(token)
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        self.token(id).map(str::to_owned)
    }

    fn get_vocab(&self) -> HashMap<String, u32> {
        (0..self.ends.len() as u32)
            .map(|id| (token_of(&self.text, &self.ends, id).to_owned(), id))
            .collect()
    }

    fn get_vocab_size(&self) -> usize {
        self.ends.len()
    }

    fn save(&self, _folder: &Path, _prefix: Option<&str>) -> tokenizers::Result<Vec<PathBuf>> {
        Err("memd's WordPiece vocabulary is read only".into())
    }

    fn get_trainer(&self) -> WordPieceTrainer {
        WordPieceTrainer::builder().build()
    }
}

#[cfg(test)]
#[path = "wordpiece_tests.rs"]
mod tests;
