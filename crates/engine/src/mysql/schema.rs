//! Discovery of the requested tables' columns from `information_schema`.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::mysql::{MySqlArguments, MySqlRow};
use sqlx::{Arguments, Decode, MySql, MySqlConnection, Row};

use crate::catalog::{Catalog, Column, Table, TableName, ValueKind};
use crate::datasource::{LoneRead, SessionFacts};
use crate::error::{EngineError, Result};
use crate::sql::Dialect;

/// Columns of the requested schemas and table names (base tables and views), in declaration
/// order. `VERSION()` and `CONNECTION_ID()` ride along so MariaDB is recognised and the session
/// known for a cancel without another round trip (`SessionFacts`).
/// Equality lists keep `information_schema`'s lookup optimisation; exact (case-sensitive)
/// pairs are matched afterwards. System schemas are never seen (see [`NOT_SYSTEM`]).
const COLUMNS: &str = "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, \
     VERSION(), CONNECTION_ID() FROM information_schema.COLUMNS";

/// Hides the server's own schemas, whatever their spelling: with a privileged datasource user
/// `mysql.user` would hand out password hashes, so a job naming one fails like a missing table.
/// Literals, never input.
const NOT_SYSTEM: &str = " AND LOWER(TABLE_SCHEMA) NOT IN \
     ('mysql', 'information_schema', 'performance_schema', 'sys')";

/// MariaDB's `JSON` is `LONGTEXT` with a `CHECK (json_valid(col))`; MySQL 8's
/// `CHECK_CONSTRAINTS` has no `TABLE_NAME` column, so this runs on MariaDB only.
const JSON_CHECKS: &str = "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, CHECK_CLAUSE \
     FROM information_schema.CHECK_CONSTRAINTS";

/// One row of [`COLUMNS`], decoded.
struct Found {
    schema: String,
    table: String,
    column: String,
    data_type: String,
    column_type: String,
    mariadb: bool,
}

/// The catalog of the requested tables that exist. `database` is the connection's database:
/// a name without a schema lives there. Absent tables are simply not in the catalog.
pub(crate) async fn load_catalog(
    conn: &mut MySqlConnection,
    connection: &str,
    database: &str,
    tables: &[TableName],
) -> Result<(Catalog, SessionFacts)> {
    // Exact (schema, table) pairs asked for, each with the name the plan looks it up by.
    let wanted: BTreeMap<(&str, &str), &TableName> = tables
        .iter()
        .map(|t| {
            (
                (t.schema.as_deref().unwrap_or(database), t.table.as_str()),
                t,
            )
        })
        .collect();
    if wanted.is_empty() {
        return Ok((Catalog::default(), SessionFacts::default()));
    }
    let schemas: BTreeSet<&str> = wanted.keys().map(|(s, _)| *s).collect();
    let names: BTreeSet<&str> = wanted.keys().map(|(_, t)| *t).collect();
    let filter = format!(
        " WHERE TABLE_SCHEMA IN ({}) AND TABLE_NAME IN ({})",
        placeholders(schemas.len()),
        placeholders(names.len())
    );
    let sql = format!(
        "{COLUMNS}{filter}{NOT_SYSTEM} ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION"
    );
    let args = text_args(schemas.iter().chain(names.iter()).copied())?;
    let rows = sqlx::query_with(&sql, args.clone())
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| EngineError::query(connection, &e))?;

    let mut facts = SessionFacts::default();
    let mut found = Vec::with_capacity(rows.len());
    for row in &rows {
        if facts.backend.is_none() {
            facts = SessionFacts {
                backend: connection_id(row),
                lone_read: lone_read(&text(row, 5)),
            };
        }
        let found_row = Found {
            schema: text(row, 0),
            table: text(row, 1),
            column: text(row, 2),
            data_type: text(row, 3).to_ascii_lowercase(),
            column_type: text(row, 4),
            mariadb: text(row, 5).to_ascii_lowercase().contains("mariadb"),
        };
        if wanted.contains_key(&(found_row.schema.as_str(), found_row.table.as_str())) {
            found.push(found_row);
        }
    }

    let maybe_json = found.iter().any(|f| f.mariadb && f.data_type == "longtext");
    let json_checks = if maybe_json {
        let sql = format!(
            "{JSON_CHECKS} WHERE CONSTRAINT_SCHEMA IN ({}) AND TABLE_NAME IN ({})",
            placeholders(schemas.len()),
            placeholders(names.len())
        );
        let rows = sqlx::query_with(&sql, args)
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| EngineError::query(connection, &e))?;
        rows.iter()
            .map(|row| ((text(row, 0), text(row, 1)), text(row, 2)))
            .collect()
    } else {
        Vec::new()
    };

    let mut catalog = Catalog::default();
    for f in found {
        let Some(name) = wanted.get(&(f.schema.as_str(), f.table.as_str())) else {
            continue;
        };
        let is_json = f.data_type == "json"
            || (f.data_type == "longtext"
                && json_checks.iter().any(|((schema, table), clause)| {
                    *schema == f.schema && *table == f.table && checks_json(clause, &f.column)
                }));
        let kind = if is_json {
            ValueKind::Json
        } else {
            super::kind_of(&f.column_type)
        };
        let table = catalog
            .tables
            .entry((*name).clone())
            .or_insert_with(|| Table {
                schema: f.schema.clone(),
                columns: Vec::new(),
                document_paths: false,
            });
        table.columns.push(Column {
            name: f.column,
            db_type: f.column_type,
            kind,
        });
    }
    Ok((catalog, facts))
}

