//! The eight tools: their catalog entries and what each call does with the core.
//!
//! Owns the mapping from a tool call to core operations and the text of successful answers.
//! Must never bypass the core's validation (limits, redaction, exactly-once scoring) and never
//! return an error as anything but `Err(text)`: the caller turns it into an `isError` result.

use super::args::{self, decode};
use super::format::{error_text, full_memory, result_list};
use super::recall::{self, Recall};
use super::text;
use memd_engine::core::Core;
use memd_engine::error::ApiError;
use memd_engine::learn;
use proto::*;
use rmcp::handler::server::tool::schema_for_input;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use std::sync::{Arc, LazyLock};

type Args = serde_json::Map<String, serde_json::Value>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolName {
    GetContextInsights,
    SearchMemory,
    AddToMemoryBank,
    UpdateMemory,
    ArchiveMemory,
    DeleteMemory,
    ScoreResponse,
    RecordResponse,
}

impl ToolName {
    pub const ALL: [ToolName; 8] = [
        ToolName::GetContextInsights,
        ToolName::SearchMemory,
        ToolName::AddToMemoryBank,
        ToolName::UpdateMemory,
        ToolName::ArchiveMemory,
        ToolName::DeleteMemory,
        ToolName::ScoreResponse,
        ToolName::RecordResponse,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::GetContextInsights => "get_context_insights",
            ToolName::SearchMemory => "search_memory",
            ToolName::AddToMemoryBank => "add_to_memory_bank",
            ToolName::UpdateMemory => "update_memory",
            ToolName::ArchiveMemory => "archive_memory",
            ToolName::DeleteMemory => "delete_memory",
            ToolName::ScoreResponse => "score_response",
            ToolName::RecordResponse => "record_response",
        }
    }

    pub fn parse(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|t| t.as_str() == name)
    }

    fn entry(self) -> Tool {
        let (description, schema, title, read_only, destructive) = match self {
            ToolName::GetContextInsights => (
                text::get_context_insights(),
                schema::<args::GetContextInsights>(),
                "Recall context",
                true,
                false,
            ),
            ToolName::SearchMemory => (
                text::search_memory(),
                schema::<args::SearchMemory>(),
                "Search memory",
                true,
                false,
            ),
            ToolName::AddToMemoryBank => (
                text::add_to_memory_bank(),
                schema::<args::AddToMemoryBank>(),
                "Store a lasting fact",
                false,
                false,
            ),
            ToolName::UpdateMemory => (
                text::UPDATE_MEMORY.into(),
                schema::<args::UpdateMemory>(),
                "Update a fact",
                false,
                false,
            ),
            ToolName::ArchiveMemory => (
                text::ARCHIVE_MEMORY.into(),
                schema::<args::ArchiveMemory>(),
                "Archive a fact",
                false,
                true,
            ),
            ToolName::DeleteMemory => (
                text::DELETE_MEMORY.into(),
                schema::<args::ArchiveMemory>(),
                "Delete a fact",
                false,
                true,
            ),
            ToolName::ScoreResponse => (
                text::SCORE_RESPONSE.into(),
                schema::<args::ScoreResponse>(),
                "Score the previous exchange",
                false,
                false,
            ),
            ToolName::RecordResponse => (
                text::RECORD_RESPONSE.into(),
                schema::<args::RecordResponse>(),
                "Keep a takeaway",
                false,
                false,
            ),
        };
        // "read-only" here means "changes no memory": get_context_insights only notes what it showed.
        let annotations = ToolAnnotations::with_title(title)
            .read_only(read_only)
            .destructive(destructive);
        Tool::new(self.as_str(), description, schema).with_annotations(annotations)
    }
}

fn schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    // The argument types are ours and plain; a schema that fails to generate is a bug caught by
    // the catalog test, and an empty object schema keeps the server usable meanwhile.
    schema_for_input::<T>().unwrap_or_else(|_| Arc::new(JsonObject::new()))
}

static CATALOG: LazyLock<Vec<Tool>> =
    LazyLock::new(|| ToolName::ALL.iter().map(|t| t.entry()).collect());

/// What `tools/list` answers.
pub fn catalog() -> &'static [Tool] {
    &CATALOG
}

/// Who is calling: the MCP session (None for the stateless protocol) and where it works.
pub struct Caller<'a> {
    pub core: &'a Arc<Core>,
    pub recall: &'a Recall,
    pub session: Option<&'a str>,
    /// The directory `memd mcp` was started in, when the client came through it.
    pub project_dir: Option<String>,
    /// The caller's project: `project_dir` resolved, else the most recently active
    /// conversation's (a client calling `/mcp` directly sends no directory).
    pub project: Option<String>,
}

