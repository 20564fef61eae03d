//! get-context as named stages, in the order `get_context_for` runs them: `Prompt::check`
//! (validate, scrub, locate) → `Turn::read` (the conversation, one read) → `encode` (the
//! query's embedding, its late-interaction encoding started beside it) → `retrieve` (the
//! pipeline's snapshot under one read, the late states waited for, reranking and the cut
//! outside the lock) → `lay_out` (budget and text) → `record` (the queued session op, the
//! ledger, the Cursor rules file).
//!
//! Owns the data each stage hands the next. Must never hold the store lock across a model
//! call and never await an fsync: the session record is queued, not waited for.

use super::{CHARS_PER_TOKEN, QUERY_CHARS, budget, format, select, unscored};
use super::{Hooks, PromptDeps};
use crate::error::{ApiError, check_len};
use crate::learn;
use crate::models::PromptRerank;
use crate::project::Project;
use crate::redact;
use crate::retrieve::{self, PromptEncoding, Second};
use crate::scope::Visibility;
use crate::search::Ranking;
use crate::state::ops::Op;
use crate::state::session::{ProjectRef, ScoringPlan, SessionOp};
use proto::{GetContextRequest, GetContextResponse, MemoryView, ScoringMemory, limits};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The prompt as memd keeps it.
pub struct Prompt {
    pub conv: String,
    /// Scrubbed.
    pub text: String,
    /// Its first `QUERY_CHARS`: the search query.
    pub query: String,
    pub here: Option<Project>,
    pub now: i64,
    pub session_start: bool,
    /// A session start after `clear` / `compact`: the model no longer sees what memd showed
    /// earlier in the conversation, so it is shown again.
    pub fresh_context: bool,
    pub client: Option<proto::Client>,
    /// The agent asking for context itself (MCP) sees disputed memories, flagged, so it can
    /// verify and fix them; the hooks never inject them.
    pub with_disputed: bool,
}

impl Prompt {
    /// Validates and scrubs the request and finds the project of its directory.
    pub fn check(h: &Hooks, req: &GetContextRequest) -> Result<Prompt, ApiError> {
        let conv = super::validate_conversation(&req.conversation_id)?.to_string();
        check_len("query", &req.query, limits::EXCHANGE_MAX_CHARS)?;
        let text = redact::scrub(&req.query).text;
        let query = text.chars().take(QUERY_CHARS).collect();
        Ok(Prompt {
            conv,
            text,
            query,
            here: super::where_the_prompt_is(h, req)?,
            now: crate::clock::now_ms(),
            session_start: req.session_start,
            fresh_context: req.session_start
                && matches!(req.session_source.as_deref(), Some("clear" | "compact")),
            client: req.client,
            with_disputed: req.client == Some(proto::Client::Mcp),
        })
    }

    fn has_query(&self) -> bool {
        !self.query.trim().is_empty()
    }
}

/// What the conversation holds for this prompt, read at once.
pub struct Turn {
    pub visible: Visibility,
    pub plan: ScoringPlan,
    /// A short prompt's query with the conversation's words (`select::followup_query`).
    pub followup: Option<String>,
    /// The memories this conversation has seen in full: key → the id it was shown under. A
    /// memory promoted since has a new id, and its old one (kept in `former_ids`) still leads
    /// to it; the reference line names the old one, which the agent knows.
    pub already: HashMap<u64, String>,
    pub scoring_hints: Vec<ScoringMemory>,
    /// The score batch for the exchange this prompt leaves unscored (`[evidence] outcomes`).
    pub unscored: Option<Op>,
    /// Words of the conversation's recent tool events (`[evidence] boost`).
    pub in_play: Vec<String>,
    /// This daemon's role in the shared store: a memory it owns is not a teammate's.
    pub own_role: Option<String>,
}

impl Turn {
    /// One read of the conversation; `fallback` is the caller's project when neither the
    /// prompt's directory nor the conversation tells it.
    pub fn read(h: &Hooks, p: &Prompt, fallback: Option<String>) -> Turn {
        let conv = p.conv.as_str();
        let tracking = !p.session_start && h.cfg.evidence.tracking();
        let mut turn = h.db.read(|s| {
            let current = match &p.here {
                Some(here) => Some(here.id.clone()),
                None => s.sessions.get(conv).and_then(|c| c.project.clone()),
            };
            let plan = match p.session_start {
                true => ScoringPlan {
                    required: false,
                    ids: Vec::new(),
                },
                false => s.sessions.plan(conv),
            };
            let scoring_hints = plan.ids.iter().map(|id| hint(s, id)).collect();
            let already = match p.fresh_context {
                true => None,
                false => s.sessions.get(conv),
            };
            let already = already.map_or_else(HashMap::new, |c| {
                c.shown
                    .iter()
                    .filter_map(|id| s.by_id(id).map(|r| (r.key, id.clone())))
                    .collect()
            });
            Turn {
                visible: Visibility::of_current(current.or(fallback).as_deref()),
                plan,
                followup: select::followup_query(s, conv, &p.query),
                already,
                scoring_hints,
                // Before the prompt moves the scoring target on: the exchange it leaves.
                unscored: tracking
                    .then(|| unscored::on_prompt(h.cfg, h.trace, s, conv))
                    .flatten(),
                in_play: Vec::new(),
                own_role: s.sync().role.clone(),
            }
        });
        if h.cfg.evidence.boost {
            turn.in_play = h.evidence.terms(conv);
        }
        if tracking {
            h.evidence.new_turn(conv);
        }
        turn
    }
}

