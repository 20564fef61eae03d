//! Wall-clock helpers: Unix milliseconds, RFC 3339 strings and the short ages shown to models.
//!
//! Owns every conversion between stored times (i64 Unix ms, UTC) and their text forms. Must never
//! be called from inside the store's `apply` (replay must not depend on the clock): callers
//! stamp ops with `now_ms()` before committing them.

use serde::{Deserialize, Serialize};
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

/// A time age-based cleanup went by and the boot clock's reading then: kept in the store
/// (`Op::CleanupClock`), so the guard holds across restarts (issue 37: two restarts with the
/// clock ahead, +25 h then +9 days, deleted every working memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trusted {
    pub wall: i64,
    pub boot: i64,
}

/// How much faster than real time the cleanup clock may run while it is behind the wall clock.
/// Time the machine was off is unknown to the boot clock: without catching up, each shutdown
/// would hold memories that much longer for good; at twice real time a wrong clock ahead can at
/// most make memories age twice as fast, never expire them at once.
pub const CATCH_UP: i64 = 2;

/// The time age-based cleanup goes by now, given the last one it went by (`None` on a new
/// store: the wall clock). Never further past `last` than `CATCH_UP` × the time the boot clock
/// (which counts suspend) says has passed since; a clock set back makes cleanup wait, never
/// hurry.
pub fn cleanup_now(last: Option<Trusted>) -> Trusted {
    cleanup_now_with(now_ms(), last)
}

/// `cleanup_now` with the wall clock reading `wall` (the boot clock is the real one).
pub fn cleanup_now_with(wall: i64, last: Option<Trusted>) -> Trusted {
    let boot = elapsed_ms();
    Trusted {
        wall: believable(wall, last, boot),
        boot,
    }
}

/// `wall`, capped at `last` plus `CATCH_UP` × the boot time passed since.
fn believable(wall: i64, last: Option<Trusted>, boot: i64) -> i64 {
    let Some(last) = last else {
        return wall;
    };
    // A boot clock behind the stored reading: the machine restarted since, and only this
    // boot's time is known to have passed.
    let passed = if boot >= last.boot {
        boot - last.boot
    } else {
        boot
    };
    wall.min(last.wall.saturating_add(CATCH_UP.saturating_mul(passed)))
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
        let last = Some(Trusted {
            wall: 1_000_000,
            boot: 50,
        });
        // 10 s really passed; the wall clock says 10 s: believed.
        assert_eq!(believable(1_010_000, last, 10_050), 1_010_000);
        // 10 s passed, the wall clock jumped 25 h: it is caught up with at twice real time.
        let jumped = 1_010_000 + 25 * HOUR_MS;
        assert_eq!(believable(jumped, last, 10_050), 1_020_000);
        // Set back: the wall clock is used (cleanup waits).
        assert_eq!(believable(900_000, last, 10_050), 900_000);
        // A reboot (the boot clock restarted at 0, 5 s ago): only those 5 s count.
        let before_reboot = Some(Trusted {
            wall: 1_000_000,
            boot: 900_000_000,
        });
        assert_eq!(believable(jumped, before_reboot, 5_000), 1_010_000);
        // A new store trusts the wall clock.
        assert_eq!(believable(jumped, None, 5_000), jumped);
        assert!(cleanup_now(None).wall <= now_ms());
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
