//! Times as Go's `time.Time` marshals them: RFC 3339 with the fraction trimmed (`RFC3339Nano`).

use chrono::{DateTime, Datelike, NaiveDateTime, Timelike, Utc};

/// Room for `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` and for chrono's signed years beyond four digits.
const CAPACITY: usize = 40;

/// A UTC time written as Go's `time.Time.MarshalJSON` writes a time in UTC, without the quotes:
/// `2006-01-02T15:04:05.999999999Z`, i.e. up to nine fraction digits with trailing zeros trimmed
/// and no fraction at all when it is zero (`2026-07-13T18:04:11.2Z`, `2026-07-13T18:04:11Z`).
///
/// Go refuses years outside 0..=9999; here they are written as chrono writes them (`+10000-…`,
/// `-0001-…`) rather than lost, since a database may hold them. A leap second (chrono's
/// nanosecond ≥ 10⁹) is written as second 59 plus its fraction beyond the second, as Go, which
/// has no leap seconds, would never see it.
#[derive(Clone, Copy)]
pub struct GoTime {
    bytes: [u8; CAPACITY],
    len: usize,
}

impl GoTime {
    /// `at`, read as UTC.
    pub fn new(at: NaiveDateTime) -> GoTime {
        let mut text = GoTime {
            bytes: [0; CAPACITY],
            len: 0,
        };
        text.push_date(at);
        let time = at.time();
        text.push_clock(
            time.hour(),
            time.minute(),
            time.second(),
            time.nanosecond() % 1_000_000_000,
        );
        text
    }

    /// `micros` microseconds from the Unix epoch, in UTC: the text [`GoTime::new`] writes for
    /// the same instant, computed from the count directly (no calendar type in between) for
    /// the years 0000 to 9999; `None` outside them (take the [`GoTime::new`] way there).
    pub fn from_unix_micros(micros: i64) -> Option<GoTime> {
        const MICROS_PER_DAY: i64 = 86_400_000_000;
        let days = micros.div_euclid(MICROS_PER_DAY);
        let of_day = micros.rem_euclid(MICROS_PER_DAY);
        // 0000-01-01 and 9999-12-31 are 719_528 days before and 2_932_896 after the epoch.
        if !(-719_528..=2_932_896).contains(&days) {
            return None;
        }
        let (year, month, day) = civil_from_days(days as i32);

        let seconds = (of_day / 1_000_000) as u32;
        // `YYYY-MM-DDTHH:MM:SS`, each digit at its place (all in range: year 0..=9999, the
        // rest below 100), then the fraction and `Z`.
        let mut bytes = *b"0000-00-00T00:00:00.000000Z0000000000000";
        let digits = |bytes: &mut [u8; CAPACITY], at: usize, value: u32| {
            bytes[at] = b'0' + (value / 10) as u8;
            bytes[at + 1] = b'0' + (value % 10) as u8;
        };
        digits(&mut bytes, 0, year / 100);
        digits(&mut bytes, 2, year % 100);
        digits(&mut bytes, 5, month);
        digits(&mut bytes, 8, day);
        digits(&mut bytes, 11, seconds / 3600);
        digits(&mut bytes, 14, seconds / 60 % 60);
        digits(&mut bytes, 17, seconds % 60);
        let mut fraction = (of_day % 1_000_000) as u32;
        let len = if fraction == 0 {
            bytes[19] = b'Z';
            20
        } else {
            // Microseconds: six digits at most, trailing zeros trimmed.
            let mut places = 6;
            while fraction.is_multiple_of(10) {
                fraction /= 10;
                places -= 1;
            }
            for at in (20..20 + places).rev() {
                bytes[at] = b'0' + (fraction % 10) as u8;
                fraction /= 10;
            }
            bytes[20 + places] = b'Z';
            21 + places
        };
        Some(GoTime { bytes, len })
    }

    /// The text's bytes (ASCII).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever pushed.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }

    fn push_date(&mut self, at: NaiveDateTime) {
        let year = at.year();
        if !(0..=9999).contains(&year) {
            let text = at.format("%Y-%m-%d").to_string();
            self.push(text.as_bytes());
            return;
        }
        let year = year as u32;
        self.push_two(year / 100);
        self.push_two(year % 100);
        self.push(b"-");
        self.push_two(at.month());
        self.push(b"-");
        self.push_two(at.day());
    }

    /// `THH:MM:SS`, the fraction of `nanos` trimmed of trailing zeros (none when zero), `Z`.
    fn push_clock(&mut self, hour: u32, minute: u32, second: u32, nanos: u32) {
        self.push(b"T");
        self.push_two(hour);
        self.push(b":");
        self.push_two(minute);
        self.push(b":");
        self.push_two(second);
        let mut nanos = nanos;
        if nanos != 0 {
            let mut digits = 9;
            while nanos.is_multiple_of(10) {
                nanos /= 10;
                digits -= 1;
            }
            let mut fraction = [b'.'; 10];
            for slot in fraction[1..=digits].iter_mut().rev() {
                *slot = b'0' + (nanos % 10) as u8;
                nanos /= 10;
            }
            self.push(&fraction[..=digits]);
        }
        self.push(b"Z");
    }

    fn push_two(&mut self, value: u32) {
        self.push(&[b'0' + (value / 10 % 10) as u8, b'0' + (value % 10) as u8]);
    }

    fn push(&mut self, text: &[u8]) {
        let end = (self.len + text.len()).min(CAPACITY);
        self.bytes[self.len..end].copy_from_slice(&text[..end - self.len]);
        self.len = end;
    }
}

