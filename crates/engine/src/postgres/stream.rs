//! Rows of one table from a PostgreSQL cursor into the result, decoded from the binary wire
//! format without an intermediate value per cell.

use contract::json::EncodedKey;
use futures_util::TryStreamExt;
use sqlx::postgres::{PgArguments, PgRow, PgValueRef};
use sqlx::{Arguments, Decode, Either, Executor, PgConnection, Postgres, Row, ValueRef};

use crate::catalog::{Column, ElementKind, ValueKind};
use crate::error::{EngineError, Result};
use crate::plan::TablePlan;
use crate::result::{self, ConnectionResult};
use crate::sql::{Dialect, Param};

/// Microseconds from the Unix epoch to PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
const PG_EPOCH_DAYS: i32 = 10_957;

pub(crate) async fn stream_table(
    conn: &mut PgConnection,
    connection: &str,
    plan: &TablePlan,
    prefix: &str,
    out: &mut ConnectionResult,
) -> Result<()> {
    let query = Dialect::Postgres.select(plan, super::select_expr);
    let sql = if prefix.is_empty() {
        std::borrow::Cow::Borrowed(query.sql.as_str())
    } else {
        std::borrow::Cow::Owned(format!("{prefix}{}", query.sql))
    };
    let mut args = PgArguments::default();
    for param in &query.params {
        let bound = match param {
            Param::Text(text) => args.add(text.as_str()),
            // The PostgreSQL builder binds text only; other forms are a bug, not input.
            other => {
                return Err(EngineError::Result(format!(
                    "unexpected parameter {other:?}"
                )));
            }
        };
        bound.map_err(|e| EngineError::Result(e.to_string()))?;
    }
    out.start_table(&plan.key)?;
    let keys = out.row_keys(&plan.columns);
    // `fetch_many`, not `fetch`: `fetch` is this stream behind one more boxed stream that drops
    // the statement's result (the `Left`) per item.
    let mut steps = conn.fetch_many(sqlx::query_with(&sql, args));
    while let Some(step) = steps
        .try_next()
        .await
        .map_err(|e| EngineError::query(connection, &e))?
    {
        if let Either::Right(row) = step {
            write_row(&row, connection, plan, &keys, out)?;
            out.end_row().await?;
        }
    }
    Ok(())
}

/// Writes one row's members as [`crate::datasource::write_row`] does, each planned column under
/// its key, with each scalar handed to [`write_value`] as its bytes: a `PgValueRef` moved into
/// the writer per cell cost more than writing most cells. Its own loop, not the generic one
/// with a PostgreSQL cell writer: that was measured, and the value writer was not inlined there
/// (BENCHMARKS.md, "A PostgreSQL row's cells as bytes").
fn write_row(
    row: &PgRow,
    connection: &str,
    plan: &TablePlan,
    keys: &[EncodedKey],
    out: &mut ConnectionResult,
) -> Result<()> {
    let w = out.begin_row()?;
    for (i, (column, key)) in plan.columns.iter().zip(keys).enumerate() {
        w.encoded_key(key)
            .map_err(|e| EngineError::Result(e.to_string()))?;
        let value = row
            .try_get_raw(i)
            .map_err(|e| EngineError::query(connection, &e))?;
        let written = if value.is_null() {
            w.null().map_err(|e| e.to_string())
        } else if let ValueKind::Array(element) = column.kind {
            write_array(w, element, value)
        } else {
            value
                .as_bytes()
                .map_err(|e| e.to_string())
                .and_then(|bytes| write_value(w, column, bytes))
        };
        written.map_err(|detail| {
            EngineError::query_detail(connection, format!("column {:?}: {detail}", column.name))
        })?;
    }
    Ok(())
}

type W = contract::json::JsonWriter<Vec<u8>>;
use contract::json::JsonError;

