//! Rows of one table from PostgreSQL into the result, decoded from the binary wire format
//! without an intermediate value per cell: by a binary `COPY (SELECT ...) TO STDOUT` when the
//! statement binds nothing, else from the statement's rows.

use contract::json::EncodedKey;
use futures_util::TryStreamExt;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Arguments, Either, Executor, PgConnection, Row, ValueRef};

use super::copy::Tuples;
use crate::catalog::{Column, ElementKind, ValueKind};
use crate::error::{EngineError, Result};
use crate::plan::TablePlan;
use crate::result::{self, ConnectionResult};
use crate::sql::{Dialect, Param};

/// Microseconds from the Unix epoch to PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
const PG_EPOCH_DAYS: i32 = 10_957;

/// Streams `plan`'s rows into `out`. `unread` is set while a copy's rows may still be arriving:
/// a copy left unfinished (an error on either side) leaves the connection where sqlx's own
/// bookkeeping does not know it is (its `COPY` is not counted among the answers awaited), so it
/// must be closed, never pooled again (the caller's session does that when `unread` is left
/// set).
pub(crate) async fn stream_table(
    conn: &mut PgConnection,
    connection: &str,
    plan: &TablePlan,
    prefix: &str,
    out: &mut ConnectionResult,
    unread: &mut bool,
) -> Result<()> {
    let query = Dialect::Postgres.select(plan, super::select_expr);
    out.start_table(&plan.key)?;
    let keys = out.row_keys(&plan.columns);
    // A copy runs in the simple query protocol, which takes no parameters and would run a
    // second statement after a `;`: the builder quotes every name, and a `;` anywhere (in a
    // quoted name) still sends the statement the other way.
    if query.params.is_empty() && prefix.is_empty() && !query.sql.contains(';') {
        *unread = true;
        copy_rows(conn, connection, plan, &query.sql, &keys, out).await?;
        *unread = false;
        return Ok(());
    }
    let sql = if prefix.is_empty() {
        std::borrow::Cow::Borrowed(query.sql.as_str())
    } else {
        std::borrow::Cow::Owned(format!("{prefix}{}", query.sql))
    };
    let mut args = PgArguments::default();
    // Each value is dropped once bound: the arguments hold their own copy, and a filter value
    // may be megabytes long.
    for param in query.params {
        let bound = match param {
            Param::Text(text) => args.add(text),
            // The PostgreSQL builder binds text only; other forms are a bug, not input.
            other => {
                return Err(EngineError::Result(format!(
                    "unexpected parameter {other:?}"
                )));
            }
        };
        bound.map_err(|e| EngineError::Result(e.to_string()))?;
    }
    // `fetch_many`, not `fetch`: `fetch` is this stream behind one more boxed stream that drops
    // the statement's result (the `Left`) per item.
    let mut steps = conn.fetch_many(sqlx::query_with(&sql, args));
    while let Some(step) = steps
        .try_next()
        .await
        .map_err(|e| EngineError::query(connection, &e))?
    {
        if let Either::Right(row) = step {
            write_row(|i| cell(&row, i), connection, plan, &keys, out)?;
            out.end_row().await?;
        }
    }
    Ok(())
}

/// The rows of `select` by a binary copy: one message per row, each field as the bytes a
/// statement's row would carry, without sqlx's row machinery (a `DataRow` and its index per
/// row, two streams handing each row on): about a fifth of the Worker's CPU on a big result.
async fn copy_rows(
    conn: &mut PgConnection,
    connection: &str,
    plan: &TablePlan,
    select: &str,
    keys: &[EncodedKey],
    out: &mut ConnectionResult,
) -> Result<()> {
    let statement = format!("COPY ({select}) TO STDOUT (FORMAT binary)");
    let mut chunks = conn
        .copy_out_raw(&statement)
        .await
        .map_err(|e| EngineError::query(connection, &e))?;
    let framing = |e: super::copy::FramingError| {
        EngineError::query_detail(connection, format!("the copy of the rows: {e}"))
    };
    let mut tuples = Tuples::new(plan.columns.len());
    while let Some(chunk) = chunks
        .try_next()
        .await
        .map_err(|e| EngineError::query(connection, &e))?
    {
        // A chunk's rows are written without a wait (the server sends one row per message), so
        // nothing of them is kept in this future's state: a full result chunk waits for the
        // message's end.
        let mut chunk = tuples.chunk(chunk);
        let mut full = false;
        while let Some(tuple) = chunk.next_tuple().map_err(framing)? {
            write_row(|i| Ok(tuple.field(i)), connection, plan, keys, out)?;
            full |= out.close_row()?;
        }
        drop(chunk);
        if full {
            out.send().await?;
        }
    }
    tuples.finish().map_err(framing)
}

/// Cell `i` of a statement's row: its bytes, `None` for a NULL.
#[inline]
fn cell(row: &PgRow, i: usize) -> std::result::Result<Option<&[u8]>, sqlx::Error> {
    let value = row.try_get_raw(i)?;
    if value.is_null() {
        return Ok(None);
    }
    value.as_bytes().map(Some).map_err(sqlx::Error::Decode)
}

