//! Reading LoCoMo conversation files: turns, session dates, questions and their evidence.
//!
//! Owns the file format (one JSON object per conversation: `session_N` turn lists,
//! `session_N_date_time`, `qa`) and its repairs: a few evidence entries in the public data
//! are malformed (`"D8:6; D9:17"`, `"D:11:26"`, `"D"`), so evidence is read as every
//! `D<session>:<turn>` found in the string. Must never drop a question silently: questions
//! without usable evidence are kept (with empty evidence) for the caller to count.

use anyhow::{Context, Result, bail};
use regex::Regex;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Categories with evidence to retrieve (5 is adversarial: unanswerable by design).
const SCORED_CATEGORIES: std::ops::RangeInclusive<u64> = 1..=4;

/// One conversation: every turn (in order) and the questions of categories 1–4.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// The file stem, e.g. `26`.
    pub name: String,
    pub turns: Vec<Turn>,
    pub questions: Vec<Question>,
}

#[derive(Debug, Clone)]
pub struct Turn {
    /// `D<session>:<turn>`.
    pub dia_id: String,
    pub speaker: String,
    pub text: String,
    /// The session's date as written in the data (e.g. `1:56 pm on 8 May, 2023`).
    pub session_date: String,
    /// Session start (UTC) plus the turn's position in seconds, in Unix ms.
    pub created_at: i64,
}

impl Turn {
    /// The memory text the protocol prescribes: `<speaker>: <text>`.
    pub fn content(&self) -> String {
        format!("{}: {}", self.speaker, self.text)
    }
}

#[derive(Debug, Clone)]
pub struct Question {
    pub text: String,
    pub category: u8,
    /// dia_ids of the turns that answer it; empty when the data gives none usable.
    pub evidence: Vec<String>,
    /// The project it is asked from, as the prompt hook scopes reads (`scope::Visibility`);
    /// `None`: from no project (global memories only; every memory when none has a project).
    pub project: Option<String>,
}

/// The conversation files of a directory (`*.json`), sorted by name.
pub fn conversation_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read LoCoMo directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no LoCoMo conversation files (*.json) in {}", dir.display());
    }
    Ok(files)
}

pub fn load_conversation(path: &Path) -> Result<Conversation> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let json: Json =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    parse_conversation(&name, &json).with_context(|| format!("in {}", path.display()))
}

fn parse_conversation(name: &str, json: &Json) -> Result<Conversation> {
    let Some(obj) = json.as_object() else {
        bail!("expected one JSON object per conversation");
    };
    let mut sessions: Vec<(u32, &Vec<Json>)> = obj
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("session_")?.parse().ok()?, v.as_array()?)))
        .collect();
    sessions.sort_by_key(|(n, _)| *n);
    let mut turns = Vec::new();
    for (n, list) in sessions {
        let date_key = format!("session_{n}_date_time");
        let date = obj
            .get(&date_key)
            .and_then(Json::as_str)
            .with_context(|| format!("session {n} has no {date_key}"))?;
        let start = parse_session_date(date)
            .with_context(|| format!("cannot read the date {date:?} of session {n}"))?;
        for (i, t) in list.iter().enumerate() {
            let field = |k: &str| t.get(k).and_then(Json::as_str).unwrap_or_default();
            if field("dia_id").is_empty() {
                bail!("session {n} turn {i} has no dia_id");
            }
            turns.push(Turn {
                dia_id: field("dia_id").to_string(),
                speaker: field("speaker").to_string(),
                text: field("text").to_string(),
                session_date: date.to_string(),
                created_at: start + i as i64 * 1_000,
            });
        }
    }
    let questions = obj
        .get("qa")
        .and_then(Json::as_array)
        .context("no `qa` list")?
        .iter()
        .filter_map(parse_question)
        .collect();
    Ok(Conversation {
        name: name.to_string(),
        turns,
        questions,
    })
}

fn parse_question(q: &Json) -> Option<Question> {
    let category = q.get("category")?.as_u64()?;
    if !SCORED_CATEGORIES.contains(&category) {
        return None;
    }
    let mut evidence: Vec<String> = Vec::new();
    for raw in q
        .get("evidence")?
        .as_array()?
        .iter()
        .filter_map(Json::as_str)
    {
        for id in normalize_evidence(raw) {
            if !evidence.contains(&id) {
                evidence.push(id);
            }
        }
    }
    Some(Question {
        text: q.get("question")?.as_str()?.to_string(),
        category: category as u8,
        evidence,
        project: None,
    })
}

