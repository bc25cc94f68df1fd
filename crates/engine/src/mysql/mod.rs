//! MySQL and MariaDB datasources: schema discovery, the select expression of each column type,
//! and rows streamed from the binary protocol into the result.
//!
//! The session time zone is UTC: sqlx's `MySqlConnectOptions` sends `SET time_zone='+00:00'`
//! on every new connection (its default, which `connection::options` keeps), so `TIMESTAMP`
//! values arrive as UTC and `DATETIME` values, which have no zone, are written as UTC as well.

mod schema;
mod stream;

pub(crate) use schema::load_catalog;
pub(crate) use stream::stream_table;

use crate::catalog::{Column, ValueKind};
use crate::plan::{Keys, Naming};

/// MySQL's naming: the connection's database is the default schema (`db.table` with that
/// database is the same table as `table`), and result keys stay as the job wrote them, as the
/// Go Worker leaves them: `db.table` and `table` are two keys. There is no catalog part, so
/// three-part keys are refused.
pub(crate) fn naming(database: &str) -> Naming {
    Naming {
        default_schema: database.to_owned(),
        catalog: None,
        keys: Keys::AsWritten,
    }
}

/// The base type of a declared column type: `int(10) unsigned` → `int`, `enum('a','b')` →
/// `enum`, lower-cased.
pub(crate) fn base_type(column_type: &str) -> String {
    column_type
        .trim_start()
        .split(|c: char| c == '(' || c.is_ascii_whitespace())
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Whether a base type is one of the spatial types.
fn is_geometry(base: &str) -> bool {
    matches!(
        base,
        "geometry"
            | "point"
            | "linestring"
            | "polygon"
            | "multipoint"
            | "multilinestring"
            | "multipolygon"
            | "geometrycollection"
            | "geomcollection"
    )
}

/// The kind of a column from its `COLUMN_TYPE` (`int(10) unsigned`, `decimal(65,30)`, ...).
/// JSON columns are recognised by the caller (MariaDB reports them as `longtext`).
pub(crate) fn kind_of(column_type: &str) -> ValueKind {
    let base = base_type(column_type);
    let unsigned = column_type.to_ascii_lowercase().contains("unsigned");
    match base.as_str() {
        "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" if unsigned => {
            ValueKind::UInt
        }
        "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" | "year" => {
            ValueKind::Int
        }
        "bit" => ValueKind::UInt,
        "float" | "double" | "real" => ValueKind::Float,
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => {
            ValueKind::Bytes
        }
        "date" => ValueKind::Date,
        "datetime" => ValueKind::Timestamp,
        // A TIMESTAMP is an instant (stored in UTC, read in the UTC session zone).
        "timestamp" => ValueKind::TimestampTz,
        "json" => ValueKind::Json,
        "set" => ValueKind::Set,
        // decimal, char/varchar/text, enum, time, spatial and unknown types: text.
        _ => ValueKind::Text,
    }
}

/// The base types read as they arrive (the binary protocol sends them as text or as the
/// number the kind decodes); every other text-kind type is cast to `CHAR` first.
fn arrives_as_text(base: &str) -> bool {
    matches!(
        base,
        "char"
            | "varchar"
            | "tinytext"
            | "text"
            | "mediumtext"
            | "longtext"
            | "enum"
            | "decimal"
            | "numeric"
            | "dec"
            | "fixed"
    )
}

/// The select-list expression that makes a column arrive in the form its kind decodes.
///
/// - `BIT(n)` is cast to `UNSIGNED`, so it arrives as a little-endian `BIGINT UNSIGNED` rather
///   than big-endian bytes.
/// - Spatial types are written as WKT with `ST_AsText`.
/// - `TIME` (which may be negative or past 24 hours) and types this module does not know
///   (MariaDB's `uuid`, `inet6`, ...) are cast to `CHAR`, the server's own rendering.
pub(crate) fn select_expr(column: &Column, quoted: &str) -> String {
    let base = base_type(&column.db_type);
    match column.kind {
        ValueKind::UInt if base == "bit" => format!("CAST({quoted} AS UNSIGNED)"),
        ValueKind::Text if is_geometry(&base) => format!("ST_AsText({quoted})"),
        ValueKind::Text if !arrives_as_text(&base) => format!("CAST({quoted} AS CHAR)"),
        _ => quoted.to_owned(),
    }
}

/// MySQL and MariaDB as the engine sees them.
pub(crate) struct Source;

impl crate::datasource::SqlDatasource for Source {
    type Db = sqlx::MySql;

    fn naming(database: &str) -> Naming {
        naming(database)
    }

    fn load_catalog<'c>(
        conn: &'c mut sqlx::MySqlConnection,
        connection: &'c str,
        database: &'c str,
        tables: &'c [crate::catalog::TableName],
    ) -> impl std::future::Future<
        Output = crate::Result<(crate::catalog::Catalog, crate::datasource::SessionFacts)>,
    > + Send
           + 'c {
        load_catalog(conn, connection, database, tables)
    }

    fn stream_table<'c>(
        conn: &'c mut sqlx::MySqlConnection,
        connection: &'c str,
        plan: &'c crate::plan::TablePlan,
        prefix: &'c str,
        out: &'c mut crate::result::ConnectionResult,
        unread: &'c mut bool,
    ) -> impl std::future::Future<Output = crate::Result<()>> + Send + 'c {
        stream_table(conn, connection, plan, prefix, out, unread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(db_type: &str) -> Column {
        Column {
            name: "c".to_owned(),
            db_type: db_type.to_owned(),
            kind: kind_of(db_type),
        }
    }

    #[test]
    fn kinds_follow_the_declared_type() {
        let cases = [
            ("tinyint(1)", ValueKind::Int),
            ("int(11)", ValueKind::Int),
            ("int(5) unsigned zerofill", ValueKind::UInt),
            ("bigint(20) unsigned", ValueKind::UInt),
            ("bit(64)", ValueKind::UInt),
            ("year(4)", ValueKind::Int),
            ("float", ValueKind::Float),
            ("double", ValueKind::Float),
            ("decimal(65,30)", ValueKind::Text),
            ("varchar(10)", ValueKind::Text),
            ("enum('a','b')", ValueKind::Text),
            ("set('a','b')", ValueKind::Set),
            ("varbinary(4)", ValueKind::Bytes),
            ("longblob", ValueKind::Bytes),
            ("date", ValueKind::Date),
            ("datetime(6)", ValueKind::Timestamp),
            ("timestamp", ValueKind::TimestampTz),
            ("time(3)", ValueKind::Text),
            ("json", ValueKind::Json),
            ("point", ValueKind::Text),
            ("uuid", ValueKind::Text),
        ];
        for (db_type, kind) in cases {
            assert_eq!(kind_of(db_type), kind, "{db_type}");
        }
    }

    #[test]
    fn select_expressions_cast_where_the_wire_form_differs() {
        let q = "`c`";
        assert_eq!(select_expr(&column("bit(1)"), q), "CAST(`c` AS UNSIGNED)");
        assert_eq!(select_expr(&column("time(6)"), q), "CAST(`c` AS CHAR)");
        assert_eq!(select_expr(&column("uuid"), q), "CAST(`c` AS CHAR)");
        assert_eq!(select_expr(&column("multipolygon"), q), "ST_AsText(`c`)");
        for plain in [
            "int(11)",
            "decimal(10,2)",
            "varchar(5)",
            "enum('x')",
            "set('x')",
            "blob",
        ] {
            assert_eq!(select_expr(&column(plain), q), q, "{plain}");
        }
        let json = Column {
            kind: ValueKind::Json,
            ..column("longtext")
        };
        assert_eq!(select_expr(&json, q), q);
    }

    #[test]
    fn the_connection_database_is_the_default_schema() {
        let naming = naming("shop");
        assert_eq!(naming.default_schema, "shop");
        assert_eq!(naming.catalog, None);
    }
}
