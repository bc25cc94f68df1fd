//! Writers for values that need more than a JSON scalar: floats Go cannot encode, bytes,
//! embedded JSON, dates and timestamps.

use base64::Engine as _;
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike};
use contract::json::{JsonError, JsonWriter};

type W = JsonWriter<Vec<u8>>;

/// A float as a number; NaN and the infinities (which JSON cannot hold) as the strings
/// `"NaN"`, `"Infinity"` and `"-Infinity"`.
#[inline]
pub(crate) fn write_float(w: &mut W, value: f64) -> Result<(), JsonError> {
    if value.is_finite() {
        w.f64(value)
    } else if value.is_nan() {
        w.string("NaN")
    } else if value > 0.0 {
        w.string("Infinity")
    } else {
        w.string("-Infinity")
    }
}

/// A single-precision float as the double with the same shortest decimal digits, so it is
/// written as it was stored (`0.1`) rather than as its exact binary value (`0.10000000149011612`).
pub(crate) fn widen_f32(value: f32) -> f64 {
    if !value.is_finite() {
        return f64::from(value);
    }
    // `Display` of an f32 gives its shortest round-trip digits, which parse as an f64 exactly.
    value.to_string().parse().unwrap_or(f64::from(value))
}

/// Binary data as standard base64 with padding (what Go writes for `[]byte`).
pub(crate) fn write_base64(w: &mut W, bytes: &[u8]) -> Result<(), JsonError> {
    w.string(&base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// JSON text from the database, embedded as JSON (object keys sorted, as Go re-encodes a
/// decoded value). Text that does not parse is written as a string rather than lost.
pub(crate) fn write_json_text(w: &mut W, text: &[u8]) -> Result<(), JsonError> {
    match serde_json::from_slice::<serde_json::Value>(text) {
        Ok(value) => w.value(&value),
        Err(_) => w.string_bytes(text),
    }
}

/// A date as `YYYY-MM-DD`.
pub(crate) fn write_date(w: &mut W, date: NaiveDate) -> Result<(), JsonError> {
    let mut buf = [0u8; 16];
    let len = format_date(&mut buf, date);
    w.string_bytes(&buf[..len])
}

/// A date and time as RFC 3339 in UTC with `Z`, the fraction trimmed of trailing zeros, as
/// Go's `time.Time` marshals (`2026-07-13T18:04:11.2Z`).
pub(crate) fn write_timestamp(w: &mut W, at: NaiveDateTime) -> Result<(), JsonError> {
    let mut buf = [0u8; 40];
    let mut len = format_date(&mut buf, at.date());
    let time = at.time();
    buf[len] = b'T';
    len += 1;
    for (i, part) in [time.hour(), time.minute(), time.second()]
        .into_iter()
        .enumerate()
    {
        if i > 0 {
            buf[len] = b':';
            len += 1;
        }
        buf[len] = b'0' + (part / 10) as u8;
        buf[len + 1] = b'0' + (part % 10) as u8;
        len += 2;
    }
    let mut nanos = time.nanosecond() % 1_000_000_000;
    if nanos != 0 {
        buf[len] = b'.';
        len += 1;
        let mut digits = 9;
        while nanos.is_multiple_of(10) {
            nanos /= 10;
            digits -= 1;
        }
        for i in (0..digits).rev() {
            buf[len + i] = b'0' + (nanos % 10) as u8;
            nanos /= 10;
        }
        len += digits;
    }
    buf[len] = b'Z';
    len += 1;
    w.string_bytes(&buf[..len])
}

/// Microseconds since an epoch as a UTC date-time; `None` when out of chrono's range.
pub(crate) fn from_micros(epoch_micros: i64, micros: i64) -> Option<NaiveDateTime> {
    DateTime::from_timestamp_micros(epoch_micros.checked_add(micros)?).map(|t| t.naive_utc())
}

fn format_date(buf: &mut [u8], date: NaiveDate) -> usize {
    let year = date.year();
    if !(0..=9999).contains(&year) {
        // Outside four digits chrono writes a sign (`+10000-01-01`); rare, so allocating is fine.
        let text = date.format("%Y-%m-%d").to_string();
        let len = text.len().min(buf.len());
        buf[..len].copy_from_slice(&text.as_bytes()[..len]);
        return len;
    }
    let year = year as u32;
    let digits = [
        year / 1000,
        year / 100 % 10,
        year / 10 % 10,
        year % 10,
        10,
        date.month() / 10,
        date.month() % 10,
        10,
        date.day() / 10,
        date.day() % 10,
    ];
    for (slot, d) in buf.iter_mut().zip(digits) {
        *slot = if d == 10 { b'-' } else { b'0' + d as u8 };
    }
    10
}
