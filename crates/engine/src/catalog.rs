//! What a datasource holds: its tables and their columns, as discovered before any query.

use std::collections::BTreeMap;

/// A table's name as a datasource knows it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableName {
    /// `None` means the connection's default schema (`public`, or the MySQL database).
    pub schema: Option<String>,
    pub table: String,
}

/// How a column's values are read and written into the result JSON. The datasource module
/// decides the kind from the column's declared type; see docs/datasources.md's value mapping table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// Signed integer of any width: a JSON number.
    Int,
    /// Unsigned integer up to 64 bits: a JSON number.
    UInt,
    /// Binary floating point: a JSON number; NaN and infinities as strings.
    Float,
    Bool,
    /// Anything the database renders as text for us (decimals, network types, ...): a string.
    Text,
    /// Binary data: a base64 string.
    Bytes,
    Uuid,
    Date,
    /// Date and time without a zone: RFC 3339 with `Z` (taken as UTC, as the Go Worker does).
    Timestamp,
    /// Date and time with a zone: RFC 3339 in UTC.
    TimestampTz,
    /// Embedded JSON (keys sorted, as Go re-encodes them).
    Json,
    /// A list whose elements map as the contained kind.
    Array(ElementKind),
    /// A MySQL `SET`: an array of its member strings.
    Set,
    /// A MongoDB document path: each value written as its own BSON type maps.
    Bson,
}

/// The element kinds arrays are read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementKind {
    Int,
    /// Single precision (`real[]`), written as Go writes a `float32`.
    Float32,
    Float,
    Bool,
    Text,
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// The declared type as the database spells it (for messages and casts; never from input).
    pub db_type: String,
    pub kind: ValueKind,
}

/// One table as the datasource's catalog returned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// The schema (MySQL: database) the catalog found the table in, spelled as stored. Queries
    /// name it, so a table is read from exactly where it was validated.
    pub schema: String,
    pub columns: Vec<Column>,
    /// A MongoDB collection: it has no column catalog, so every field is a document path of
    /// kind [`ValueKind::Bson`] (the datasource checks the paths' syntax) and `columns` is empty.
    pub document_paths: bool,
}

impl Table {
    /// The column `name` of the table, if it has one.
    pub fn column(&self, name: &str) -> Option<Column> {
        if self.document_paths {
            return Some(Column {
                name: name.to_owned(),
                db_type: "document path".to_owned(),
                kind: ValueKind::Bson,
            });
        }
        self.columns.iter().find(|c| c.name == name).cloned()
    }
}

/// The tables of one datasource that a job asked about, keyed by the name the job used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    pub tables: BTreeMap<TableName, Table>,
}

impl Catalog {
    pub fn columns(&self, table: &TableName) -> Option<&[Column]> {
        self.tables.get(table).map(|t| t.columns.as_slice())
    }

    /// The column `name` of `table`, if both exist.
    pub fn column(&self, table: &TableName, name: &str) -> Option<Column> {
        self.tables.get(table)?.column(name)
    }
}