/// Every `D<session>:<turn>` in an evidence string, tolerating a stray colon after the D.
pub fn normalize_evidence(raw: &str) -> Vec<String> {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    let re = PATTERN.get_or_init(|| Regex::new(r"D:?(\d+):(\d+)").expect("static regex"));
    re.captures_iter(raw)
        .map(|c| format!("D{}:{}", &c[1], &c[2]))
        .collect()
}

/// `"1:56 pm on 8 May, 2023"` → Unix ms (taken as UTC; only the order of sessions matters).
pub fn parse_session_date(s: &str) -> Option<i64> {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    let re = PATTERN.get_or_init(|| {
        Regex::new(r"(?i)^\s*(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+([a-z]+),?\s+(\d{4})")
            .expect("static regex")
    });
    let c = re.captures(s)?;
    let mut hour: u8 = c[1].parse().ok()?;
    let minute: u8 = c[2].parse().ok()?;
    match (c[3].to_ascii_lowercase().as_str(), hour) {
        ("am", 12) => hour = 0,
        ("pm", h) if h < 12 => hour += 12,
        _ => {}
    }
    let day: u8 = c[4].parse().ok()?;
    let month = month_from_name(&c[5])?;
    let year: i32 = c[6].parse().ok()?;
    let date = time::Date::from_calendar_date(year, month, day).ok()?;
    let at = date.with_hms(hour, minute, 0).ok()?.assume_utc();
    Some(at.unix_timestamp() * 1_000)
}

fn month_from_name(name: &str) -> Option<time::Month> {
    use time::Month::*;
    let months = [
        January, February, March, April, May, June, July, August, September, October, November,
        December,
    ];
    let lower = name.to_ascii_lowercase();
    months
        .into_iter()
        .find(|m| m.to_string().to_ascii_lowercase() == lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_dates_parse_with_twelve_hour_clock() {
        let t = parse_session_date("1:56 pm on 8 May, 2023").unwrap();
        // 2023-05-08T13:56:00Z
        assert_eq!(t, 1_683_554_160_000);
        let midnight = parse_session_date("12:09 am on 13 September, 2023").unwrap();
        let noon = parse_session_date("12:09 pm on 13 September, 2023").unwrap();
        assert_eq!(noon - midnight, 12 * 3_600_000);
        assert!(parse_session_date("sometime in May").is_none());
        assert!(parse_session_date("1:56 pm on 31 February, 2023").is_none());
    }

    #[test]
    fn malformed_evidence_is_repaired_not_dropped() {
        assert_eq!(normalize_evidence("D8:6; D9:17"), ["D8:6", "D9:17"]);
        assert_eq!(normalize_evidence("D:11:26"), ["D11:26"]);
        assert!(normalize_evidence("D").is_empty());
    }

    #[test]
    fn a_conversation_keeps_turn_order_and_scored_questions_only() {
        let json: Json = serde_json::from_str(
            r#"{"speaker_a":"A","speaker_b":"B",
                "session_2_date_time":"9:00 am on 2 May, 2023",
                "session_2":[{"speaker":"B","dia_id":"D2:1","text":"later"}],
                "session_1_date_time":"9:00 am on 1 May, 2023",
                "session_1":[{"speaker":"A","dia_id":"D1:1","text":"hi"},
                             {"speaker":"B","dia_id":"D1:2","text":"hello"}],
                "session_1_summary":"not a session",
                "qa":[{"question":"q1","answer":"x","evidence":["D1:2"],"category":4},
                      {"question":"q5","adversarial_answer":"x","evidence":["D1:1"],"category":5},
                      {"question":"q3","answer":"y","evidence":[],"category":3}]}"#,
        )
        .unwrap();
        let c = parse_conversation("t", &json).unwrap();
        let ids: Vec<&str> = c.turns.iter().map(|t| t.dia_id.as_str()).collect();
        assert_eq!(ids, ["D1:1", "D1:2", "D2:1"]);
        assert!(c.turns[0].created_at < c.turns[1].created_at);
        assert!(c.turns[1].created_at < c.turns[2].created_at);
        assert_eq!(c.turns[1].content(), "B: hello");
        let qs: Vec<(&str, usize)> = c
            .questions
            .iter()
            .map(|q| (q.text.as_str(), q.evidence.len()))
            .collect();
        assert_eq!(qs, [("q1", 1), ("q3", 0)]);
    }
}
