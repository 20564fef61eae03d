//! Roampal's timestamps as Unix milliseconds.
//!
//! Owns the one conversion `memd import --from-roampal` needs for times: Roampal writes Python
//! `datetime.isoformat()` strings (with an offset, or naive local time) and sometimes epoch
//! seconds. Must never guess a time it cannot read: that is an error naming the text.

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

/// Epoch numbers below this are seconds, above it milliseconds (1e11 s is the year 5138).
const SECONDS_LIMIT: f64 = 1e11;

/// Milliseconds since the Unix epoch for an ISO 8601 text or an epoch number in text.
pub fn parse_text(text: &str) -> Result<i64, String> {
    let t = text.trim();
    if let Ok(n) = t.parse::<f64>() {
        return parse_number(n);
    }
    if let Ok(dt) = OffsetDateTime::parse(t, &Rfc3339) {
        return Ok(millis(dt));
    }
    // Python's isoformat uses "+00:00" (RFC 3339 allows it) but also a space separator.
    if let Ok(dt) = OffsetDateTime::parse(&t.replacen(' ', "T", 1), &Rfc3339) {
        return Ok(millis(dt));
    }
    let naive = format_description!(
        version = 2,
        "[year]-[month]-[day][first [T][ ]][hour]:[minute]:[second][optional [.[subsecond]]]"
    );
    match PrimitiveDateTime::parse(t, &naive) {
        Ok(local) => local_to_utc(local).ok_or_else(|| format!("{t:?} is not a valid local time")),
        Err(_) => Err(format!("{t:?} is not an ISO 8601 time")),
    }
}

/// Milliseconds for an epoch number of seconds (or of milliseconds, when it is that large).
pub fn parse_number(n: f64) -> Result<i64, String> {
    if !n.is_finite() || n < 0.0 {
        return Err(format!("{n} is not a time"));
    }
    Ok(if n < SECONDS_LIMIT {
        (n * 1000.0).round() as i64
    } else {
        n.round() as i64
    })
}

fn millis(dt: OffsetDateTime) -> i64 {
    (dt.unix_timestamp_nanos() / 1_000_000) as i64
}

/// A naive time as Roampal's machine wrote it (its local zone, which is this machine's when the
/// store is imported where it was made): converted with the C library's zone rules.
fn local_to_utc(local: PrimitiveDateTime) -> Option<i64> {
    #[cfg(unix)]
    {
        // SAFETY: `tm` is plain data, fully initialised below; mktime only reads the zone.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        tm.tm_year = local.year() - 1900;
        tm.tm_mon = i32::from(u8::from(local.month())) - 1;
        tm.tm_mday = i32::from(local.day());
        tm.tm_hour = i32::from(local.hour());
        tm.tm_min = i32::from(local.minute());
        tm.tm_sec = i32::from(local.second());
        tm.tm_isdst = -1; // let the zone rules say whether summer time applied
        // SAFETY: a valid pointer to an initialised tm.
        let secs = unsafe { libc::mktime(&mut tm) };
        (secs != -1).then(|| secs as i64 * 1000 + i64::from(local.millisecond()))
    }
    #[cfg(not(unix))]
    {
        Some(millis(local.assume_utc()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_epochs() {
        assert_eq!(
            parse_text("2026-11-26T09:40:12.250+00:00"),
            Ok(1_795_686_012_250)
        );
        assert_eq!(
            parse_text("2026-11-26T10:40:12.250+01:00"),
            Ok(1_795_686_012_250)
        );
        assert_eq!(parse_text("2026-11-26 09:40:12Z"), Ok(1_795_686_012_000));
        assert_eq!(parse_text("1795686012.25"), Ok(1_795_686_012_250));
        assert_eq!(parse_number(1_795_686_012_250.0), Ok(1_795_686_012_250));
    }

    #[test]
    fn naive_times_are_local() {
        // Whatever the zone, a naive time is within a day of the same time read as UTC.
        let naive = parse_text("2026-11-26T09:40:12.123456").unwrap();
        let utc = parse_text("2026-11-26T09:40:12.123+00:00").unwrap();
        assert!((naive - utc).abs() <= 26 * 3_600_000, "{naive} vs {utc}");
        assert_eq!(naive % 1000, 123);
    }

    #[test]
    fn nonsense_is_named() {
        assert!(parse_text("yesterday").unwrap_err().contains("yesterday"));
        assert!(parse_text("-5").is_err());
    }
}
