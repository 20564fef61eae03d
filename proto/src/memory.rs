//! Collections, outcomes and the normalized memory shape every read returns.

use crate::metadata::Metadata;
use serde::{Deserialize, Serialize};

/// The five collections. The string form is also the id prefix (`working_3fa9c2e1b07d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Collection {
    Books,
    Working,
    History,
    Patterns,
    MemoryBank,
}

impl Collection {
    pub const ALL: [Collection; 5] = [
        Collection::Books,
        Collection::Working,
        Collection::History,
        Collection::Patterns,
        Collection::MemoryBank,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Collection::Books => "books",
            Collection::Working => "working",
            Collection::History => "history",
            Collection::Patterns => "patterns",
            Collection::MemoryBank => "memory_bank",
        }
    }

    pub fn parse(s: &str) -> Option<Collection> {
        Collection::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The collection an id belongs to, read from its prefix.
    pub fn of_id(id: &str) -> Option<Collection> {
        // memory_bank must be tried before anything that could be its prefix.
        Collection::ALL.into_iter().rev().find(|c| {
            id.strip_prefix(c.as_str())
                .is_some_and(|r| r.starts_with('_'))
        })
    }

    /// Outcome scoring applies to these three only (books and memory_bank are never scored).
    pub fn is_outcome_scored(self) -> bool {
        matches!(
            self,
            Collection::Working | Collection::History | Collection::Patterns
        )
    }
}

/// What an exchange or a memory did for the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Worked,
    Failed,
    Partial,
    Unknown,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Worked => "worked",
            Outcome::Failed => "failed",
            Outcome::Partial => "partial",
            Outcome::Unknown => "unknown",
        }
    }
    pub fn parse(s: &str) -> Option<Outcome> {
        match s.trim().to_ascii_lowercase().as_str() {
            "worked" => Some(Outcome::Worked),
            "failed" => Some(Outcome::Failed),
            "partial" => Some(Outcome::Partial),
            "unknown" => Some(Outcome::Unknown),
            _ => None,
        }
    }
    /// One character in the `[YY~N]` history display.
    pub fn symbol(self) -> char {
        match self {
            Outcome::Worked => 'Y',
            Outcome::Failed => 'N',
            Outcome::Partial => '~',
            Outcome::Unknown => '?',
        }
    }
}

/// The normalized memory shape (seed 002, feature 2): the same fields on every read path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemoryView {
    pub id: String,
    pub collection: String,
    pub content: String,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// Relative age: `now`, `5m`, `3h`, `2d`, `4mo`, `1y`.
    pub age: String,
    pub score: f64,
    pub wilson_score: f64,
    pub uses: u32,
    pub success_count: f64,
    pub learned_score: f64,
    /// `""` until the memory is first scored.
    pub last_outcome: String,
    /// The last five outcomes, oldest first (`Y` worked, `~` partial, `N` failed, `?` unknown),
    /// e.g. `[YY~N]`; `""` before the first.
    pub outcome_history: String,
    pub tags: Vec<String>,
    /// Failed 3 times since it last worked: the hooks no longer inject it, and reads flag it so
    /// the agent verifies it, then updates or archives it (a success clears the flag).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disputed: bool,
    /// Archived (memory-bank soft delete): only listed when a search asks for archived ones.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
    /// The project this memory belongs to; absent when it is global (seen in every project).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_similarity: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_rank_score: Option<f64>,
    /// The cross-encoder's logit, for results it reordered (higher = more relevant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank_score: Option<f64>,
    /// Shared with the team through the shared store.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
    /// Who shared it, for a memory that came from the shared store (another user, or this
    /// user on another machine); absent for memories made here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub metadata: Metadata,
}