/// The civil date (year, month 1-12, day 1-31) of a day count from 1970-01-01, for the years
/// 0000 to 9999: C. Neri and L. Schneider's algorithm ("Euclidean affine functions and their
/// application to calendar algorithms", 2022), in 32-bit arithmetic with no division but by
/// constants. The count is shifted by 82 eras of 400 years so that it is never negative; the
/// computation runs from March, so that a leap day ends its year.
fn civil_from_days(days: i32) -> (u32, u32, u32) {
    const ERAS: u32 = 82;
    const SHIFT: u32 = 719_468 + 146_097 * ERAS;
    let n = (days as u32).wrapping_add(SHIFT);
    // The century, and the day within it.
    let n1 = 4 * n + 3;
    let century = n1 / 146_097;
    let of_century = n1 % 146_097 / 4;
    // The year within the century, and the day within the year (from March 1).
    let n2 = 4 * of_century + 3;
    let p2 = 2_939_745 * u64::from(n2);
    let year_of_century = (p2 >> 32) as u32;
    let day_of_year = (p2 as u32) / 2_939_745 / 4;
    // The month (3 to 14, from March) and the day.
    let n3 = 2_141 * day_of_year + 197_913;
    let month = n3 >> 16;
    let day = (n3 & 0xFFFF) / 2_141 + 1;
    // January and February belong to the next year.
    let january_or_later = day_of_year >= 306;
    let year = 100 * century + year_of_century + u32::from(january_or_later) - 400 * ERAS;
    let month = if january_or_later { month - 12 } else { month };
    (year, month, day)
}

impl From<DateTime<Utc>> for GoTime {
    fn from(at: DateTime<Utc>) -> GoTime {
        GoTime::new(at.naive_utc())
    }
}

impl std::fmt::Display for GoTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for GoTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn go(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, nanos: u32) -> String {
        let at = NaiveDate::from_ymd_opt(y, mo, d)
            .and_then(|day| day.and_hms_nano_opt(h, mi, s, nanos))
            .expect("a valid time");
        GoTime::new(at).to_string()
    }

    #[test]
    fn the_fraction_is_trimmed_of_trailing_zeros() {
        assert_eq!(go(2026, 7, 13, 18, 4, 11, 0), "2026-07-13T18:04:11Z");
        assert_eq!(
            go(2026, 7, 13, 18, 4, 11, 200_000_000),
            "2026-07-13T18:04:11.2Z"
        );
        assert_eq!(
            go(2026, 7, 13, 18, 4, 11, 204_000_000),
            "2026-07-13T18:04:11.204Z"
        );
        assert_eq!(go(1970, 1, 1, 0, 0, 0, 1), "1970-01-01T00:00:00.000000001Z");
        assert_eq!(
            go(9999, 12, 31, 23, 59, 59, 999_999_999),
            "9999-12-31T23:59:59.999999999Z"
        );
        assert_eq!(go(1, 2, 3, 4, 5, 6, 1_000), "0001-02-03T04:05:06.000001Z");
    }

    #[test]
    fn years_beyond_four_digits_are_kept() {
        assert_eq!(go(10000, 1, 1, 0, 0, 0, 0), "+10000-01-01T00:00:00Z");
        assert_eq!(go(-1, 1, 1, 0, 0, 0, 0), "-0001-01-01T00:00:00Z");
    }

    /// The direct computation against chrono's calendar, over the years it covers and past
    /// both ends of them.
    fn through_chrono(micros: i64) -> Option<String> {
        let at = chrono::DateTime::from_timestamp_micros(micros)?.naive_utc();
        (0..=9999)
            .contains(&at.year())
            .then(|| GoTime::new(at).to_string())
    }

    #[test]
    fn every_day_of_the_ten_thousand_years_has_the_calendars_date() {
        let first = chrono::NaiveDate::from_ymd_opt(0, 1, 1).expect("a date");
        for days in -719_528..=2_932_896 {
            let date = first + chrono::Days::new((days + 719_528) as u64);
            assert_eq!(
                civil_from_days(days),
                (date.year() as u32, date.month(), date.day()),
                "{days} days from the epoch"
            );
        }
    }

    #[test]
    fn micros_from_the_epoch_are_written_as_the_calendar_writes_them() {
        let first = -62_167_219_200_000_000; // 0000-01-01T00:00:00Z
        let last = 253_402_300_799_999_999; // 9999-12-31T23:59:59.999999Z
        let mut edges = vec![i64::MIN, i64::MAX, 0, -1, 1, first, last];
        for edge in [first, last, 0, 951_782_400_000_000, 4_107_542_400_000_000] {
            for delta in [-86_400_000_001, -86_400_000_000, -1_000_001, -1, 1, 999_999] {
                edges.push(edge + delta);
            }
        }
        // Every day's start and a varying time of day, through 10,000 years in steps of 7 days
        // and 13 seconds (so every weekday, month, leap rule and century is crossed).
        let mut at = first - 86_400_000_000;
        while at <= last + 86_400_000_000 {
            edges.push(at);
            edges.push(at + (at / 7).rem_euclid(86_400_000_000));
            at += 7 * 86_400_000_000 + 13_000_000;
        }
        for micros in edges {
            assert_eq!(
                GoTime::from_unix_micros(micros).map(|t| t.to_string()),
                through_chrono(micros),
                "{micros} µs"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn any_micros_are_written_as_the_calendar_writes_them(micros in proptest::prelude::any::<i64>()) {
            let micros = micros % 300_000_000_000_000_000;
            proptest::prop_assert_eq!(
                GoTime::from_unix_micros(micros).map(|t| t.to_string()),
                through_chrono(micros)
            );
        }
    }

    #[test]
    fn a_leap_second_keeps_its_fraction() {
        assert_eq!(
            go(2016, 12, 31, 23, 59, 59, 1_500_000_000),
            "2016-12-31T23:59:59.5Z"
        );
    }
}
