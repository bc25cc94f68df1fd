//! The `connection` collection as the engine's source of stored connections, in the Manager
//! mode: the engine's resolver asks it for a name the environment does not define.

use std::future::Future;
use std::pin::Pin;

use engine::connection::{ConnectionConfig, StoredConnections};
use engine::EngineError;

use crate::connections::{self, Credentials, INTERNAL_NAMES};
use crate::Store;

type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T, EngineError>> + Send + 'a>>;

/// The Manager's registered connections, passwords opened with `credentials`.
#[derive(Clone, Debug)]
pub struct ManagerConnections {
    store: Store,
    credentials: Credentials,
}

impl ManagerConnections {
    pub fn new(store: Store, credentials: Credentials) -> ManagerConnections {
        ManagerConnections { store, credentials }
    }
}

impl StoredConnections for ManagerConnections {
    /// As [`connections::resolve`] reads one name the environment lacks: an internal name is
    /// an error (the Go Worker takes those from the environment only), any other the live
    /// document of that `config_name`.
    fn find<'a>(&'a self, name: &'a str) -> Answer<'a, Option<ConnectionConfig>> {
        Box::pin(async move {
            if INTERNAL_NAMES.contains(&name) {
                return Err(connections::internal_only(name));
            }
            let found = connections::find(&self.store, &self.credentials, &[name]).await?;
            found
                .into_iter()
                .find(|connection| connection.config_name == name)
                .map(|connection| connection.to_config())
                .transpose()
        })
    }

    fn is_removed<'a>(&'a self, name: &'a str) -> Answer<'a, bool> {
        Box::pin(connections::is_removed(&self.store, name))
    }
}