/// `CONNECTION_ID()` of a [`COLUMNS`] row: a binary integer over the binary protocol, whose
/// width and sign vary by server and version.
fn connection_id(row: &MySqlRow) -> Option<u64> {
    const AT: usize = 6;
    row.try_get::<u64, _>(AT)
        .ok()
        .or_else(|| {
            row.try_get::<i64, _>(AT)
                .ok()
                .and_then(|id| u64::try_from(id).ok())
        })
        .or_else(|| text(row, AT).parse().ok())
}

/// How a lone table is read read-only on the server of `version` (`VERSION()`): MariaDB 10.1.2
/// and later take `SET STATEMENT ... FOR` (its variable renamed `transaction_read_only` in
/// 11.1, the old name kept as an alias for a while); MySQL has no per-statement form of it.
fn lone_read(version: &str) -> LoneRead {
    if !version.to_ascii_lowercase().contains("mariadb") {
        return LoneRead::InTransaction;
    }
    let mut numbers = version
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse::<u32>().ok());
    let release = (
        numbers.next().flatten(),
        numbers.next().flatten(),
        numbers.next().flatten(),
    );
    match release {
        (Some(major), Some(minor), _) if (major, minor) >= (11, 1) => {
            LoneRead::Prefixed("SET STATEMENT transaction_read_only=1 FOR ")
        }
        (Some(major), Some(minor), Some(patch)) if (major, minor, patch) >= (10, 1, 2) => {
            LoneRead::Prefixed("SET STATEMENT tx_read_only=1 FOR ")
        }
        _ => LoneRead::InTransaction,
    }
}

/// Whether a check clause validates `column` as JSON: `json_valid(`col`)`, as MariaDB writes
/// the constraint its `JSON` alias adds.
fn checks_json(clause: &str, column: &str) -> bool {
    let call = format!("json_valid({})", Dialect::MySql.quote(column));
    clause
        .to_ascii_lowercase()
        .contains(&call.to_ascii_lowercase())
}

fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

fn text_args<'q>(values: impl Iterator<Item = &'q str>) -> Result<MySqlArguments> {
    let mut args = MySqlArguments::default();
    for value in values {
        args.add(value)
            .map_err(|e| EngineError::Result(e.to_string()))?;
    }
    Ok(args)
}

/// A column of an `information_schema` row as text. Decoded from the raw bytes, because
/// depending on the server and version these columns arrive as `VARCHAR`, `VARBINARY` or
/// `BLOB`, which a typed `String` decode would refuse. NULL reads as empty.
fn text(row: &MySqlRow, index: usize) -> String {
    row.try_get_raw(index)
        .ok()
        .and_then(|value| <&[u8] as Decode<MySql>>::decode(value).ok())
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_checks_name_the_column_quoted() {
        assert!(checks_json("json_valid(`doc`)", "doc"));
        assert!(checks_json("JSON_VALID(`doc`)", "doc"));
        assert!(checks_json("json_valid(`a``b`)", "a`b"));
        assert!(!checks_json("json_valid(`doc2`)", "doc"));
        assert!(!checks_json("`doc` > 0", "doc"));
    }

    #[test]
    fn only_mariadb_reads_a_lone_table_read_only_by_itself() {
        assert_eq!(
            lone_read("10.11.19-MariaDB-0+deb12u1"),
            LoneRead::Prefixed("SET STATEMENT tx_read_only=1 FOR ")
        );
        assert_eq!(
            lone_read("11.4.2-MariaDB"),
            LoneRead::Prefixed("SET STATEMENT transaction_read_only=1 FOR ")
        );
        assert_eq!(lone_read("10.1.1-MariaDB"), LoneRead::InTransaction);
        assert_eq!(lone_read("8.0.36"), LoneRead::InTransaction);
        assert_eq!(lone_read("MariaDB"), LoneRead::InTransaction);
    }

    #[test]
    fn placeholders_are_comma_separated() {
        assert_eq!(placeholders(1), "?");
        assert_eq!(placeholders(3), "?, ?, ?");
    }
}
