//! The text of a memory that the search indexes read.
//!
//! Owns one rule: what the lexical index, the embedder and the token states are given for a
//! record. An exchange (a conversation turn the stop hook filed, `memory_type` "exchange") is
//! indexed as its UTC date then its content, `[8 May 2023] User: ...`, so a question that names
//! a day or a month finds the turns of that day (bench/EVAL.md sections 13 (b) and 26); every
//! other memory is indexed as its content, unchanged. The date's tokens can only raise an
//! exchange's late-interaction score, so that score carries the exchange weight
//! (`retrieve::LATE_SCORE`, section 26 (c)). Must never change what is stored or shown:
//! `/api/search`, context injection and the dashboard read `Record::content`.

use crate::record::Record;
use proto::{Metadata, Value};
use std::borrow::Cow;

/// The version of the rule above. A store records the version its exchanges were indexed
/// with; when it differs, the background pass indexes them again (`state::reindex`).
/// 1: content alone; 2: an exchange's date, then its content.
pub const VERSION: u32 = 2;

/// Whether a memory with `metadata` is a conversation turn as the stop hook files it.
pub fn is_exchange(metadata: &Metadata) -> bool {
    matches!(metadata.get("memory_type"), Some(Value::String(t)) if t == "exchange")
}

/// The text the indexes read for `r`: for an exchange, its date and its content; for any other
/// memory, its content.
pub fn of(r: &Record) -> Cow<'_, str> {
    if is_exchange(&r.metadata) {
        Cow::Owned(dated(r.created_at, &r.content))
    } else {
        Cow::Borrowed(&r.content)
    }
}

/// `of(r)` when it is not `r`'s content (an exchange), for a copy that outlives the store's
/// read (the second stage's candidates).
pub fn differing(r: &Record) -> Option<String> {
    match of(r) {
        Cow::Owned(text) => Some(text),
        Cow::Borrowed(_) => None,
    }
}

/// `content` after the UTC day of `at_ms` (Unix milliseconds): `[8 May 2023] <content>`.
/// A time outside the calendar's range leaves the content alone.
pub fn dated(at_ms: i64, content: &str) -> String {
    match day(at_ms) {
        Some(d) => format!("[{d}] {content}"),
        None => content.to_string(),
    }
}

/// `8 May 2023`: the day without a leading zero, the month's English name, the year. Written
/// out (not `5/8/2023`) so the words a question uses ("in May", "2023") are terms of the turn.
fn day(at_ms: i64) -> Option<String> {
    let at = time::OffsetDateTime::from_unix_timestamp(at_ms.div_euclid(1_000)).ok()?;
    Some(format!("{} {} {}", at.day(), at.month(), at.year()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::Collection;

    fn record(content: &str, at: i64, exchange: bool) -> Record {
        let mut r = Record::new(Collection::Working, content.to_string(), at);
        if exchange {
            r.metadata
                .insert("memory_type".into(), Value::from("exchange"));
        }
        r
    }

    #[test]
    fn exchanges_are_indexed_after_their_utc_day() {
        // 2023-05-08 13:56 UTC.
        let at = 1_683_554_160_000;
        let r = record("User: hi\nAssistant: hello", at, true);
        assert_eq!(of(&r), "[8 May 2023] User: hi\nAssistant: hello");
        // 23:59:59 and the next midnight are two days.
        assert_eq!(dated(1_683_590_399_000, "x"), "[8 May 2023] x");
        assert_eq!(dated(1_683_590_400_000, "x"), "[9 May 2023] x");
    }

    #[test]
    fn other_memories_are_indexed_as_their_content() {
        let r = record("Builds run with cargo", 1_683_554_160_000, false);
        assert!(matches!(of(&r), Cow::Borrowed("Builds run with cargo")));
    }

    #[test]
    fn a_time_off_the_calendar_leaves_the_content_alone() {
        assert_eq!(dated(i64::MAX, "x"), "x");
        assert_eq!(dated(0, "x"), "[1 January 1970] x");
    }
}
