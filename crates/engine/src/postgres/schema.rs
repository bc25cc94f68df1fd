//! Discovery of the requested tables' columns from `pg_catalog`.

use std::collections::BTreeMap;

use sqlx::{PgConnection, Row};

use crate::catalog::{Catalog, Column, Table, TableName};
use crate::datasource::{LoneRead, SessionFacts};
use crate::error::{EngineError, Result};

/// Columns of every requested table that exists (tables, views, materialized views, partitioned
/// and foreign tables). Absent tables are simply not in the catalog. The session's backend PID
/// and read-only default ride along (`SessionFacts`), so no statement of their own asks. Domains map as their base
/// type; the declared type name is kept for casts. System schemas (`pg_catalog`,
/// `information_schema`, `pg_toast*`, `pg_temp*`) are never seen: with a privileged datasource
/// user they would hand out `pg_authid`'s password hashes, so a job naming one fails like a
/// missing table.
const COLUMNS: &str = r#"
SELECT n.nspname AS schema_name, c.relname AS table_name, a.attname AS column_name,
       format_type(a.atttypid, NULL) AS db_type,
       bt.typname::text AS type_name, bt.typcategory::text AS category,
       et.typname::text AS element_name, et.typcategory::text AS element_category,
       pg_backend_pid() AS backend_pid,
       current_setting('default_transaction_read_only') AS read_only_default
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
JOIN pg_catalog.pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
LEFT JOIN pg_catalog.pg_type et ON et.oid = bt.typelem AND bt.typcategory = 'A'
WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND a.attnum > 0 AND NOT a.attisdropped
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname !~ '^pg_(toast|temp)'
  AND (n.nspname, c.relname) IN (SELECT * FROM unnest($1::text[], $2::text[]))
ORDER BY n.nspname, c.relname, a.attnum
"#;

pub(crate) async fn load_catalog(
    conn: &mut PgConnection,
    connection: &str,
    tables: &[TableName],
) -> Result<(Catalog, SessionFacts)> {
    let schemas: Vec<&str> = tables
        .iter()
        .map(|t| t.schema.as_deref().unwrap_or("public"))
        .collect();
    let names: Vec<&str> = tables.iter().map(|t| t.table.as_str()).collect();
    let rows = sqlx::query(COLUMNS)
        .bind(&schemas)
        .bind(&names)
        .fetch_all(conn)
        .await
        .map_err(|e| EngineError::query(connection, &e))?;

    let mut found: BTreeMap<TableName, Table> = BTreeMap::new();
    let mut facts = SessionFacts::default();
    for row in rows {
        let get = |name: &str| -> Result<Option<String>> {
            row.try_get::<Option<String>, _>(name)
                .map_err(|e| EngineError::query(connection, &e))
        };
        if facts.backend.is_none() {
            let pid: i32 = row
                .try_get("backend_pid")
                .map_err(|e| EngineError::query(connection, &e))?;
            facts = SessionFacts {
                backend: u64::try_from(pid).ok(),
                lone_read: match get("read_only_default")?.as_deref() {
                    Some("on") => LoneRead::SessionDefault,
                    _ => LoneRead::InTransaction,
                },
            };
        }
        let schema = get("schema_name")?.unwrap_or_default();
        let type_name = get("type_name")?.unwrap_or_default();
        let category = get("category")?.unwrap_or_default();
        let element_name = get("element_name")?;
        let element_category = get("element_category")?;
        let element = element_name
            .as_deref()
            .map(|n| (n, element_category.as_deref().unwrap_or("")));
        let name = TableName {
            schema: (schema != "public").then(|| schema.clone()),
            table: get("table_name")?.unwrap_or_default(),
        };
        let table = found.entry(name).or_insert_with(|| Table {
            schema,
            columns: Vec::new(),
            document_paths: false,
        });
        table.columns.push(Column {
            name: get("column_name")?.unwrap_or_default(),
            db_type: get("db_type")?.unwrap_or_default(),
            kind: super::kind_of(&type_name, &category, element),
        });
    }
    Ok((Catalog { tables: found }, facts))
}
