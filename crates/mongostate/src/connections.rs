//! The Manager's `connection` collection (UPSTREAM-MANAGER §3): the connections a job names,
//! found as the Go Worker finds them, their passwords opened, and read as the engine's
//! [`ConnectionConfig`].
//!
//! Errors are the engine's, so a job fails or retries on them as it does on the PostgreSQL
//! store's: a collection that cannot be read is [`EngineError::Store`] (retried), a document
//! that cannot be a connection [`EngineError::InvalidConnection`], a password sealed under
//! another key version [`EngineError::KeyVersionMismatch`], one that does not open
//! [`EngineError::PasswordUnreadable`]. Each names the connection; none carries a password, a
//! sealed text or a document.

use std::collections::BTreeMap;

use crypto::CipherKey;
use engine::connection::{ConnectionConfig, DatasourceKind, Password, SslMode};
use engine::EngineError;
use mongodb::bson::{doc, Bson, Document};
use zeroize::Zeroizing;

use crate::Store;

/// Upstream's internal datasources (`fetcher:pkg/resolver/registry.go:38-45`): the Go Worker
/// takes them only from `DATASOURCE_<NAME>_*` variables, never from the collection.
pub const INTERNAL_NAMES: [&str; 3] = ["midaz_onboarding", "midaz_transaction", "plugin_crm"];

/// An internal name the environment does not define: the collection is never asked for it.
pub(crate) fn internal_only(name: &str) -> EngineError {
    EngineError::InvalidConnection {
        connection: name.to_owned(),
        reason: "internal datasource not configured via environment variables \
                 (DATASOURCE_<NAME>_CONFIG_NAME)"
            .to_owned(),
    }
}

/// The key that opens stored passwords, and the version they must carry.
#[derive(Clone, Debug)]
pub struct Credentials {
    key: CipherKey,
    version: String,
}

impl Credentials {
    /// `key` is `KeySet::credentials()` (HKDF `fetcher-credentials-v1` of `APP_ENC_KEY`);
    /// `version` is this Worker's `APP_ENC_KEY_VERSION` (default `"1"`), which the Go Worker
    /// requires every sealed password's `encryption_key_version` to equal.
    pub fn new(key: CipherKey, version: impl Into<String>) -> Credentials {
        Credentials {
            key,
            version: version.into(),
        }
    }
}

/// A live connection as the Manager registered it (§3.1), its password opened.
#[derive(Clone, Debug)]
pub struct ManagerConnection {
    /// `config_name`: the name jobs use (exact, case-sensitive).
    pub config_name: String,
    /// `type`, read as Go reads it (trimmed, any case).
    pub kind: DatasourceKind,
    pub host: String,
    /// `port`; `None` when absent or 0.
    pub port: Option<u16>,
    /// `database_name`.
    pub database: String,
    /// `username`.
    pub user: String,
    /// Opened from `password_encrypted`; empty when there is none.
    pub password: Password,
    /// `encryption_key_version`: empty for a connection stored in plain text (no password).
    pub key_version: String,
    /// `ssl.mode`, as stored; `None` when there is no `ssl` or its mode is empty.
    pub ssl_mode: Option<String>,
    /// `metadata`'s string values (`authSource`, `directConnection`, `serviceName`, ...).
    pub metadata: BTreeMap<String, String>,
}

/// The live connections named `names`, in the collection's order; a name with none is left out
/// (the caller says which is missing). The query is the Go Worker's,
/// `{config_name: {$in: names}, deleted_at: {$eq: null}}`, over the trimmed, non-empty names
/// (`fetcher:pkg/mongodb/connection/connection.mongodb.go:457-536`); as there, one document
/// that cannot be read fails the whole lookup.
pub async fn find(
    store: &Store,
    credentials: &Credentials,
    names: &[&str],
) -> Result<Vec<ManagerConnection>, EngineError> {
    let names: Vec<&str> = names
        .iter()
        .map(|name| name.trim())
        .filter(|name| !name.is_empty())
        .collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let filter = doc! {"config_name": {"$in": &names}, "deleted_at": {"$eq": Bson::Null}};
    let documents = read(store, filter).await?;
    documents
        .iter()
        .map(|document| decode(document, credentials))
        .collect()
}

