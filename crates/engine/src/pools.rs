//! Connection pools, one per datasource, shared by every job and rebuilt when its connection
//! settings change.

use std::collections::HashMap;
use std::sync::Mutex;

use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::config::EngineConfig;
use crate::connection::{ConnectionConfig, DatasourceKind};
use crate::error::Result;

/// A datasource's pool.
#[derive(Debug, Clone)]
pub(crate) enum Pool {
    Postgres(PgPool),
    MySql(MySqlPool),
}

impl Pool {
    fn close_in_background(self) {
        tokio::spawn(async move {
            match self {
                Pool::Postgres(pool) => pool.close().await,
                Pool::MySql(pool) => pool.close().await,
            }
        });
    }
}

/// The pools by connection name. Pools are lazy (nothing connects until a job needs a
/// connection), bounded by `pool_max_connections`, and close connections idle longer than
/// `pool_idle_timeout`, so an unused datasource holds no connection.
#[derive(Debug)]
pub(crate) struct Pools {
    entries: Mutex<HashMap<String, (ConnectionConfig, Pool)>>,
    max_connections: u32,
    idle_timeout: std::time::Duration,
    connect_timeout: std::time::Duration,
    statement_timeout_ms: u128,
}

impl Pools {
    pub(crate) fn new(config: &EngineConfig) -> Pools {
        Pools {
            entries: Mutex::new(HashMap::new()),
            max_connections: config.pool_max_connections.max(1),
            idle_timeout: config.pool_idle_timeout,
            connect_timeout: config.connect_timeout,
            statement_timeout_ms: config.timeout.as_millis(),
        }
    }

    /// The pool of `config`'s datasource, created on first use.
    pub(crate) fn get(&self, config: &ConnectionConfig) -> Result<Pool> {
        // A poisoned lock only means another job panicked mid-insert; the map is still whole.
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((known, pool)) = entries.get(&config.name) {
            if same_target(known, config) {
                return Ok(pool.clone());
            }
        }
        let pool = self.create(config)?;
        if let Some((_, old)) = entries.insert(config.name.clone(), (config.clone(), pool.clone()))
        {
            old.close_in_background();
        }
        Ok(pool)
    }

    fn create(&self, config: &ConnectionConfig) -> Result<Pool> {
        config.ensure_supported()?;
        Ok(match config.kind {
            DatasourceKind::MySql => {
                let options = config.mysql_options()?;
                Pool::MySql(
                    MySqlPoolOptions::new()
                        .max_connections(self.max_connections)
                        .min_connections(0)
                        .idle_timeout(self.idle_timeout)
                        .acquire_timeout(self.connect_timeout)
                        .connect_lazy_with(options),
                )
            }
            _ => {
                let mut options = config.pg_options()?;
                let statement_timeout = self.statement_timeout_ms.to_string();
                let mut settings: Vec<(&str, &str)> = crate::postgres::SESSION_SETTINGS.to_vec();
                settings.push(("statement_timeout", &statement_timeout));
                options = options.options(settings);
                Pool::Postgres(
                    PgPoolOptions::new()
                        .max_connections(self.max_connections)
                        .min_connections(0)
                        .idle_timeout(self.idle_timeout)
                        .acquire_timeout(self.connect_timeout)
                        .connect_lazy_with(options),
                )
            }
        })
    }
}

fn same_target(a: &ConnectionConfig, b: &ConnectionConfig) -> bool {
    a.kind == b.kind
        && a.host == b.host
        && a.port == b.port
        && a.database == b.database
        && a.user == b.user
        && a.password.expose() == b.password.expose()
        && a.ssl_mode == b.ssl_mode
        && a.options == b.options
}
