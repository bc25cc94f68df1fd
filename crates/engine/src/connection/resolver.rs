//! Connection names to connections: the environment first, then the stored connections (the
//! state database's `connections` table, or the Manager's `connection` collection).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::{ConnectionConfig, ConnectionStore};
use crate::error::{EngineError, Result};

/// Where connections registered at run time are kept: the PostgreSQL state database's
/// `connections` table ([`ConnectionStore`]), or, in the Manager mode, the Manager's
/// `connection` collection (`mongostate`).
pub trait StoredConnections: Send + Sync {
    /// The live connection called `name`, its password opened; `None` when there is none.
    fn find<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<ConnectionConfig>>>;

    /// Whether `name` exists only as deleted connections.
    fn is_removed<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<bool>>;
}

impl StoredConnections for ConnectionStore {
    fn find<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<ConnectionConfig>>> {
        Box::pin(ConnectionStore::find(self, name))
    }

    fn is_removed<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(ConnectionStore::is_removed(self, name))
    }
}

/// Resolves a job's connection names. Environment-defined datasources win over stored ones with
/// the same name, so an operator can pin or override a connection without touching the table.
#[derive(Clone, Default)]
pub struct Resolver {
    env: BTreeMap<String, ConnectionConfig>,
    store: Option<Arc<dyn StoredConnections>>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("stored", &self.store.is_some())
            .finish()
    }
}

impl Resolver {
    /// `env` is what [`from_env_vars`](super::from_env_vars) read; `store` is `None` when the
    /// Worker has only environment-defined datasources.
    ///
    /// Every host and user name a resolver hands out is first given to
    /// [`contract::redaction`], so drivers' texts that print them bare are redacted too.
    pub fn new(env: BTreeMap<String, ConnectionConfig>, store: Option<ConnectionStore>) -> Self {
        Resolver::with_stored(
            env,
            store.map(|store| Arc::new(store) as Arc<dyn StoredConnections>),
        )
    }

    /// [`new`](Self::new), over any [`StoredConnections`].
    pub fn with_stored(
        env: BTreeMap<String, ConnectionConfig>,
        store: Option<Arc<dyn StoredConnections>>,
    ) -> Self {
        env.values().for_each(remember_names);
        Resolver { env, store }
    }

    /// The connection called `name` (exact, case-sensitive match).
    ///
    /// Fails with [`EngineError::UnknownConnection`] (`connection not found for database:
    /// <name>`) when neither source has it ([`EngineError::RemovedConnection`], same text, when
    /// the store has it only as deleted), and with the store's errors when the table cannot
    /// be read or the stored row is unusable (see [`ConnectionStore::find`]).
    pub async fn resolve(&self, name: &str) -> Result<ConnectionConfig> {
        if let Some(config) = self.env.get(name) {
            return Ok(config.clone());
        }
        if let Some(store) = &self.store {
            if let Some(config) = store.find(name).await? {
                remember_names(&config);
                return Ok(config);
            }
            if store.is_removed(name).await? {
                return Err(EngineError::RemovedConnection(name.to_owned()));
            }
        }
        Err(EngineError::UnknownConnection(name.to_owned()))
    }

    /// The names of the environment-defined datasources (stored ones are looked up on demand).
    pub fn env_names(&self) -> impl Iterator<Item = &str> {
        self.env.keys().map(String::as_str)
    }
}

/// Gives `config`'s host and user to redaction. A name equal to the connection's own name is
/// left out: messages name the connection (that is how an operator finds it), so such a name
/// is out already, and redacting it would only hide which connection failed.
pub fn remember_names(config: &ConnectionConfig) {
    let own_name = |name: &str| name.eq_ignore_ascii_case(&config.name);
    if !own_name(&config.host) {
        contract::redaction::remember_host(&config.host);
    }
    if !own_name(&config.user) {
        contract::redaction::remember_user(&config.user);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::from_env_vars;

    fn env() -> BTreeMap<String, ConnectionConfig> {
        from_env_vars(
            [
                ("DATASOURCE_LEDGER_TYPE", "MYSQL"),
                ("DATASOURCE_LEDGER_HOST", "h"),
                ("DATASOURCE_LEDGER_DATABASE", "d"),
                ("DATASOURCE_LEDGER_USER", "u"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn environment_names_resolve_without_a_store() {
        let resolver = Resolver::new(env(), None);
        let config = resolver.resolve("ledger").await.unwrap();
        assert_eq!(config.port, 3306);
        assert_eq!(resolver.env_names().collect::<Vec<_>>(), ["ledger"]);
    }

    #[tokio::test]
    async fn unknown_names_fail_with_the_upstream_text() {
        let resolver = Resolver::new(env(), None);
        let error = resolver.resolve("Ledger").await.unwrap_err();
        assert!(matches!(error, EngineError::UnknownConnection(_)));
        assert_eq!(
            error.to_string(),
            "connection not found for database: Ledger"
        );
    }
}
