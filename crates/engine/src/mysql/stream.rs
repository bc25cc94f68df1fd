//! Rows of one table from a MySQL prepared statement into the result, decoded from the binary
//! protocol's bytes without an intermediate value per cell.

use std::fmt::Write as _;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use contract::json::{JsonError, JsonWriter};
use futures_util::TryStreamExt;
use sqlx::mysql::{MySqlArguments, MySqlValueRef};
use sqlx::{Arguments, Decode, MySql, MySqlConnection};

use crate::catalog::{Column, ValueKind};
use crate::datasource::write_row;
use crate::error::{EngineError, Result};
use crate::plan::TablePlan;
use crate::result::{self, ConnectionResult};
use crate::sql::{Dialect, Param};

type W = JsonWriter<Vec<u8>>;

pub(crate) async fn stream_table(
    conn: &mut MySqlConnection,
    connection: &str,
    plan: &TablePlan,
    prefix: &str,
    out: &mut ConnectionResult,
    _unread: &mut bool,
) -> Result<()> {
    let query = Dialect::MySql.select(plan, super::select_expr);
    let sql = if prefix.is_empty() {
        std::borrow::Cow::Borrowed(query.sql.as_str())
    } else {
        std::borrow::Cow::Owned(format!("{prefix}{}", query.sql))
    };
    let mut args = MySqlArguments::default();
    for param in &query.params {
        let bound = match param {
            Param::Text(text) => args.add(text.as_str()),
            Param::Int(i) => args.add(*i),
            Param::UInt(u) => args.add(*u),
            Param::Float(f) => args.add(*f),
            Param::Bool(b) => args.add(*b),
        };
        bound.map_err(|e| EngineError::Result(e.to_string()))?;
    }
    out.start_table(&plan.key)?;
    let keys = out.row_keys(&plan.columns);
    let mut rows = sqlx::query_with(&sql, args).fetch(conn);
    while let Some(row) = rows
        .try_next()
        .await
        .map_err(|e| EngineError::query(connection, &e))?
    {
        write_row(&row, connection, plan, &keys, out, write_value)?;
        out.end_row().await?;
    }
    Ok(())
}

/// The value's bytes as they came off the wire; `None` for SQL NULL. Read through `Decode`
/// rather than `ValueRef::is_null`, which also calls a zero date NULL: a zero date is a value
/// the table holds, and is written as such.
fn raw(value: MySqlValueRef<'_>) -> Option<&[u8]> {
    // `&[u8]`'s decode fails only when the value is absent (NULL).
    <&[u8] as Decode<MySql>>::decode(value).ok()
}

fn write_value(w: &mut W, column: &Column, value: MySqlValueRef<'_>) -> Result<(), String> {
    let Some(bytes) = raw(value) else {
        return w.null().map_err(|e| e.to_string());
    };
    let written = match column.kind {
        ValueKind::Int => w.i64(signed(bytes)?),
        ValueKind::UInt => w.u64(unsigned(bytes)?),
        ValueKind::Float => match bytes.len() {
            4 => result::write_float32(w, f32::from_le_bytes(fixed(bytes)?)),
            _ => result::write_float(w, f64::from_le_bytes(fixed(bytes)?)),
        },
        ValueKind::Bool => w.bool(bytes.iter().any(|b| *b != 0)),
        ValueKind::Text | ValueKind::Uuid | ValueKind::Array(_) => w.string_bytes(bytes),
        ValueKind::Set => write_set(w, bytes),
        ValueKind::Bytes => result::write_base64(w, bytes),
        ValueKind::Json => result::write_json_text(w, bytes),
        ValueKind::Date => write_date(w, bytes)?,
        ValueKind::Timestamp | ValueKind::TimestampTz => write_datetime(w, bytes)?,
        ValueKind::Bson => return Err("a MySQL column is never a document path".into()),
    };
    written.map_err(|e| e.to_string())
}

/// A signed integer of the binary protocol: 1, 2, 4 (`MEDIUMINT` too) or 8 bytes,
/// little-endian. `YEAR` arrives as 2 bytes.
fn signed(bytes: &[u8]) -> Result<i64, String> {
    Ok(match bytes.len() {
        1 => i64::from(i8::from_le_bytes(fixed(bytes)?)),
        2 => i64::from(i16::from_le_bytes(fixed(bytes)?)),
        4 => i64::from(i32::from_le_bytes(fixed(bytes)?)),
        _ => i64::from_le_bytes(fixed(bytes)?),
    })
}

/// An unsigned integer of the binary protocol (see [`signed`]).
fn unsigned(bytes: &[u8]) -> Result<u64, String> {
    Ok(match bytes.len() {
        1 => u64::from(bytes[0]),
        2 => u64::from(u16::from_le_bytes(fixed(bytes)?)),
        4 => u64::from(u32::from_le_bytes(fixed(bytes)?)),
        _ => u64::from_le_bytes(fixed(bytes)?),
    })
}

/// A `SET` value (`a,b`; members cannot contain commas) as an array of its members; the empty
/// set is `[]`.
fn write_set(w: &mut W, bytes: &[u8]) -> Result<(), JsonError> {
    w.begin_array()?;
    if !bytes.is_empty() {
        for member in bytes.split(|b| *b == b',') {
            w.string_bytes(member)?;
        }
    }
    w.end_array()
}

/// A binary-protocol `DATE`: a length byte, then year (2 bytes), month, day. A zero date
/// (length 0) or one with zero parts, which chrono cannot hold, is written as stored:
/// `0000-00-00`, `2024-00-00`.
fn write_date(w: &mut W, bytes: &[u8]) -> Result<Result<(), JsonError>, String> {
    let parts = DateTimeParts::read(bytes)?;
    Ok(match parts.date() {
        Some(date) => result::write_date(w, date),
        None => w.string(&parts.date_text()),
    })
}

