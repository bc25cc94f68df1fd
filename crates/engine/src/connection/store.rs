//! The `connections` table of the Worker's state database: lookup, and sealed inserts.

use std::collections::BTreeMap;

use crypto::CipherKey;
use sqlx::PgPool;
use uuid::Uuid;
use zeroize::Zeroizing;

use super::options::format_options;
use super::{parse_options, AllowedSchemas, ConnectionConfig, DatasourceKind, Password, SslMode};
use crate::error::{EngineError, Result};

/// A connection to add to the table. `None` port and SSL mode are stored as NULL and read back
/// as the type's default port and [`SslMode::Prefer`]; an empty password is stored as NULL, and
/// `None` schemas (no allow-list) as NULL.
#[derive(Debug, Clone)]
pub struct NewConnection {
    pub name: String,
    pub kind: DatasourceKind,
    pub host: String,
    pub port: Option<u16>,
    pub database: String,
    pub user: String,
    pub password: Password,
    pub ssl_mode: Option<SslMode>,
    pub options: BTreeMap<String, String>,
    pub schemas: Option<AllowedSchemas>,
}

impl From<ConnectionConfig> for NewConnection {
    fn from(config: ConnectionConfig) -> Self {
        NewConnection {
            name: config.name,
            kind: config.kind,
            host: config.host,
            port: Some(config.port),
            database: config.database,
            user: config.user,
            password: config.password,
            ssl_mode: Some(config.ssl_mode),
            options: config.options,
            schemas: config.schemas,
        }
    }
}

impl NewConnection {
    /// The connection as it will resolve once stored.
    fn to_config(&self) -> ConnectionConfig {
        ConnectionConfig {
            name: self.name.clone(),
            kind: self.kind,
            host: self.host.clone(),
            port: self.port.unwrap_or(self.kind.default_port()),
            database: self.database.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
            ssl_mode: self.ssl_mode.unwrap_or_default(),
            options: self.options.clone(),
            schemas: self.schemas.clone(),
        }
    }
}

/// The columns [`ConnectionStore::find`] reads, in `SELECT` order.
type Row = (
    String,              // type
    String,              // host
    Option<i32>,         // port
    String,              // database
    String,              // username
    Option<String>,      // password_sealed
    String,              // key_version
    Option<String>,      // ssl_mode
    Option<String>,      // options
    Option<Vec<String>>, // schemas
);

/// Connections stored in the state database (table `connections`, `migrations/0001`), with
/// passwords sealed under the credentials key of contract §1 and labelled with a key version.
#[derive(Debug, Clone)]
pub struct ConnectionStore {
    pool: PgPool,
    credentials: CipherKey,
    key_version: String,
}

impl ConnectionStore {
    /// `credentials` is `KeySet::credentials()`; `key_version` is `APP_ENC_KEY_VERSION`
    /// (default `1`), which every stored password's label must equal.
    pub fn new(pool: PgPool, credentials: CipherKey, key_version: impl Into<String>) -> Self {
        ConnectionStore {
            pool,
            credentials,
            key_version: key_version.into(),
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The live (not soft-deleted) connection with exactly this name, password unsealed.
    ///
    /// A row with a sealed password fails with [`EngineError::KeyVersionMismatch`] when its
    /// `key_version` differs from this store's, and with [`EngineError::PasswordUnreadable`]
    /// when the password does not open under the credentials key (another master key, or an
    /// altered blob). A row without a password is not checked against the key version. Database
    /// failures are [`EngineError::Store`], redacted.
    pub async fn find(&self, name: &str) -> Result<Option<ConnectionConfig>> {
        let row: Option<Row> = sqlx::query_as(
            "SELECT type, host, port, database, username, password_sealed, key_version, \
                    ssl_mode, options, schemas \
             FROM connections WHERE name = $1 AND deleted_at IS NULL",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(store_error)?;
        row.map(|row| self.decode(name, row)).transpose()
    }

    /// Whether `name` exists only as deleted rows (lifecycle §1: its execution is `REMOVED`).
    pub async fn is_removed(&self, name: &str) -> Result<bool> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM connections WHERE name = $1 AND deleted_at IS NOT NULL) \
                    AND NOT EXISTS (SELECT 1 FROM connections WHERE name = $1 AND deleted_at IS NULL)",
        )
        .bind(name)
        .fetch_one(&self.pool)
        .await
        .map_err(store_error)
    }

