//! A datasource session that cancels its query on the server when the extraction abandons it.
//!
//! When one datasource fails (or the extraction times out) the others' tasks are aborted.
//! Dropping a client-side stream does not stop the server working on the statement, so each
//! datasource works through a [`Session`]: dropped before [`Session::finish`], it takes its
//! connection out of the pool (so no other job can ever receive it mid-statement), closes it,
//! and asks the server, from another pooled connection, to cancel what that session was doing.

use sqlx::mysql::{MySql, MySqlPool};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, Postgres};
use sqlx::Database;

/// One pooled connection running a job's statements.
pub(crate) struct Session<DB: Database> {
    /// `Some` until the session ends.
    conn: Option<PoolConnection<DB>>,
    cancel: Option<Cancel>,
}

enum Cancel {
    Postgres { pool: PgPool, pid: i32 },
    MySql { pool: MySqlPool, id: u64 },
}

impl Session<Postgres> {
    pub(crate) async fn postgres(
        mut conn: PoolConnection<Postgres>,
        pool: PgPool,
    ) -> Result<Self, sqlx::Error> {
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await?;
        Ok(Session {
            conn: Some(conn),
            cancel: Some(Cancel::Postgres { pool, pid }),
        })
    }
}

impl Session<MySql> {
    pub(crate) async fn mysql(
        mut conn: PoolConnection<MySql>,
        pool: MySqlPool,
    ) -> Result<Self, sqlx::Error> {
        let id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
            .fetch_one(&mut *conn)
            .await?;
        Ok(Session {
            conn: Some(conn),
            cancel: Some(Cancel::MySql { pool, id }),
        })
    }
}

impl<DB: Database> Session<DB> {
    pub(crate) fn conn(&mut self) -> &mut DB::Connection {
        // `conn` is only taken by `finish` (which consumes the session) and by `drop`.
        self.conn
            .as_deref_mut()
            .expect("a live session has its connection")
    }

    /// The session's statements ended (well or not): the connection goes back to the pool.
    pub(crate) fn finish(mut self) {
        self.cancel = None;
    }
}

impl<DB: Database> Drop for Session<DB> {
    fn drop(&mut self) {
        let Some(cancel) = self.cancel.take() else {
            return;
        };
        // Never return a connection that may be mid-statement to the pool: detach and close it.
        if let Some(conn) = self.conn.take() {
            drop(conn.detach());
        }
        // Aborts happen on the runtime; outside one there is nothing to run the cancel on.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let outcome = match cancel {
                Cancel::Postgres { pool, pid } => sqlx::query("SELECT pg_cancel_backend($1)")
                    .bind(pid)
                    .execute(&pool)
                    .await
                    .map(drop),
                Cancel::MySql { pool, id } => sqlx::query(&format!("KILL QUERY {id}"))
                    .execute(&pool)
                    .await
                    .map(drop),
            };
            if let Err(error) = outcome {
                tracing::warn!(
                    error = %contract::redact(&error.to_string()),
                    "Could not cancel an abandoned datasource query."
                );
            }
        });
    }
}
