//! One evaluation store holding every set's memories and questions at once (issue 34, bench/
//! EVAL.md section 16), as a user's daemon holds conversations and notes together: the
//! candidates a question gets there include other sets' memories.
//!
//! Owns the merge (each label and each piece of evidence prefixed with its set's name, so
//! LoCoMo's `D1:3` of two conversations stay apart) and the split of the questions back by
//! set. Must never change a memory's text or collection, or a question, beyond that prefix.

use super::dataset::Question;
use super::locomo::Indexed;
use anyhow::Result;
use memd_engine::models::embed::Embed;
use memd_engine::record::new_id;

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
                    memories.push((rec, prefixed(label)));
                }
            }
        });
        questions.extend(ix.questions.iter().map(|q| Question {
            text: q.text.clone(),
            category: q.category,
            evidence: q.evidence.iter().map(prefixed).collect(),
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
