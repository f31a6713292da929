//! Timestamps: unix milliseconds inside, RFC 3339 UTC with milliseconds and
//! `Z` on the wire (`2026-11-22T10:00:00.123Z`). Storage keeps the integer.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time with millisecond precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The current wall-clock time.
    pub fn now() -> Self {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Self(millis)
    }

    /// Unix milliseconds.
    pub fn millis(self) -> i64 {
        self.0
    }

    /// Formats as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub fn to_rfc3339(self) -> String {
        let secs = self.0.div_euclid(1000);
        let millis = self.0.rem_euclid(1000);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
            rem / 3600,
            (rem % 3600) / 60,
            rem % 60
        )
    }

    /// Parses the exact format produced by [`Timestamp::to_rfc3339`].
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        if b.len() != 24 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[23] != b'Z' {
            return None;
        }
        let num = |range: std::ops::Range<usize>| -> Option<i64> {
            text.get(range)?.parse::<u32>().ok().map(i64::from)
        };
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second, millis) =
            (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
        if !(1..=12).contains(&month)
            || !(1..=31).contains(&day)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        let days = days_from_civil(year, month, day);
        Some(Self(
            ((days * 86_400 + hour * 3600 + minute * 60 + second) * 1000) + millis,
        ))
    }
}

impl Timestamp {
    /// Parses any RFC 3339 date-time a client may send: fractional seconds
    /// of any length (kept to the millisecond) or none, and `Z` or a numeric
    /// offset. `None` for anything else, impossible dates included.
    pub fn parse_client(text: &str) -> Option<Self> {
        let (date_time, offset_minutes) = split_offset(text)?;
        let (date, time) = date_time
            .split_once('T')
            .or_else(|| date_time.split_once('t'))?;
        let field = |part: &str, len: usize| -> Option<i64> {
            (part.len() == len && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse::<i64>().ok())?
        };
        let mut ymd = date.split('-');
        let (year, month, day) = (
            field(ymd.next()?, 4)?,
            field(ymd.next()?, 2)?,
            field(ymd.next()?, 2)?,
        );
        let (clock, fraction) = match time.split_once('.') {
            Some((clock, fraction)) => (clock, Some(fraction)),
            None => (time, None),
        };
        let mut hms = clock.split(':');
        let (hour, minute, second) = (
            field(hms.next()?, 2)?,
            field(hms.next()?, 2)?,
            field(hms.next()?, 2)?,
        );
        if ymd.next().is_some() || hms.next().is_some() {
            return None;
        }
        let millis = match fraction {
            None => 0,
            Some(f) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => {
                let kept: String = f.chars().chain("00".chars()).take(3).collect();
                kept.parse::<i64>().ok()?
            }
            Some(_) => return None,
        };
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        let days = days_from_civil(year, month, day);
        let local = (days * 86_400 + hour * 3600 + minute * 60 + second) * 1000 + millis;
        Some(Self(local - offset_minutes * 60_000))
    }
}

/// `text` without its offset, and the offset in minutes east of UTC.
fn split_offset(text: &str) -> Option<(&str, i64)> {
    if let Some(rest) = text.strip_suffix('Z').or_else(|| text.strip_suffix('z')) {
        return Some((rest, 0));
    }
    let at = text.len().checked_sub(6)?;
    let (rest, offset) = (text.get(..at)?, text.get(at..)?);
    let sign = match offset.as_bytes() {
        [b'+', _, _, b':', _, _] => 1,
        [b'-', _, _, b':', _, _] => -1,
        _ => return None,
    };
    let hours: i64 = offset.get(1..3)?.parse().ok()?;
    let minutes: i64 = offset.get(4..6)?.parse().ok()?;
    if hours > 23 || minutes > 59 || !offset[1..3].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((rest, sign * (hours * 60 + minutes)))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The inverse of [`civil_from_days`].
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.serialize_str(&self.to_rfc3339())
        } else {
            serializer.serialize_i64(self.0)
        }
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            let text = String::deserialize(deserializer)?;
            Self::parse_rfc3339(&text)
                .ok_or_else(|| serde::de::Error::custom("expected an RFC 3339 UTC timestamp"))
        } else {
            i64::deserialize(deserializer).map(Self)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(Timestamp(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Timestamp(1_795_341_600_123).to_rfc3339(),
            "2026-11-22T10:00:00.123Z"
        );
        assert_eq!(
            Timestamp(951_782_400_000).to_rfc3339(),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn parse_inverts_format() {
        for millis in [0, 1, 951_782_400_000, 1_795_341_600_123, 4_102_444_799_999] {
            let ts = Timestamp(millis);
            assert_eq!(Timestamp::parse_rfc3339(&ts.to_rfc3339()), Some(ts));
        }
        assert_eq!(Timestamp::parse_rfc3339("2026-13-01T00:00:00.000Z"), None);
        assert_eq!(Timestamp::parse_rfc3339("2026-11-22 10:00:00.000Z"), None);
    }

    #[test]
    fn clients_may_send_any_rfc3339_date_time() {
        let at = Some(Timestamp(1_795_341_600_000));
        for text in [
            "2026-11-22T10:00:00Z",
            "2026-11-22T10:00:00.000Z",
            "2026-11-22T10:00:00.0004z",
            "2026-11-22t11:30:00+01:30",
            "2026-11-22T05:00:00-05:00",
        ] {
            assert_eq!(Timestamp::parse_client(text), at, "{text}");
        }
        assert_eq!(
            Timestamp::parse_client("2026-11-22T10:00:00.12Z"),
            Some(Timestamp(1_795_341_600_120))
        );
        for text in [
            "",
            "yesterday",
            "2026-11-22",
            "2026-11-22T10:00:00",
            "2026-11-22 10:00:00Z",
            "2026-02-29T10:00:00Z",
            "2026-11-31T10:00:00Z",
            "2026-11-22T24:00:00Z",
            "2026-11-22T10:00:60Z",
            "2026-11-22T10:00:00.Z",
            "2026-11-22T10:00:00+1:00",
            "2026-11-22T10:00:00+01:00:00",
            "+2026-11-22T10:00:00Z",
            "2026-11-22T10:00:00Z ",
        ] {
            assert_eq!(Timestamp::parse_client(text), None, "{text}");
        }
        assert_eq!(
            Timestamp::parse_client("2024-02-29T00:00:00Z"),
            Timestamp::parse_rfc3339("2024-02-29T00:00:00.000Z")
        );
    }
}