/// A binary-protocol `DATETIME`/`TIMESTAMP`: a length byte (0, 4, 7 or 11), then year, month,
/// day, hour, minute, second and microseconds. Written as RFC 3339 in UTC; a zero or partly zero
/// date keeps the same layout with its zeros: `0000-00-00T00:00:00Z`.
fn write_datetime(w: &mut W, bytes: &[u8]) -> Result<Result<(), JsonError>, String> {
    let parts = DateTimeParts::read(bytes)?;
    Ok(match parts.datetime() {
        Some(at) => result::write_timestamp(w, at),
        None => {
            let mut text = parts.date_text();
            let _ = write!(
                text,
                "T{:02}:{:02}:{:02}",
                parts.hour, parts.minute, parts.second
            );
            if parts.micros != 0 {
                let fraction = format!("{:06}", parts.micros);
                let _ = write!(text, ".{}", fraction.trim_end_matches('0'));
            }
            text.push('Z');
            w.string(&text)
        }
    })
}

/// The fields of a binary-protocol date or date-time; absent fields are zero.
#[derive(Debug, Default, PartialEq, Eq)]
struct DateTimeParts {
    year: u16,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
    micros: u32,
}

impl DateTimeParts {
    fn read(bytes: &[u8]) -> Result<DateTimeParts, String> {
        let (&len, body) = bytes
            .split_first()
            .ok_or_else(|| "empty date value".to_owned())?;
        let len = usize::from(len);
        if !matches!(len, 0 | 4 | 7 | 11) || body.len() < len {
            return Err(format!("unexpected date value of {len} bytes"));
        }
        let mut parts = DateTimeParts::default();
        if len >= 4 {
            parts.year = u16::from_le_bytes([body[0], body[1]]);
            parts.month = body[2];
            parts.day = body[3];
        }
        if len >= 7 {
            parts.hour = body[4];
            parts.minute = body[5];
            parts.second = body[6];
        }
        if len == 11 {
            parts.micros = u32::from_le_bytes([body[7], body[8], body[9], body[10]]);
        }
        Ok(parts)
    }

    fn date(&self) -> Option<NaiveDate> {
        NaiveDate::from_ymd_opt(
            i32::from(self.year),
            u32::from(self.month),
            u32::from(self.day),
        )
    }

    fn datetime(&self) -> Option<NaiveDateTime> {
        let time = NaiveTime::from_hms_micro_opt(
            u32::from(self.hour),
            u32::from(self.minute),
            u32::from(self.second),
            self.micros,
        )?;
        Some(self.date()?.and_time(time))
    }

    fn date_text(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

fn fixed<const N: usize>(bytes: &[u8]) -> Result<[u8; N], String> {
    bytes
        .try_into()
        .map_err(|_| format!("expected {N} bytes, got {}", bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract::json::Style;

    fn written(f: impl FnOnce(&mut W) -> Result<(), JsonError>) -> String {
        let mut w = JsonWriter::new(Vec::new(), Style::Compact);
        f(&mut w).unwrap();
        String::from_utf8(w.finish().unwrap()).unwrap()
    }

    #[test]
    fn integers_read_every_width() {
        assert_eq!(signed(&[0xff]).unwrap(), -1);
        assert_eq!(signed(&(-300i16).to_le_bytes()).unwrap(), -300);
        assert_eq!(
            signed(&i32::MIN.to_le_bytes()).unwrap(),
            i64::from(i32::MIN)
        );
        assert_eq!(signed(&i64::MIN.to_le_bytes()).unwrap(), i64::MIN);
        assert_eq!(unsigned(&[0xff]).unwrap(), 255);
        assert_eq!(unsigned(&u64::MAX.to_le_bytes()).unwrap(), u64::MAX);
        assert!(signed(&[1, 2, 3]).is_err());
    }

    #[test]
    fn sets_are_arrays_of_members() {
        assert_eq!(written(|w| write_set(w, b"")), "[]");
        assert_eq!(written(|w| write_set(w, b"a,b")), r#"["a","b"]"#);
    }

    #[test]
    fn dates_and_zero_dates() {
        let date = |bytes: &[u8]| written(|w| write_date(w, bytes).unwrap());
        let datetime = |bytes: &[u8]| written(|w| write_datetime(w, bytes).unwrap());
        assert_eq!(date(&[0]), r#""0000-00-00""#);
        assert_eq!(date(&[4, 0xe8, 0x07, 2, 29]), r#""2024-02-29""#);
        assert_eq!(date(&[4, 0xe8, 0x07, 0, 0]), r#""2024-00-00""#);
        assert_eq!(datetime(&[0]), r#""0000-00-00T00:00:00Z""#);
        assert_eq!(
            datetime(&[4, 0xe8, 0x07, 1, 2]),
            r#""2024-01-02T00:00:00Z""#
        );
        assert_eq!(
            datetime(&[7, 0xe8, 0x07, 1, 2, 3, 4, 5]),
            r#""2024-01-02T03:04:05Z""#
        );
        let micros = 500_000u32.to_le_bytes();
        let mut bytes = vec![11, 0xe8, 0x07, 0, 0, 3, 4, 5];
        bytes.extend_from_slice(&micros);
        assert_eq!(datetime(&bytes), r#""2024-00-00T03:04:05.5Z""#);
        assert!(DateTimeParts::read(&[5, 0, 0, 0, 0, 0]).is_err());
        assert!(DateTimeParts::read(&[]).is_err());
    }
}