impl Caller<'_> {
    fn recall_key(&self) -> &str {
        self.session.unwrap_or(recall::STATELESS)
    }

    /// The conversation the store keeps for this client. A session maps to one conversation
    /// (so repeats within it are only referenced); a stateless call gets its own, because
    /// nothing says two stateless calls belong to the same conversation.
    fn conversation_id(&self) -> String {
        match self.session {
            Some(s) => format!("mcp-{s}"),
            None => format!("mcp-call-{}", hex::encode(rand::random::<[u8; 6]>())),
        }
    }
}

/// Runs one tool call. `Err` carries the text of an `isError` result.
pub async fn run(tool: ToolName, caller: &Caller<'_>, args: Args) -> Result<String, String> {
    let result = match tool {
        ToolName::GetContextInsights => get_context_insights(caller, args).await,
        ToolName::SearchMemory => search_memory(caller, args).await,
        ToolName::AddToMemoryBank => add_to_memory_bank(caller, args).await,
        ToolName::UpdateMemory => update_memory(caller, args).await,
        ToolName::ArchiveMemory | ToolName::DeleteMemory => archive_memory(caller, args).await,
        ToolName::ScoreResponse => score_response(caller, args).await,
        ToolName::RecordResponse => record_response(caller, args).await,
    };
    result.map_err(|e| error_text(&e, &[("metadata_filters", "metadata")]))
}

async fn get_context_insights(c: &Caller<'_>, args: Args) -> Result<String, ApiError> {
    let a: args::GetContextInsights = decode(args)?;
    let req = GetContextRequest {
        query: a.query,
        conversation_id: c.conversation_id(),
        cwd: None,
        project_dir: c.project_dir.clone(),
        client: Some(Client::Mcp),
        session_start: false,
        session_source: None,
    };
    let resp = c.core.get_context_for(&req, c.project.clone()).await?;
    let shown: Vec<String> = resp
        .relevant_memories
        .iter()
        .map(|m| m.id.clone())
        .collect();
    let shows_bank = resp
        .relevant_memories
        .iter()
        .any(|m| m.collection == Collection::MemoryBank.as_str());
    let audit_due = c.recall.note_context(c.recall_key(), &shown, shows_bank);
    let mut out = if resp.formatted_injection.trim().is_empty() {
        text::NOTHING_RELEVANT.to_string()
    } else {
        resp.formatted_injection
    };
    if audit_due {
        out.push_str("\n\n");
        out.push_str(text::SELF_AUDIT);
    }
    Ok(out)
}

async fn search_memory(c: &Caller<'_>, args: Args) -> Result<String, ApiError> {
    let a: args::SearchMemory = decode(args)?;
    let (lo, hi) = args::SEARCH_LIMIT;
    let limit = a.limit.unwrap_or(args::SEARCH_LIMIT_DEFAULT);
    if !(lo..=hi).contains(&limit) {
        return Err(ApiError::bad(
            "limit",
            format!("limit must be between {lo} and {hi} (got {limit})"),
        ));
    }
    let metadata_filters = a
        .metadata
        .map(|m| serde_json::from_value(serde_json::Value::Object(m)))
        .transpose()
        .map_err(|e| {
            ApiError::bad(
                "metadata",
                format!("metadata must be an object of filters: {e}"),
            )
        })?;
    let req = SearchRequest {
        query: a.query,
        days_back: a.days_back,
        id: a.id.clone(),
        conversation_id: None,
        collections: a
            .collections
            .map(|cs| cs.iter().map(|c| c.as_str().to_string()).collect()),
        limit: Some(limit),
        metadata_filters,
        sort_by: a.sort_by.map(args::SortArg::to_proto),
        include_archived: None,
        project: Some(a.project.unwrap_or_else(|| "current".into())),
        cwd: None,
    };
    let resp = c.core.search(&req, c.project.clone()).await?;
    let found: Vec<String> = resp.results.iter().map(|m| m.id.clone()).collect();
    c.recall.note_search(c.recall_key(), &found);
    if let Some(id) = a.id.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        return Ok(match resp.results.first() {
            Some(m) => full_memory(m),
            None => format!(
                "No memory has the id {id}. It may have been deleted by the lifecycle, or the id is mistyped."
            ),
        });
    }
    if resp.results.is_empty() {
        return Ok(
            "No memories matched. Try other words, a longer days_back, or no collections filter."
                .into(),
        );
    }
    let header = match resp.count {
        1 => "Found 1 memory:".to_string(),
        n => format!("Found {n} memories:"),
    };
    Ok(result_list(&header, &resp.results, c.project.as_deref()))
}

