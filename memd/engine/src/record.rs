//! The stored form of a memory.
//!
//! Owns the `Record` struct (what the write-ahead log and snapshots carry) and its conversion to
//! the wire shape `proto::MemoryView`. Must never hold derived data that can be rebuilt (vectors
//! live in the index, lexical postings in the lexical index).

use proto::{Collection, Metadata, Outcome};
use serde::{Deserialize, Serialize};

/// How many outcomes `outcome_history` keeps.
pub const HISTORY_LEN: usize = 10;
/// How many promotions and demotions `moves` keeps (the newest; a memory going back and forth
/// between history and patterns would otherwise grow without bound).
pub const MOVES_KEPT: usize = 20;

/// One scored outcome in a memory's history.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OutcomeEntry {
    pub outcome: Outcome,
    /// Unix milliseconds.
    pub at: i64,
}

/// A memory as stored. Times are Unix milliseconds (UTC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Record {
    /// Internal key for the indexes. Unique for the life of the store, never reused.
    pub key: u64,
    /// Public id, `<collection>_<12 hex>`. Changes on promotion; old ids stay findable.
    pub id: String,
    pub collection: Collection,
    pub content: String,
    pub created_at: i64,
    pub updated_at: i64,
    /// Raw outcome score in [0, 1].
    pub score: f64,
    pub uses: u32,
    pub success_count: f64,
    pub outcome_history: Vec<OutcomeEntry>,
    pub last_outcome: Option<Outcome>,
    pub last_used: Option<i64>,
    pub tags: Vec<String>,
    /// memory_bank only.
    pub importance: Option<f64>,
    /// memory_bank only.
    pub confidence: Option<f64>,
    /// memory_bank soft delete: archived entries are never injected nor returned by default.
    pub archived: bool,
    /// Ids this memory had before promotions/demotions, oldest first.
    pub former_ids: Vec<String>,
    pub metadata: Metadata,
    /// The project this memory belongs to (`scope::Project` id); `None` is global. Logs and
    /// exports written before projects existed have no such field: those memories are global.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Shared with the team through the shared store (issue 14); private otherwise. Only
    /// memory-bank facts and patterns can be shared.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub team: bool,
    /// Set on a memory that came from the shared store (another machine or another user);
    /// `None` on memories made here. Such a memory is only scored here, never edited, moved
    /// or deleted: its own daemon runs its lifecycle.
    /// Boxed: rare, and inline it made every record 40 bytes larger (bench/EVAL.md section 28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Box<Origin>>,
    /// Promotions and demotions, oldest first (with `former_ids`, the memory's path). Memories
    /// moved before this field existed have none: their last move is `metadata.promoted_at`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<MoveEntry>,
}

/// One promotion or demotion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MoveEntry {
    pub from: Collection,
    pub to: Collection,
    /// Unix milliseconds.
    pub at: i64,
}

/// Where a memory mirrored from the shared store lives there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Origin {
    /// The row's key in the shared store: `<store id of the daemon that made it>:<its key>`.
    pub uid: String,
    /// The database role that owns it.
    pub owner: String,
}

impl Record {
    /// Bytes this memory takes in the store's tables: the record, what its fields point to,
    /// and its entries in the key, id and duplicate maps (the id map holds a hash and a key
    /// per id, not the id). An estimate: metadata values count their text only, and neither
    /// the allocator's rounding nor the maps' spare slots are counted.
    pub fn memory_bytes(&self) -> usize {
        let text = |s: &String| s.capacity();
        let strings = |v: &Vec<String>| {
            v.capacity() * size_of::<String>() + v.iter().map(String::capacity).sum::<usize>()
        };
        // The entries' table, then what each key and text value holds.
        let metadata: usize = self.metadata.table_bytes()
            + self.metadata.key_bytes()
            + self
                .metadata
                .values()
                .map(|v| v.as_str().map_or(0, str::len))
                .sum::<usize>();
        let ids = (1 + self.former_ids.len()) * size_of::<(u64, u64)>();
        // The key map holds a pointer to the boxed record (`state::MemState::records`).
        size_of::<(u64, Box<Record>)>()
            + size_of::<Record>()
            + size_of::<((Collection, u64), u64)>()
            + text(&self.id)
            + text(&self.content)
            + self.outcome_history.capacity() * size_of::<OutcomeEntry>()
            + strings(&self.tags)
            + strings(&self.former_ids)
            + metadata
            + self.project.as_ref().map_or(0, text)
            + self
                .origin
                .as_ref()
                .map_or(0, |o| size_of::<Origin>() + text(&o.uid) + text(&o.owner))
            + self.moves.capacity() * size_of::<MoveEntry>()
            + ids
    }

    /// Outcomes as `[YY~N]` (last five, oldest first); `""` when never scored.
    pub fn outcome_symbols(&self) -> String {
        if self.outcome_history.is_empty() {
            return String::new();
        }
        let start = self.outcome_history.len().saturating_sub(5);
        let s: String = self.outcome_history[start..]
            .iter()
            .map(|e| e.outcome.symbol())
            .collect();
        format!("[{s}]")
    }
}

/// A fresh public id in `c`: `<collection>_<12 hex>`.
pub fn new_id(c: Collection) -> String {
    let n: u64 = rand::random::<u64>() & 0xffff_ffff_ffff;
    format!("{}_{n:012x}", c.as_str())
}

impl Record {
    /// A fresh record with neutral scores and a new id; `content` must already be scrubbed.
    pub fn new(collection: Collection, content: String, now: i64) -> Record {
        Record {
            key: 0,
            id: new_id(collection),
            collection,
            content,
            created_at: now,
            updated_at: now,
            score: 0.5,
            uses: 0,
            success_count: 0.0,
            outcome_history: Vec::new(),
            last_outcome: None,
            last_used: None,
            tags: Vec::new(),
            importance: None,
            confidence: None,
            archived: false,
            former_ids: Vec::new(),
            metadata: Metadata::default(),
            project: None,
            team: false,
            origin: None,
            moves: Vec::new(),
        }
    }
}
