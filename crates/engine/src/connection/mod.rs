//! Connections: what a job's connection name stands for, and where that comes from.
//!
//! A job names its datasources by connection name (contract §6). [`Resolver::resolve`] looks the
//! name up in the environment-defined datasources first, then in the `connections` table of the
//! Worker's PostgreSQL state database ([`ConnectionStore`]); a name found in neither fails with
//! [`EngineError::UnknownConnection`].
//!
//! # Environment-defined datasources
//!
//! Each datasource is a group of variables `DATASOURCE_<NAME>_<SUFFIX>` ([`from_env_vars`]):
//!
//! | suffix | meaning |
//! |---|---|
//! | `CONFIG_NAME` | the connection name jobs use; default `<NAME>` lower-cased |
//! | `TYPE` | `POSTGRESQL`, `MYSQL`, `MONGODB`, `SQL_SERVER` or `ORACLE` (required) |
//! | `HOST` | host name or address (required) |
//! | `PORT` | 1–65535; default per type (5432, 3306, 27017, 1433, 1521) |
//! | `DATABASE` | database name (required) |
//! | `USER` | user name (required; MongoDB: optional, none means no authentication) |
//! | `PASSWORD` | password; empty or unset means none |
//! | `SSLMODE` | see [`SslMode`]; default `prefer` |
//! | `OPTIONS` | driver options, format below |
//! | `SCHEMAS` | the schemas (MySQL: databases) jobs may read, comma-separated ([`AllowedSchemas`]); unset: any the user's grants allow |
//!
//! `<NAME>` may contain underscores (`DATASOURCE_MY_DB_HOST` belongs to `MY_DB`): a variable is
//! split at the longest known suffix.
//!
//! # Options
//!
//! The `OPTIONS` variable and the `options` column hold `key=value` pairs separated by `&` or
//! whitespace, as in a URL query or a libpq connection string without quoting:
//! `sslrootcert=/etc/ssl/ca.pem&statement_timeout=30s`. Keys are case-sensitive, a key may appear
//! once, values are taken literally (no percent-decoding, no quoting) and cannot contain `&` or
//! whitespace. What a key means depends on the type:
//!
//! - PostgreSQL: `sslrootcert`, `sslcert`, `sslkey` (file paths) and `application_name` set the
//!   driver's options of those names; every other key is a server run-time parameter sent at
//!   connect (`statement_timeout=30s`, `work_mem=8MB`, like libpq's `options=-c key=value`),
//!   except `search_path`, `default_transaction_read_only` and `transaction_read_only`, which
//!   the engine sets itself (`pg_catalog, pg_temp`, read-only) and which are refused.
//! - MySQL: `ssl-ca` (alias `sslrootcert`), `ssl-cert` (`sslcert`), `ssl-key` (`sslkey`) are file
//!   paths and `collation` a `utf8mb4` collation; any other key is an error. The character set
//!   stays `utf8mb4` and the session time zone UTC, on which the value mapping relies.
//! - MongoDB: `authSource`, `authMechanism` (SCRAM only), `replicaSet`, `directConnection`,
//!   `sslrootcert` (alias `tlsCAFile`), `appName`; any other key is an error (the private
//!   `mongo::client` module).
//! - SQL Server: `sslrootcert` (alias `ssl-ca`, the CA of `verify-ca`/`verify-full`) and
//!   `application_name`; any other key is an error (the private `sqlserver::client` module).
//! - Oracle: kept as given; this engine has no Oracle connector.
//!
//! # Secrets
//!
//! [`Password`] zeroes its text on drop and prints as `Password(<redacted>)`, so the derived
//! `Debug` of [`ConnectionConfig`] carries no password. Error texts name connections and
//! variables, never a password, host, user or option value.

mod allowed_schemas;
mod env;
mod kind;
mod options;
mod password;
mod resolver;
mod ssl_mode;
mod store;

use std::collections::BTreeMap;

pub use allowed_schemas::{AllowedSchemas, InvalidSchemas};
pub use env::{from_env_vars, read_env_vars, EnvDatasources, SkippedGroup};
pub use kind::DatasourceKind;
pub use options::parse_options;
pub use password::Password;
pub use resolver::{remember_names, Resolver, StoredConnections};
pub use ssl_mode::SslMode;
pub use store::{ConnectionStore, NewConnection};

use crate::error::{EngineError, Result};

/// Everything needed to open one datasource, resolved from the environment or the store.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// The connection name jobs use.
    pub name: String,
    pub kind: DatasourceKind,
    pub host: String,
    /// The port, with the type's default already applied.
    pub port: u16,
    pub database: String,
    pub user: String,
    /// Empty when the datasource takes no password.
    pub password: Password,
    pub ssl_mode: SslMode,
    /// Driver options; see the module docs for what each key means per type.
    pub options: BTreeMap<String, String>,
    /// The schemas (MySQL: databases) jobs may read; `None`: whatever the user may read.
    pub schemas: Option<AllowedSchemas>,
}

impl ConnectionConfig {
    /// Fails with `datasource type X is not supported` for the types this engine has no
    /// connector for (Oracle). It still resolves, so the job fails with
    /// that clear message rather than "connection not found".
    pub fn ensure_supported(&self) -> Result<()> {
        if self.kind.is_supported() {
            Ok(())
        } else {
            Err(self.invalid(format!("datasource type {} is not supported", self.kind)))
        }
    }

    /// Checks what can be checked without a server: a supported type's options map to driver
    /// options. Called by the environment loader and the store, so a bad option fails early.
    pub fn validate(&self) -> Result<()> {
        if self.host.is_empty() {
            return Err(self.invalid("host is empty".to_owned()));
        }
        match self.kind {
            DatasourceKind::Postgres => self.pg_options().map(drop),
            DatasourceKind::MySql => self.mysql_options().map(drop),
            DatasourceKind::MongoDb => {
                let limits = crate::mongo::PoolLimits {
                    max_connections: 1,
                    idle_timeout: std::time::Duration::from_secs(60),
                    connect_timeout: std::time::Duration::from_secs(5),
                };
                crate::mongo::client_options(self, limits).map(drop)
            }
            DatasourceKind::SqlServer => crate::sqlserver::client_config(self).map(drop),
            DatasourceKind::Oracle => Ok(()),
        }
    }

    /// What an operator should hear at start about this connection's TLS, naming the
    /// connection and never a secret: SQL Server's `require` encrypts without checking the
    /// server's certificate (upstream's `TrustServerCertificate=true`), so an active attacker
    /// between the Worker and the server can pose as it and receive the login's password, as
    /// with `prefer`; `verify-ca` and `verify-full` are the settings for an untrusted network.
    pub fn tls_warning(&self) -> Option<String> {
        let unverified_login = self.kind == DatasourceKind::SqlServer
            && self.ssl_mode == SslMode::Require
            && !self.password.is_empty();
        unverified_login.then(|| {
            format!(
                "datasource {:?} (SQL Server) has sslmode=require: TLS without a certificate \
                 check, so an active attacker between the Worker and the server can pose as it \
                 and receive the password; on an untrusted network set sslmode=verify-ca or \
                 verify-full",
                self.name
            )
        })
    }

    /// An [`EngineError::InvalidConnection`] about this connection.
    pub(crate) fn invalid(&self, reason: String) -> EngineError {
        EngineError::InvalidConnection {
            connection: self.name.clone(),
            reason,
        }
    }
}