/// Whether `name` exists in the collection only as deleted documents (a job that names it
/// ends `REMOVED`, as with the PostgreSQL store). Every document of the name is read and
/// sorted here: a filter on `deleted_at` beside `config_name` is the Manager's partial index's
/// shape, and secantusdb answers `{config_name, deleted_at: {$ne: null}}` from that index, which
/// holds no deleted document.
pub async fn is_removed(store: &Store, name: &str) -> Result<bool, EngineError> {
    let documents = read(store, doc! {"config_name": name}).await?;
    let deleted =
        |document: &Document| !matches!(document.get("deleted_at"), None | Some(Bson::Null));
    Ok(documents.iter().any(deleted) && documents.iter().all(deleted))
}

/// The connections named `names`, in that order, with upstream's precedence (§3.3) and this
/// Worker's one addition:
///
/// - an internal name ([`INTERNAL_NAMES`]) comes only from `env`, the `DATASOURCE_<NAME>_*`
///   datasources; missing there, it is an error even when the collection has it, as the Go
///   Worker's single-tenant resolver says (`fetcher:pkg/resolver/single_tenant.go:41-70`);
/// - any other name comes from `env` when a datasource there has it (the Go Worker reads only
///   internal names from the environment, so this is this Worker's addition, the precedence
///   its PostgreSQL mode has: an operator can pin or override a connection), else from the
///   collection, all such names in one query.
///
/// A name found nowhere is [`EngineError::UnknownConnection`], or
/// [`EngineError::RemovedConnection`] when the collection has it only deleted.
pub async fn resolve(
    store: &Store,
    credentials: &Credentials,
    env: &BTreeMap<String, ConnectionConfig>,
    names: &[&str],
) -> Result<Vec<ConnectionConfig>, EngineError> {
    let mut external: Vec<&str> = Vec::new();
    for name in names {
        if INTERNAL_NAMES.contains(name) && !env.contains_key(*name) {
            return Err(internal_only(name));
        }
        if !env.contains_key(*name) && !external.contains(name) {
            external.push(name);
        }
    }
    let mut stored = BTreeMap::new();
    for connection in find(store, credentials, &external).await? {
        let config = connection.to_config()?;
        engine::connection::remember_names(&config);
        stored.insert(config.name.clone(), config);
    }
    let mut resolved = Vec::with_capacity(names.len());
    for name in names {
        match env.get(*name).or_else(|| stored.get(*name)) {
            Some(config) => resolved.push(config.clone()),
            None if is_removed(store, name).await? => {
                return Err(EngineError::RemovedConnection((*name).to_owned()))
            }
            None => return Err(EngineError::UnknownConnection((*name).to_owned())),
        }
    }
    Ok(resolved)
}