fn hint(s: &crate::state::MemState, id: &str) -> ScoringMemory {
    ScoringMemory {
        id: id.to_string(),
        content_hint: s
            .by_id(id)
            .map(|r| format::clip(&r.content, 60))
            .unwrap_or_default(),
    }
}

/// The prompt's encodings and how long reranking may add to it.
#[derive(Default)]
pub struct Queries {
    pub prompt: PromptEncoding,
    pub followup: Option<Arc<Vec<f32>>>,
    /// `search.prompt_budget_ms`.
    pub budget: Duration,
}

/// The prompt's embedding, its late-interaction encoding started beside it (each has its own
/// model), and a follow-up's embedding after. No late encoding for a follow-up (its words are
/// mostly the conversation's, not the prompt's: fused order) nor while no memory has token
/// states.
pub async fn encode(d: &PromptDeps<'_>, p: &Prompt, t: &Turn) -> Queries {
    if !p.has_query() {
        return Queries::default();
    }
    let late = match (&t.followup, d.late.is_empty()) {
        (None, false) => true,
        (None, true) => {
            d.models.nothing_to_rerank();
            false
        }
        (Some(_), _) => false,
    };
    let prompt = retrieve::encode_prompt(d.models, &p.query, late).await;
    let followup = match &t.followup {
        Some(f) => d.models.embed_query(f).await,
        None => None,
    };
    Queries {
        prompt,
        followup,
        budget: Duration::from_millis(d.hooks.cfg.search.prompt_budget_ms),
    }
}

/// The memories to inject, best first, with their keys: the profile for an empty prompt,
/// else the pipeline: the snapshot under one read, the late-interaction states (waited for
/// only when the head has at least two candidates), MaxSim outside the lock, the cut. Laps
/// `clock` after each.
///
/// The reranking budget starts when the first stage ends: it bounds what reranking adds to
/// the prompt (the rest of the late encoding, which has run beside the embedding and the first
/// stage, then MaxSim), not the embedding's own time, which the prompt spends either way.
pub async fn retrieve(
    d: &PromptDeps<'_>,
    p: &Prompt,
    t: &Turn,
    q: Queries,
    clock: &mut Clock,
) -> Vec<(u64, MemoryView)> {
    let max = d.hooks.cfg.context.max_memories;
    if !p.has_query() {
        return d
            .hooks
            .db
            .read(|s| select::profile(s, &t.visible, max, p.with_disputed, p.now));
    }
    let boosting = !t.in_play.is_empty();
    let rules = select::Rules::new(
        d.hooks.cfg,
        &p.conv,
        &t.visible,
        p.with_disputed,
        boosting,
        q.prompt.late.is_some(),
    );
    let ranking = Ranking::of(&d.hooks.cfg.learning);
    let followup = t.followup.as_deref();
    let fvec = q.followup.as_deref().map(|v| &v[..]);
    let found = d.hooks.db.read(|s| {
        let prompt = (p.query.as_str(), q.prompt.vector());
        select::snapshot(
            s,
            &rules,
            &ranking,
            prompt,
            followup.map(|f| (f, fvec)),
            p.now,
        )
    });
    clock.lap("first");
    let deadline = Instant::now() + q.budget;
    let late = retrieve::late_for_head(d.models, q.prompt.late, found.head.len(), deadline).await;
    clock.lap("late");
    let how = Second {
        late: late.as_ref().map(|l| (l, found.head.len())),
        deadline: Some(deadline),
        cross: None,
        score: retrieve::LATE_SCORE,
    };
    let (head, report) = retrieve::second_stage(d.late, &p.query, found.head, how).await;
    if late.is_some() {
        // MaxSim stops at the deadline: past it, (part of) the head kept its fused places.
        d.models.prompts.count(match report.late_cut_short {
            true => PromptRerank::MaxSimCutShort,
            false => PromptRerank::Reranked,
        });
    }
    clock.lap("maxsim");
    select::cut(head, found.extra, &rules, &t.in_play)
        .into_iter()
        .map(|c| (c.key(), c.view))
        .collect()
}

/// One prompt's injection, laid out.
pub struct Injection {
    pub memories: Vec<MemoryView>,
    /// Ids of the memories with a line (full or reference), in order.
    pub injected: Vec<String>,
    /// Ids newly shown in full.
    pub shown: Vec<String>,
    pub context: String,
    pub formatted: String,
    pub scoring_prompt: String,
}

