//! A MariaDB account of the test's own, with a known password, on the local server
//! (`TEST_MYSQL_URL`, default `mysql://root@127.0.0.1:3306`): a login that really fails when
//! the Worker brings another password. Removed by [`MariaDbUser::remove`], or from `Drop` when
//! the test panicked first.

use std::str::FromStr;

use sqlx::mysql::MySqlConnectOptions;
use sqlx::{ConnectOptions, Connection};

pub struct MariaDbUser {
    pub name: String,
    removed: bool,
}

fn admin_options() -> MySqlConnectOptions {
    let url = std::env::var("TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_owned());
    MySqlConnectOptions::from_str(&url)
        .expect("TEST_MYSQL_URL")
        .disable_statement_logging()
}

async fn run(statement: &str) -> Result<(), sqlx::Error> {
    let mut admin = admin_options().connect().await?;
    sqlx::raw_sql(statement).execute(&mut admin).await?;
    admin.close().await
}

impl MariaDbUser {
    /// Creates `name` (any host) identified by `password`.
    pub async fn create(name: &str, password: &str) -> MariaDbUser {
        run(&format!(
            "CREATE USER '{name}'@'%' IDENTIFIED BY '{password}'"
        ))
        .await
        .unwrap_or_else(|e| panic!("MariaDB is not reachable (scripts/services.sh mariadb): {e}"));
        MariaDbUser {
            name: name.to_owned(),
            removed: false,
        }
    }

    pub async fn remove(mut self) {
        self.removed = true;
        let _ = run(&format!("DROP USER IF EXISTS '{}'@'%'", self.name)).await;
    }
}

impl Drop for MariaDbUser {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        let statement = format!("DROP USER IF EXISTS '{}'@'%'", self.name);
        // The test's runtime may be the one panicking: remove the account from a runtime of its own.
        let _ = std::thread::spawn(move || {
            if let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                let _ = runtime.block_on(run(&statement));
            }
        })
        .join();
    }
}
