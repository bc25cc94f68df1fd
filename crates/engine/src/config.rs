//! The engine's own settings (the Worker maps its environment onto these).

use std::time::Duration;

use crate::plan::Limits;

/// How much a job may ask for and how long it may take.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// `ENGINE_MAX_RESULT_BYTES` (≤0 or unset → 268435456), measured on the result JSON.
    pub max_result_bytes: u64,
    /// The whole extraction, all datasources (upstream: 5 minutes).
    pub timeout: Duration,
    /// Datasources queried at the same time (upstream: 4).
    pub max_parallel_datasources: usize,
    pub limits: Limits,
    /// Connections per datasource pool; pools are shared by all jobs.
    pub pool_max_connections: u32,
    /// An idle pooled connection is closed after this long.
    pub pool_idle_timeout: Duration,
    /// Connecting to a datasource gives up after this long.
    pub connect_timeout: Duration,
}

/// The upstream default for `ENGINE_MAX_RESULT_BYTES`: 256 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 268_435_456;

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            timeout: Duration::from_secs(300),
            max_parallel_datasources: 4,
            limits: Limits::default(),
            pool_max_connections: 4,
            pool_idle_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
        }
    }
}