/// The scoring request and KNOWN CONTEXT within the token budget (a memory shown in full
/// earlier in the conversation gets a reference line).
pub fn lay_out(h: &Hooks, p: &Prompt, t: &Turn, picked: Vec<(u64, MemoryView)>) -> Injection {
    let scoring_prompt = match (t.plan.required, p.client) {
        (false, _) => String::new(),
        // OpenCode rebuilds its system prompt every turn: last turn's KNOWN CONTEXT is gone,
        // so the request carries its own SCORING REFERENCE.
        (true, Some(proto::Client::Opencode)) => format::scoring_with_reference(&t.scoring_hints),
        (true, _) => format::scoring_prompt(&t.plan.ids),
    };
    let budget = h.cfg.context.token_budget * CHARS_PER_TOKEN;
    let first_context = t.already.is_empty();
    let seen: Vec<Option<String>> = picked
        .iter()
        .map(|(k, _)| t.already.get(k).cloned())
        .collect();
    let own = t.own_role.as_deref();
    let memories: Vec<MemoryView> = picked
        .into_iter()
        .map(|(_, v)| format::attributed(v, own))
        .collect();
    let for_lines = budget::for_lines(budget, &scoring_prompt, first_context);
    let (laid, shown) = budget::lay_out(&memories, &seen, for_lines);
    let context = format::known_context(&budget::lines(&memories, &seen, &laid), first_context);
    let formatted = [scoring_prompt.as_str(), context.as_str()]
        .iter()
        .filter(|t| !t.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n\n");
    let injected = laid.iter().map(|(i, _)| memories[*i].id.clone()).collect();
    Injection {
        memories,
        injected,
        shown,
        context,
        formatted,
        scoring_prompt,
    }
}

impl Injection {
    pub fn response(self, required: bool, hints: Vec<ScoringMemory>) -> GetContextResponse {
        let injected = self.injected;
        GetContextResponse {
            formatted_injection: self.formatted,
            relevant_memories: self
                .memories
                .into_iter()
                .filter(|m| injected.contains(&m.id))
                .collect(),
            scoring_required: required,
            scoring_prompt: self.scoring_prompt,
            scoring_memories: hints,
        }
    }
}

/// Queues the prompt's session record (and the evidence's score of the exchange it leaves),
/// appends the ledger line and updates the Cursor rules file. The record is queued, not
/// awaited: its order against the stop that follows is fixed now, and the prompt path does not
/// pay an fsync. A crash in between loses only which ids this turn showed, never a memory.
pub fn record(
    h: &Hooks,
    req: &GetContextRequest,
    p: &Prompt,
    unscored: Option<Op>,
    inj: &Injection,
) -> Result<(), ApiError> {
    let op = Op::Session(SessionOp::Prompt {
        conv: p.conv.clone(),
        at: p.now,
        client: p.client,
        prompt: format::clip(&p.text, crate::state::session::EXCHANGE_KEEP_CHARS),
        injected: inj.injected.clone(),
        shown: inj.shown.clone(),
        concepts: learn::graph::extract_concepts(&p.query),
        session_start: p.session_start,
        project: p.here.as_ref().map(|h| ProjectRef {
            id: h.id.clone(),
            root: h.root.display().to_string(),
        }),
    });
    let evidence_scored = unscored.is_some();
    let reset = p.fresh_context.then(|| {
        Op::Session(SessionOp::ContextReset {
            conv: p.conv.clone(),
        })
    });
    h.db.commit_queued(unscored.into_iter().chain(reset).chain([op]).collect())?;
    if evidence_scored {
        // The lifecycle pass must see the scores: wake it once the queued ops are applied.
        h.db.signals().wake_lifecycle_when_applied();
    }
    h.trace.append(&crate::trace::TraceEntry::get_context(
        &p.conv,
        &p.text,
        &inj.injected,
        &inj.formatted,
        p.session_start,
    ));
    if h.cfg.cursor.rules_file && p.client == Some(proto::Client::Cursor) && !p.session_start {
        super::write_cursor_rules(req.cwd.as_deref(), &inj.context);
    }
    Ok(())
}

/// Each stage's wall time, logged at debug level (`MEMD_LOG=info,memd_engine::ops::context=debug`):
/// where a prompt's time goes under load.
pub struct Clock {
    at: Instant,
    laps: Vec<(&'static str, Duration)>,
}

impl Clock {
    pub fn start() -> Clock {
        Clock {
            at: Instant::now(),
            laps: Vec::with_capacity(8),
        }
    }

    pub fn lap(&mut self, stage: &'static str) {
        let now = Instant::now();
        self.laps.push((stage, now - self.at));
        self.at = now;
    }

    pub fn log(&self) {
        if tracing::enabled!(tracing::Level::DEBUG) {
            let laps: Vec<String> = self
                .laps
                .iter()
                .map(|(s, d)| format!("{s}={:.1}", d.as_secs_f64() * 1000.0))
                .collect();
            tracing::debug!("get-context stages (ms): {}", laps.join(" "));
        }
    }
}
