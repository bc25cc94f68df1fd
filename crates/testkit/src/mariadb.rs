//! [`MariaDb`]: a database of the test's own on the MySQL/MariaDB test server (`TEST_MYSQL_URL`,
//! default `mysql://root@127.0.0.1:3306`, what `scripts/services.sh mariadb` provides), and its
//! `DATASOURCE_<GROUP>_*` variables. A server that cannot be reached fails the test saying what
//! to start.

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::{Duration, Instant};

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection, MySqlConnection, MySqlPool};
use uuid::Uuid;

/// The server used when `TEST_MYSQL_URL` is unset.
const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306";

/// How long to keep trying a server that refuses connections (it may be starting).
const CONNECT_PATIENCE: Duration = Duration::from_secs(5);

fn mysql_url() -> String {
    std::env::var("TEST_MYSQL_URL").unwrap_or_else(|_| DEFAULT_MYSQL_URL.to_owned())
}

/// A database named `fetcher_test_<uuid>`; [`MariaDb::drop`] removes it, or `Drop` (on a thread
/// of its own) when the test panicked first.
pub struct MariaDb {
    pub name: String,
    /// A pool on the database (at most 2 connections), for fixtures.
    pub pool: MySqlPool,
    admin: MySqlConnectOptions,
    server: Server,
    dropped: bool,
}

/// Where the server is and who logs in, as the `DATASOURCE_*` variables want them.
struct Server {
    host: String,
    port: u16,
    user: String,
    password: String,
}

impl MariaDb {
    pub async fn create() -> MariaDb {
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
        MariaDb {
            name,
            pool,
            admin,
            server,
            dropped: false,
        }
    }

    /// Runs fixture SQL (several statements allowed) in one session, so `SET` statements apply
    /// to the statements after them; the session is not reused.
    pub async fn exec(&self, sql: &str) {
        let mut conn = self.pool.acquire().await.expect("a fixture connection");
        sqlx::raw_sql(sql)
            .execute(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("fixture SQL failed: {e}\n{sql}"));
        // The session may have changed settings (sql_mode, time_zone).
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

    /// The server's host and port, as `TEST_MYSQL_URL` names them.
    pub fn host_port(&self) -> (&str, u16) {
        (&self.server.host, self.server.port)
    }

    /// The server's address, for a proxy in front of it.
    pub async fn addr(&self) -> SocketAddr {
        tokio::net::lookup_host((self.server.host.as_str(), self.server.port))
            .await
            .expect("the MariaDB test server's address")
            .next()
            .expect("an address")
    }

    /// The `DATASOURCE_<group>_*` variables of a datasource named `name` on this database (the
    /// server's login; no `PASSWORD` when it has none), then `extra` (`(suffix, value)`).
    pub fn vars(&self, group: &str, name: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let prefix = format!("DATASOURCE_{group}_");
        let s = &self.server;
        let mut settings = vec![
            ("CONFIG_NAME", name.to_owned()),
            ("TYPE", "MYSQL".to_owned()),
            ("HOST", s.host.clone()),
            ("PORT", s.port.to_string()),
            ("DATABASE", self.name.clone()),
            ("USER", s.user.clone()),
            ("SSLMODE", "disable".to_owned()),
        ];
        if !s.password.is_empty() {
            settings.push(("PASSWORD", s.password.clone()));
        }
        settings
            .into_iter()
            .chain(extra.iter().map(|(k, v)| (*k, (*v).to_owned())))
            .map(|(suffix, value)| (format!("{prefix}{suffix}"), value))
            .collect()
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

impl Drop for MariaDb {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        let admin = self.admin.clone();
        let statement = drop_statement(&self.name);
        crate::cleanup::run_detached(move || async move {
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
