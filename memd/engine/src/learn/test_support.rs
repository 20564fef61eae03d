//! Record builders shared by the learn tests.

use crate::record::Record;
use proto::Collection;
use proto::Metadata;

pub const DAY: i64 = 86_400_000;
pub const HOUR: i64 = 3_600_000;
/// A fixed "now" for tests: 2026-01-01T00:00:00Z.
pub const NOW: i64 = 1_767_225_600_000;

/// A fresh memory in `collection` created at `created_at`, raw score 0.5, never used.
pub fn record_in(collection: Collection, created_at: i64) -> Record {
    Record {
        key: 1,
        id: format!("{}_0123456789ab", collection.as_str()),
        collection,
        content: "uses rmp-serde for snapshots".to_string(),
        created_at,
        updated_at: created_at,
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
        project: None,
        metadata: Metadata::new(),
        team: false,
        origin: None,
        moves: Vec::new(),
    }
}

/// A memory with the given score, uses and success count, created long ago.
pub fn scored(collection: Collection, score: f64, uses: u32, successes: f64) -> Record {
    let mut rec = record_in(collection, NOW - 60 * DAY);
    rec.score = score;
    rec.uses = uses;
    rec.success_count = successes;
    rec
}

pub fn approx(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

pub fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}
