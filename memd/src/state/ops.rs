//! The operations the write-ahead log carries, and what applying one returns.
//!
//! Owns the vocabulary of change. Every op is self-contained and stamped by its caller (ids,
//! times, outcomes are decided before the op is logged), so replaying the log gives the same
//! state. Must never contain derived data that is cheaper to rebuild than to log, except
//! vectors (re-embedding costs more than storing them).

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
    /// The embedding of a memory (by internal key).
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
    },
    /// Remember a sidecar run's attempts (no content), for status and circuit-breaking.
    SidecarAttempts {
        at: i64,
        attempts: Vec<proto::SidecarAttempt>,
    },
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
    pub context_type: String,
    pub action: String,
    pub at: i64,
    pub time_weighting: bool,
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
    Done,
    Rejected(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScoreResult {
    pub scored: Vec<String>,
    /// Named ids that do not exist or cannot be outcome-scored (books, memory_bank).
    pub skipped: Vec<String>,
}
