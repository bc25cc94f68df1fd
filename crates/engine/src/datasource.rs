//! What the engine needs from a kind of datasource: its naming, its catalog, its rows.
//!
//! [`Datasource`] is the engine's one view of a kind. The SQL kinds share most of it: they
//! implement [`SqlDatasource`] (a catalog and one table's rows on a connection of their sqlx
//! database), and get their [`Datasource`] from it: a cancel-on-drop session
//! ([`crate::cancel::Session`]) and the tables read read-only.
//!
//! A job costs its source two statements, the catalog and the rows: what the session must know
//! of itself (the server's id of it, for a cancel; whether a statement alone runs read-only)
//! rides along in the catalog statement ([`SessionFacts`]) instead of a statement of its own,
//! and a lone table is read by a statement that is read-only by itself ([`LoneRead`]). Several
//! tables are read in one `START TRANSACTION READ ONLY`, so each stays read-only whatever a
//! view read before it did to the session (and, on MySQL and MariaDB, all from one snapshot).

use std::future::Future;

use contract::json::EncodedKey;
use sqlx::{Connection, Database};

use crate::cancel::Session;
use crate::catalog::{Catalog, TableName};
use crate::error::{EngineError, Result};
use crate::plan::{Naming, TablePlan};
use crate::result::ConnectionResult;

/// One kind of datasource (PostgreSQL, MySQL, MongoDB). Implementations are stateless: the
/// session their statements run on is passed in.
pub(crate) trait Datasource {
    /// What one datasource's reads run on; dropped before [`Datasource::finish`] (the
    /// extraction was abandoned), it stops them on the server.
    type Session: Send;

    /// How the datasource names tables, for a connection to `database`.
    fn naming(database: &str) -> Naming;

    /// The requested tables that exist, and their columns.
    fn load_catalog<'c>(
        session: &'c mut Self::Session,
        connection: &'c str,
        database: &'c str,
        tables: &'c [TableName],
    ) -> impl Future<Output = Result<Catalog>> + Send + 'c;

    /// Streams every planned table's rows into `out`, in plan order.
    fn stream<'c>(
        session: &'c mut Self::Session,
        connection: &'c str,
        plans: &'c [TablePlan],
        out: &'c mut ConnectionResult,
    ) -> impl Future<Output = Result<()>> + Send + 'c;

    /// The reads ended, well or not (`succeeded`): the session is given back instead of being
    /// cancelled (a pooled connection kept for the next read when they succeeded, else to its
    /// pool, through its test).
    fn finish(session: Self::Session, succeeded: bool);
}

/// What the catalog statement also told of the session it ran on.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionFacts {
    /// The server's id of the session (PostgreSQL's backend PID, MySQL's connection id): what
    /// a cancel names. `None` when the catalog came back empty (then nothing is read).
    pub(crate) backend: Option<u64>,
    pub(crate) lone_read: LoneRead,
}

/// How a datasource's only table is read read-only without a transaction of its own.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoneRead {
    /// It cannot be: the read runs in `START TRANSACTION READ ONLY` as several tables do.
    #[default]
    InTransaction,
    /// The session's default makes every transaction read-only (PostgreSQL's
    /// `default_transaction_read_only`, which the catalog statement saw `on` just before on the
    /// same connection; a view's function may turn it off, never for the statement it runs in).
    SessionDefault,
    /// The statement says so itself with this prefix (MariaDB's `SET STATEMENT ... FOR`).
    Prefixed(&'static str),
}

/// A SQL kind of datasource on sqlx (PostgreSQL, MySQL).
pub(crate) trait SqlDatasource {
    type Db: Database;

    /// How the datasource names tables, for a connection to `database`.
    fn naming(database: &str) -> Naming;

    /// The columns of the requested tables that exist, and what the statement that read them
    /// told of the session.
    fn load_catalog<'c>(
        conn: &'c mut <Self::Db as Database>::Connection,
        connection: &'c str,
        database: &'c str,
        tables: &'c [TableName],
    ) -> impl Future<Output = Result<(Catalog, SessionFacts)>> + Send + 'c;

    /// Streams one planned table's rows into `out`; `prefix` goes before its statement
    /// ([`LoneRead::Prefixed`], else empty). When it fails with `unread` set, the connection is
    /// where the driver cannot settle it (rows still arriving that its bookkeeping does not
    /// await): it is closed instead of pooled.
    fn stream_table<'c>(
        conn: &'c mut <Self::Db as Database>::Connection,
        connection: &'c str,
        plan: &'c TablePlan,
        prefix: &'c str,
        out: &'c mut ConnectionResult,
        unread: &'c mut bool,
    ) -> impl Future<Output = Result<()>> + Send + 'c;
}

