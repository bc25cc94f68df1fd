//! PostgreSQL datasources: schema discovery, the select expression of each column kind, and
//! rows streamed from the cursor into the result.

mod copy;
mod schema;
mod stream;

pub(crate) use schema::load_catalog;
pub(crate) use stream::stream_table;

use crate::catalog::{Column, ElementKind, ValueKind};
use crate::plan::{Keys, Naming};

/// Session settings every extraction connection runs with, sent as startup parameters after
/// the connection's own options (the later of two wins; the options refuse these names anyway):
///
/// - text renderings are stable: ISO dates, ISO 8601 intervals, UTC, full float precision;
/// - `search_path` holds only `pg_catalog` and the session's own `pg_temp`, so nothing the
///   engine or a function in a view refers to without a schema resolves to a user's schema
///   (queries name every table with the schema it was validated in);
/// - every transaction is read-only (several tables are also read inside `START TRANSACTION
///   READ ONLY`; a lone table's statement relies on this default, which the catalog statement
///   checks just before).
pub(crate) const SESSION_SETTINGS: [(&str, &str); 6] = [
    ("DateStyle", "ISO"),
    ("IntervalStyle", "iso_8601"),
    ("TimeZone", "UTC"),
    ("extra_float_digits", "3"),
    ("search_path", "pg_catalog,pg_temp"),
    ("default_transaction_read_only", "on"),
];

/// PostgreSQL's naming: `public` (in any case) is the default schema and is stripped from
/// result keys, as is the catalog part, which must be the connection's database.
pub(crate) fn naming(database: &str) -> Naming {
    Naming {
        default_schema: "public".to_owned(),
        catalog: Some(database.to_owned()),
        keys: Keys::DefaultSchemaStripped,
    }
}

/// The select-list expression that makes a column arrive in the form its kind decodes.
pub(crate) fn select_expr(column: &Column, quoted: &str) -> String {
    match column.kind {
        ValueKind::Int => format!("{quoted}::int8"),
        ValueKind::Text | ValueKind::Json => format!("{quoted}::text"),
        ValueKind::Array(ElementKind::Int) => format!("{quoted}::int8[]"),
        ValueKind::Array(ElementKind::Float32) => format!("{quoted}::float4[]"),
        ValueKind::Array(ElementKind::Float) => format!("{quoted}::float8[]"),
        ValueKind::Array(ElementKind::Bool) => format!("{quoted}::bool[]"),
        ValueKind::Array(ElementKind::Text) => format!("{quoted}::text[]"),
        ValueKind::UInt
        | ValueKind::Float
        | ValueKind::Bool
        | ValueKind::Bytes
        | ValueKind::Uuid
        | ValueKind::Date
        | ValueKind::Timestamp
        | ValueKind::TimestampTz
        | ValueKind::Set
        | ValueKind::Bson => quoted.to_owned(),
    }
}

/// The kind of a column from its (domain-resolved) type name and category.
pub(crate) fn kind_of(type_name: &str, category: &str, element: Option<(&str, &str)>) -> ValueKind {
    match type_name {
        "int2" | "int4" | "int8" | "oid" | "xid" | "cid" => ValueKind::Int,
        "float4" | "float8" => ValueKind::Float,
        "bool" => ValueKind::Bool,
        "bytea" => ValueKind::Bytes,
        "uuid" => ValueKind::Uuid,
        "date" => ValueKind::Date,
        "timestamp" => ValueKind::Timestamp,
        "timestamptz" => ValueKind::TimestampTz,
        "json" | "jsonb" => ValueKind::Json,
        _ if category == "A" => ValueKind::Array(match element {
            Some(("int2" | "int4" | "int8" | "oid", _)) => ElementKind::Int,
            Some(("float4", _)) => ElementKind::Float32,
            Some(("float8", _)) => ElementKind::Float,
            Some(("bool", _)) => ElementKind::Bool,
            _ => ElementKind::Text,
        }),
        _ => ValueKind::Text,
    }
}

/// PostgreSQL as the engine sees it.
pub(crate) struct Source;

impl crate::datasource::SqlDatasource for Source {
    type Db = sqlx::Postgres;

    fn naming(database: &str) -> Naming {
        naming(database)
    }

    fn load_catalog<'c>(
        conn: &'c mut sqlx::PgConnection,
        connection: &'c str,
        _database: &'c str,
        tables: &'c [crate::catalog::TableName],
    ) -> impl std::future::Future<
        Output = crate::Result<(crate::catalog::Catalog, crate::datasource::SessionFacts)>,
    > + Send
           + 'c {
        load_catalog(conn, connection, tables)
    }

    fn stream_table<'c>(
        conn: &'c mut sqlx::PgConnection,
        connection: &'c str,
        plan: &'c crate::plan::TablePlan,
        prefix: &'c str,
        out: &'c mut crate::result::ConnectionResult,
        unread: &'c mut bool,
    ) -> impl std::future::Future<Output = crate::Result<()>> + Send + 'c {
        stream_table(conn, connection, plan, prefix, out, unread)
    }
}
