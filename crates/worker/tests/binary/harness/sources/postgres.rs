//! [`PgSource`]: a PostgreSQL database of the test's own (a testkit [`TestDb`]) as a datasource.

use std::net::SocketAddr;

use testkit::pg::TestDb;

use super::SourceDb;

pub struct PgSource {
    pub db: TestDb,
}

impl PgSource {
    /// A fresh database holding `fixture` (several statements allowed).
    pub async fn create(fixture: &str) -> PgSource {
        let db = TestDb::create_with(2).await;
        sqlx::raw_sql(fixture)
            .execute(&db.pool)
            .await
            .unwrap_or_else(|e| panic!("fixture SQL failed: {e}\n{fixture}"));
        PgSource { db }
    }

    /// Statements running on this database whose text contains `needle`, other than the
    /// test's own.
    pub async fn running(&self, needle: &str) -> i64 {
        sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = $1 AND state = 'active' AND strpos(query, $2) > 0
               AND pid <> pg_backend_pid()",
        )
        .bind(&self.db.name)
        .bind(needle)
        .fetch_one(&self.db.pool)
        .await
        .expect("pg_stat_activity")
    }

    pub async fn drop(self) {
        self.db.drop().await;
    }
}

impl SourceDb for PgSource {
    fn datasource_at(&self, name: &str, addr: Option<SocketAddr>) -> Vec<(String, String)> {
        let options = &self.db.options;
        let (host, port) = match addr {
            Some(addr) => (addr.ip().to_string(), addr.port()),
            None => (options.get_host().to_owned(), options.get_port()),
        };
        let mut settings = vec![
            ("TYPE", "POSTGRESQL".to_owned()),
            ("HOST", host),
            ("PORT", port.to_string()),
            ("DATABASE", self.db.name.clone()),
            ("USER", options.get_username().to_owned()),
            ("SSLMODE", "disable".to_owned()),
        ];
        if let Some(password) = super::super::world::url_password(&testkit::pg::admin_url()) {
            settings.push(("PASSWORD", password));
        }
        super::group(name, &settings)
    }
}
