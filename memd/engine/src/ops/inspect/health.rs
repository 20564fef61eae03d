//! Health over time: memories per collection per day, injections per day, how scored turns went.
//!
//! Owns `<data dir>/logs/counts.jsonl` (one line per day with each collection's count, written
//! by the lifecycle worker; the store keeps only the present) and the daily figures read off the
//! trace ledger. Must never fail a caller: a counts file that cannot be written or read is
//! skipped (the dashboard then shows today's counts only).

use super::Inspect;
use super::TRACE_LINES;
use crate::clock;
use crate::trace::TraceEvent;
use proto::Collection;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// File name of the daily counts, inside the logs directory.
pub const COUNTS_FILE: &str = "counts.jsonl";
/// Days a chart shows.
pub const DAYS_SHOWN: usize = 30;

/// One day's counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DayCounts {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    pub counts: BTreeMap<String, usize>,
}

/// One day of hook activity, from the ledger.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DayActivity {
    pub day: String,
    /// Prompts (session starts are not prompts).
    pub prompts: usize,
    /// Memories injected (with repeats), session starts included.
    pub injected: usize,
}

/// Everything the health page charts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HealthSeries {
    /// Oldest first, today (live) last.
    pub counts: Vec<DayCounts>,
    /// Oldest first; days without prompts are absent.
    pub activity: Vec<DayActivity>,
    /// Scored turns per outcome word, over the whole ledger.
    pub outcomes: BTreeMap<String, usize>,
}

impl HealthSeries {
    /// Share of scored turns that worked (a partial counts half); `None` before any.
    pub fn hit_rate(&self) -> Option<f64> {
        let n = |k: &str| self.outcomes.get(k).copied().unwrap_or(0) as f64;
        let scored = n("worked") + n("partial") + n("failed");
        (scored > 0.0).then(|| (n("worked") + 0.5 * n("partial")) / scored)
    }
}

impl Inspect<'_> {
    fn counts_path(&self) -> PathBuf {
        self.data_dir.join("logs").join(COUNTS_FILE)
    }

    /// Each collection's count now.
    pub fn counts_now(&self) -> DayCounts {
        let counts = self.db.read(|s| {
            Collection::ALL
                .iter()
                .map(|c| (c.as_str().to_string(), s.count(*c)))
                .collect()
        });
        DayCounts {
            day: day_of(clock::now_ms()),
            counts,
        }
    }

    /// Appends today's counts unless today already has a line (called by the lifecycle
    /// worker; the first call of a day wins, the live figures show the rest).
    pub fn sample_counts(&self) {
        let today = self.counts_now();
        let path = self.counts_path();
        if read_counts(&path)
            .last()
            .is_some_and(|d| d.day == today.day)
        {
            return;
        }
        let Ok(mut line) = serde_json::to_vec(&today) else {
            return;
        };
        line.push(b'\n');
        let written = std::fs::create_dir_all(path.parent().unwrap_or(&path))
            .and_then(|_| crate::trace::open_append(&path))
            .and_then(|mut f| f.write_all(&line));
        if let Err(e) = written {
            tracing::debug!("daily counts not written to {}: {e}", path.display());
        }
    }

    /// The health page's series: the last [`DAYS_SHOWN`] days.
    pub fn health_series(&self) -> HealthSeries {
        let mut counts = read_counts(&self.counts_path());
        let today = self.counts_now();
        counts.retain(|d| d.day != today.day);
        counts.push(today);
        let keep_from = counts.len().saturating_sub(DAYS_SHOWN);
        let mut activity: BTreeMap<String, DayActivity> = BTreeMap::new();
        let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
        for e in self.trace.read(None, TRACE_LINES) {
            match e.event {
                TraceEvent::GetContext => {
                    // A session start injects without a prompt: its memories count, it does not.
                    let day = e.ts.get(..10).unwrap_or("").to_string();
                    let a = activity.entry(day.clone()).or_insert_with(|| DayActivity {
                        day,
                        ..DayActivity::default()
                    });
                    a.prompts += usize::from(!e.is_session_start());
                    a.injected += e.injected.len();
                }
                TraceEvent::RecordOutcome if e.note.as_deref() != Some("already_scored") => {
                    if let Some(o) = e.outcome {
                        *outcomes.entry(o).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
        let activity: Vec<DayActivity> = activity.into_values().collect();
        let from = activity.len().saturating_sub(DAYS_SHOWN);
        HealthSeries {
            counts: counts.split_off(keep_from),
            activity: activity[from..].to_vec(),
            outcomes,
        }
    }
}

/// `YYYY-MM-DD` (UTC) of a Unix-milliseconds time.
pub fn day_of(ms: i64) -> String {
    clock::rfc3339(ms).chars().take(10).collect()
}

fn read_counts(path: &std::path::Path) -> Vec<DayCounts> {
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect()
}
