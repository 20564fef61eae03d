//! Wall-clock timestamps as RFC 3339 UTC strings (`2026-11-20T08:15:02.123Z`).
//!
//! Owns only formatting of `SystemTime`; it must never pull in a date crate (the hooks stay small).

use std::time::{SystemTime, UNIX_EPOCH};

/// The current time, RFC 3339, UTC, millisecond precision.
pub fn now_rfc3339() -> String {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format_unix_millis(since_epoch.as_millis() as u64)
}

/// Formats milliseconds since the Unix epoch (UTC).
pub fn format_unix_millis(millis: u64) -> String {
    let secs = millis / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        millis % 1000
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_epoch_and_known_dates() {
        assert_eq!(format_unix_millis(0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 is a leap day in a century divisible by 400.
        assert_eq!(
            format_unix_millis(951_782_400_000 + 3_723_456),
            "2000-02-29T01:02:03.456Z"
        );
        assert_eq!(
            format_unix_millis(1_798_761_599_999),
            "2026-12-31T23:59:59.999Z"
        );
    }
}