/// Both dialects' spelling of a read-only transaction (PostgreSQL and MySQL 5.6+ / MariaDB).
const READ_ONLY: &str = "START TRANSACTION READ ONLY";

impl<S: SqlDatasource + 'static> Datasource for S
where
    S::Db: Database,
{
    type Session = Session<S::Db>;

    fn naming(database: &str) -> Naming {
        <S as SqlDatasource>::naming(database)
    }

    async fn load_catalog(
        session: &mut Self::Session,
        connection: &str,
        database: &str,
        tables: &[TableName],
    ) -> Result<Catalog> {
        let (catalog, facts) =
            <S as SqlDatasource>::load_catalog(session.conn(), connection, database, tables)
                .await?;
        session.learn(facts);
        Ok(catalog)
    }

    /// The rows read-only: a view whose function writes fails the job instead of writing. A
    /// lone table in one statement read-only by itself, when the session allows
    /// ([`LoneRead`]); otherwise every table in one read-only transaction, which an error rolls
    /// back before the connection is pooled again. A statement that failed with its rows still
    /// arriving (a PostgreSQL copy) closes the connection instead.
    async fn stream(
        session: &mut Self::Session,
        connection: &str,
        plans: &[TablePlan],
        out: &mut ConnectionResult,
    ) -> Result<()> {
        let mut unread = false;
        let lone_read = session.facts().lone_read;
        let streamed = stream_tables::<S>(
            session.conn(),
            lone_read,
            connection,
            plans,
            out,
            &mut unread,
        )
        .await;
        if streamed.is_err() && unread {
            session.close_unsettled();
        }
        streamed
    }

    fn finish(session: Self::Session, succeeded: bool) {
        session.finish(succeeded);
    }
}

/// [`Datasource::stream`]'s statements on the session's connection `conn`: a lone table
/// read-only by itself when the session allows (`lone_read`), else every table in one
/// read-only transaction, which an error rolls back; `unread` as
/// [`SqlDatasource::stream_table`] leaves it.
async fn stream_tables<S: SqlDatasource>(
    conn: &mut <S::Db as Database>::Connection,
    lone_read: LoneRead,
    connection: &str,
    plans: &[TablePlan],
    out: &mut ConnectionResult,
    unread: &mut bool,
) -> Result<()> {
    if let [plan] = plans {
        let prefix = match lone_read {
            LoneRead::InTransaction => None,
            LoneRead::SessionDefault => Some(""),
            LoneRead::Prefixed(prefix) => Some(prefix),
        };
        if let Some(prefix) = prefix {
            return S::stream_table(conn, connection, plan, prefix, out, unread).await;
        }
    }
    let mut tx = conn
        .begin_with(READ_ONLY)
        .await
        .map_err(|e| EngineError::query(connection, &e))?;
    for plan in plans {
        S::stream_table(&mut tx, connection, plan, "", out, unread).await?;
    }
    tx.commit()
        .await
        .map_err(|e| EngineError::query(connection, &e))
}

/// Writes one database row's members: each planned column, in plan order (sorted by name),
/// through the datasource's value decoder, under its key as [`ConnectionResult::row_keys`]
/// encoded it once for the table. The caller then ends the row
/// ([`ConnectionResult::end_row`], which may wait to hand a chunk on).
pub(crate) fn write_row<R>(
    row: &R,
    connection: &str,
    plan: &TablePlan,
    keys: &[EncodedKey],
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
    let w = out.begin_row()?;
    for (i, (column, key)) in plan.columns.iter().zip(keys).enumerate() {
        w.encoded_key(key)
            .map_err(|e| EngineError::Result(e.to_string()))?;
        let value = row
            .try_get_raw(i)
            .map_err(|e| EngineError::query(connection, &e))?;
        write_value(w, column, value).map_err(|detail| {
            EngineError::query_detail(connection, format!("column {:?}: {detail}", column.name))
        })?;
    }
    Ok(())
}
