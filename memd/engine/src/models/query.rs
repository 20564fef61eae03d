//! The query side of late interaction: the query's token states under a deadline, the count of
//! encodings in flight that load shedding reads, and the tally of what prompts got.
//!
//! Owns when a prompt gives up on reranking (deadline passed, a full batch of queries already
//! waiting, or the encodings in flight expected to outlast its deadline: `EncodeCost`) and
//! counting it. Must never block past the caller's deadline and never fail: a missing, busy or
//! failing model gives `None` (the fused order).

use super::Models;
use super::embed::QueryStates;
use super::embed::colbert::QUERY_BATCH;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// While prompts or searches are arriving (one within `BUSY_WINDOW`), the background
/// token-state encoding yields (`workers`): it takes a tenth of the time and plans at most once
/// a second. Searches count too: someone (an agent's MCP call, the dashboard) waits for each;
/// at 1M memories with a backlog that halved the daemon's CPU per search (bench/EVAL.md
/// section 24).
pub const BUSY_WINDOW: Duration = Duration::from_secs(2);
/// After a prompt's query encoding missed its budget, the prompts of the next `MISS_BACKOFF`
/// keep the fused order without encoding: on a machine that busy their encodings would finish
/// after their prompts too, and the work thrown away is what slowed everyone down.
const MISS_BACKOFF: Duration = Duration::from_millis(500);

/// Milliseconds on a monotonic clock private to this module (0 = never).
fn clock_ms() -> u64 {
    static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
    EPOCH.elapsed().as_millis() as u64 + 1
}

/// When the last prompt or search asked for reranking, and until when prompts skip their query
/// encoding after a miss (milliseconds on `clock_ms`); what query encodings have been taking.
#[derive(Default)]
pub struct Load {
    last_query_ms: AtomicU64,
    backoff_until_ms: AtomicU64,
    cost: EncodeCost,
}

/// Weight of the running estimates' past: a new sample counts for 1/`EWMA_KEEP`.
const EWMA_KEEP: u64 = 8;

/// Running estimates (microseconds; 0 = not measured yet) of what a query encoding takes and
/// of how long a prompt can wait for one. Under 16 sessions 36-46 % of prompts' encodings
/// finished past their deadline and were thrown away after 7-12 ms of CPU each; with these a
/// prompt does not start one that the encodings ahead of it would make late.
#[derive(Default)]
pub struct EncodeCost {
    /// From an encoding's start to its states, per place it took in the queue (itself and the
    /// encodings in flight when it started): encodings queued behind a run share the next
    /// one, so this falls as the queue grows, and rises with the machine's load.
    per_place_us: AtomicU64,
    /// From a prompt's start of its encoding to its deadline: the embedding and the first
    /// stage, which the encoding runs beside, then `search.prompt_budget_ms`.
    allowance_us: AtomicU64,
}

impl EncodeCost {
    /// An encoding that found `others` in flight took `took` from its start to its states.
    fn ran(&self, took: Duration, others: usize) {
        ewma(
            &self.per_place_us,
            took.as_micros() as u64 / (others as u64 + 1),
        );
    }

    /// A prompt's encoding, started at `started`, may finish until `deadline`.
    fn allowed(&self, started: Instant, deadline: Instant) {
        ewma(
            &self.allowance_us,
            deadline.saturating_duration_since(started).as_micros() as u64,
        );
    }

    /// Whether an encoding starting behind `others` in flight is expected to finish past its
    /// prompt's deadline. Never when none is in flight (that encoding keeps the estimates
    /// current, and an idle machine always reranks) nor before both are measured.
    fn would_miss(&self, others: usize) -> bool {
        let per_place = self.per_place_us.load(Ordering::Relaxed);
        let allowance = self.allowance_us.load(Ordering::Relaxed);
        others > 0 && per_place > 0 && per_place * (others as u64 + 1) > allowance
    }

    /// The estimates (per place in the queue, allowance), for logs and tests.
    pub fn estimates(&self) -> (Duration, Duration) {
        let get = |c: &AtomicU64| Duration::from_micros(c.load(Ordering::Relaxed));
        (get(&self.per_place_us), get(&self.allowance_us))
    }
}

/// Moves the running estimate `cell` toward `sample` (the first sample is taken as it is).
fn ewma(cell: &AtomicU64, sample: u64) {
    let sample = sample.max(1);
    let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
        Some(match old {
            0 => sample,
            old => ((old * (EWMA_KEEP - 1) + sample) / EWMA_KEEP).max(1),
        })
    });
}

impl Load {
    /// A prompt or a search asked for reranking now.
    fn query_seen(&self) {
        self.last_query_ms.store(clock_ms(), Ordering::Relaxed);
    }

    /// Whether a prompt or a search asked for reranking within `BUSY_WINDOW`.
    pub fn queries_arriving(&self) -> bool {
        let last = self.last_query_ms.load(Ordering::Relaxed);
        last != 0 && clock_ms().saturating_sub(last) < BUSY_WINDOW.as_millis() as u64
    }

