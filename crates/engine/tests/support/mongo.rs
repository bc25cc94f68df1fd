//! MongoDB integration-test helpers: testkit's database per test ([`MongoDb`]), and an
//! [`Engine`] whose datasource is that database ([`MongoEngine::engine`]).

use engine::connection::{from_env_vars, Resolver};
use engine::{Engine, EngineConfig};

pub use testkit::mongo::MongoDb;

/// An engine over a test's MongoDB database.
pub trait MongoEngine {
    /// An engine whose one datasource, `name`, is this database (`extra`: more of its
    /// `DATASOURCE_*` settings, by suffix).
    fn engine(&self, name: &str, config: EngineConfig, extra: &[(&str, &str)]) -> Engine;
}

impl MongoEngine for MongoDb {
    fn engine(&self, name: &str, config: EngineConfig, extra: &[(&str, &str)]) -> Engine {
        let env = from_env_vars(self.vars("MONGO0", name, extra)).expect("valid datasource");
        Engine::new(config, Resolver::new(env, None))
    }
}
