//! The engine's own settings (the Worker maps its environment onto these).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use zeroize::Zeroizing;

use crate::plan::Limits;
use crate::result::SpillPlace;
use crate::retry::RetryPolicy;

/// Bytes of its part a datasource behind the first may hold in memory before it spills to disk.
pub const SPILL_AFTER_BYTES: usize = 1024 * 1024;

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
    /// The `plugin_crm` path's keys.
    pub crm: CrmSecrets,
    /// `ENGINE_SPILL_DIR`: where parts of a result waiting their turn spill (unnamed files).
    pub spill_dir: PathBuf,
    /// How a datasource that failed transiently is read again (default: not at all).
    pub retry: RetryPolicy,
}

impl EngineConfig {
    pub(crate) fn spill(&self) -> SpillPlace {
        SpillPlace {
            dir: self.spill_dir.clone(),
            memory_bytes: SPILL_AFTER_BYTES,
        }
    }
}

/// `CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM` and `CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM` as configured
/// (empty: not configured). They are checked when a `plugin_crm` job needs them, as upstream
/// does: a Worker that never reads the CRM needs neither. Zeroed on drop; `Debug` shows only
/// whether each is set.
#[derive(Clone, Default)]
pub struct CrmSecrets {
    pub hash_key: Zeroizing<String>,
    pub encrypt_key: Zeroizing<String>,
}

impl fmt::Debug for CrmSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrmSecrets")
            .field("hash_key_set", &!self.hash_key.is_empty())
            .field("encrypt_key_set", &!self.encrypt_key.is_empty())
            .finish()
    }
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
            crm: CrmSecrets::default(),
            spill_dir: std::env::temp_dir(),
            retry: RetryPolicy::NONE,
        }
    }
}
