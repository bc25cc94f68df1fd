//! Discovery of the requested tables' columns from `INFORMATION_SCHEMA.COLUMNS`.

use std::collections::BTreeMap;

use futures_util::TryStreamExt as _;
use tiberius::{ColumnData, Query};

use super::client::{query_error, SqlClient};
use crate::catalog::{Catalog, Column, Table, TableName};
use crate::error::Result;

/// Columns of base tables and views, in declaration order; the `WHERE` is one
/// `(TABLE_SCHEMA = @Pn AND TABLE_NAME = @Pm)` per requested pair, values bound.
const COLUMNS: &str = "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE \
     FROM INFORMATION_SCHEMA.COLUMNS";

/// Whether a schema is one of the server's own (`sys`, `INFORMATION_SCHEMA`) or a fixed
/// database role's (`db_owner`, `db_datareader`, ...), in any case: a job naming a table there
/// is told it does not exist, as upstream's catalog drops them.
pub(crate) fn is_system_schema(schema: &str) -> bool {
    let lower = schema.to_ascii_lowercase();
    lower == "sys" || lower == "information_schema" || lower.starts_with("db_")
}

/// The catalog of the requested tables that exist. A name without a schema lives in `dbo`.
/// Names are matched as the server's collation matches them (case-insensitively by default);
/// an exact spelling wins over another case. The catalog is keyed by the requested name, and
/// each table keeps the schema as stored, which the query then names.
pub(crate) async fn load_catalog(
    client: &mut SqlClient,
    connection: &str,
    tables: &[TableName],
) -> Result<Catalog> {
    let wanted: Vec<(&str, &TableName)> = tables
        .iter()
        .map(|t| (t.schema.as_deref().unwrap_or(super::DEFAULT_SCHEMA), t))
        .filter(|(schema, _)| !is_system_schema(schema))
        .collect();
    if wanted.is_empty() {
        return Ok(Catalog::default());
    }
    let pairs: Vec<String> = (0..wanted.len())
        .map(|i| {
            format!(
                "(TABLE_SCHEMA = @P{} AND TABLE_NAME = @P{})",
                2 * i + 1,
                2 * i + 2
            )
        })
        .collect();
    let sql = format!(
        "{COLUMNS} WHERE {} ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
        pairs.join(" OR ")
    );
    let mut query = Query::new(sql);
    for (schema, name) in &wanted {
        query.bind(schema.to_string());
        query.bind(name.table.clone());
    }
    let mut rows = query
        .query(client)
        .await
        .map_err(|e| query_error(connection, &e))?
        .into_row_stream();
    // Columns by (schema, table) as stored, in order.
    let mut found: BTreeMap<(String, String), Vec<Column>> = BTreeMap::new();
    while let Some(row) = rows
        .try_next()
        .await
        .map_err(|e| query_error(connection, &e))?
    {
        let mut cells = row.into_iter().map(|cell| match cell {
            ColumnData::String(Some(text)) => text.into_owned(),
            _ => String::new(),
        });
        let (schema, table, column, data_type) = (
            cells.next().unwrap_or_default(),
            cells.next().unwrap_or_default(),
            cells.next().unwrap_or_default(),
            cells.next().unwrap_or_default().to_ascii_lowercase(),
        );
        if is_system_schema(&schema) {
            continue;
        }
        found.entry((schema, table)).or_default().push(Column {
            name: column,
            kind: super::kind_of(&data_type),
            db_type: data_type,
        });
    }

    let mut catalog = Catalog::default();
    for (schema, name) in wanted {
        let exact = found.get_key_value(&(schema.to_owned(), name.table.clone()));
        let stored = exact.or_else(|| {
            found.iter().find(|((s, t), _)| {
                s.eq_ignore_ascii_case(schema) && t.eq_ignore_ascii_case(&name.table)
            })
        });
        if let Some(((stored_schema, _), columns)) = stored {
            catalog.tables.insert(
                name.clone(),
                Table {
                    schema: stored_schema.clone(),
                    columns: columns.clone(),
                    document_paths: false,
                },
            );
        }
    }
    Ok(catalog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_and_role_schemas_in_any_case() {
        for schema in [
            "sys",
            "SYS",
            "INFORMATION_SCHEMA",
            "information_schema",
            "db_owner",
            "DB_datareader",
        ] {
            assert!(is_system_schema(schema), "{schema}");
        }
        for schema in ["dbo", "sales", "sysadmin_data", "xdb_"] {
            assert!(!is_system_schema(schema), "{schema}");
        }
    }
}
