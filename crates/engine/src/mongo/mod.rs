//! MongoDB datasources: a job's "table" is a collection, its fields are document paths, and
//! its rows are the documents a `find` returns, each value written as its BSON type maps
//! ([`values`]).
//!
//! - **Tables.** `collection` is a collection of the connection's database; `db.collection` one
//!   of database `db` (inside the connection's `SCHEMAS`, which for MongoDB name databases).
//!   The result key is the key as the job wrote it. The databases `admin`, `local` and
//!   `config` and collections named `system.*` are never looked up: a job naming one is told
//!   the table does not exist, as upstream's catalog filters them.
//! - **Validation.** The catalog is `listCollections`: a collection that does not exist fails
//!   the job before any read. A collection has no column catalog, so a field is checked only
//!   as a document path (no `$` segment, no empty segment, no NUL; [`query::check_path`]); a
//!   path absent from a document is absent from its row.
//! - **Reads.** One `find` per collection, its filter every predicate under an explicit
//!   operator with typed values ([`query`]), its projection the mapped paths (and `_id` only
//!   when mapped), bounded by `maxTimeMS` (the engine's timeout). Rows stream from the cursor
//!   in the server's batches; the cursor is killed on the server (`killCursors`, sent by the
//!   driver when the cursor is dropped unexhausted) when the extraction fails fast, times out
//!   or is canceled.

mod client;
mod crm;
mod query;
mod values;

pub(crate) use client::{client_options, PoolLimits};
pub(crate) use crm::{CrmSession, CrmSource};

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use mongodb::action::Action as _;
use mongodb::bson::{doc, Document, RawDocumentBuf};
use mongodb::Client;

use crate::catalog::{Catalog, Table, TableName};
use crate::error::{EngineError, Result};
use crate::plan::{Keys, Naming, TablePlan};
use crate::result::ConnectionResult;

/// A MongoDB deployment's client, shared by every job of the connection; a session holds it
/// for one datasource's reads.
pub(crate) struct Session {
    client: Client,
    /// `maxTimeMS` of every read.
    max_time: Duration,
}

impl Session {
    pub(crate) fn new(client: Client, max_time: Duration) -> Session {
        Session { client, max_time }
    }
}

/// MongoDB as the engine sees it.
pub(crate) struct Source;

/// Databases upstream's catalog never lists, in any case.
const RESERVED_DATABASES: [&str; 3] = ["admin", "local", "config"];

fn is_reserved(database: &str, collection: &str) -> bool {
    RESERVED_DATABASES
        .iter()
        .any(|reserved| database.eq_ignore_ascii_case(reserved))
        || collection.to_ascii_lowercase().starts_with("system.")
}

impl crate::datasource::Datasource for Source {
    type Session = Session;

    /// Keys as written; the default "schema" is the connection's database.
    fn naming(database: &str) -> Naming {
        Naming {
            default_schema: database.to_owned(),
            catalog: None,
            keys: Keys::AsWritten,
        }
    }

    async fn load_catalog(
        session: &mut Session,
        connection: &str,
        database: &str,
        tables: &[TableName],
    ) -> Result<Catalog> {
        let mut by_database: BTreeMap<&str, Vec<&TableName>> = BTreeMap::new();
        for name in tables {
            let db = name.schema.as_deref().unwrap_or(database);
            if !is_reserved(db, &name.table) {
                by_database.entry(db).or_default().push(name);
            }
        }
        let mut catalog = Catalog::default();
        for (db, names) in by_database {
            let wanted: Vec<&str> = names.iter().map(|n| n.table.as_str()).collect();
            let found: BTreeSet<String> = session
                .client
                .database(db)
                .list_collection_names()
                .filter(doc! { "name": { "$in": wanted } })
                .await
                .map_err(|e| error(connection, &e))?
                .into_iter()
                .collect();
            for name in names {
                if found.contains(&name.table) {
                    catalog.tables.insert(
                        name.clone(),
                        Table {
                            schema: db.to_owned(),
                            columns: Vec::new(),
                            document_paths: true,
                        },
                    );
                }
            }
        }
        Ok(catalog)
    }

