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

/// How far the wall clock may run ahead of the elapsed time before it is not believed (NTP
/// steps a drifted clock by seconds, not hours).
pub const JUMP_TOLERANCE_MS: i64 = MINUTE_MS;

/// The time age-based cleanup goes by: the wall clock, but never further ahead of the wall
/// time at the first call than the time that has really elapsed since (the boot clock, which
/// counts suspend). A clock jumped forward (issue 17: +25 h for 35 s emptied working memory)
/// expires nothing early; a clock set back makes cleanup wait, never hurry.
pub fn cleanup_now_ms() -> i64 {
    static ANCHOR: std::sync::OnceLock<(i64, i64)> = std::sync::OnceLock::new();
    let anchor = *ANCHOR.get_or_init(|| (now_ms(), elapsed_ms()));
    believable(now_ms(), anchor, elapsed_ms())
}

/// `wall`, capped at the anchor's wall time plus the elapsed time since the anchor.
fn believable(wall: i64, (anchor_wall, anchor_elapsed): (i64, i64), elapsed: i64) -> i64 {
    wall.min(anchor_wall + (elapsed - anchor_elapsed) + JUMP_TOLERANCE_MS)
}

/// Milliseconds of a clock nobody sets: since boot, suspend included (Linux `CLOCK_BOOTTIME`);
/// elsewhere since the first call (a monotonic clock that may pause in sleep: cleanup then
/// waits longer, never less).
fn elapsed_ms() -> i64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime(2) writes into the live struct passed to it.
        if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } == 0 {
            // time_t and c_long are narrower than i64 on 32-bit targets.
            #[allow(clippy::unnecessary_cast)]
            return ts.tv_sec as i64 * 1000 + ts.tv_nsec as i64 / 1_000_000;
        }
    }
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as i64
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
    fn a_wall_clock_jumping_ahead_is_not_believed() {
        let anchor = (1_000_000, 50);
        // 10 s really passed; the wall clock says 10 s: believed.
        assert_eq!(believable(1_010_000, anchor, 10_050), 1_010_000);
        // 10 s passed, the wall clock jumped 25 h: capped at 10 s plus the tolerance.
        let jumped = 1_010_000 + 25 * HOUR_MS;
        assert_eq!(
            believable(jumped, anchor, 10_050),
            1_010_000 + JUMP_TOLERANCE_MS
        );
        // Set back: the wall clock is used (cleanup waits).
        assert_eq!(believable(900_000, anchor, 10_050), 900_000);
        assert!(cleanup_now_ms() <= now_ms());
    }

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