impl ManagerConnection {
    /// The connection as the engine opens it, with the Go Worker's datasource factory's
    /// readings (`fetcher:pkg/datasource/datasource_factory.go`):
    ///
    /// - TLS: no `ssl.mode` is no TLS for every type. MongoDB: `false`/`disable` off,
    ///   `skip-verify`/`insecure` TLS without checking the certificate ([`SslMode::Require`]),
    ///   any other mode TLS checked ([`SslMode::VerifyFull`]). The others: `false` off, `true`
    ///   and `strict` checked, `skip-verify` unchecked, and libpq's and MySQL's own spellings
    ///   as the engine reads them.
    /// - MongoDB options: `authSource` from `metadata.authSource`, else `admin` for a sealed
    ///   connection and the database for a plain-text one; `directConnection=true` when
    ///   `metadata.directConnection` is `"true"`.
    /// - A missing or 0 port is the type's default. `schema` and `ssl.ca`/`cert`/`key` are not
    ///   read: the Go Worker's factory does not read them either (the Manager's schema
    ///   browser does).
    pub fn to_config(&self) -> Result<ConnectionConfig, EngineError> {
        let invalid = |reason: String| EngineError::InvalidConnection {
            connection: self.config_name.clone(),
            reason,
        };
        let ssl_mode = ssl_mode(self.kind, self.ssl_mode.as_deref())
            .ok_or_else(|| invalid("ssl.mode is not a TLS mode of its type".to_owned()))?;
        let mut options = BTreeMap::new();
        if self.kind == DatasourceKind::MongoDb {
            let default_source = if self.key_version.is_empty() && !self.database.is_empty() {
                self.database.clone()
            } else {
                "admin".to_owned()
            };
            let source = self
                .metadata
                .get("authSource")
                .filter(|source| !source.is_empty())
                .cloned()
                .unwrap_or(default_source);
            options.insert("authSource".to_owned(), source);
            if self.metadata.get("directConnection").map(String::as_str) == Some("true") {
                options.insert("directConnection".to_owned(), "true".to_owned());
            }
        }
        let config = ConnectionConfig {
            name: self.config_name.clone(),
            kind: self.kind,
            host: self.host.clone(),
            port: self.port.unwrap_or(self.kind.default_port()),
            database: self.database.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
            ssl_mode,
            options,
            schemas: None,
        };
        config.validate()?;
        Ok(config)
    }
}

/// Every document `filter` matches (no projection, no sort, no limit, as upstream).
async fn read(store: &Store, filter: Document) -> Result<Vec<Document>, EngineError> {
    let unavailable = |error: mongodb::error::Error| {
        EngineError::Store(contract::redact(&format!(
            "the Manager's connection collection: {error}"
        )))
    };
    let mut cursor = store
        .connections()
        .find(filter)
        .await
        .map_err(unavailable)?;
    let mut documents = Vec::new();
    while cursor.advance().await.map_err(unavailable)? {
        documents.push(cursor.deserialize_current().map_err(unavailable)?);
    }
    Ok(documents)
}

/// One document as Go's `ConnectionMongoDBModel` and `ToEntity` read it, password opened.
fn decode(
    document: &Document,
    credentials: &Credentials,
) -> Result<ManagerConnection, EngineError> {
    let name = match document.get("config_name") {
        Some(Bson::String(name)) => name.clone(),
        _ => {
            return Err(EngineError::InvalidConnection {
                connection: "(a document without a config_name)".to_owned(),
                reason: "config_name is not a string".to_owned(),
            })
        }
    };
    let invalid = |reason: String| EngineError::InvalidConnection {
        connection: name.clone(),
        reason,
    };
    let text = |field: &str| match document.get(field) {
        None | Some(Bson::Null) => Ok(String::new()),
        Some(Bson::String(text)) => Ok(text.clone()),
        Some(_) => Err(invalid(format!("{field} is not a string"))),
    };
    let kind: DatasourceKind = text("type")?
        .parse()
        .map_err(|e| invalid(format!("type: {e}")))?;
    let port = match document.get("port") {
        None | Some(Bson::Null) => None,
        Some(Bson::Int32(port)) => Some(i64::from(*port)),
        Some(Bson::Int64(port)) => Some(*port),
        Some(_) => return Err(invalid("port is not an integer".to_owned())),
    };
    let port = match port {
        None | Some(0) => None,
        Some(port) => {
            Some(u16::try_from(port).map_err(|_| invalid("port is not 1-65535".to_owned()))?)
        }
    };
    let ssl_mode = match document.get("ssl") {
        None | Some(Bson::Null) => None,
        Some(Bson::Document(ssl)) => match ssl.get("mode") {
            None | Some(Bson::Null) => None,
            Some(Bson::String(mode)) => Some(mode.clone()).filter(|mode| !mode.is_empty()),
            Some(_) => return Err(invalid("ssl.mode is not a string".to_owned())),
        },
        Some(_) => return Err(invalid("ssl is not a document".to_owned())),
    };
    let metadata = match document.get("metadata") {
        None | Some(Bson::Null) => BTreeMap::new(),
        Some(Bson::Document(metadata)) => metadata
            .iter()
            .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
            .collect(),
        Some(_) => return Err(invalid("metadata is not a document".to_owned())),
    };
    let key_version = text("encryption_key_version")?;
    let sealed = text("password_encrypted")?;
    let password = open(&name, &sealed, &key_version, credentials)?;
    Ok(ManagerConnection {
        kind,
        host: text("host")?,
        port,
        database: text("database_name")?,
        user: text("username")?,
        password,
        key_version,
        ssl_mode,
        metadata,
        config_name: name,
    })
}

