//! Retries of a datasource whose attempt failed transiently (`JOB_RETRY_ATTEMPTS`): how many,
//! and how long to wait before each (exponential, capped, with full jitter).
//!
//! Whether a failure may be retried at all is the error's ([`crate::EngineError::is_transient`],
//! per driver in the private `transient` module); whether the failed attempt left nothing
//! behind is the result's ([`crate::result::ConnectionResult::discard`]). The engine's loop that
//! puts the two together is `Inner::retried_datasource` (`engine.rs`).

use std::time::Duration;

/// How a datasource that failed transiently is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (`JOB_RETRY_ATTEMPTS`; 0: fail at once, as upstream).
    pub attempts: u32,
    /// The ceiling of the first wait (`JOB_RETRY_BACKOFF_MS`); it doubles with each retry.
    pub backoff: Duration,
    /// No wait is longer than this (`JOB_RETRY_BACKOFF_MAX_MS`).
    pub backoff_max: Duration,
}

impl RetryPolicy {
    /// The most retries a policy may ask for: a datasource read eleven times in one run is
    /// already more load than a struggling server should get from one job.
    pub const MAX_ATTEMPTS: u32 = 10;

    /// Fail at once: the default.
    pub const NONE: RetryPolicy = RetryPolicy {
        attempts: 0,
        backoff: Duration::from_millis(500),
        backoff_max: Duration::from_secs(10),
    };

    /// The wait before retry number `retry` (from 1): uniformly random in `[0, ceiling]`, so
    /// the datasources and replicas that failed together do not come back together.
    pub fn delay(&self, retry: u32) -> Duration {
        self.ceiling(retry).mul_f64(random_unit())
    }

    /// `min(backoff_max, backoff × 2^(retry-1))` (retry 0 counts as 1).
    pub fn ceiling(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(31);
        self.backoff
            .saturating_mul(1u32 << doublings)
            .min(self.backoff_max)
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::NONE
    }
}

/// A uniform random number in `[0, 1)`: 53 of a version 4 UUID's random bits (the operating
/// system's generator), which spares a random-number crate for one number per retry.
fn random_unit() -> f64 {
    let bits = uuid::Uuid::new_v4().as_u128() >> (128 - 53);
    bits as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            attempts: 3,
            backoff: Duration::from_millis(250),
            backoff_max: Duration::from_secs(2),
        }
    }

    #[test]
    fn the_ceiling_doubles_from_the_backoff_up_to_its_cap() {
        let policy = policy();
        assert_eq!(policy.ceiling(0), Duration::from_millis(250));
        assert_eq!(policy.ceiling(1), Duration::from_millis(250));
        assert_eq!(policy.ceiling(2), Duration::from_millis(500));
        assert_eq!(policy.ceiling(4), Duration::from_secs(2));
        assert_eq!(policy.ceiling(5), Duration::from_secs(2));
        assert_eq!(policy.ceiling(u32::MAX), Duration::from_secs(2));
    }

    #[test]
    fn waits_are_jittered_between_zero_and_the_ceiling() {
        let policy = policy();
        let waits: Vec<Duration> = (0..200).map(|_| policy.delay(3)).collect();
        assert!(waits.iter().all(|w| *w <= policy.ceiling(3)));
        assert!(
            waits.iter().any(|w| *w != waits[0]),
            "full jitter varies the wait"
        );
    }

    #[test]
    fn the_default_fails_at_once() {
        assert_eq!(RetryPolicy::default().attempts, 0);
    }
}
