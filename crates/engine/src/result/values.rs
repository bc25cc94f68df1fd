//! Writers for values that need more than a JSON scalar: floats Go cannot encode, bytes,
//! embedded JSON, dates and timestamps.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime};
use contract::json::{GoTime, JsonError, JsonWriter};

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

/// A single-precision float (PostgreSQL `real`, MySQL `FLOAT`) as Go writes a `float32`: its
/// own shortest digits (`0.1`), ties as Go breaks them; NaN and the infinities as strings, as
/// [`write_float`] writes them.
#[inline]
pub(crate) fn write_float32(w: &mut W, value: f32) -> Result<(), JsonError> {
    if value.is_finite() {
        w.f32(value)
    } else {
        write_float(w, f64::from(value))
    }
}

/// Binary data as standard base64 with padding (what Go writes for `[]byte`), SIMD-encoded:
/// the same text as the `base64` crate's `STANDARD` (property-tested).
pub(crate) fn write_base64(w: &mut W, bytes: &[u8]) -> Result<(), JsonError> {
    w.string(&base64_simd::STANDARD.encode_to_string(bytes))
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
    w.time(&GoTime::new(at))
}

/// Microseconds since an epoch (`epoch_micros` from the Unix epoch) as [`write_timestamp`]
/// writes that time; `None` when out of chrono's range. The years 0000 to 9999 are written
/// from the count directly, without a calendar type in between.
pub(crate) fn write_micros(
    w: &mut W,
    epoch_micros: i64,
    micros: i64,
) -> Option<Result<(), JsonError>> {
    let unix = epoch_micros.checked_add(micros)?;
    if let Some(time) = GoTime::from_unix_micros(unix) {
        return Some(w.time(&time));
    }
    let at = DateTime::from_timestamp_micros(unix)?.naive_utc();
    Some(write_timestamp(w, at))
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