/// The password of a connection (§3.2): `""` as the key version means plain text, which a
/// stored connection has only without a password; otherwise the version must be this
/// Worker's before the text is opened with the credentials key.
fn open(
    name: &str,
    sealed: &str,
    key_version: &str,
    credentials: &Credentials,
) -> Result<Password, EngineError> {
    if key_version.is_empty() {
        return Ok(Password::default());
    }
    if key_version != credentials.version {
        return Err(EngineError::KeyVersionMismatch {
            connection: name.to_owned(),
            found: key_version.to_owned(),
            expected: credentials.version.clone(),
        });
    }
    if sealed.is_empty() {
        return Ok(Password::default());
    }
    let unreadable = || EngineError::PasswordUnreadable {
        connection: name.to_owned(),
    };
    let bytes = Zeroizing::new(credentials.key.open(sealed).map_err(|_| unreadable())?);
    let text = std::str::from_utf8(&bytes).map_err(|_| unreadable())?;
    Ok(Password::new(text))
}

/// `mode` for a connection of type `kind`, as the Go Worker's factory reads it; `None` when it
/// is no mode of that type.
fn ssl_mode(kind: DatasourceKind, mode: Option<&str>) -> Option<SslMode> {
    let Some(mode) = mode else {
        return Some(SslMode::Disable);
    };
    let lower = mode.trim().to_ascii_lowercase();
    if kind == DatasourceKind::MongoDb {
        return Some(match lower.as_str() {
            "false" | "disable" => SslMode::Disable,
            "skip-verify" | "insecure" => SslMode::Require,
            _ => SslMode::VerifyFull,
        });
    }
    match lower.as_str() {
        "false" => Some(SslMode::Disable),
        "true" | "strict" => Some(SslMode::VerifyFull),
        "skip-verify" | "insecure" => Some(SslMode::Require),
        _ => lower.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_modes_read_as_the_go_factory_reads_them() {
        use DatasourceKind::{MongoDb, MySql, Postgres, SqlServer};
        let cases = [
            (Postgres, None, Some(SslMode::Disable)),
            (Postgres, Some("verify-full"), Some(SslMode::VerifyFull)),
            (Postgres, Some("require"), Some(SslMode::Require)),
            (MySql, Some("true"), Some(SslMode::VerifyFull)),
            (MySql, Some("false"), Some(SslMode::Disable)),
            (MySql, Some("skip-verify"), Some(SslMode::Require)),
            (SqlServer, Some("strict"), Some(SslMode::VerifyFull)),
            (MongoDb, None, Some(SslMode::Disable)),
            (MongoDb, Some("require"), Some(SslMode::VerifyFull)),
            (MongoDb, Some("insecure"), Some(SslMode::Require)),
            (Postgres, Some("sometimes"), None),
        ];
        for (kind, mode, expected) in cases {
            assert_eq!(ssl_mode(kind, mode), expected, "{kind} {mode:?}");
        }
    }
}
