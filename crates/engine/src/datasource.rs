//! What the engine needs from a kind of datasource: its naming, its catalog, its rows.

use std::future::Future;

use sqlx::Database;

use crate::catalog::{Catalog, TableName};
use crate::error::Result;
use crate::plan::{Naming, TablePlan};
use crate::result::ConnectionResult;

/// One kind of datasource (PostgreSQL, MySQL). Implementations are stateless: a connection
/// of their database is passed in.
pub(crate) trait Datasource {
    type Db: Database;

    /// How the datasource names tables, for a connection to `database`.
    fn naming(database: &str) -> Naming;

    /// The columns of the requested tables that exist.
    fn load_catalog<'c>(
        conn: &'c mut <Self::Db as Database>::Connection,
        connection: &'c str,
        database: &'c str,
        tables: &'c [TableName],
    ) -> impl Future<Output = Result<Catalog>> + Send + 'c;

    /// Streams one planned table's rows into `out`.
    fn stream_table<'c>(
        conn: &'c mut <Self::Db as Database>::Connection,
        connection: &'c str,
        plan: &'c TablePlan,
        out: &'c mut ConnectionResult,
    ) -> impl Future<Output = Result<()>> + Send + 'c;
}

/// Writes one database row as a result row: each planned column, in plan order (sorted by
/// name), through the datasource's value decoder.
pub(crate) fn write_row<R>(
    row: &R,
    connection: &str,
    plan: &TablePlan,
    out: &mut ConnectionResult,
    write_value: impl Fn(
        &mut contract::json::JsonWriter<Vec<u8>>,
        &crate::catalog::Column,
        <R::Database as Database>::ValueRef<'_>,
    ) -> std::result::Result<(), String>,
) -> Result<()>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
{
    use crate::error::EngineError;

    let w = out.begin_row()?;
    for (i, column) in plan.columns.iter().enumerate() {
        w.key(&column.name)
            .map_err(|e| EngineError::Result(e.to_string()))?;
        let value = row
            .try_get_raw(i)
            .map_err(|e| EngineError::query(connection, &e))?;
        write_value(w, column, value).map_err(|detail| EngineError::Query {
            connection: connection.to_owned(),
            detail: format!("column {:?}: {detail}", column.name),
        })?;
    }
    out.end_row()
}
