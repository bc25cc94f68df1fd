//! A datasource session that cancels its query on the server when the extraction abandons it.
//!
//! When one datasource fails (or the extraction times out) the others' tasks are aborted.
//! Dropping a client-side stream does not stop the server working on the statement, so each
//! datasource works through a [`Session`]: dropped before [`Session::finish`], it takes its
//! connection out of the pool (so no other job can ever receive it mid-statement), closes it,
//! and asks the server, from another pooled connection, to cancel what that session was doing.

use sqlpool::{Kept, Lent};
use sqlx::mysql::MySql;
use sqlx::postgres::Postgres;
use sqlx::query::Query;
use sqlx::{Database, Executor, IntoArguments};

use crate::datasource::SessionFacts;

/// One pooled connection running a job's statements.
pub(crate) struct Session<DB: Database> {
    /// `Some` until the session ends.
    conn: Option<Lent<DB>>,
    /// Where a cancel is asked; `None` once the session ended.
    cancel: Option<Cancel>,
    /// Learnt from the catalog statement ([`Session::learn`]): no statement of its own asks
    /// the server's id of the session. Until then an abandoned session is closed without a
    /// cancel: only the engine's own catalog query can be running.
    facts: SessionFacts,
    /// Its connection was left where the driver cannot settle it ([`Session::close_unsettled`]).
    unsettled: bool,
}

enum Cancel {
    Postgres(Kept<Postgres>),
    MySql(Kept<MySql>),
}

impl Session<Postgres> {
    pub(crate) fn postgres(conn: Lent<Postgres>, pool: Kept<Postgres>) -> Self {
        Session::new(conn, Cancel::Postgres(pool))
    }
}

impl Session<MySql> {
    pub(crate) fn mysql(conn: Lent<MySql>, pool: Kept<MySql>) -> Self {
        Session::new(conn, Cancel::MySql(pool))
    }
}

impl<DB: Database> Session<DB> {
    fn new(conn: Lent<DB>, cancel: Cancel) -> Self {
        Session {
            conn: Some(conn),
            cancel: Some(cancel),
            facts: SessionFacts::default(),
            unsettled: false,
        }
    }

    pub(crate) fn conn(&mut self) -> &mut DB::Connection {
        // `conn` is only taken by `finish` (which consumes the session) and by `drop`.
        self.conn
            .as_deref_mut()
            .expect("a live session has its connection")
    }

    /// What the catalog statement told of this session.
    pub(crate) fn learn(&mut self, facts: SessionFacts) {
        self.facts = facts;
    }

    pub(crate) fn facts(&self) -> SessionFacts {
        self.facts
    }

    /// The connection was left mid-statement in a way the driver does not know of (a copy's
    /// rows still arriving): however the session is finished, its connection is closed, never
    /// pooled again. No cancel is sent: the statement was sending rows, and a server sending
    /// to a closed socket ends the session itself (a cancel would take one more connection).
    pub(crate) fn close_unsettled(&mut self) {
        self.unsettled = true;
    }

    /// The session's statements ended: after they `succeeded` the connection may be kept out
    /// of the pool for the next read ([`Kept`]), else it goes back to the pool, through its
    /// test. After [`Session::close_unsettled`] it is closed instead.
    pub(crate) fn finish(mut self, succeeded: bool) {
        self.cancel = None;
        if self.unsettled {
            if let Some(conn) = self.conn.take() {
                drop(conn.detach());
            }
            return;
        }
        if let Some(conn) = self.conn.take() {
            conn.finish(succeeded);
        }
    }
}

impl<DB: Database> Drop for Session<DB> {
    fn drop(&mut self) {
        let Some(cancel) = self.cancel.take() else {
            return;
        };
        let backend = self.facts.backend;
        // Never return a connection that may be mid-statement to the pool: detach and close it.
        if let Some(conn) = self.conn.take() {
            drop(conn.detach());
        }
        // Aborts happen on the runtime; outside one there is nothing to run the cancel on.
        let (Ok(runtime), Some(backend)) = (tokio::runtime::Handle::try_current(), backend) else {
            return;
        };
        runtime.spawn(async move {
            let outcome = cancel.run(backend).await;
            if let Err(error) = outcome {
                tracing::warn!(
                    error = %contract::redact(&error.to_string()),
                    "Could not cancel an abandoned datasource query."
                );
            }
        });
    }
}

impl Cancel {
    /// Asks the server to cancel what session `backend` is doing, on a connection of the pool.
    async fn run(self, backend: u64) -> Result<(), sqlx::Error> {
        match self {
            // A PID is an `int4`; one that is not came from no server.
            Cancel::Postgres(pool) => match i32::try_from(backend) {
                Ok(pid) => {
                    let cancel = sqlx::query("SELECT pg_cancel_backend($1)").bind(pid);
                    execute(&pool, cancel).await
                }
                Err(_) => Ok(()),
            },
            Cancel::MySql(pool) => {
                let kill = format!("KILL QUERY {backend}");
                execute(&pool, sqlx::query(&kill)).await
            }
        }
    }
}

/// Runs `query` on a connection lent by `pool`.
async fn execute<'q, DB: Database>(
    pool: &Kept<DB>,
    query: Query<'q, DB, <DB as Database>::Arguments<'q>>,
) -> Result<(), sqlx::Error>
where
    <DB as Database>::Arguments<'q>: IntoArguments<'q, DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    let mut conn = pool.lend().await?;
    let done = query.execute(&mut *conn).await;
    conn.finish(done.is_ok());
    done.map(drop)
}
