//! MySQL/MariaDB integration-test helpers: a fresh database per test on the real local server,
//! and an [`Engine`] whose one datasource is that database.
//!
//! The server is `TEST_MYSQL_URL`, default `mysql://root@127.0.0.1:3306` (what
//! `scripts/services.sh mariadb` provides). A server that cannot be reached fails the test with
//! a message saying so: tests never skip a missing dependency.

use std::str::FromStr;
use std::time::{Duration, Instant};

use engine::connection::{from_env_vars, Resolver};
use engine::{Engine, EngineConfig};
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection, MySqlConnection, MySqlPool};
use uuid::Uuid;

/// The server used when `TEST_MYSQL_URL` is unset.
pub const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306";

/// How long to keep trying a server that refuses connections (it may be starting).
const CONNECT_PATIENCE: Duration = Duration::from_secs(5);

/// The administrative URL: `TEST_MYSQL_URL`, or [`DEFAULT_MYSQL_URL`].
pub fn mysql_url() -> String {
    std::env::var("TEST_MYSQL_URL").unwrap_or_else(|_| DEFAULT_MYSQL_URL.to_owned())
}

/// A database created for one test, named `fetcher_test_<uuid>`. Call [`MyDb::drop`] at the end
/// of the test. A test that panics first never gets there: then `Drop` removes the database on
/// a thread of its own, so failed runs leave nothing behind either.
pub struct MyDb {
    /// The database's name.
    pub name: String,
    /// A pool on the database (at most 2 connections), for fixtures.
    pub pool: MySqlPool,
    admin: MySqlConnectOptions,
    server: Server,
    dropped: bool,
}

/// Where the server is and who logs in, as the engine's `DATASOURCE_*` variables want them.
#[derive(Clone)]
struct Server {
    host: String,
    port: u16,
    user: String,
    password: String,
}

impl MyDb {
    /// Creates an empty database on the test server.
    pub async fn create() -> MyDb {
        let url = mysql_url();
        let admin = MySqlConnectOptions::from_str(&url)
            .unwrap_or_else(|e| panic!("TEST_MYSQL_URL is not a MySQL URL: {e}"))
            .disable_statement_logging();
        let server = Server::from_url(&url);
        let name = format!("fetcher_test_{}", Uuid::new_v4().simple());
        let mut conn = connect_admin(&admin).await;
        sqlx::raw_sql(&format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("cannot create test database {name}: {e}"));
        let _ = conn.close().await;

        let pool = MySqlPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(admin.clone().database(&name))
            .await
            .unwrap_or_else(|e| panic!("cannot connect to test database {name}: {e}"));
        MyDb {
            name,
            pool,
            admin,
            server,
            dropped: false,
        }
    }

    /// Runs fixture SQL (several statements allowed) in one session, so `SET` statements apply
    /// to the statements after them.
    pub async fn exec(&self, sql: &str) {
        let mut conn = self.pool.acquire().await.expect("a fixture connection");
        sqlx::raw_sql(sql)
            .execute(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("fixture SQL failed: {e}\n{sql}"));
        // The session may have changed settings (sql_mode, time_zone): do not reuse it.
        conn.detach();
    }

    /// Whether `table` exists in this database.
    pub async fn has_table(&self, table: &str) -> bool {
        let count: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
        )
        .bind(&self.name)
        .bind(table)
        .fetch_one(&self.pool)
        .await
        .expect("information_schema is readable");
        count == 1
    }

    /// An engine whose only datasource, `connection`, is this database, defined the way the
    /// Worker's environment defines one.
    pub fn engine(&self, connection: &str) -> Engine {
        self.engine_with(connection, &[])
    }

    /// [`MyDb::engine`], with `extra` `(suffix, value)` variables (`SCHEMAS`, ...) added to the
    /// datasource's group.
    pub fn engine_with(&self, connection: &str, extra: &[(&str, &str)]) -> Engine {
        let s = &self.server;
        let vars = [
            ("DATASOURCE_MY_CONFIG_NAME", connection),
            ("DATASOURCE_MY_TYPE", "MYSQL"),
            ("DATASOURCE_MY_HOST", &s.host),
            ("DATASOURCE_MY_PORT", &s.port.to_string()),
            ("DATASOURCE_MY_DATABASE", &self.name),
            ("DATASOURCE_MY_USER", &s.user),
            ("DATASOURCE_MY_PASSWORD", &s.password),
            ("DATASOURCE_MY_SSLMODE", "disable"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into_iter()
        .chain(
            extra
                .iter()
                .map(|(suffix, value)| (format!("DATASOURCE_MY_{suffix}"), (*value).to_owned())),
        );
        let env = from_env_vars(vars).expect("the test datasource is well-formed");
        Engine::new(EngineConfig::default(), Resolver::new(env, None))
    }

    /// Closes the pool and drops the database.
    pub async fn drop(mut self) {
        self.pool.close().await;
        let mut conn = connect_admin(&self.admin).await;
        let name = &self.name;
        sqlx::raw_sql(&drop_statement(name))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("cannot drop test database {name}: {e}"));
        let _ = conn.close().await;
        self.dropped = true;
    }
}

impl Drop for MyDb {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        // The test panicked before `drop(...).await`.
        let admin = self.admin.clone();
        let statement = drop_statement(&self.name);
        testkit::cleanup::run_detached(move || async move {
            if let Ok(mut conn) = MySqlConnection::connect_with(&admin).await {
                let _ = sqlx::raw_sql(&statement).execute(&mut conn).await;
                let _ = conn.close().await;
            }
        });
    }
}

fn drop_statement(name: &str) -> String {
    format!("DROP DATABASE IF EXISTS `{name}`")
}

impl Server {
    /// Reads `mysql://user[:password]@host[:port][/...]` (no percent-decoding: test URLs are
    /// plain).
    fn from_url(url: &str) -> Server {
        let rest = url
            .strip_prefix("mysql://")
            .or_else(|| url.strip_prefix("mariadb://"))
            .unwrap_or_else(|| panic!("TEST_MYSQL_URL must start with mysql://"));
        let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
        let (userinfo, hostport) = authority.rsplit_once('@').unwrap_or(("root", authority));
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        let (host, port) = match hostport.rsplit_once(':') {
            Some((host, port)) => (host, port.parse().expect("TEST_MYSQL_URL port")),
            None => (hostport, 3306),
        };
        Server {
            host: host.to_owned(),
            port,
            user: user.to_owned(),
            password: password.to_owned(),
        }
    }
}

/// Connects to the server, retrying for a few seconds, or fails the test with a message that
/// says what to start.
async fn connect_admin(admin: &MySqlConnectOptions) -> MySqlConnection {
    let started = Instant::now();
    loop {
        match MySqlConnection::connect_with(admin).await {
            Ok(conn) => return conn,
            Err(_) if started.elapsed() < CONNECT_PATIENCE => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(error) => panic!(
                "MySQL/MariaDB for the integration tests is not reachable at {}:{} ({error}). \
                 Start it with `scripts/services.sh mariadb`, or set TEST_MYSQL_URL.",
                admin.get_host(),
                admin.get_port(),
            ),
        }
    }
}
