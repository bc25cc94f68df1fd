//! SQL Server datasources: schema discovery from `INFORMATION_SCHEMA`, and rows streamed from
//! tiberius into the result, each value written as its type maps ([`values`]).
//!
//! - **Tables.** `dbo` is the default schema: `t`, `dbo.t`, `DBO.t` and `<database>.dbo.t` are
//!   the table `t` and the result key `t`; another schema stays in the key (`sales.orders`).
//!   Tables in `sys`, `INFORMATION_SCHEMA` and the `db_*` role schemas do not exist for a job.
//! - **Validation.** One `INFORMATION_SCHEMA.COLUMNS` query before any read: a missing table or
//!   column fails the job there. Identifiers are quoted with `[]` (`]` doubled), filter values
//!   are `@P1…` parameters, `like` patterns are matched literally but for `%`, `_` and `\`.
//! - **Reads.** Each datasource's reads run on their own connection, closed when they end.
//!   Dropped mid-read (the job failed fast, timed out or was canceled), the connection closes,
//!   which ends the statement on the server: tiberius 0.12 has no call that sends a TDS
//!   attention on its own.

mod client;
mod schema;
mod stream;
mod values;

pub(crate) use client::{config as client_config, SqlClient, Target};

use crate::catalog::{Catalog, Column, TableName, ValueKind};
use crate::error::Result;
use crate::plan::{Keys, Naming, TablePlan};
use crate::result::ConnectionResult;

/// The schema of a name without one.
pub(crate) const DEFAULT_SCHEMA: &str = "dbo";

/// SQL Server's naming: `dbo` (in any case) is the default schema and is stripped from result
/// keys, as is the catalog part, which must be the connection's database.
pub(crate) fn naming(database: &str) -> Naming {
    Naming {
        default_schema: DEFAULT_SCHEMA.to_owned(),
        catalog: Some(database.to_owned()),
        keys: Keys::DefaultSchemaStripped,
    }
}

/// The kind of a column from its `DATA_TYPE` (lower-cased). The value written comes from the
/// type on the wire ([`values`]); the kind drives filters (a whole end day for dates).
pub(crate) fn kind_of(data_type: &str) -> ValueKind {
    match data_type {
        "tinyint" | "smallint" | "int" | "bigint" => ValueKind::Int,
        "bit" => ValueKind::Bool,
        "float" | "real" => ValueKind::Float,
        "binary" | "varbinary" | "image" | "timestamp" | "rowversion" => ValueKind::Bytes,
        "uniqueidentifier" => ValueKind::Uuid,
        "date" => ValueKind::Date,
        "datetime" | "datetime2" | "smalldatetime" => ValueKind::Timestamp,
        "datetimeoffset" => ValueKind::TimestampTz,
        // decimal/numeric/money, character types, xml, time and the rest: text.
        _ => ValueKind::Text,
    }
}

/// The select-list expression of a column: money arrives as an exact `decimal(19,4)` (the
/// wire's money type would go through a float), the CLR types (`hierarchyid`, `geometry`,
/// `geography`) as their `ToString()` text, `sql_variant` as `nvarchar(max)`.
pub(crate) fn select_expr(column: &Column, quoted: &str) -> String {
    match column.db_type.as_str() {
        "money" | "smallmoney" => format!("CAST({quoted} AS decimal(19,4))"),
        "hierarchyid" | "geometry" | "geography" => format!("{quoted}.ToString()"),
        "sql_variant" => format!("CAST({quoted} AS nvarchar(max))"),
        _ => quoted.to_owned(),
    }
}

/// SQL Server as the engine sees it.
pub(crate) struct Source;

impl crate::datasource::Datasource for Source {
    type Session = SqlClient;

    fn naming(database: &str) -> Naming {
        naming(database)
    }

    async fn load_catalog(
        session: &mut SqlClient,
        connection: &str,
        _database: &str,
        tables: &[TableName],
    ) -> Result<Catalog> {
        schema::load_catalog(session, connection, tables).await
    }

    async fn stream(
        session: &mut SqlClient,
        connection: &str,
        plans: &[TablePlan],
        out: &mut ConnectionResult,
    ) -> Result<()> {
        for plan in plans {
            stream::stream_table(session, connection, plan, out).await?;
        }
        Ok(())
    }

    /// The connection closes: each datasource read has its own.
    fn finish(session: SqlClient, _succeeded: bool) {
        drop(session);
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
    fn kinds_follow_the_data_type() {
        let cases = [
            ("tinyint", ValueKind::Int),
            ("bigint", ValueKind::Int),
            ("bit", ValueKind::Bool),
            ("real", ValueKind::Float),
            ("decimal", ValueKind::Text),
            ("money", ValueKind::Text),
            ("nvarchar", ValueKind::Text),
            ("varbinary", ValueKind::Bytes),
            ("uniqueidentifier", ValueKind::Uuid),
            ("date", ValueKind::Date),
            ("datetime2", ValueKind::Timestamp),
            ("datetimeoffset", ValueKind::TimestampTz),
            ("time", ValueKind::Text),
            ("xml", ValueKind::Text),
        ];
        for (data_type, kind) in cases {
            assert_eq!(kind_of(data_type), kind, "{data_type}");
        }
    }

    #[test]
    fn money_is_read_as_an_exact_decimal() {
        assert_eq!(
            select_expr(&column("money"), "[c]"),
            "CAST([c] AS decimal(19,4))"
        );
        assert_eq!(
            select_expr(&column("smallmoney"), "[c]"),
            "CAST([c] AS decimal(19,4))"
        );
        assert_eq!(select_expr(&column("geometry"), "[c]"), "[c].ToString()");
        for plain in ["int", "decimal", "nvarchar", "datetime2", "xml"] {
            assert_eq!(select_expr(&column(plain), "[c]"), "[c]", "{plain}");
        }
    }

    #[test]
    fn dbo_is_the_default_schema() {
        let naming = naming("shop");
        assert_eq!(naming.default_schema, "dbo");
        assert_eq!(naming.catalog.as_deref(), Some("shop"));
        assert_eq!(naming.keys, Keys::DefaultSchemaStripped);
    }

    #[test]
    fn dbo_is_stripped_from_keys_in_any_case_and_other_schemas_kept() {
        use crate::plan::{parse_table_key, result_key};
        let naming = naming("shop");
        for (key, expected) in [
            ("people", "people"),
            ("dbo.people", "people"),
            ("DBO.people", "people"),
            ("shop.dbo.people", "people"),
            ("shop.Dbo.people", "people"),
            ("sales.orders", "sales.orders"),
            ("shop.sales.orders", "sales.orders"),
        ] {
            let name = parse_table_key(key, &naming).unwrap();
            assert_eq!(result_key(key, &name, &naming), expected, "{key}");
        }
        assert!(parse_table_key("other.dbo.people", &naming).is_err());
        assert!(parse_table_key("a.b.c.d", &naming).is_err());
    }
}
