//! The end of a turn and the scoring of the previous one: `/api/hooks/stop` and
//! `/api/record-outcome`.
//!
//! Owns exactly-once scoring (the check-and-mark happens inside one logged op), the grace window
//! for an in-flight `score_response`, and which ids an outcome applies to (seed 001's `related`
//! table). Must never block the stop hook beyond the grace window.

use super::Hooks;
use super::{format, sidecar, validate_conversation};
use crate::clock;
use crate::error::{ApiError, check_len};
use crate::record::Record;
use crate::redact;
use crate::state::ops::{Op, Output, ScoreBatch};
use crate::state::session::{EXCHANGE_KEEP_CHARS, Exchange};
use proto::limits;
use proto::{
    Collection, Outcome, RecordOutcomeRequest, RecordOutcomeResponse, StopRequest, StopResponse,
    Value,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a stop waits for a `score_response` that may still be in flight (seed 000).
pub const GRACE: Duration = Duration::from_millis(500);
/// How much of each side of an exchange the working memory keeps.
const EXCHANGE_USER_CHARS: usize = 1_000;
const EXCHANGE_ASSISTANT_CHARS: usize = 2_000;

/// `POST /api/hooks/stop`.
pub async fn stop(h: &Hooks<'_>, req: &StopRequest) -> Result<StopResponse, ApiError> {
    let conv = validate_conversation(&req.conversation_id)?.to_string();
    check_len(
        "user_message",
        &req.user_message,
        limits::EXCHANGE_MAX_CHARS,
    )?;
    check_len(
        "assistant_response",
        &req.assistant_response,
        limits::EXCHANGE_MAX_CHARS,
    )?;
    let now = clock::now_ms();
    h.db.settle().await;
    // The exchange belongs where its prompt was; the stop's own directory only when memd never
    // saw that prompt.
    let project = match h.registry().conversation_project(&conv) {
        Some(p) => Some(p),
        None => h
            .registry()
            .current_project("project_dir", req.project_dir.as_deref(), None)?,
    };
    let user = if req.user_message.trim().is_empty() {
        h.db.read(|s| s.sessions.get(&conv).map(|c| c.current_prompt.clone()))
            .unwrap_or_default()
    } else {
        redact::scrub(&req.user_message).text
    };
    let assistant = redact::scrub(&req.assistant_response).text;
    if user.trim().is_empty() && assistant.trim().is_empty() {
        return Err(ApiError::bad(
            "assistant_response",
            "nothing to store: both user_message and assistant_response are empty",
        ));
    }
    let content = format!(
        "User: {}\nAssistant: {}",
        format::clip(user.trim(), EXCHANGE_USER_CHARS),
        format::clip(assistant.trim(), EXCHANGE_ASSISTANT_CHARS)
    );
    let mut rec = Record::new(Collection::Working, content, now);
    rec.project = project;
    rec.metadata
        .insert("memory_type".into(), Value::from("exchange"));
    rec.metadata
        .insert("conversation_id".into(), Value::from(conv.as_str()));
    let required = h.db.read(|s| {
        s.sessions
            .get(&conv)
            .is_some_and(|c| c.scoring_required && c.target.as_ref().is_some_and(|t| !t.scored))
    });
    let out =
        h.db.commit_one(Op::Exchange {
            record: Box::new(rec),
            conv: conv.clone(),
            at: now,
            user: format::clip(&user, EXCHANGE_KEEP_CHARS),
            assistant: format::clip(&assistant, EXCHANGE_KEEP_CHARS),
            evidence: h
                .cfg
                .evidence
                .outcomes
                .then(|| h.evidence.verdict(&conv))
                .flatten(),
        })
        .await?;
    let doc_id = match out {
        Output::Inserted { id, .. } | Output::Duplicate { id } => id,
        other => {
            return Err(ApiError::internal(format!(
                "unexpected store answer {other:?}"
            )));
        }
    };
    let mut resp = StopResponse {
        stored: true,
        doc_id,
        scoring_complete: !required,
        ..StopResponse::default()
    };
    if required && !score_arrives(h, &conv, req).await {
        resp.scoring_complete = false;
        resp.sidecar_data = sidecar::claim(h, &conv).await?;
        resp.needs_sidecar = resp.sidecar_data.is_some();
    } else {
        resp.scoring_complete = true;
    }
    h.trace.append(&crate::trace::TraceEntry::stop(
        &conv,
        &resp.doc_id,
        &user,
        resp.needs_sidecar,
    ));
    Ok(resp)
}

/// Is the exchange scored, or about to be? Waits the grace window only when a
/// `score_response` may still be in flight: the turn's transcript shows the call, or nobody
/// can tell (no transcript). A turn known not to have called it, and Cursor (which never sees
/// the scoring request), get the answer at once: 14 of 34 stops in issue 12's replay waited
/// 500 ms for a score that was never coming.
async fn score_arrives(h: &Hooks<'_>, conv: &str, req: &StopRequest) -> bool {
    let may_be_in_flight = match req.score_call_seen {
        Some(seen) => seen,
        None => !req.client.is_some_and(proto::Client::turn_end_after_tools),
    };
    if may_be_in_flight {
        wait_for_score(h, conv).await
    } else {
        is_scored(h, conv)
    }
}

fn is_scored(h: &Hooks<'_>, conv: &str) -> bool {
    h.db.read(|s| {
        s.sessions
            .get(conv)
            .and_then(|c| c.target.as_ref())
            .is_none_or(|t| t.scored)
    })
}

/// True once the conversation's scoring target is scored, false after the grace window.
async fn wait_for_score(h: &Hooks<'_>, conv: &str) -> bool {
    let scored = || is_scored(h, conv);
    let deadline = tokio::time::Instant::now() + GRACE;
    loop {
        let notified = h.db.signals().scored.notified();
        if scored() {
            return true;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return scored();
        }
    }
}

/// `POST /api/record-outcome`: scores the pending exchange of a conversation, once.
pub async fn record_outcome(
    h: &Hooks<'_>,
    req: &RecordOutcomeRequest,
    session_shown: &[String],
) -> Result<RecordOutcomeResponse, ApiError> {
    let outcome = Outcome::parse(&req.outcome).ok_or_else(|| {
        ApiError::bad(
            "outcome",
            format!(
                "outcome must be worked, failed, partial or unknown (got {:?})",
                req.outcome
            ),
        )
    })?;
    let per_memory = parse_memory_scores(req.memory_scores.as_ref())?;
    if let Some(s) = &req.exchange_summary {
        check_len("exchange_summary", s.trim(), limits::SUMMARY_MAX_CHARS)?;
    }
    h.db.settle().await;
    let conv = redact::safe_id(req.conversation_id.trim());
    let (conv, target) = pending_exchange(h, &conv);
    let Some((conv, target)) = conv.zip(target) else {
        return Ok(RecordOutcomeResponse {
            success: true,
            outcome: outcome.as_str().into(),
            already_scored: true,
            ..RecordOutcomeResponse::default()
        });
    };
    let ids = ids_to_score(&target, req.related.as_deref(), &per_memory);
    let mut scores: Vec<(String, Outcome)> = vec![(target.doc_id.clone(), outcome)];
    scores.extend(ids.into_iter().filter(|id| *id != target.doc_id).map(|id| {
        let o = per_memory.get(&id).copied().unwrap_or(outcome);
        (id, o)
    }));
    let (scores, ignored) =
        h.db.read(|s| super::accept::split(s, &conv, &target, session_shown, scores));
    let unknown_ids: Vec<String> = h.db.read(|s| {
        scores
            .iter()
            .filter(|(id, _)| s.by_id(id).is_none())
            .map(|(id, _)| id.clone())
            .collect()
    });
    let now = clock::now_ms();
    let mut ops = vec![Op::ScoreExchange(Box::new(ScoreBatch {
        exchange: Some((conv.clone(), target.doc_id.clone())),
        exchange_outcome: outcome,
        scores,
        concepts: target.concepts.clone(),
        at: now,
        time_weighting: h.cfg.learning.time_weighting,
    }))];
    let summary = req
        .exchange_summary
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    if let Some(s) = summary {
        let mut rec = Record::new(Collection::Working, redact::scrub(s).text, now);
        rec.project = h.registry().conversation_project(&conv);
        rec.metadata
            .insert("memory_type".into(), Value::from("exchange_summary"));
        rec.metadata
            .insert("exchange_outcome".into(), Value::from(outcome.as_str()));
        rec.metadata
            .insert("conversation_id".into(), Value::from(conv.as_str()));
        // Which exchange it sums up: the digest before a compaction uses it in its place.
        rec.metadata
            .insert("exchange_id".into(), Value::from(target.doc_id.as_str()));
        ops.push(Op::Insert(Box::new(rec)));
    }
    let out = h.db.commit(ops).await?;
    h.db.signals().scored.notify_waiters();
    h.db.signals().lifecycle.notify_one();
    let mut resp = RecordOutcomeResponse {
        success: true,
        outcome: outcome.as_str().into(),
        unknown_ids,
        ignored,
        ..RecordOutcomeResponse::default()
    };
    match out.first() {
        Some(Output::Scored(r)) => {
            resp.documents_scored = r.scored.len();
            h.trace.append(&crate::trace::TraceEntry::record_outcome(
                &conv,
                outcome.as_str(),
                &r.scored,
                req.source.as_deref(),
                false,
            ));
        }
        Some(Output::AlreadyScored) => {
            h.trace.append(&crate::trace::TraceEntry::record_outcome(
                &conv,
                outcome.as_str(),
                &[],
                req.source.as_deref(),
                true,
            ));
            resp.already_scored = true;
            return Ok(resp);
        }
        other => {
            return Err(ApiError::internal(format!(
                "unexpected store answer {other:?}"
            )));
        }
    }
    resp.summary_stored = matches!(
        out.get(1),
        Some(Output::Inserted { .. } | Output::Duplicate { .. })
    );
    Ok(resp)
}

/// Scores memories outside a hook turn: what an MCP client was shown by its own tool calls
/// when no hook exchange is waiting (clients without hooks, issue 12). The caller guarantees
/// each id is scored once (it forgets what it scored). Unknown ids are reported, not errors.
pub async fn score_memories(
    h: &Hooks<'_>,
    scores: Vec<(String, Outcome)>,
) -> Result<crate::state::ops::ScoreResult, ApiError> {
    if scores.len() > 100 {
        return Err(ApiError::bad(
            "memory_scores",
            "at most 100 memory scores per call",
        ));
    }
    let exchange_outcome = scores.first().map_or(Outcome::Unknown, |s| s.1);
    let batch = ScoreBatch {
        exchange: None,
        exchange_outcome,
        scores,
        concepts: Vec::new(),
        at: clock::now_ms(),
        time_weighting: h.cfg.learning.time_weighting,
    };
    match h.db.commit_one(Op::ScoreExchange(Box::new(batch))).await? {
        Output::Scored(r) => {
            h.db.signals().lifecycle.notify_one();
            Ok(r)
        }
        other => Err(ApiError::internal(format!(
            "unexpected store answer {other:?}"
        ))),
    }
}

fn parse_memory_scores(
    m: Option<&BTreeMap<String, String>>,
) -> Result<BTreeMap<String, Outcome>, ApiError> {
    let Some(m) = m else {
        return Ok(BTreeMap::new());
    };
    if m.len() > 100 {
        return Err(ApiError::bad(
            "memory_scores",
            "at most 100 memory scores per call",
        ));
    }
    m.iter()
        .map(|(id, o)| {
            check_len("memory_scores", id, limits::ID_MAX_CHARS)?;
            let parsed = Outcome::parse(o).ok_or_else(|| {
                ApiError::bad("memory_scores", format!("memory_scores[{id:?}] must be worked, failed, partial or unknown (got {o:?})"))
            })?;
            Ok((id.clone(), parsed))
        })
        .collect()
}

/// The conversation and exchange an outcome applies to. An empty or "default" conversation id
/// (MCP clients cannot know the hook's session id) means the most recent pending one.
fn pending_exchange(h: &Hooks<'_>, conv: &str) -> (Option<String>, Option<Exchange>) {
    h.db.read(|s| {
        let conv = if conv.is_empty() || conv == "default" {
            s.sessions.most_recent_pending()
        } else {
            Some(conv.to_string())
        };
        let target = conv
            .as_deref()
            .and_then(|c| s.sessions.get(c))
            .and_then(|c| {
                c.target
                    .iter()
                    .chain(c.last.iter())
                    .find(|ex| !ex.scored)
                    .cloned()
            });
        (conv, target)
    })
}

/// Seed 001: `related` given → exactly those; `related: []` → none; omitted → every memory
/// injected for that exchange. Ids in `memory_scores` are scored too.
fn ids_to_score(
    target: &Exchange,
    related: Option<&[String]>,
    per_memory: &BTreeMap<String, Outcome>,
) -> Vec<String> {
    let mut ids = crate::learn::scoring_targets(&target.injected, related);
    if related.is_none_or(|r| !r.is_empty()) {
        for id in per_memory.keys() {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
    }
    ids
}