    /// A prompt's query encoding missed its budget: the next ones skip theirs for a while.
    fn missed(&self) {
        let until = clock_ms() + MISS_BACKOFF.as_millis() as u64;
        self.backoff_until_ms.store(until, Ordering::Relaxed);
    }

    fn backing_off(&self) -> bool {
        clock_ms() < self.backoff_until_ms.load(Ordering::Relaxed)
    }

    /// What query encodings have been taking.
    pub fn cost(&self) -> &EncodeCost {
        &self.cost
    }
}

/// Prompts that asked for late interaction since the daemon started, by what they got: the
/// figure that says how often a busy machine serves the fused order (`/api/stats`
/// `index.prompt_rerank`, memd-bench's concurrent phase).
#[derive(Default)]
pub struct PromptTally {
    reranked: std::sync::atomic::AtomicU64,
    late_encoding_late: std::sync::atomic::AtomicU64,
    maxsim_cut_short: std::sync::atomic::AtomicU64,
    shed: std::sync::atomic::AtomicU64,
    nothing_to_rerank: std::sync::atomic::AtomicU64,
}

/// What one prompt's reranking came to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PromptRerank {
    /// The whole head was scored within the budget.
    Reranked,
    /// The query's late encoding had not arrived by the deadline: the fused order kept.
    LateEncodingLate,
    /// MaxSim reached the deadline before the end of the head: the part it did not reach
    /// kept its fused places.
    MaxSimCutShort,
    /// A full batch of queries was already encoding or waiting: the fused order at once
    /// (load shedding).
    Shed,
    /// Nothing to reorder (no memory has token states yet, or the first stage found fewer
    /// than two candidates): the prompt did not wait for its query's token states.
    NothingToRerank,
}