/// Writes one row's members as [`crate::datasource::write_row`] does, each planned column under
/// its key, each cell (`cell(i)`: its bytes, `None` for a NULL) handed to [`write_value`] as
/// its bytes: a `PgValueRef` moved into the writer per cell cost more than writing most cells.
/// Its own loop, not the generic one with a PostgreSQL cell writer: that was measured, and the
/// value writer was not inlined there (BENCHMARKS.md, "A PostgreSQL row's cells as bytes").
#[inline]
fn write_row<'r>(
    cell: impl Fn(usize) -> std::result::Result<Option<&'r [u8]>, sqlx::Error>,
    connection: &str,
    plan: &TablePlan,
    keys: &[EncodedKey],
    out: &mut ConnectionResult,
) -> Result<()> {
    let w = out.begin_row()?;
    for (i, (column, key)) in plan.columns.iter().zip(keys).enumerate() {
        w.encoded_key(key)
            .map_err(|e| EngineError::Result(e.to_string()))?;
        let bytes = cell(i).map_err(|e| EngineError::query(connection, &e))?;
        let written = match bytes {
            None => w.null().map_err(|e| e.to_string()),
            Some(bytes) => match column.kind {
                ValueKind::Array(element) => write_array(w, element, bytes),
                _ => write_value(w, column, bytes),
            },
        };
        written.map_err(|detail| {
            EngineError::query_detail(connection, format!("column {:?}: {detail}", column.name))
        })?;
    }
    Ok(())
}

type W = contract::json::JsonWriter<Vec<u8>>;

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

/// Writes a one-dimensional array from its binary wire form: the number of dimensions, a
/// flags word, the element type, the length and lower bound of the dimension, then each
/// element as its length (-1 for a NULL) and bytes. The select list cast it to an array of
/// `element`, as sqlx's decoder takes it (no dimensions: empty; more than one, or a lower bound
/// other than 1: refused).
fn write_array(w: &mut W, element: ElementKind, bytes: &[u8]) -> Result<(), String> {
    let mut rest = bytes;
    let len = array_len(&mut rest).ok_or(ARRAY_REFUSED)?;
    w.begin_array().map_err(|e| e.to_string())?;
    for _ in 0..len {
        match array_item(&mut rest).ok_or(ARRAY_REFUSED)? {
            Some(item) => write_item(w, element, item)?,
            None => w.null().map_err(|e| e.to_string())?,
        }
    }
    w.end_array().map_err(|e| e.to_string())
}

const ARRAY_REFUSED: &str =
    "array value could not be decoded (only one-dimensional arrays are supported)";

/// The number of elements of a one-dimensional array, its header taken off `rest`.
fn array_len(rest: &mut &[u8]) -> Option<usize> {
    match take_i32(rest)? {
        0 => Some(0),
        1 => {
            let [_flags, _element_type, len, lower] = [
                take_i32(rest)?,
                take_i32(rest)?,
                take_i32(rest)?,
                take_i32(rest)?,
            ];
            (lower == 1).then_some(usize::try_from(len).ok()?)
        }
        _ => None,
    }
}

/// The next element taken off `rest`: `Some(None)` for a NULL, `None` when `rest` is short.
fn array_item<'a>(rest: &mut &'a [u8]) -> Option<Option<&'a [u8]>> {
    let size = take_i32(rest)?;
    if size == -1 {
        return Some(None);
    }
    let (item, tail) = rest.split_at_checked(usize::try_from(size).ok()?)?;
    *rest = tail;
    Some(Some(item))
}

fn take_i32(rest: &mut &[u8]) -> Option<i32> {
    let (head, tail) = rest.split_first_chunk::<4>()?;
    *rest = tail;
    Some(i32::from_be_bytes(*head))
}

/// Writes one non-null element of an array of `element`.
fn write_item(w: &mut W, element: ElementKind, item: &[u8]) -> Result<(), String> {
    let refused = |_| ARRAY_REFUSED.to_owned();
    let written = match element {
        ElementKind::Int => w.i64(i64::from_be_bytes(fixed(item).map_err(refused)?)),
        ElementKind::Float32 => {
            result::write_float32(w, f32::from_be_bytes(fixed(item).map_err(refused)?))
        }
        ElementKind::Float => {
            result::write_float(w, f64::from_be_bytes(fixed(item).map_err(refused)?))
        }
        ElementKind::Bool => w.bool(item.first().is_some_and(|b| *b != 0)),
        ElementKind::Text => w.string(std::str::from_utf8(item).map_err(|_| ARRAY_REFUSED)?),
    };
    written.map_err(|e| e.to_string())
}

fn fixed<const N: usize>(bytes: &[u8]) -> Result<[u8; N], String> {
    bytes
        .try_into()
        .map_err(|_| format!("expected {N} bytes, got {}", bytes.len()))
}
