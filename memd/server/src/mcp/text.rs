//! Every sentence the agent reads about memd's tools: the server instructions, the tool
//! descriptions and the periodic self-audit reminder.
//!
//! Owns the wording only. Thresholds are formatted from the constants `learn` decides with, so
//! a description can never drift from what the daemon does. Must never mention another
//! product, a support link or anything about pricing: tool descriptions are instructions to a
//! model, not advertising.

use memd_engine::learn::{lifecycle as lc, scoring as sc};
use proto::limits;

/// Sent once in the `initialize` answer (clients show it to the model next to the tools).
pub const INSTRUCTIONS: &str = "memd is this user's persistent memory across sessions. It \
learns from outcomes: memories that help rise, memories that mislead sink and are removed. Call \
get_context_insights before answering questions that may depend on earlier work, search_memory \
for detail or verification, add_to_memory_bank for lasting facts about the user, and \
score_response whenever a <memd-score-required> block asks for it.";

/// Appended to a `get_context_insights` answer now and then (see `recall::AUDIT_EVERY`).
pub const SELF_AUDIT: &str = "SELF-AUDIT: look again at the memory_bank facts above. If one is \
outdated, wrong or says the same as another, fix it with update_memory or remove it with \
delete_memory now. Keeping your own memory clean is part of the job.";

/// Shown when nothing stored is relevant to a `get_context_insights` query.
pub const NOTHING_RELEVANT: &str = "memd holds no memory relevant to this query. Answer from the \
conversation and your own knowledge. If you learn a lasting fact about the user (name, role, \
preferences, projects, goals), store it with add_to_memory_bank.";

fn pct(x: f64) -> String {
    format!("{x:.1}")
}