impl PromptTally {
    pub fn count(&self, what: PromptRerank) {
        let counter = match what {
            PromptRerank::Reranked => &self.reranked,
            PromptRerank::LateEncodingLate => &self.late_encoding_late,
            PromptRerank::MaxSimCutShort => &self.maxsim_cut_short,
            PromptRerank::Shed => &self.shed,
            PromptRerank::NothingToRerank => &self.nothing_to_rerank,
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn view(&self) -> proto::PromptRerankStats {
        let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let (late, cut) = (get(&self.late_encoding_late), get(&self.maxsim_cut_short));
        proto::PromptRerankStats {
            reranked: get(&self.reranked),
            over_budget: late + cut,
            late_encoding_late: late,
            maxsim_cut_short: cut,
            shed: get(&self.shed),
            nothing_to_rerank: get(&self.nothing_to_rerank),
        }
    }
}

impl Models {
    /// The query's token states, if the model is loaded and they arrive before `deadline`
    /// (`start_late_query`, then `wait_late_query`).
    pub async fn encode_late_query(
        &self,
        text: &str,
        deadline: Instant,
        shed: bool,
    ) -> Option<QueryStates> {
        if Instant::now() >= deadline {
            self.missed_budget(shed);
            return None;
        }
        let started = self.start_late_query(text, shed)?;
        self.wait_late_query(started, deadline).await
    }

    /// Starts encoding the query's token states on a blocking thread, so the caller can embed
    /// the query and take the first stage meanwhile; `None` when there is no model or the
    /// encoding is not worth starting. Queries arriving while one is encoding are encoded
    /// together in the next run (`colbert::QUERY_BATCH`). With `shed` (the prompt path), a
    /// query that would not fit that next run, one the encodings already in flight would
    /// finish past the prompt's deadline (`EncodeCost`), or one arriving while prompts back
    /// off after a miss, is not started: under load the prompt keeps the fused order instead
    /// of piling up work it would not wait for.
    pub fn start_late_query(&self, text: &str, shed: bool) -> Option<LateQuery> {
        let model = self.late()?;
        self.load.query_seen();
        if shed && self.load.backing_off() {
            self.prompts.count(PromptRerank::Shed);
            return None;
        }
        let in_flight = InFlight::enter(self.queries.clone());
        if shed && in_flight.others >= QUERY_BATCH {
            tracing::debug!("late-interaction query skipped: a full batch is waiting");
            self.prompts.count(PromptRerank::Shed);
            return None;
        }
        if shed && self.load.cost.would_miss(in_flight.others) {
            tracing::debug!(
                others = in_flight.others,
                "late-interaction query skipped: it would finish past the budget"
            );
            self.prompts.count(PromptRerank::Shed);
            return None;
        }
        let (text, load) = (text.to_string(), self.load.clone());
        let wanted = Arc::new(AtomicBool::new(true));
        let still_wanted = wanted.clone();
        let started = Instant::now();
        // The guard moves into the work: it counts until the encoding ends, however it ends.
        let work = tokio::task::spawn_blocking(move || {
            let in_flight = in_flight;
            // Abandoned before its turn on a blocking thread: the model never runs for it.
            let states = still_wanted
                .load(Ordering::Acquire)
                .then(|| model.encode_query(&text));
            if let Some(Ok(_)) = &states {
                load.cost.ran(started.elapsed(), in_flight.others);
            }
            states
        });
        Some(LateQuery {
            work,
            wanted,
            shed,
            started,
        })
    }

    /// The states of a started encoding, if they arrive before `deadline`. The encoding cannot
    /// be interrupted: past the deadline it finishes on its blocking thread and is thrown
    /// away, while the caller goes on with the fused order.
    pub async fn wait_late_query(
        &self,
        mut started: LateQuery,
        deadline: Instant,
    ) -> Option<QueryStates> {
        if started.shed {
            self.load.cost.allowed(started.started, deadline);
        }
        match tokio::time::timeout_at(deadline.into(), &mut started.work).await {
            Ok(Ok(Some(Ok(q)))) => Some(q),
            Ok(Ok(Some(Err(e)))) => {
                tracing::warn!("late-interaction query encoding failed: {e:#}");
                None
            }
            Ok(Ok(None)) => None,
            Ok(Err(e)) => {
                tracing::warn!("late-interaction query encoding crashed: {e}");
                None
            }
            Err(_) => {
                tracing::debug!("late-interaction query missed the reranking budget");
                self.missed_budget(started.shed);
                None
            }
        }
    }

    /// A prompt that asked for reranking but has nothing to reorder (no memory has token
    /// states yet, or its first stage found fewer than two candidates): it did not wait for
    /// its query's token states. Counted only while the late-interaction model is loaded.
    pub fn nothing_to_rerank(&self) {
        if self.late().is_some() {
            self.load.query_seen();
            self.prompts.count(PromptRerank::NothingToRerank);
        }
    }

    /// A query encoding ran out of time: a prompt's is tallied, and the next prompts back off.
    fn missed_budget(&self, shed: bool) {
        if shed {
            self.prompts.count(PromptRerank::LateEncodingLate);
            self.load.missed();
        }
    }
}

/// A late-interaction query encoding started and not waited for yet. Dropped without
/// `Models::wait_late_query` it is abandoned: if no blocking thread has taken it up yet, the
/// model never runs for it (one already running finishes and is thrown away).
pub struct LateQuery {
    work: tokio::task::JoinHandle<Option<anyhow::Result<QueryStates>>>,
    wanted: Arc<AtomicBool>,
    /// The prompt path's: tallied and shed.
    shed: bool,
    /// When it was started (`EncodeCost`).
    started: Instant,
}

impl Drop for LateQuery {
    fn drop(&mut self) {
        self.wanted.store(false, Ordering::Release);
    }
}

/// One query encoding in the count of those running; leaves it when dropped (finished,
/// failed, panicked or never run).
struct InFlight {
    count: Arc<AtomicUsize>,
    /// How many were running when this one entered.
    others: usize,
}

impl InFlight {
    fn enter(count: Arc<AtomicUsize>) -> InFlight {
        let others = count.fetch_add(1, Ordering::SeqCst);
        InFlight { count, others }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missed_budget_backs_off_and_prompts_make_the_background_yield() {
        let load = Load::default();
        assert!(!load.backing_off() && !load.queries_arriving());
        load.query_seen();
        assert!(load.queries_arriving(), "a prompt just arrived");
        assert!(!load.backing_off(), "no miss yet");
        load.missed();
        assert!(load.backing_off(), "the next prompts skip their encoding");
    }

    #[test]
    fn an_encoding_the_queue_would_make_late_is_not_started() {
        let cost = EncodeCost::default();
        assert!(
            !cost.would_miss(10),
            "nothing measured yet: every encoding starts"
        );
        let t0 = Instant::now();
        // 6 ms for an encoding alone; prompts may wait 25 ms from its start.
        cost.ran(Duration::from_millis(6), 0);
        cost.allowed(t0, t0 + Duration::from_millis(25));
        assert_eq!(
            cost.estimates(),
            (Duration::from_millis(6), Duration::from_millis(25))
        );
        assert!(!cost.would_miss(0), "alone, an encoding always starts");
        assert!(!cost.would_miss(3), "4 places x 6 ms fit 25 ms");
        assert!(cost.would_miss(4), "5 places x 6 ms do not");
        // The machine gets busy: an encoding behind 3 others took 80 ms (20 ms a place).
        for _ in 0..20 {
            cost.ran(Duration::from_millis(80), 3);
        }
        assert!(cost.would_miss(1), "{:?}", cost.estimates());
        assert!(!cost.would_miss(0), "still one at a time");
        // And quiet again: the estimate comes back down.
        for _ in 0..40 {
            cost.ran(Duration::from_millis(5), 0);
        }
        assert!(!cost.would_miss(3), "{:?}", cost.estimates());
    }
}
