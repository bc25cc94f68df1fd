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
        text.push(b"T");
        text.push_two(time.hour());
        text.push(b":");
        text.push_two(time.minute());
        text.push(b":");
        text.push_two(time.second());
        let mut nanos = time.nanosecond() % 1_000_000_000;
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
            text.push(&fraction[..=digits]);
        }
        text.push(b"Z");
        text
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

    fn push_two(&mut self, value: u32) {
        self.push(&[b'0' + (value / 10 % 10) as u8, b'0' + (value % 10) as u8]);
    }

    fn push(&mut self, text: &[u8]) {
        let end = (self.len + text.len()).min(CAPACITY);
        self.bytes[self.len..end].copy_from_slice(&text[..end - self.len]);
        self.len = end;
    }
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

    #[test]
    fn a_leap_second_keeps_its_fraction() {
        assert_eq!(
            go(2016, 12, 31, 23, 59, 59, 1_500_000_000),
            "2016-12-31T23:59:59.5Z"
        );
    }
}
