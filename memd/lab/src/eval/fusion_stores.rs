//! The stores `memd-eval fusion` ranks in (issue 34, bench/EVAL.md sections 11-13, 16): each
//! set's own (each LoCoMo conversation apart), or one holding every set's memories and
//! questions at once, as a user's daemon holds conversations and notes together (a question's
//! candidates then include other sets' memories); and what the study reads off a store
//! before ranking: every memory's token states, token ids and kind, and document frequencies.
//!
//! Owns loading the sets, the merge (each label, each piece of evidence and each project
//! prefixed with its set's name, so LoCoMo's `D1:3` of two conversations and the two sets'
//! `infra` projects stay apart; conversation turns marked
//! `memory_type: exchange`, as the daemon files them, so the exchange weight acts on them as
//! in a user's store) and the split of the questions back by set. Must never change a
//! memory's text or collection, or a question, beyond those prefixes and marker, or write
//! anywhere but temporary stores.

use super::coding::{CodingIndex, CodingSet};
use super::dataset::Question;
use super::fusion_tokens::{Counts, Kind, Vocabulary};
use super::late::TurnText;
use super::locomo::Indexed;
use anyhow::Result;
use memd_engine::models::embed::{Embed, LateInteraction, TokenStates};
use memd_engine::record::new_id;
use proto::{Collection, Value};
use std::collections::HashMap;
use std::path::PathBuf;

/// Where the study ranks each question.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Stores {
    /// Each set (each LoCoMo conversation) in a store of its own.
    Own,
    /// Every set's memories in one store, as a user's daemon holds them (bench/EVAL.md
    /// section 16): a question's candidates include other sets' memories.
    Mixed,
}

/// Every set, stored and embedded apart: LoCoMo's conversations (when given), the coding
/// and holdout sets, the paraphrase probe.
pub(super) struct Loaded {
    locomo: Vec<Indexed>,
    coding: Vec<(String, CodingIndex)>,
    probe: Indexed,
}

impl Loaded {
    pub(super) fn load(locomo: Option<PathBuf>, embedder: &dyn Embed) -> Result<Loaded> {
        let locomo = match locomo {
            Some(dir) => {
                let files = super::dataset::conversation_files(&dir)?;
                super::late::index_files(&files, embedder, TurnText::Speaker)?
            }
            None => Vec::new(),
        };
        let mut coding = Vec::new();
        for (name, dir) in super::coding::repository_sets() {
            let index = CodingIndex::build(CodingSet::load(&dir)?, embedder)?;
            coding.push((name.replace(' ', "_"), index));
        }
        let probe = super::paraphrase::probe_index(embedder)?;
        Ok(Loaded {
            locomo,
            coding,
            probe,
        })
    }

    /// Every store with its set's name, LoCoMo's conversations under one, in that order.
    pub(super) fn parts(&self) -> Vec<(String, &Indexed)> {
        self.locomo
            .iter()
            .map(|ix| ("locomo".to_string(), ix))
            .chain(self.coding.iter().map(|(n, c)| (n.clone(), c.indexed())))
            .chain([("probe".to_string(), &self.probe)])
            .collect()
    }
}

/// Every memory of one store: (key, text, kind).
pub(super) fn texts_of(ix: &Indexed) -> Vec<(u64, String, Kind)> {
    ix.store.read(|s| {
        ix.labels
            .keys()
            .filter_map(|&k| {
                let rec = s.by_key(k)?;
                Some((k, rec.content.clone(), kind_of(rec.collection)))
            })
            .collect()
    })
}

/// Conversation turns (working, history, patterns) against notes (memory bank, books).
fn kind_of(c: Collection) -> Kind {
    match c {
        Collection::Working | Collection::History | Collection::Patterns => Kind::Exchange,
        Collection::MemoryBank | Collection::Books => Kind::Note,
    }
}

/// Document frequencies over every set's memories together, whole and by kind, as one
/// daemon holding them all would count them.
pub(super) fn count_every(parts: &[(String, &Indexed)], model: &LateInteraction) -> Result<Counts> {
    let mut counts = Counts::default();
    for (_, ix) in parts {
        for (_, t, kind) in texts_of(ix) {
            let ids = model.doc_ids(&t)?;
            counts.mixed.add(&ids);
            counts.kinds[kind as usize].add(&ids);
        }
    }
    Ok(counts)
}

/// Every memory's token states, token ids and kind, and the store's document frequencies.
pub(super) struct Encoded {
    pub(super) states: HashMap<u64, TokenStates>,
    pub(super) ids: HashMap<u64, Vec<i64>>,
    pub(super) kinds: HashMap<u64, Kind>,
    pub(super) vocab: Vocabulary,
}

pub(super) fn encode_store(ix: &Indexed, model: &LateInteraction) -> Result<Encoded> {
    let mut e = Encoded {
        states: HashMap::new(),
        ids: HashMap::new(),
        kinds: HashMap::new(),
        vocab: Vocabulary::default(),
    };
    for (k, t, kind) in texts_of(ix) {
        let (ids, rows) = model.doc_rows(&t)?;
        e.vocab.add(&ids);
        e.states.insert(k, TokenStates::quantize_rows(&rows));
        e.ids.insert(k, ids);
        e.kinds.insert(k, kind);
    }
    Ok(e)
}

/// The merged store and, in its question order, each set's name and question count.
pub(super) struct Mixed {
    pub(super) ix: Indexed,
    pub(super) sets: Vec<(String, usize)>,
}

/// Every memory and question of `parts` (set name, store) in one fresh store, embedded again.
pub(super) fn mixed_store(parts: &[(String, &Indexed)], embedder: &dyn Embed) -> Result<Mixed> {
    let mut memories = Vec::new();
    let mut questions: Vec<Question> = Vec::new();
    let mut sets: Vec<(String, usize)> = Vec::new();
    for (name, ix) in parts {
        let prefixed = |label: &String| format!("{name}/{label}");
        ix.store.read(|s| {
            let mut keys: Vec<&u64> = ix.labels.keys().collect();
            keys.sort();
            for key in keys {
                let Some(rec) = s.by_key(*key) else { continue };
                for label in &ix.labels[key] {
                    let mut rec = rec.clone();
                    rec.key = 0;
                    rec.id = new_id(rec.collection);
                    rec.project = rec.project.as_ref().map(prefixed);
                    if kind_of(rec.collection) == Kind::Exchange {
                        rec.metadata
                            .insert("memory_type".into(), Value::from("exchange"));
                    }
                    memories.push((rec, prefixed(label)));
                }
            }
        });
        questions.extend(ix.questions.iter().map(|q| Question {
            text: q.text.clone(),
            category: q.category,
            evidence: q.evidence.iter().map(prefixed).collect(),
            project: q.project.as_ref().map(prefixed),
        }));
        match sets.iter_mut().find(|(n, _)| n == name) {
            Some((_, count)) => *count += ix.questions.len(),
            None => sets.push((name.clone(), ix.questions.len())),
        }
    }
    let ix = Indexed::store(memories, &questions, embedder)?;
    anyhow::ensure!(
        ix.questions.len() == questions.len(),
        "{} of {} questions were embedded",
        ix.questions.len(),
        questions.len()
    );
    Ok(Mixed { ix, sets })
}
