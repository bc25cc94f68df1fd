//! MySQL/MariaDB integration-test helpers: testkit's database per test ([`MariaDb`]), and an
//! [`Engine`] whose one datasource is that database ([`MariaDbEngine`]).

use engine::connection::{from_env_vars, Resolver};
use engine::{Engine, EngineConfig};

pub use testkit::mariadb::MariaDb;

/// An engine over a test's MariaDB database, defined the way the Worker's environment defines
/// one.
pub trait MariaDbEngine {
    /// An engine whose only datasource, `connection`, is this database.
    fn engine(&self, connection: &str) -> Engine {
        self.engine_with(connection, &[])
    }

    /// [`MariaDbEngine::engine`], with `extra` `(suffix, value)` variables (`SCHEMAS`, ...)
    /// added to the datasource's group.
    fn engine_with(&self, connection: &str, extra: &[(&str, &str)]) -> Engine;
}

impl MariaDbEngine for MariaDb {
    fn engine_with(&self, connection: &str, extra: &[(&str, &str)]) -> Engine {
        let env = from_env_vars(self.vars("MY", connection, extra))
            .expect("the test datasource is well-formed");
        Engine::new(EngineConfig::default(), Resolver::new(env, None))
    }
}
