//! [`MariaDb`]: a database of the test's own on the MySQL/MariaDB test server
//! (`TEST_MYSQL_URL`, default `mysql://root@127.0.0.1:3306`, what `scripts/services.sh mariadb`
//! provides).

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection, MySqlConnection, MySqlPool};
use uuid::Uuid;

use super::SourceDb;

fn admin_options() -> MySqlConnectOptions {
    let url = std::env::var("TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_owned());
    MySqlConnectOptions::from_str(&url)
        .unwrap_or_else(|e| panic!("TEST_MYSQL_URL is not a MySQL URL: {e}"))
        .disable_statement_logging()
}

/// A database named `fetcher_test_<uuid>`; [`MariaDb::drop`] removes it, or `Drop` (on a thread
/// of its own) when the test panicked first.
pub struct MariaDb {
    pub name: String,
    /// A pool on the database, for fixtures.
    pub pool: MySqlPool,
    admin: MySqlConnectOptions,
    dropped: bool,
}

impl MariaDb {
    pub async fn create() -> MariaDb {
        let admin = admin_options();
        let name = format!("fetcher_test_{}", Uuid::new_v4().simple());
        let mut conn = MySqlConnection::connect_with(&admin)
            .await
            .unwrap_or_else(|e| {
                panic!("MariaDB is not reachable (start it with scripts/services.sh mariadb): {e}")
            });
        sqlx::raw_sql(&format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("cannot create test database {name}: {e}"));
        let _ = conn.close().await;
        let pool = MySqlPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(admin.clone().database(&name))
            .await
            .unwrap_or_else(|e| panic!("cannot connect to test database {name}: {e}"));
        MariaDb {
            name,
            pool,
            admin,
            dropped: false,
        }
    }

    /// Runs fixture SQL (several statements allowed).
    pub async fn exec(&self, sql: &str) {
        sqlx::raw_sql(sql)
            .execute(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("fixture SQL failed: {e}\n{sql}"));
    }

    /// The server's address, for a proxy in front of it.
    pub async fn addr(&self) -> SocketAddr {
        tokio::net::lookup_host((self.admin.get_host(), self.admin.get_port()))
            .await
            .expect("the MariaDB test server's address")
            .next()
            .expect("an address")
    }

    pub async fn drop(mut self) {
        self.pool.close().await;
        let mut conn = MySqlConnection::connect_with(&self.admin)
            .await
            .expect("MariaDB");
        sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS `{}`", self.name))
            .execute(&mut conn)
            .await
            .expect("drop the test database");
        let _ = conn.close().await;
        self.dropped = true;
    }
}

impl SourceDb for MariaDb {
    fn datasource_at(&self, name: &str, addr: Option<SocketAddr>) -> Vec<(String, String)> {
        let (host, port) = match addr {
            Some(addr) => (addr.ip().to_string(), addr.port()),
            None => (self.admin.get_host().to_owned(), self.admin.get_port()),
        };
        let mut settings = vec![
            ("TYPE", "MYSQL".to_owned()),
            ("HOST", host),
            ("PORT", port.to_string()),
            ("DATABASE", self.name.clone()),
            ("USER", self.admin.get_username().to_owned()),
            ("SSLMODE", "disable".to_owned()),
        ];
        if let Some(password) = mysql_password() {
            settings.push(("PASSWORD", password));
        }
        super::group(name, &settings)
    }
}

/// The password of `TEST_MYSQL_URL`, if it has one (test URLs are plain: no percent-decoding).
fn mysql_password() -> Option<String> {
    let url = std::env::var("TEST_MYSQL_URL").ok()?;
    let rest = &url[url.find("://")? + 3..];
    let userinfo = &rest[..rest.rfind('@')?];
    Some(userinfo.split_once(':')?.1.to_owned()).filter(|p| !p.is_empty())
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        let admin = self.admin.clone();
        let statement = format!("DROP DATABASE IF EXISTS `{}`", self.name);
        testkit::cleanup::run_detached(move || async move {
            if let Ok(mut conn) = MySqlConnection::connect_with(&admin).await {
                let _ = sqlx::raw_sql(&statement).execute(&mut conn).await;
                let _ = conn.close().await;
            }
        });
    }
}
