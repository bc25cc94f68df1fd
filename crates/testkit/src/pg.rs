//! A fresh database per test on the real local PostgreSQL.
//!
//! The server is `TEST_DATABASE_URL`, default [`DEFAULT_DATABASE_URL`] (what
//! `scripts/services.sh postgres` provides).

use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};
use uuid::Uuid;

/// The server used when `TEST_DATABASE_URL` is unset.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The size of [`TestDb::pool`] unless the test asks for another.
pub const DEFAULT_CONNECTIONS: u32 = 5;

/// How long to keep trying a server that refuses connections (it may be starting).
const CONNECT_PATIENCE: Duration = Duration::from_secs(5);

/// The administrative URL: `TEST_DATABASE_URL`, or [`DEFAULT_DATABASE_URL`].
pub fn admin_url() -> String {
    std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned())
}

/// A database created for one test, named `fetcher_test_<uuid>`. Call [`TestDb::drop`] at the
/// end of the test. A test that panics first never gets there: then `Drop` removes the database
/// on a thread of its own, so failed runs leave nothing behind either.
pub struct TestDb {
    /// The database's name.
    pub name: String,
    /// A URL of the database, for code under test that takes one.
    pub url: String,
    /// The connect options of the database.
    pub options: PgConnectOptions,
    /// A pool on the database ([`DEFAULT_CONNECTIONS`] unless created `_with` another size).
    pub pool: PgPool,
    admin: PgConnectOptions,
    /// The pools of [`TestDb::pool_with`], closed with [`TestDb::pool`].
    extra: Mutex<Vec<PgPool>>,
    dropped: bool,
}

impl TestDb {
    /// Creates an empty database on the test server.
    pub async fn create() -> TestDb {
        TestDb::create_with(DEFAULT_CONNECTIONS).await
    }

    /// Creates an empty database whose [`TestDb::pool`] has at most `connections`.
    pub async fn create_with(connections: u32) -> TestDb {
        let url = admin_url();
        let admin = PgConnectOptions::from_str(&url)
            .unwrap_or_else(|e| panic!("TEST_DATABASE_URL is not a PostgreSQL URL: {e}"))
            .disable_statement_logging();
        let name = format!("fetcher_test_{}", Uuid::new_v4().simple());
        let server = connect_admin(&admin).await;
        sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\""))
            .execute(&server)
            .await
            .unwrap_or_else(|e| panic!("cannot create test database {name}: {e}"));
        server.close().await;

        let options = admin.clone().database(&name);
        TestDb {
            url: with_database(&url, &name),
            pool: pool(&options, connections, &name).await,
            name,
            options,
            admin,
            extra: Mutex::new(Vec::new()),
            dropped: false,
        }
    }

    /// Creates a database and brings it to the Worker's schema (every embedded migration).
    pub async fn migrated() -> TestDb {
        TestDb::migrated_with(DEFAULT_CONNECTIONS).await
    }

    /// [`TestDb::migrated`] with a [`TestDb::pool`] of at most `connections`.
    pub async fn migrated_with(connections: u32) -> TestDb {
        let db = TestDb::create_with(connections).await;
        schema::migrate(&db.pool)
            .await
            .unwrap_or_else(|e| panic!("migrating {} failed: {e}", db.name));
        db
    }

    /// Another pool on the same database, of at most `connections` (callers that really run at
    /// the same time, or another Worker process). [`TestDb::drop`] closes it too.
    pub async fn pool_with(&self, connections: u32) -> PgPool {
        let pool = pool(&self.options, connections, &self.name).await;
        self.extra
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pool.clone());
        pool
    }

    /// Closes the pools and drops the database, ending any connection still open on it.
    pub async fn drop(mut self) {
        let extra = std::mem::take(&mut *self.extra.lock().unwrap_or_else(|e| e.into_inner()));
        for pool in extra {
            pool.close().await;
        }
        self.pool.close().await;
        let server = connect_admin(&self.admin).await;
        let name = &self.name;
        sqlx::raw_sql(&drop_statement(name))
            .execute(&server)
            .await
            .unwrap_or_else(|e| panic!("cannot drop test database {name}: {e}"));
        server.close().await;
        self.dropped = true;
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        // The test panicked before `drop(...).await`; the forced drop ends the pools' sessions.
        let admin = self.admin.clone();
        let statement = drop_statement(&self.name);
        crate::cleanup::run_detached(move || async move {
            if let Ok(mut conn) = PgConnection::connect_with(&admin).await {
                let _ = sqlx::raw_sql(&statement).execute(&mut conn).await;
                let _ = conn.close().await;
            }
        });
    }
}

async fn pool(options: &PgConnectOptions, connections: u32, name: &str) -> PgPool {
    PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options.clone())
        .await
        .unwrap_or_else(|e| panic!("cannot connect to test database {name}: {e}"))
}

/// Drops a test database even while connections (a pool of the test's) are still open on it.
fn drop_statement(name: &str) -> String {
    format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")
}

/// One connection to the administrative database, retrying for a few seconds, or a failed test
/// with a message that says what to start. A one-connection pool rather than a `PgConnection`:
/// `&mut PgConnection` executors make a future not `Send`-general enough for `tokio::spawn`,
/// and a test may well create or drop its database inside a spawned task.
async fn connect_admin(admin: &PgConnectOptions) -> PgPool {
    let started = Instant::now();
    loop {
        let attempt = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(admin.clone())
            .await;
        match attempt {
            Ok(server) => return server,
            Err(_) if started.elapsed() < CONNECT_PATIENCE => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(error) => panic!(
                "PostgreSQL for the integration tests is not reachable at {}:{} ({error}). \
                 Start it with `scripts/services.sh postgres`, or set TEST_DATABASE_URL.",
                admin.get_host(),
                admin.get_port(),
            ),
        }
    }
}

/// `url` with its path replaced by `/<database>`, keeping user, host, port and query.
pub fn with_database(url: &str, database: &str) -> String {
    let authority_start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[authority_start..];
    let authority_end = authority_start + rest.find(['/', '?']).unwrap_or(rest.len());
    let query = url[authority_end..]
        .find('?')
        .map_or("", |i| &url[authority_end + i..]);
    format!("{}/{database}{query}", &url[..authority_end])
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn with_database_replaces_only_the_path() {
        assert_eq!(
            with_database("postgres://u@h:1/postgres?sslmode=disable", "x"),
            "postgres://u@h:1/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h:1", "x"), "postgres://u@h:1/x");
        assert_eq!(
            with_database("postgres://u@h?sslmode=disable", "x"),
            "postgres://u@h/x?sslmode=disable"
        );
    }
}