    /// Adds a connection, sealing its password, and returns the new row's id. A live connection
    /// with the same name is an [`EngineError::InvalidConnection`].
    pub async fn insert(&self, new: &NewConnection) -> Result<Uuid> {
        let config = new.to_config();
        if config.name.is_empty() {
            return Err(config.invalid("the connection name is empty".to_owned()));
        }
        config.validate()?;
        let options = format_options(&new.options).map_err(|e| config.invalid(e.to_string()))?;
        let sealed = (!new.password.is_empty())
            .then(|| self.credentials.seal(new.password.expose().as_bytes()));
        let inserted = sqlx::query_scalar(
            "INSERT INTO connections \
                 (name, type, host, port, database, username, password_sealed, key_version, \
                  ssl_mode, options, schemas) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             RETURNING id",
        )
        .bind(&new.name)
        .bind(new.kind.as_str())
        .bind(&new.host)
        .bind(new.port.map(i32::from))
        .bind(&new.database)
        .bind(&new.user)
        .bind(sealed)
        .bind(&self.key_version)
        .bind(new.ssl_mode.map(SslMode::as_str))
        .bind((!options.is_empty()).then_some(options))
        .bind(new.schemas.as_ref().map(AllowedSchemas::to_vec))
        .fetch_one(&self.pool)
        .await;
        match inserted {
            Ok(id) => Ok(id),
            Err(sqlx::Error::Database(error)) if error.is_unique_violation() => {
                Err(config.invalid("a connection with this name already exists".to_owned()))
            }
            Err(error) => Err(store_error(error)),
        }
    }

    /// Soft-deletes the live connection with this name; `false` when there was none.
    pub async fn soft_delete(&self, name: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE connections SET deleted_at = now(), updated_at = now() \
             WHERE name = $1 AND deleted_at IS NULL",
        )
        .bind(name)
        .execute(&self.pool)
        .await
        .map_err(store_error)?;
        Ok(done.rows_affected() > 0)
    }

    fn decode(&self, name: &str, row: Row) -> Result<ConnectionConfig> {
        let (kind, host, port, database, user, sealed, key_version, ssl_mode, options, schemas) =
            row;
        let invalid = |reason: String| EngineError::InvalidConnection {
            connection: name.to_owned(),
            reason,
        };
        let kind: DatasourceKind = kind
            .parse()
            .map_err(|e| invalid(format!("type column: {e}")))?;
        let port = match port {
            None => kind.default_port(),
            Some(port) => u16::try_from(port)
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| invalid("port column is not 1-65535".to_owned()))?,
        };
        let ssl_mode = match ssl_mode.as_deref().map(str::trim) {
            None | Some("") => SslMode::default(),
            Some(text) => text
                .parse()
                .map_err(|e| invalid(format!("ssl_mode column: {e}")))?,
        };
        let options = parse_options(options.as_deref().unwrap_or_default())
            .map_err(|e| invalid(format!("options column: {e}")))?;
        let schemas = schemas
            .map(AllowedSchemas::from_names)
            .transpose()
            .map_err(|e| invalid(format!("schemas column: {e}")))?;
        let password = match sealed.as_deref() {
            None | Some("") => Password::default(),
            Some(sealed) => self.unseal(name, sealed, key_version)?,
        };
        let config = ConnectionConfig {
            name: name.to_owned(),
            kind,
            host,
            port,
            database,
            user,
            password,
            ssl_mode,
            options,
            schemas,
        };
        config.validate()?;
        Ok(config)
    }

    fn unseal(&self, name: &str, sealed: &str, key_version: String) -> Result<Password> {
        if key_version != self.key_version {
            return Err(EngineError::KeyVersionMismatch {
                connection: name.to_owned(),
                found: key_version,
                expected: self.key_version.clone(),
            });
        }
        let unreadable = || EngineError::PasswordUnreadable {
            connection: name.to_owned(),
        };
        let bytes = Zeroizing::new(self.credentials.open(sealed).map_err(|_| unreadable())?);
        let text = std::str::from_utf8(&bytes).map_err(|_| unreadable())?;
        Ok(Password::new(text))
    }
}

fn store_error(error: sqlx::Error) -> EngineError {
    EngineError::Store(contract::redact(&error.to_string()))
}
