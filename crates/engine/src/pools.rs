//! Connection pools, one per datasource, shared by every job and rebuilt when its connection
//! settings change.

use std::collections::HashMap;
use std::sync::Mutex;

use sqlpool::{tested_after_idle, Cap, Kept};
use sqlx::mysql::MySql;
use sqlx::pool::PoolOptions;
use sqlx::postgres::Postgres;
use sqlx::{Connection, Database};

use crate::cleartext::{self, Verdict};
use crate::config::EngineConfig;
use crate::connection::{ConnectionConfig, DatasourceKind};
use crate::error::Result;

/// A datasource's pool. A SQL pool's every user (a read, the cancel of an abandoned one) lends
/// its connections through [`Kept`], so all of them may be kept out of the pool between reads
/// and none pays sqlx's round trip when given back after a read that succeeded.
#[derive(Debug, Clone)]
pub(crate) enum Pool {
    Postgres(Kept<Postgres>),
    MySql(Kept<MySql>),
    /// The driver's client: its own pool per server, connected lazily.
    MongoDb(mongodb::Client),
    /// Where to connect: each datasource read opens its own connection.
    SqlServer(crate::sqlserver::Target),
}

impl Pool {
    fn close_in_background(self) {
        tokio::spawn(async move {
            match self {
                Pool::Postgres(kept) => kept.close().await,
                Pool::MySql(kept) => kept.close().await,
                // Its connections close once the jobs still holding a clone are done.
                Pool::MongoDb(client) => drop(client),
                Pool::SqlServer(target) => drop(target),
            }
        });
    }
}

/// One datasource's pool and the settings it was built from.
#[derive(Debug)]
struct Entry {
    /// The connection as configured (the pool may use a stricter TLS mode, see below).
    configured: ConnectionConfig,
    pool: Pool,
    /// The [`cleartext`] check that decided the pool's TLS mode.
    verdict: Verdict,
}

/// The pools by connection name. Pools are lazy (nothing connects until a job needs a
/// connection), bounded by `pool_max_connections`, and close connections idle longer than
/// `pool_idle_timeout`, so an unused datasource holds no connection. Before a pool is built
/// (and before each use of one whose server had no TLS) the [`cleartext`] check runs.
#[derive(Debug)]
pub(crate) struct Pools {
    entries: Mutex<HashMap<String, Entry>>,
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
    pub(crate) async fn get(&self, config: &ConnectionConfig) -> Result<Pool> {
        config.ensure_supported()?;
        if let Some((pool, verdict)) = self.known(config) {
            if verdict.recheck() {
                cleartext::check(config, self.connect_timeout).await?;
            }
            return Ok(pool);
        }
        let verdict = cleartext::check(config, self.connect_timeout).await?;
        let mut entries = self.lock();
        // Another job may have built the pool while this one probed: share it.
        if let Some(entry) = entries.get(&config.name) {
            if same_target(&entry.configured, config) {
                return Ok(entry.pool.clone());
            }
        }
        let mut effective = config.clone();
        effective.ssl_mode = verdict.ssl_mode(config.ssl_mode);
        let pool = self.create(&effective)?;
        let entry = Entry {
            configured: config.clone(),
            pool: pool.clone(),
            verdict,
        };
        if let Some(old) = entries.insert(config.name.clone(), entry) {
            old.pool.close_in_background();
        }
        Ok(pool)
    }

    /// The pool already built for exactly these settings, with its check's verdict.
    fn known(&self, config: &ConnectionConfig) -> Option<(Pool, Verdict)> {
        let entries = self.lock();
        let entry = entries.get(&config.name)?;
        same_target(&entry.configured, config).then(|| (entry.pool.clone(), entry.verdict))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        // A poisoned lock only means another job panicked mid-insert; the map is still whole.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn create(&self, config: &ConnectionConfig) -> Result<Pool> {
        Ok(match config.kind {
            DatasourceKind::MongoDb => {
                let limits = crate::mongo::PoolLimits {
                    max_connections: self.max_connections,
                    idle_timeout: self.idle_timeout,
                    connect_timeout: self.connect_timeout,
                };
                let options = crate::mongo::client_options(config, limits)?;
                Pool::MongoDb(
                    mongodb::Client::with_options(options)
                        .map_err(|e| config.invalid(contract::redact(&e.to_string())))?,
                )
            }
            DatasourceKind::SqlServer => {
                Pool::SqlServer(crate::sqlserver::Target::new(config, self.connect_timeout)?)
            }
            DatasourceKind::MySql => {
                let options = config.mysql_options()?;
                Pool::MySql(self.kept(options))
            }
            _ => {
                let mut options = config.pg_options()?;
                let statement_timeout = self.statement_timeout_ms.to_string();
                let mut settings: Vec<(&str, &str)> = crate::postgres::SESSION_SETTINGS.to_vec();
                settings.push(("statement_timeout", &statement_timeout));
                options = options.options(settings);
                Pool::Postgres(self.kept(options))
            }
        })
    }

    /// A SQL source's lazy pool on `options` (the engine's bounds, the test when taken after a
    /// second idle), every connection of which may be kept between reads.
    fn kept<DB: Database>(&self, options: <DB::Connection as Connection>::Options) -> Kept<DB> {
        let pool = tested_after_idle(
            PoolOptions::<DB>::new()
                .max_connections(self.max_connections)
                .min_connections(0)
                .idle_timeout(self.idle_timeout)
                .acquire_timeout(self.connect_timeout),
        )
        .connect_lazy_with(options);
        Kept::new(pool, Cap::All)
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
