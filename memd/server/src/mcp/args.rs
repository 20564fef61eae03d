//! The arguments of each tool: their JSON schemas (from these types) and their decoding.
//!
//! Owns the contract a client sees in `tools/list` and the first line of validation: types,
//! enums, unknown fields. Must never let a malformed argument become a protocol error: decoding
//! failures are `ApiError`s naming the argument, which the caller turns into a tool result with
//! `isError: true` the model can read and correct.

use memd_engine::error::ApiError;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

/// MCP search returns fewer results than the HTTP API: each one costs the model context.
pub const SEARCH_LIMIT: (i64, i64) = (1, 20);
pub const SEARCH_LIMIT_DEFAULT: i64 = 5;

/// Decodes a tool's arguments; the error names the offending argument.
pub fn decode<T: DeserializeOwned>(
    args: serde_json::Map<String, serde_json::Value>,
) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(serde_json::Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if let Some(name) = inner
            .strip_prefix("missing field `")
            .and_then(|r| r.split('`').next())
        {
            ApiError::bad(name, format!("{name} is required"))
        } else if path.is_empty() || path == "." {
            ApiError::bad_request(format!("invalid arguments: {inner}"))
        } else if inner.starts_with("unknown field") {
            ApiError::bad(&path, inner)
        } else {
            let field = path.split(['.', '[']).next().unwrap_or(&path).to_string();
            ApiError::bad(&field, format!("invalid value for {path}: {inner}"))
        }
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetContextInsights {
    /// What the user asked or the topic you need context for, in plain words. Empty: the
    /// user's most important memory_bank facts.
    #[serde(default)]
    pub query: String,
}

/// A memory collection.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CollectionArg {
    Working,
    History,
    Patterns,
    MemoryBank,
    Books,
}

impl CollectionArg {
    pub fn as_str(self) -> &'static str {
        match self {
            CollectionArg::Working => "working",
            CollectionArg::History => "history",
            CollectionArg::Patterns => "patterns",
            CollectionArg::MemoryBank => "memory_bank",
            CollectionArg::Books => "books",
        }
    }
}

/// Result order.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortArg {
    Relevance,
    Recency,
    Score,
}

impl SortArg {
    pub fn to_proto(self) -> proto::SortBy {
        match self {
            SortArg::Relevance => proto::SortBy::Relevance,
            SortArg::Recency => proto::SortBy::Recency,
            SortArg::Score => proto::SortBy::Score,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchMemory {
    /// Search by meaning. Optional when days_back or id is given.
    pub query: Option<String>,
    /// Only memories created in the last N days (1-365). Works without a query.
    #[schemars(range(min = 1, max = 365))]
    pub days_back: Option<i64>,
    /// Look up one memory by its id (e.g. "patterns_3f2a9c01b7d4"); query and days_back are then ignored.
    pub id: Option<String>,
    /// Collections to search; leave out to search all.
    pub collections: Option<Vec<CollectionArg>>,
    /// How many results, 1-20 (default 5).
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<i64>,
    /// Filters on memory fields and metadata, e.g. {"created_at": {"$gte": "2026-01-01T00:00:00Z"}} or {"tags": "preference"}.
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// relevance (default with a query), recency or score.
    pub sort_by: Option<SortArg>,
    /// Whose memories: "current" (default: this project's and global ones), "global" (only
    /// facts that hold everywhere), "all" (every project), or a project id from a result's
    /// project field.
    #[schemars(length(max = 512))]
    pub project: Option<String>,
}

/// Where a fact applies.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScopeArg {
    Project,
    Global,
}

impl ScopeArg {
    pub fn to_proto(self) -> proto::Scope {
        match self {
            ScopeArg::Project => proto::Scope::Project,
            ScopeArg::Global => proto::Scope::Global,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddToMemoryBank {
    /// The fact, one per memory, in a full sentence.
    pub content: String,
    /// Short labels such as "identity", "preference", "project", "goal".
    #[serde(default)]
    pub tags: Vec<String>,
    /// How much the fact matters across sessions, 0-1 (default 0.7).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub importance: Option<f64>,
    /// How sure you are it is true, 0-1 (default 0.7; 0.9+ only when verified, 0.5 when unverified).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub confidence: Option<f64>,
    /// "project" (default): only this repository (build and test commands, conventions, paths,
    /// architecture). "global": every project (who the user is, their preferences and habits).
    pub scope: Option<ScopeArg>,
    /// true: share the fact with the user's team (everyone on the shared store sees it); only
    /// for facts about a shared repository or the team's ways of working. Default false.
    #[serde(default)]
    pub share: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMemory {
    /// The memory_bank entry's id.
    pub id: String,
    /// The corrected text of the fact.
    pub content: Option<String>,
    /// Replaces all tags.
    pub tags: Option<Vec<String>>,
    /// New importance, 0-1.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub importance: Option<f64>,
    /// New confidence, 0-1.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub confidence: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveMemory {
    /// The memory_bank entry's id.
    pub id: Option<String>,
    /// The fact's text, when you do not have the id: the closest active entry is archived.
    pub content: Option<String>,
}

/// How an exchange or a memory worked out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeArg {
    Worked,
    Failed,
    Partial,
    Unknown,
}

impl OutcomeArg {
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeArg::Worked => "worked",
            OutcomeArg::Failed => "failed",
            OutcomeArg::Partial => "partial",
            OutcomeArg::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScoreResponse {
    /// How the previous exchange went, judged from the user's reaction.
    pub outcome: OutcomeArg,
    /// Per-memory outcomes, {"<memory id>": "worked|partial|unknown|failed"}; score every id the scoring prompt lists.
    pub memory_scores: Option<BTreeMap<String, OutcomeArg>>,
    /// Only these ids get the outcome; [] scores the exchange alone; leave out to score every memory shown for it.
    pub related: Option<Vec<String>>,
    /// Optional one-sentence summary of the exchange, stored with its outcome.
    pub exchange_summary: Option<String>,
}

/// The outcome a takeaway starts with.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InitialScoreArg {
    Worked,
    Failed,
    Partial,
}

impl InitialScoreArg {
    pub fn as_str(self) -> &'static str {
        match self {
            InitialScoreArg::Worked => "worked",
            InitialScoreArg::Failed => "failed",
            InitialScoreArg::Partial => "partial",
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordResponse {
    /// The lesson in one or two sentences.
    pub key_takeaway: String,
    /// worked (starts at 0.7), partial (0.55) or failed (0.2); leave out for 0.5.
    pub initial_score: Option<InitialScoreArg>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn type_errors_name_the_argument() {
        let e = decode::<SearchMemory>(obj(json!({"limit": "ten"}))).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("limit"));
        assert!(e.message.contains("limit"), "{e}");
    }

    #[test]
    fn bad_enum_values_list_the_choices() {
        let e = decode::<ScoreResponse>(obj(json!({"outcome": "great"}))).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("outcome"));
        assert!(e.message.contains("worked"), "{e}");
        let e = decode::<ScoreResponse>(obj(
            json!({"outcome": "worked", "memory_scores": {"a": "meh"}}),
        ))
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("memory_scores"));
    }

    #[test]
    fn missing_and_unknown_fields_are_reported() {
        let e = decode::<AddToMemoryBank>(obj(json!({}))).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("content"));
        assert_eq!(e.message, "content is required");
        let e = decode::<SearchMemory>(obj(json!({"query": "x", "days": 3}))).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("days"));
        assert!(e.message.starts_with("unknown field `days`"), "{e}");
        assert!(
            e.message.contains("days_back"),
            "lists the known fields: {e}"
        );
    }
}