async fn add_to_memory_bank(c: &Caller<'_>, args: Args) -> Result<String, ApiError> {
    let a: args::AddToMemoryBank = decode(args)?;
    let req = MemoryBankAdd {
        content: a.content,
        tags: a.tags,
        importance: a.importance,
        confidence: a.confidence,
        metadata: None,
        scope: a.scope.map(args::ScopeArg::to_proto),
        cwd: None,
        share: a.share,
    };
    let resp = c.core.memory_bank_add(&req, c.project.clone()).await?;
    let place = match &resp.project {
        Some(p) => format!("for project {p}"),
        None => "for every project".to_string(),
    };
    Ok(if resp.duplicate {
        format!(
            "Not stored again: memory_bank already holds this fact as [id:{id}]. To change it, call update_memory(id=\"{id}\", ...).",
            id = resp.doc_id
        )
    } else {
        let replaced = resp
            .superseded
            .as_ref()
            .map(|old| format!(" It contradicts [id:{old}], which is now archived."))
            .unwrap_or_default();
        format!(
            "Stored in memory_bank as [id:{}] {place} (importance {:.1}, confidence {:.1}).{replaced}",
            resp.doc_id,
            req.importance.unwrap_or(0.7),
            req.confidence.unwrap_or(0.7)
        )
    })
}

async fn update_memory(c: &Caller<'_>, args: Args) -> Result<String, ApiError> {
    let a: args::UpdateMemory = decode(args)?;
    if a.content.is_none() && a.tags.is_none() && a.importance.is_none() && a.confidence.is_none() {
        return Err(ApiError::bad_request(
            "Nothing to update: give at least one of content, tags, importance, confidence",
        ));
    }
    let req = MemoryBankUpdate {
        id: a.id,
        content: a.content,
        tags: a.tags,
        importance: a.importance,
        confidence: a.confidence,
    };
    let resp = c.core.memory_bank_update(&req).await?;
    Ok(format!("Updated [id:{}].", resp.doc_id))
}

async fn archive_memory(c: &Caller<'_>, args: Args) -> Result<String, ApiError> {
    let a: args::ArchiveMemory = decode(args)?;
    let req = MemoryBankArchive {
        id: a.id,
        content: a.content,
    };
    let resp = c.core.memory_bank_archive(&req, c.project.clone()).await?;
    Ok(format!(
        "Archived [id:{}]: it no longer appears in context or search results.",
        resp.doc_id
    ))
}

async fn score_response(c: &Caller<'_>, args: Args) -> Result<String, ApiError> {
    let a: args::ScoreResponse = decode(args)?;
    let explicit: std::collections::BTreeMap<String, String> = a
        .memory_scores
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(id, o)| (id.trim().to_string(), o.as_str().to_string()))
        .collect();
    let mut memory_scores = explicit.clone();
    // Seed 001: with `related` left out, every memory shown for the exchange takes its outcome,
    // and that includes what get_context_insights showed this session (the hook's own
    // injections are added by record_outcome). Search results are not included: browsing by
    // date is no evidence that a memory was used.
    let from_context = if a.related.is_none() {
        c.recall.shown_unscored(c.recall_key())
    } else {
        Vec::new()
    };
    for id in &from_context {
        memory_scores
            .entry(id.clone())
            .or_insert_with(|| a.outcome.as_str().to_string());
    }
    let req = RecordOutcomeRequest {
        conversation_id: String::new(),
        outcome: a.outcome.as_str().to_string(),
        memory_scores: (!memory_scores.is_empty()).then_some(memory_scores),
        related: a.related.clone(),
        exchange_summary: a.exchange_summary,
        source: Some("agent".into()),
    };
    // What this session's own tool calls showed it may be scored beside the request's ids.
    let key = c.recall_key();
    let session_shown: Vec<String> = c
        .recall
        .shown_unscored(key)
        .into_iter()
        .chain(c.recall.searched_unscored(key))
        .collect();
    let resp = c
        .core
        .record_outcome_for_session(&req, &session_shown)
        .await?;
    if resp.already_scored {
        return score_without_exchange(c, a.outcome, &explicit, a.related.as_deref()).await;
    }
    let named: Vec<String> = from_context
        .into_iter()
        .chain(explicit.into_keys())
        .collect();
    c.recall.forget_shown(c.recall_key(), &named);
    let mut out = format!(
        "Scored {} {} as {}.",
        resp.documents_scored,
        if resp.documents_scored == 1 {
            "memory"
        } else {
            "memories"
        },
        resp.outcome
    );
    if !resp.unknown_ids.is_empty() {
        out.push_str(&format!(
            " Unknown ids, ignored: {}.",
            resp.unknown_ids.join(", ")
        ));
    }
    for i in &resp.ignored {
        out.push_str(&format!(" Ignored {}: {}.", i.id, i.reason));
    }
    if resp.summary_stored {
        out.push_str(" The exchange summary was stored.");
    }
    Ok(out)
}

