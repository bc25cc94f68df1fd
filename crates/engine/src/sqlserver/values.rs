//! SQL Server values (tiberius' [`ColumnData`]) into result JSON, as the value mapping table of
//! `docs/datasources.md` lists them: exact decimals as strings, times as Go's `time.Time` writes
//! them.

use chrono::{Duration, NaiveDate, NaiveDateTime, NaiveTime};
use contract::json::{GoTime, JsonError, JsonWriter};
use tiberius::numeric::Numeric;
use tiberius::time::{Date, DateTime, DateTime2, DateTimeOffset, SmallDateTime, Time};
use tiberius::ColumnData;

use crate::result::{write_base64, write_float, write_float32};

type W = JsonWriter<Vec<u8>>;

/// Writes one value. `Err` carries what could not be written (a date out of range).
pub(crate) fn write_value(w: &mut W, data: &ColumnData<'_>) -> Result<(), String> {
    let json = |e: JsonError| e.to_string();
    match data {
        ColumnData::U8(Some(v)) => w.i64(i64::from(*v)).map_err(json),
        ColumnData::I16(Some(v)) => w.i64(i64::from(*v)).map_err(json),
        ColumnData::I32(Some(v)) => w.i64(i64::from(*v)).map_err(json),
        ColumnData::I64(Some(v)) => w.i64(*v).map_err(json),
        ColumnData::F32(Some(v)) => write_float32(w, *v).map_err(json),
        ColumnData::F64(Some(v)) => write_float(w, *v).map_err(json),
        ColumnData::Bit(Some(v)) => w.bool(*v).map_err(json),
        ColumnData::String(Some(v)) => w.string(v).map_err(json),
        ColumnData::Guid(Some(v)) => w.string(&v.hyphenated().to_string()).map_err(json),
        ColumnData::Binary(Some(v)) => write_base64(w, v).map_err(json),
        ColumnData::Numeric(Some(v)) => w.string(&numeric_text(*v)).map_err(json),
        ColumnData::Xml(Some(v)) => w.string(v.as_ref().as_ref()).map_err(json),
        ColumnData::DateTime(Some(v)) => w.string(go_time(datetime(*v)?).as_str()).map_err(json),
        ColumnData::SmallDateTime(Some(v)) => w
            .string(go_time(small_datetime(*v)?).as_str())
            .map_err(json),
        ColumnData::Date(Some(v)) => {
            let day = date(*v)?;
            w.string(go_time(day.and_time(NaiveTime::MIN)).as_str())
                .map_err(json)
        }
        ColumnData::Time(Some(v)) => {
            let at = NaiveDate::from_ymd_opt(1, 1, 1)
                .unwrap_or_default()
                .and_time(NaiveTime::MIN)
                + time_of_day(*v)?;
            w.string(go_time(at).as_str()).map_err(json)
        }
        ColumnData::DateTime2(Some(v)) => w.string(go_time(datetime2(*v)?).as_str()).map_err(json),
        ColumnData::DateTimeOffset(Some(v)) => w.string(&offset_text(*v)?).map_err(json),
        _ => w.null().map_err(json),
    }
}

fn go_time(at: NaiveDateTime) -> GoTime {
    GoTime::new(at)
}

/// A decimal's exact text from its unscaled value and scale: `-0.50`, `1500.00`, `12.3400`.
/// (tiberius' own `Display` writes the integer and fraction parts separately, so `-0.5` would
/// lose its sign and `-1.5` would print as `-1.-5`.)
pub(crate) fn numeric_text(n: Numeric) -> String {
    let digits = n.value().unsigned_abs().to_string();
    let scale = usize::from(n.scale());
    let sign = if n.value() < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

fn out_of_range(what: &str) -> String {
    format!("{what} out of range")
}

/// `datetime`: days since 1900-01-01 and 1/300 s ticks, rounded to the millisecond as the Go
/// driver rounds them (`.997`, `.003`, `.007`).
fn datetime(v: DateTime) -> Result<NaiveDateTime, String> {
    let base = NaiveDate::from_ymd_opt(1900, 1, 1).unwrap_or_default();
    let day = base
        .checked_add_signed(Duration::days(i64::from(v.days())))
        .ok_or_else(|| out_of_range("datetime"))?;
    let ticks = i64::from(v.seconds_fragments());
    let millis = (ticks % 300 * 20 + 3) / 6;
    let time = Duration::seconds(ticks / 300) + Duration::milliseconds(millis);
    Ok(day.and_time(NaiveTime::MIN) + time)
}

/// `smalldatetime`: days since 1900-01-01 and minutes since midnight.
fn small_datetime(v: SmallDateTime) -> Result<NaiveDateTime, String> {
    let base = NaiveDate::from_ymd_opt(1900, 1, 1).unwrap_or_default();
    let day = base
        .checked_add_signed(Duration::days(i64::from(v.days())))
        .ok_or_else(|| out_of_range("smalldatetime"))?;
    Ok(day.and_time(NaiveTime::MIN) + Duration::minutes(i64::from(v.seconds_fragments())))
}

/// `date`: days since 0001-01-01.
fn date(v: Date) -> Result<NaiveDate, String> {
    NaiveDate::from_ymd_opt(1, 1, 1)
        .unwrap_or_default()
        .checked_add_signed(Duration::days(i64::from(v.days())))
        .ok_or_else(|| out_of_range("date"))
}

/// `time(n)`: increments of 10⁻ⁿ s since midnight.
fn time_of_day(v: Time) -> Result<Duration, String> {
    let scale = u32::from(v.scale());
    let nanos_per = 10u64
        .checked_pow(9u32.saturating_sub(scale))
        .ok_or_else(|| out_of_range("time"))?;
    let nanos = v
        .increments()
        .checked_mul(nanos_per)
        .and_then(|n| i64::try_from(n).ok())
        .ok_or_else(|| out_of_range("time"))?;
    Ok(Duration::nanoseconds(nanos))
}

fn datetime2(v: DateTime2) -> Result<NaiveDateTime, String> {
    Ok(date(v.date())?.and_time(NaiveTime::MIN) + time_of_day(v.time())?)
}

/// `datetimeoffset`: the instant (stored in UTC) written at its own offset, as Go writes a
/// time in a fixed zone: `2024-07-05T11:00:00+02:00`, and `Z` for offset zero.
fn offset_text(v: DateTimeOffset) -> Result<String, String> {
    let offset = i64::from(v.offset());
    let local = datetime2(v.datetime2())? + Duration::minutes(offset);
    let text = go_time(local);
    let utc = text.as_str();
    if offset == 0 {
        return Ok(utc.to_owned());
    }
    let sign = if offset < 0 { '-' } else { '+' };
    let minutes = offset.unsigned_abs();
    Ok(format!(
        "{}{sign}{:02}:{:02}",
        utc.trim_end_matches('Z'),
        minutes / 60,
        minutes % 60
    ))
}

#[cfg(test)]
mod tests;
