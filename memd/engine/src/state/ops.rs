//! The operations the write-ahead log carries, and what applying one returns.
//!
//! Owns the vocabulary of change. Every op is self-contained and stamped by its caller (ids,
//! times, outcomes are decided before the op is logged), so replaying the log gives the same
//! state. Must never contain derived data that is cheaper to rebuild than to log, except
//! vectors (re-embedding costs more than storing them). The op payloads live here too (bar the
//! sessions' own, `session::SessionOp`), so every module that applies ops depends on this one
//! and this one on none of them.

use crate::record::Record;
use crate::state::session::SessionOp;
use proto::{Collection, Outcome};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// Store a new memory. Its `key` is assigned at apply time; an identical content already
    /// stored in the same collection makes this a no-op that reports the existing id.
    Insert(Box<Record>),
    /// Change a memory's content or memory-bank fields.
    Update {
        id: String,
        content: Option<String>,
        tags: Option<Vec<String>>,
        importance: Option<f64>,
        confidence: Option<f64>,
        at: i64,
    },
    Archive {
        id: String,
        at: i64,
    },
    Delete {
        id: String,
        reason: String,
    },
    /// Apply the outcome scores of one exchange, once: if `exchange` (conv, doc id) is given
    /// and already scored, nothing changes.
    ScoreExchange(Box<ScoreBatch>),
    /// Move a memory to another collection (promotion/demotion) under a new id.
    Move {
        id: String,
        to: Collection,
        new_id: String,
        at: i64,
    },
    /// The embedding of a memory (by internal key) as f32 components: what logs written before
    /// `QuantizedVector` hold. Replaying one still works; nothing writes it any more.
    Vector {
        key: u64,
        vector: Vec<f32>,
    },
    Session(SessionOp),
    /// A finished exchange: store it in working memory and close the turn with its id (the id
    /// of the identical memory if one exists), atomically.
    Exchange {
        record: Box<Record>,
        conv: String,
        at: i64,
        user: String,
        assistant: String,
        /// The turn's tool verdict (`[evidence] outcomes`); absent in older logs.
        #[serde(default)]
        evidence: Option<proto::Outcome>,
    },
    /// Remember a sidecar run's attempts (no content), for status and circuit-breaking.
    SidecarAttempts {
        at: i64,
        attempts: Vec<proto::SidecarAttempt>,
    },
    /// The embedding of a memory (by internal key), quantised to i8 as the vector index keeps
    /// it (`index::vector::quantize`): 384 bytes on disk instead of ~1.9 KB of MessagePack
    /// floats. Each byte is an `i8` component.
    QuantizedVector {
        key: u64,
        #[serde(with = "serde_bytes")]
        components: Vec<u8>,
    },
    /// Delete every memory of `project`, drop its conversations' hook state and its registry
    /// entry, atomically (`memd projects forget`). Global memories are untouched.
    ForgetProject {
        project: String,
    },
    /// Share a memory-bank fact or pattern with the team through the shared store (`team`),
    /// or make it private again.
    Share {
        id: String,
        team: bool,
        at: i64,
    },
    /// The shared store's bookkeeping: what was sent, what was read (`state::sync`).
    Sync(SyncOp),
    // New variants go last, so logs written before them decode as they did.
    /// Archive a memory as expired by age at `at` (`Some`), or restore one (`None`): see
    /// `state::expiry`.
    SetExpired {
        id: String,
        at: Option<i64>,
    },
    /// The time the age cleanup went by (`clock::cleanup_now`): the next pass, after a
    /// restart too, never goes further past it than the boot clock allows.
    CleanupClock(crate::clock::Trusted),
    /// Every exchange at or above `below` has a vector of today's indexed text (the
    /// re-embedding after an upgrade, `state::reindex`); 0 or 1: all of them.
    Reindexed {
        below: u64,
    },
}