/// The entry point's description: the whole mental model of memd in one place, because a
/// fresh session knows nothing else about it.
pub fn get_context_insights() -> String {
    format!(
        "Recall what memd knows that bears on a topic, before you answer. Returns the relevant \
stored memories as a KNOWN CONTEXT block; an empty query returns the user's most important \
memory_bank facts.

HOW MEMD WORKS
memd is persistent memory that learns from outcomes. Each time a memory is shown to you and \
the exchange gets scored, its score moves (worked {worked:+.2}, partial {partial:+.2}, failed \
{failed:+.2}, unknown: no change). Scores decide where a memory lives:
• working: new exchanges and takeaways; kept about a day unless promoted.
• history: promoted from working at score ≥ {h_score} with ≥ {h_uses} uses; kept about 30 days.
• patterns: promoted from history at score ≥ {p_score}, ≥ {p_uses} uses and ≥ {p_succ} \
successes; kept for good.
• A pattern whose score falls below {demote} goes back to history; any scored memory at or \
below {delete} is deleted ({young} for one younger than a week that never left working).
• A memory that failed {disputed} times since it last worked is DISPUTED: it is no longer put \
into your context by itself, and results flag it. Verify it, then fix it (update_memory) or \
drop it (archive_memory); one success clears the flag.
• memory_bank: facts stored on purpose with add_to_memory_bank. Their score never moves and \
they are never deleted by score; a failure lowers their confidence, a success raises it. \
Ranked by importance × confidence, with its track record blended in after {bank_uses} uses.
• books: reference documents the user ingested; never scored.

READING A MEMORY
• [id:patterns_3f2a…] the memory's id: look it up with search_memory(id=...) and use it when \
scoring.
• s:0.72 raw outcome score, 0 to 1.
• w:0.68 Wilson lower bound: how confident memd is that the memory helps; it grows with evidence.
• 8 uses: how often it was shown and scored (more = better tested).
• [YY~N] its latest outcomes, oldest first: Y worked, ~ partial, N failed, ? unknown.
• 2d, 5h, 3mo: age. imp:0.9, conf:0.8: importance and confidence of a memory_bank fact.

SEARCHING (search_memory)
• by meaning: search_memory(query=\"flaky auth test\")
• by time: search_memory(days_back=7), no query needed
• by id: search_memory(id=\"history_9c1d…\")
• combined: search_memory(query=\"deploy\", days_back=14, collections=[\"patterns\"])

WORKFLOW
1. get_context_insights(query) ← you are here
2. Read KNOWN CONTEXT; note the [id:...] of what you rely on.
3. search_memory() for more detail or to verify (id= for one memory).
4. Answer the user.
5. When a <memd-score-required> block appears with the next message, call score_response.
6. record_response(key_takeaway) only for a lesson the transcript alone would not keep.

YOUR ROLE
Score honestly: your scores decide which memories survive. Store lasting facts about the user \
(name, role, preferences, projects, goals) with add_to_memory_bank as soon as you learn them, \
without being asked, and selectively.

MEMORY HYGIENE (your responsibility)
• When you were corrected because a memory misled you, score that memory failed, not only the \
exchange.
• When a memory_bank fact is outdated or wrong, fix it with update_memory or remove it with \
delete_memory right away; do not wait to be told.
• Verify a fact before you store it. If you cannot, store it with confidence=0.5, not 0.9.
• When KNOWN CONTEXT holds something this session's work showed to be wrong, say so: \
\"Note: [id:...] looks outdated because ...\".
• Never state exact details (ports, paths, versions, numbers) from memory as fact unless they \
appear verbatim in KNOWN CONTEXT or a tool confirmed them; say \"I believe X; let me check\".",
        worked = sc::WORKED_DELTA,
        partial = sc::PARTIAL_DELTA,
        failed = sc::FAILED_DELTA,
        h_score = pct(lc::PROMOTE_TO_HISTORY_SCORE),
        h_uses = lc::PROMOTE_TO_HISTORY_USES,
        p_score = pct(lc::PROMOTE_TO_PATTERNS_SCORE),
        p_uses = lc::PROMOTE_TO_PATTERNS_USES,
        p_succ = lc::PROMOTE_TO_PATTERNS_SUCCESSES,
        demote = pct(lc::DEMOTE_BELOW),
        delete = pct(lc::DELETE_BELOW),
        young = pct(lc::NEW_ITEM_DELETE_BELOW),
        disputed = sc::DISPUTE_FAILURES,
        bank_uses = sc::BANK_WILSON_MIN_USES,
    )
}

pub fn search_memory() -> String {
    format!(
        "Search persistent memory when you need more than get_context_insights returned.

WHEN TO SEARCH
• The user says \"remember\", \"I told you\", \"we discussed\", \"last time\": search at once.
• You need more detail than KNOWN CONTEXT gave.
• You see an [id:...] in KNOWN CONTEXT and want the whole memory: use id=.
Do not search for general knowledge, or when KNOWN CONTEXT already answers.

MODES (give at least one of query, days_back, id)
• query: search by meaning, e.g. query=\"database migration failure\".
• days_back: only memories from the last N days ({d_lo}–{d_hi}); works without a query, newest \
first. days_back=1, collections=[\"working\"] is today's working memory.
• query + days_back: meaning within a time window, e.g. query=\"auth\", days_back=14.
• id: one memory by its id, with all its data (query and days_back are then ignored).
• collections: working (recent), history (scored, ~30 days), patterns (proven), memory_bank \
(permanent facts), books (reference documents). Leave it out to search all of them \
(recommended).
• sort_by: relevance (default with a query), recency, score.
• metadata: exact-match filters, with $gte/$gt/$lte/$lt/$eq/$ne for ranges, e.g. \
{{\"created_at\": {{\"$gte\": \"2026-01-01T00:00:00Z\"}}}}.
• limit: {l_lo}–{l_hi} results (default {l_def}).
• project: \"current\" (default) searches this project's memories and global ones; \"global\" \
only facts that hold everywhere; \"all\" every project (say so when you use what another \
project taught: its commands and paths may not apply here).

READING RESULTS
1. [patterns] (2d, s:0.72, w:0.68, 8 uses, [YY~N]) [id:patterns_3f2a…] memory text
• s: outcome score 0–1; w: Wilson confidence (lower bound, grows with evidence); uses: times \
shown and scored; [YY~N]: latest outcomes (Y worked, ~ partial, N failed, ? unknown); 2d: age.
• memory_bank results show imp: (importance) and conf: (confidence) instead.
• [id:...]: the id to look up, update or score.

VERIFICATION USE
• Before you state a remembered fact as definite, search for it.
• When two memories on one topic disagree, trust the newer one and score the older one failed \
at the next scoring prompt.
• Look up an [id:...] from KNOWN CONTEXT with id= before you build a conclusion on it.",
        d_lo = limits::DAYS_BACK.0,
        d_hi = limits::DAYS_BACK.1,
        l_lo = super::args::SEARCH_LIMIT.0,
        l_hi = super::args::SEARCH_LIMIT.1,
        l_def = super::args::SEARCH_LIMIT_DEFAULT,
    )
}

pub fn add_to_memory_bank() -> String {
    format!(
        "Store a lasting fact in memory_bank, the permanent part of memory. memory_bank facts are \
never outcome-scored or deleted by score; they stay until updated or archived, and the most \
important ones reach every new session.

WHAT BELONGS HERE
• Who the user is: name, role, background.
• Preferences: communication style, tools, conventions, workflows.
• Goals and projects: what they work on, priorities, deadlines.
• Lessons about working with them: what worked, what failed, strategies tried.
WHAT DOES NOT
• Conversation content: exchanges are captured automatically in working memory.
• Facts about the current task only.
• Everything you hear: be selective.

SCOPE
• scope=\"global\": true in every project: the user's identity, role, preferences, habits, \
how they like to work.
• scope=\"project\" (default): true in this repository only: build and test commands, ports, \
conventions, architecture, deploy steps. Other projects never see it.
When unsure, ask whether the fact would still be right in a different repository.

SHARING
• share=true also gives the fact to the user's team (when memd has a shared store): only for \
facts about a shared repository or how the team works (deploy steps, conventions, gotchas). \
Never for anything personal, private or secret. Default: private.

SIZE
One fact per memory, at most {max} characters. Do not combine unrelated facts.

STORAGE DISCIPLINE
• confidence 0.9 or more only for facts you verified against a source (code, docs, tool output), \
not for things you merely believe.
• confidence 0.7 (the default) unless you have evidence either way.
• confidence 0.5 for unverified claims, approximate numbers, or things the user said that you \
could not confirm.
• importance (default 0.7): how much the fact matters across sessions; 0.9+ for identity and \
strong preferences.
• Before storing, ask: will this still be true next week? If not, it does not belong here.
• A fact that restates an existing one is not stored twice; the answer names the existing id.",
        max = limits::MEMORY_BANK_MAX_CHARS,
    )
}

pub const UPDATE_MEMORY: &str = "Change a memory_bank fact in place: its text, tags, importance \
or confidence. Give the id (from an [id:memory_bank_...] tag or search_memory) and at least one \
field to change; fields you leave out keep their value. Use it as soon as you notice a stored \
fact is outdated or imprecise, and lower confidence when a fact turns out to be uncertain. \
Only memory_bank entries can be edited: other memories change through scoring.";

pub const ARCHIVE_MEMORY: &str = "Archive a memory_bank fact that is no longer true or no longer \
useful. Archived facts stop appearing in context and search (a soft delete: nothing is \
destroyed). Give the id, or the fact's text to archive the closest matching active entry. \
Prefer update_memory when the fact only changed.";

pub const DELETE_MEMORY: &str = "Remove a wrong, outdated or redundant memory_bank fact so it \
stops misleading future sessions. Give its id or its text (the closest active entry is \
chosen). This is the same soft delete as archive_memory: the fact disappears from context and \
search but stays recoverable on disk.";

pub const SCORE_RESPONSE: &str = "Score the previous exchange. Call it only when a \
<memd-score-required> block appears in the context, before you answer the new message. To \
keep a lesson at any other time, use record_response instead.

FINDING THE MEMORIES
The scoring prompt lists memory ids only. The same ids appear as [id:...] tags in the KNOWN \
CONTEXT of the previous turn: look there to see what each memory said, then judge whether it \
helped your previous answer.

EXCHANGE OUTCOME (read the user's reaction to your previous answer)
• worked: satisfied, thanks you, moves on to something new.
• failed: corrects you, says no or that's wrong, supplies the right answer.
• partial: takes some of the answer but not all, or is lukewarm.
• unknown: no clear signal.

PER-MEMORY SCORES (memory_scores)
Score every id the scoring prompt lists:
• worked: the memory helped.
• partial: it helped somewhat.
• unknown: you did not use it.
• failed: it MISLED you (wrong or stale information you acted on).
You may also score any other memory you saw in KNOWN CONTEXT or search results. \"failed\" \
means misleading, not unused: a memory you ignored is unknown.

related: leave it out to apply the outcome to every memory shown for that exchange; give a list \
of ids to score only those; give [] to score the exchange alone.

ACTIVE MEMORY MANAGEMENT
• failed is pruning, not punishment: a memory scored failed a few times stops being shown, and \
a scored one is deleted, which is exactly what should happen to bad information.
• If a memory misled you, score it failed even when the exchange as a whole went fine.
• A memory that keeps surfacing and keeps being unknown is noise; one honest failed helps memd \
stop spending context on it.
• You are the gardener: pull the weeds.";

pub const RECORD_RESPONSE: &str = "Keep a key takeaway from this exchange in memory, when the \
transcript alone would not preserve it: a decision that was made, a solution to a hard \
problem, a correction of something you got wrong (and why), context that would otherwise be \
lost. One or two sentences. Most exchanges need none: every exchange is already captured.

initial_score judges the takeaway now: worked starts it at 0.7, partial at 0.55, failed at 0.2 \
(kept as \"what not to do\"); leave it out to start at 0.5. Like every working memory it then \
earns its place through scoring.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_carry_the_thresholds_memd_uses() {
        let d = get_context_insights();
        assert!(d.contains(&format!("score ≥ {}", pct(lc::PROMOTE_TO_HISTORY_SCORE))));
        assert!(d.contains(&format!("at or below {} is deleted", pct(lc::DELETE_BELOW))));
        assert!(d.contains(&format!(
            "failed {} times since it last worked",
            sc::DISPUTE_FAILURES
        )));
        assert!(
            d.contains("A pattern whose score falls below"),
            "only patterns are demoted: {d}"
        );
        assert!(d.contains("worked +0.20"), "{d}");
        assert!(d.contains("failed -0.30"), "{d}");
    }

    #[test]
    fn no_foreign_names_or_links() {
        let all = [
            get_context_insights(),
            search_memory(),
            add_to_memory_bank(),
            UPDATE_MEMORY.into(),
            ARCHIVE_MEMORY.into(),
            DELETE_MEMORY.into(),
            SCORE_RESPONSE.into(),
            RECORD_RESPONSE.into(),
            INSTRUCTIONS.into(),
            SELF_AUDIT.into(),
        ];
        for text in all {
            let lower = text.to_lowercase();
            assert!(
                !lower.contains("roampal") && !lower.contains("http"),
                "{text}"
            );
        }
    }
}