    async fn stream(
        session: &mut Session,
        connection: &str,
        plans: &[TablePlan],
        out: &mut ConnectionResult,
    ) -> Result<()> {
        // Every table's query is built (and its paths and filters checked) before the first
        // read.
        let finds = plans
            .iter()
            .map(|plan| Find::of(connection, plan))
            .collect::<Result<Vec<_>>>()?;
        for find in finds {
            let mut cursor = find
                .open(session, connection, &find.plan.name.table)
                .await?;
            out.start_table(&find.plan.key)?;
            while cursor.advance().await.map_err(|e| error(connection, &e))? {
                let w = out.begin_row()?;
                values::write_members(w, cursor.current())
                    .map_err(|detail| find.row_error(connection, detail))?;
                out.end_row().await?;
            }
        }
        Ok(())
    }

    /// Nothing to give back: the client is shared, and an exhausted cursor is closed.
    fn finish(_session: Session, _succeeded: bool) {}
}

/// One planned table's `find`: its filter and projection, built (and checked) before any read.
struct Find<'p> {
    plan: &'p TablePlan,
    filter: Document,
    projection: Option<Document>,
}

impl<'p> Find<'p> {
    fn of(connection: &str, plan: &'p TablePlan) -> Result<Find<'p>> {
        let refused = |e| refusal(connection, e);
        Ok(Find {
            plan,
            filter: query::filter(plan).map_err(refused)?,
            projection: query::projection(plan).map_err(refused)?,
        })
    }

    /// Runs it on `collection` of the plan's database, bounded by the session's `maxTimeMS`.
    async fn open(
        &self,
        session: &Session,
        connection: &str,
        collection: &str,
    ) -> Result<mongodb::Cursor<RawDocumentBuf>> {
        session
            .client
            .database(&self.plan.schema)
            .collection::<RawDocumentBuf>(collection)
            .find(self.filter.clone())
            .optional(self.projection.clone(), |find, p| find.projection(p))
            .max_time(session.max_time)
            .await
            .map_err(|e| error(connection, &e))
    }

    /// A row of its table that could not be written.
    fn row_error(&self, connection: &str, detail: String) -> EngineError {
        EngineError::query_detail(
            connection,
            format!("collection {:?}: {detail}", self.plan.key),
        )
    }
}

fn refusal(connection: &str, error: query::QueryError) -> EngineError {
    match error {
        query::QueryError::Path(detail) => EngineError::Schema {
            connection: connection.to_owned(),
            detail,
        },
        query::QueryError::Filter(detail) => EngineError::Filter {
            detail: format!("on {connection}: {detail}"),
        },
    }
}

/// A driver error in words safe to publish: no server address (server selection errors list
/// the topology), no credentials.
pub(crate) fn error(connection: &str, error: &mongodb::error::Error) -> EngineError {
    use mongodb::error::ErrorKind;
    let connection = connection.to_owned();
    let transient = crate::transient::mongo(error);
    match error.kind.as_ref() {
        ErrorKind::ServerSelection { .. } => EngineError::Connect {
            connection,
            detail: "no MongoDB server could be reached within the connect timeout".to_owned(),
            transient,
        },
        ErrorKind::Authentication { .. } => EngineError::Connect {
            connection,
            detail: "authentication failed".to_owned(),
            transient: false,
        },
        ErrorKind::InvalidTlsConfig { .. } | ErrorKind::DnsResolve { .. } => EngineError::Connect {
            connection,
            detail: contract::redact(&error.to_string()),
            transient: false,
        },
        ErrorKind::Command(command) => EngineError::Query {
            connection,
            detail: contract::redact(&format!(
                "{} ({}): {}",
                command.code_name, command.code, command.message
            )),
            transient,
        },
        ErrorKind::Io(io) => EngineError::Query {
            connection,
            detail: format!("connection broke: {}", io.kind()),
            transient,
        },
        _ => EngineError::Query {
            connection,
            detail: contract::redact(&error.to_string()),
            transient,
        },
    }
}