impl Op {
    /// The op that logs `vector` as the embedding of the memory with internal key `key`.
    pub fn vector(key: u64, vector: &[f32]) -> Op {
        Op::QuantizedVector {
            key,
            components: crate::index::quantize(vector)
                .into_iter()
                .map(|c| c as u8)
                .collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreBatch {
    /// `(conversation, exchange doc id)` to mark scored; `None` for scores outside a turn.
    pub exchange: Option<(String, String)>,
    pub exchange_outcome: Outcome,
    /// Per-memory outcomes, in order.
    pub scores: Vec<(String, Outcome)>,
    /// Concepts of the prompt whose memories are scored (routing graph).
    pub concepts: Vec<String>,
    pub at: i64,
    pub time_weighting: bool,
}

/// A memory as read from the shared store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedRow {
    pub uid: String,
    pub owner: String,
    pub deleted: bool,
    /// Its content and scores (`key` and `origin` are ignored).
    pub record: Record,
    /// Its embedding, quantised like the local index keeps it; `None` when it has none yet.
    #[serde(default)]
    pub vector: Option<serde_bytes::ByteBuf>,
    /// Only the scores are news (one of this store's own memories, last written here).
    #[serde(default)]
    pub counts_only: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SyncOp {
    /// A shared store is configured (or a different database than before): track changes from
    /// now on; every local memory is due; memories mirrored from another database are dropped.
    Enable {
        store_id: String,
        /// The database's own id (`memd_meta.database_id`).
        #[serde(default)]
        database: Option<String>,
    },
    /// The shared store committed these: forget them unless they changed again since.
    Sent {
        memories: Vec<(u64, u64)>,
        deleted: Vec<String>,
        events: Vec<String>,
    },
    /// Rows read from the shared store, in change order, up to change number `cursor`;
    /// `complete` when that is everything there was (the last page of a catch-up).
    Received {
        rows: Vec<SharedRow>,
        cursor: i64,
        #[serde(default)]
        complete: bool,
    },
    /// The database role this store writes as (logged when it is first or newly known).
    Role { role: String },
}

/// What applying an op did.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Inserted {
        id: String,
        key: u64,
    },
    /// Same content already stored in that collection: the existing id.
    Duplicate {
        id: String,
    },
    Updated {
        id: String,
    },
    Moved {
        from: String,
        to: String,
    },
    Deleted {
        id: String,
    },
    NotFound {
        id: String,
    },
    Scored(ScoreResult),
    AlreadyScored,
    /// A project was forgotten: memories deleted, conversations dropped.
    Forgotten {
        deleted: usize,
        conversations: usize,
    },
    Done,
    Rejected(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScoreResult {
    pub scored: Vec<String>,
    /// Named ids that do not exist or cannot be outcome-scored (books, memory_bank).
    pub skipped: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::MemState;
    use crate::store::Machine;
    use proto::Collection;

    fn unit_vector(seed: u32) -> Vec<f32> {
        let v: Vec<f32> = (0..384u32)
            .map(|i| ((i * 31 + seed * 17) % 97) as f32 - 48.0)
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    fn inserted_key(state: &mut MemState, text: &str) -> u64 {
        let rec = Record::new(Collection::Working, text.to_string(), 0);
        match state.apply(&Op::Insert(Box::new(rec))) {
            crate::state::ops::Output::Inserted { key, .. } => key,
            other => panic!("insert: {other:?}"),
        }
    }

    #[test]
    fn a_logged_vector_is_a_quarter_of_the_float_encoding() {
        let v = unit_vector(1);
        let quantized = rmp_serde::to_vec_named(&Op::vector(7, &v)).unwrap();
        let floats = rmp_serde::to_vec_named(&Op::Vector { key: 7, vector: v }).unwrap();
        assert!(quantized.len() < 440, "{} bytes", quantized.len());
        assert!(floats.len() > 1900, "{} bytes", floats.len());
        let back: Op = rmp_serde::from_slice(&quantized).unwrap();
        assert_eq!(back, Op::vector(7, &unit_vector(1)));
    }

    #[test]
    fn collection_counts_follow_inserts_moves_updates_and_deletes() {
        let mut state = MemState::new(384).unwrap();
        let a = inserted_key(&mut state, "first takeaway");
        inserted_key(&mut state, "second takeaway");
        inserted_key(&mut state, "third takeaway");
        let id = state.by_key(a).unwrap().id.clone();
        let moved = state.apply(&Op::Move {
            id: id.clone(),
            to: Collection::History,
            new_id: "history_moved".into(),
            at: 1,
        });
        assert!(matches!(moved, Output::Moved { .. }), "{moved:?}");
        state.apply(&Op::Update {
            id: "history_moved".into(),
            content: Some("first takeaway, reworded".into()),
            tags: None,
            importance: None,
            confidence: None,
            at: 2,
        });
        let second = state
            .records()
            .find(|r| r.content == "second takeaway")
            .unwrap()
            .id
            .clone();
        state.apply(&Op::Delete {
            id: second,
            reason: "test".into(),
        });
        for c in Collection::ALL {
            let walked = state.records().filter(|r| r.collection == c).count();
            assert_eq!(state.count(c), walked, "{c:?}");
        }
        assert_eq!(state.count(Collection::Working), 1);
        assert_eq!(state.count(Collection::History), 1);
    }

    #[test]
    fn old_float_vector_ops_still_replay() {
        let mut state = MemState::new(384).unwrap();
        let old = inserted_key(&mut state, "logged before quantisation");
        let new = inserted_key(&mut state, "logged quantised");
        let (v_old, v_new) = (unit_vector(2), unit_vector(3));
        state.apply(&Op::Vector {
            key: old,
            vector: v_old.clone(),
        });
        state.apply(&Op::vector(new, &v_new));
        for (key, v) in [(old, &v_old), (new, &v_new)] {
            let got = state.vectors().get(key).expect("vector stored");
            let cos: f32 = got.iter().zip(v).map(|(a, b)| a * b).sum();
            assert!(cos > 0.999, "key {key}: cos {cos}");
        }
        assert_eq!(
            state.vectors().search(&v_old, 1, &|_| true).unwrap()[0].0,
            old
        );
    }
}
