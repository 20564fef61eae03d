//! Wall-clock helpers: Unix milliseconds, RFC 3339 strings and the short ages shown to models.
//!
//! Owns every conversion between stored times (i64 Unix ms, UTC) and their text forms. Must never
//! be called from inside the store's `apply` (replay must not depend on the clock): callers
//! stamp ops with `now_ms()` before committing them.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub const MINUTE_MS: i64 = 60_000;
pub const HOUR_MS: i64 = 60 * MINUTE_MS;
pub const DAY_MS: i64 = 24 * HOUR_MS;

pub fn now_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    now.as_millis() as i64
}

/// `2026-11-22T03:07:24.123Z`; falls back to the epoch for out-of-range values.
pub fn rfc3339(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string())
}

/// Parses RFC 3339 (what `created_at` carries on the wire) into Unix ms.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let t = OffsetDateTime::parse(s.trim(), &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// Short relative age: `now`, `12m`, `5h`, `3d`, `4mo`, `2y`.
pub fn age(from_ms: i64, now_ms: i64) -> String {
    let d = now_ms.saturating_sub(from_ms).max(0);
    if d < MINUTE_MS {
        "now".into()
    } else if d < HOUR_MS {
        format!("{}m", d / MINUTE_MS)
    } else if d < DAY_MS {
        format!("{}h", d / HOUR_MS)
    } else if d < 30 * DAY_MS {
        format!("{}d", d / DAY_MS)
    } else if d < 365 * DAY_MS {
        format!("{}mo", d / (30 * DAY_MS))
    } else {
        format!("{}y", d / (365 * DAY_MS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_to_the_millisecond() {
        let ms = 1_795_000_123_456;
        assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms));
    }

    #[test]
    fn ages_use_the_largest_whole_unit() {
        let now = 400 * DAY_MS;
        assert_eq!(age(now - 5_000, now), "now");
        assert_eq!(age(now - 12 * MINUTE_MS, now), "12m");
        assert_eq!(age(now - 5 * HOUR_MS, now), "5h");
        assert_eq!(age(now - 3 * DAY_MS, now), "3d");
        assert_eq!(age(now - 65 * DAY_MS, now), "2mo");
        assert_eq!(age(0, now), "1y");
        assert_eq!(age(now + 10, now), "now");
    }
}
