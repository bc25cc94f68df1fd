//! SQL Server integration-test helpers: testkit's private pysqlbridge per test, and an
//! [`Engine`] whose datasource is that server.

use engine::connection::{from_env_vars, Resolver};
use engine::{Engine, EngineConfig};

pub use testkit::sqlbridge::{client_connections, SqlBridge, PASSWORD, USER};

/// An engine whose one datasource, `name`, is `server`.
pub fn engine(
    server: &SqlBridge,
    name: &str,
    config: EngineConfig,
    extra: &[(&str, &str)],
) -> Engine {
    let env = from_env_vars(server.vars("MSSQL0", name, extra)).expect("valid datasource");
    Engine::new(config, Resolver::new(env, None))
}