/// Writes one non-null scalar from its binary wire form (arrays go to [`write_array`]).
fn write_value(w: &mut W, column: &Column, bytes: &[u8]) -> Result<(), String> {
    let written = match column.kind {
        ValueKind::Int => w.i64(i64::from_be_bytes(fixed(bytes)?)),
        ValueKind::UInt => w.u64(u64::from_be_bytes(fixed(bytes)?)),
        // `real` arrives as 4 bytes and is written as Go writes a float32, with its own shortest
        // digits (0.1, not the 0.10000000149011612 a widening to double would show).
        ValueKind::Float if bytes.len() == 4 => {
            result::write_float32(w, f32::from_be_bytes(fixed(bytes)?))
        }
        ValueKind::Float => result::write_float(w, f64::from_be_bytes(fixed(bytes)?)),
        ValueKind::Bool => w.bool(bytes.first().is_some_and(|b| *b != 0)),
        ValueKind::Text | ValueKind::Set => w.string_bytes(bytes),
        ValueKind::Bytes => result::write_base64(w, bytes),
        ValueKind::Uuid => w.uuid(&fixed(bytes)?),
        ValueKind::Json => result::write_json_text(w, bytes),
        ValueKind::Date => {
            let days = i32::from_be_bytes(fixed(bytes)?);
            match days {
                i32::MAX => w.string("infinity"),
                i32::MIN => w.string("-infinity"),
                _ => match chrono::NaiveDate::from_num_days_from_ce_opt(
                    days.saturating_add(PG_EPOCH_DAYS).saturating_add(719_163),
                ) {
                    Some(date) => result::write_date(w, date),
                    None => return Err("date out of range".into()),
                },
            }
        }
        ValueKind::Timestamp | ValueKind::TimestampTz => {
            let micros = i64::from_be_bytes(fixed(bytes)?);
            match micros {
                i64::MAX => w.string("infinity"),
                i64::MIN => w.string("-infinity"),
                _ => match result::write_micros(w, PG_EPOCH_MICROS, micros) {
                    Some(written) => written,
                    None => return Err("timestamp out of range".into()),
                },
            }
        }
        ValueKind::Array(_) => return Err("an array is written by write_array".into()),
        ValueKind::Bson => return Err("a PostgreSQL column is never a document path".into()),
    };
    written.map_err(|e| e.to_string())
}

fn write_array(w: &mut W, element: ElementKind, value: PgValueRef<'_>) -> Result<(), String> {
    fn decode<'r, T>(value: PgValueRef<'r>) -> Result<Vec<Option<T>>, String>
    where
        Vec<Option<T>>: Decode<'r, Postgres>,
    {
        <Vec<Option<T>> as Decode<Postgres>>::decode(value).map_err(|_| {
            "array value could not be decoded (only one-dimensional arrays are supported)".into()
        })
    }
    fn items<T>(
        w: &mut W,
        items: Vec<Option<T>>,
        mut write: impl FnMut(&mut W, T) -> Result<(), JsonError>,
    ) -> Result<(), JsonError> {
        w.begin_array()?;
        for item in items {
            match item {
                Some(value) => write(w, value)?,
                None => w.null()?,
            }
        }
        w.end_array()
    }
    let written = match element {
        ElementKind::Int => items(w, decode::<i64>(value)?, |w, i| w.i64(i)),
        ElementKind::Float32 => items(w, decode::<f32>(value)?, result::write_float32),
        ElementKind::Float => items(w, decode::<f64>(value)?, result::write_float),
        ElementKind::Bool => items(w, decode::<bool>(value)?, |w, b| w.bool(b)),
        ElementKind::Text => items(w, decode::<String>(value)?, |w, s| w.string(&s)),
    };
    written.map_err(|e| e.to_string())
}

fn fixed<const N: usize>(bytes: &[u8]) -> Result<[u8; N], String> {
    bytes
        .try_into()
        .map_err(|_| format!("expected {N} bytes, got {}", bytes.len()))
}
