//! Trying a failed request of an upload again, as the caller's policy says.
//!
//! A streamed result cannot be produced twice, so its writes are retried where they fail: each
//! request (create, part, complete, single put) on its own, from the bytes it still holds.
//! When to give up and how long to wait is the caller's ([`RetryPolicy`]); the storage only
//! asks.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::error::{Result, StorageError};

/// Asked after each retriable failure of one request of an upload.
pub trait RetryPolicy: Send + Sync {
    /// The wait before trying the request again after its `failures`-th failure, or `None` to
    /// give up (the error then ends the upload).
    fn next_wait(&self, failures: u32, error: &StorageError) -> Option<Duration>;
}

/// Never tries again (beyond the SDK's own attempts).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRetry;

impl RetryPolicy for NoRetry {
    fn next_wait(&self, _: u32, _: &StorageError) -> Option<Duration> {
        None
    }
}

/// Runs `attempt` until it succeeds, fails in a way no retry can help, or `policy` gives up.
pub async fn retrying<T, F, Fut>(policy: &Arc<dyn RetryPolicy>, mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut failures = 0u32;
    loop {
        let error = match attempt().await {
            Ok(value) => return Ok(value),
            Err(error) if !error.is_retriable() => return Err(error),
            Err(error) => error,
        };
        failures = failures.saturating_add(1);
        match policy.next_wait(failures, &error) {
            Some(wait) => tokio::time::sleep(wait).await,
            None => return Err(error),
        }
    }
}
