//! The result size cap (`ENGINE_MAX_RESULT_BYTES`), shared by a job's datasources.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{EngineError, Result};

/// Bytes a job's result may still take. Charged as rows are written, so an oversized result
/// fails as soon as it crosses the limit, not after it was built.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: AtomicU64,
}

impl Budget {
    pub fn new(limit: u64) -> Budget {
        Budget {
            limit,
            used: AtomicU64::new(0),
        }
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Gives back bytes a discarded attempt had charged (it is retried from nothing).
    pub(crate) fn refund(&self, bytes: u64) {
        // Never below zero: only what was charged comes back.
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                Some(used.saturating_sub(bytes))
            });
    }

    pub(crate) fn charge(&self, bytes: u64) -> Result<()> {
        let total = self.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if total > self.limit {
            return Err(EngineError::ResultTooLarge { limit: self.limit });
        }
        Ok(())
    }
}
