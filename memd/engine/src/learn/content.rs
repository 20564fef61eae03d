//! The content graph: entity → ids of the memory_bank facts that mention it, so a prompt
//! naming `Python` or `src/store.rs` can find the facts about them without a vector search.
//!
//! Plain serializable data updated by deterministic calls. It must never hold memory
//! content (only ids), and must never keep an id after the caller removed it.

use super::text::{extract_entities, words};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Entity keys (lowercase) → ids of the facts that mention them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContentGraph {
    #[serde(default)]
    entities: BTreeMap<String, BTreeSet<String>>,
}

impl ContentGraph {
    /// Indexes a fact's text under its id, replacing whatever the id had before (so an
    /// updated fact drops entities it no longer mentions). Returns the entities linked.
    pub fn index(&mut self, id: &str, text: &str) -> Vec<String> {
        self.remove_id(id);
        let entities = extract_entities(text);
        for entity in &entities {
            self.entities
                .entry(entity.clone())
                .or_default()
                .insert(id.to_string());
        }
        entities
    }

    /// Forgets an id (fact archived or deleted). Returns whether it was linked anywhere.
    pub fn remove_id(&mut self, id: &str) -> bool {
        let mut removed = false;
        self.entities.retain(|_, ids| {
            removed |= ids.remove(id);
            !ids.is_empty()
        });
        removed
    }

    /// Forgets many ids at once (e.g. every chunk of a removed book). Returns how many
    /// entity → id links were dropped.
    pub fn remove_refs(&mut self, ids: &[String]) -> usize {
        if ids.is_empty() {
            return 0;
        }
        let doomed: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        let mut dropped = 0;
        self.entities.retain(|_, linked| {
            let before = linked.len();
            linked.retain(|id| !doomed.contains(id.as_str()));
            dropped += before - linked.len();
            !linked.is_empty()
        });
        dropped
    }

    /// Ids linked to any of these entity keys (matched case-insensitively), most matched
    /// entities first, then by id.
    pub fn facts_for_entities(&self, entities: &[String], limit: usize) -> Vec<String> {
        let keys: BTreeSet<String> = entities.iter().map(|e| e.to_lowercase()).collect();
        self.rank(keys, limit)
    }

    /// Ids of facts sharing entities with a free text such as a prompt. Besides the
    /// text's own entities, its plain words are tried as keys, so `python` in a lowercase
    /// prompt still finds the fact that says `Python`.
    pub fn lookup(&self, text: &str, limit: usize) -> Vec<String> {
        let mut keys: BTreeSet<String> = extract_entities(text).into_iter().collect();
        keys.extend(words(text));
        self.rank(keys, limit)
    }

    fn rank(&self, keys: BTreeSet<String>, limit: usize) -> Vec<String> {
        let mut hits: BTreeMap<&str, usize> = BTreeMap::new();
        for key in &keys {
            for id in self.entities.get(key).into_iter().flatten() {
                *hits.entry(id.as_str()).or_insert(0) += 1;
            }
        }
        let mut ranked: Vec<(&str, usize)> = hits.into_iter().collect();
        // Stable sort over id order keeps ties ordered by id.
        ranked.sort_by_key(|&(_, hits)| std::cmp::Reverse(hits));
        ranked
            .into_iter()
            .take(limit)
            .map(|(id, _)| id.to_string())
            .collect()
    }

    /// Ids linked to one entity key.
    pub fn ids_for(&self, entity: &str) -> Vec<String> {
        self.entities
            .get(&entity.to_lowercase())
            .map(|ids| ids.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Number of distinct entities.
    pub fn entity_count(&self) -> usize {
        self.entities.len()
    }

    /// Number of entity → id links.
    pub fn link_count(&self) -> usize {
        self.entities.values().map(BTreeSet::len).sum()
    }
}
