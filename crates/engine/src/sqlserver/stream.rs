//! Rows of one table from a parameterised `SELECT` into the result, each value written
//! straight from tiberius' decoded cell.

use futures_util::TryStreamExt as _;
use tiberius::Query;

use super::client::{query_error, SqlClient};
use crate::error::{EngineError, Result};
use crate::plan::TablePlan;
use crate::result::ConnectionResult;
use crate::sql::{Dialect, Param};

/// Streams one planned table. The statement runs as `sp_executesql` with every filter value a
/// parameter (`@P1…`); rows are written as they arrive, so a table larger than memory streams.
pub(crate) async fn stream_table(
    client: &mut SqlClient,
    connection: &str,
    plan: &TablePlan,
    out: &mut ConnectionResult,
) -> Result<()> {
    let statement = Dialect::SqlServer.select(plan, super::select_expr);
    let mut query = Query::new(statement.sql);
    for param in statement.params {
        match param {
            Param::Text(text) => query.bind(text),
            Param::Int(i) => query.bind(i),
            // Beyond `bigint`: only a comparison can use it, and a float compares right.
            Param::UInt(u) => query.bind(u as f64),
            Param::Float(f) => query.bind(f),
            Param::Bool(b) => query.bind(b),
        }
    }
    let mut rows = query
        .query(client)
        .await
        .map_err(|e| query_error(connection, &e))?
        .into_row_stream();
    out.start_table(&plan.key)?;
    while let Some(row) = rows
        .try_next()
        .await
        .map_err(|e| query_error(connection, &e))?
    {
        let w = out.begin_row()?;
        for (column, cell) in plan.columns.iter().zip(row) {
            w.key(&column.name)
                .map_err(|e| EngineError::Result(e.to_string()))?;
            super::values::write_value(w, &cell).map_err(|detail| {
                EngineError::query_detail(connection, format!("column {:?}: {detail}", column.name))
            })?;
        }
        out.end_row().await?;
    }
    Ok(())
}