/// No hook exchange is waiting (a client without hooks, or the exchange was scored already):
/// the memories this session was shown by its own tool calls are scored instead, each once.
/// `related` or `memory_scores` pick among them as they would in a turn; without either, what
/// get_context_insights showed takes the outcome (search results only when named).
async fn score_without_exchange(
    c: &Caller<'_>,
    outcome: args::OutcomeArg,
    explicit: &std::collections::BTreeMap<String, String>,
    related: Option<&[String]>,
) -> Result<String, ApiError> {
    let key = c.recall_key();
    let shown = c.recall.shown_unscored(key);
    let searched = c.recall.searched_unscored(key);
    let seen = |id: &str| shown.iter().chain(&searched).any(|s| s == id);
    let default = Outcome::parse(outcome.as_str()).unwrap_or(Outcome::Unknown);
    let mut scores: Vec<(String, Outcome)> = explicit
        .iter()
        .filter(|(id, _)| seen(id))
        .map(|(id, o)| (id.clone(), Outcome::parse(o).unwrap_or(default)))
        .collect();
    let by_default: Vec<String> = match related {
        Some(ids) => ids
            .iter()
            .map(|i| i.trim().to_string())
            .filter(|i| seen(i))
            .collect(),
        None => shown,
    };
    for id in by_default {
        if !scores.iter().any(|(s, _)| *s == id) {
            scores.push((id, default));
        }
    }
    if scores.is_empty() {
        return Ok("Nothing to score: no exchange is waiting for a score, and this session was shown no memory it has not scored yet. Nothing changed.".into());
    }
    let result = c.core.score_memories(scores).await?;
    c.recall.forget_shown(key, &result.scored);
    Ok(format!(
        "No hook exchange was waiting: scored {} {} this session was shown, as {}.",
        result.scored.len(),
        if result.scored.len() == 1 {
            "memory"
        } else {
            "memories"
        },
        outcome.as_str()
    ))
}

async fn record_response(c: &Caller<'_>, args: Args) -> Result<String, ApiError> {
    let a: args::RecordResponse = decode(args)?;
    let initial = a.initial_score.map(|s| s.as_str().to_string());
    let req = RecordResponseRequest {
        key_takeaway: a.key_takeaway,
        initial_score: initial.clone(),
        conversation_id: c.session.map(|s| format!("mcp-{s}")),
    };
    let resp = c.core.record_response(&req, c.project.clone()).await?;
    let start = learn::scoring::initial_score(initial.as_deref().and_then(Outcome::parse));
    Ok(format!(
        "Kept the takeaway in working memory as [id:{}] (starting score {start:.2}).",
        resp.doc_id
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_lists_every_tool_with_an_object_schema() {
        let names: Vec<&str> = catalog().iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "get_context_insights",
                "search_memory",
                "add_to_memory_bank",
                "update_memory",
                "archive_memory",
                "delete_memory",
                "score_response",
                "record_response"
            ]
        );
        for t in catalog() {
            assert_eq!(
                t.input_schema.get("type").and_then(|v| v.as_str()),
                Some("object"),
                "{}",
                t.name
            );
            assert!(
                t.description.as_deref().is_some_and(|d| d.len() > 100),
                "{}",
                t.name
            );
        }
        let search = &catalog()[1];
        let props = search
            .input_schema
            .get("properties")
            .and_then(|p| p.as_object())
            .expect("properties");
        for p in [
            "query",
            "days_back",
            "id",
            "collections",
            "limit",
            "metadata",
            "sort_by",
            "project",
        ] {
            assert!(props.contains_key(p), "search_memory lacks {p}");
        }
        assert_eq!(props["limit"]["maximum"], 20);
    }

    #[test]
    fn names_round_trip() {
        for t in ToolName::ALL {
            assert_eq!(ToolName::parse(t.as_str()), Some(t));
        }
        assert_eq!(ToolName::parse("search"), None);
    }
}
