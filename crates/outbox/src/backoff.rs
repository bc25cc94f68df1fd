//! How long to wait before publishing an event again: exponential backoff with full jitter.
//!
//! Whether to retry at all is not decided here: an unpublished event is always retried (the
//! contract loses no event); the publisher's error decides whether the failure counts.

use std::time::Duration;

/// The ceiling of the first retry.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// No retry waits longer than this.
pub const BACKOFF_CAP: Duration = Duration::from_secs(300);

/// The wait before the next publish of an event that failed `attempts` times: uniformly random
/// in `[0, min(cap, base × 2^(attempts-1))]` ("full jitter"), so Workers that failed together
/// do not retry together.
pub fn backoff(attempts: u32) -> Duration {
    jittered(ceiling(attempts), random_unit())
}

/// The upper bound of [`backoff`] after `attempts` failures (0 counts as 1).
pub fn ceiling(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(31);
    BACKOFF_BASE
        .saturating_mul(1u32 << doublings)
        .min(BACKOFF_CAP)
}

/// `ceiling × unit`, `unit` in `[0, 1]`.
fn jittered(ceiling: Duration, unit: f64) -> Duration {
    ceiling.mul_f64(unit.clamp(0.0, 1.0))
}

/// A uniform random number in `[0, 1)`. A version 4 UUID carries 122 random bits from the
/// operating system's generator (`getrandom`); 53 of them make an `f64` fraction. This avoids a
/// random-number crate for one number per failed publish.
fn random_unit() -> f64 {
    let bits = uuid::Uuid::new_v4().as_u128() >> (128 - 53);
    // Fewer than 2^53: exact in an f64.
    bits as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_from_the_base_up_to_the_cap() {
        assert_eq!(ceiling(0), Duration::from_secs(1));
        assert_eq!(ceiling(1), Duration::from_secs(1));
        assert_eq!(ceiling(2), Duration::from_secs(2));
        assert_eq!(ceiling(5), Duration::from_secs(16));
        assert_eq!(ceiling(9), Duration::from_secs(256));
        assert_eq!(ceiling(10), BACKOFF_CAP);
        assert_eq!(ceiling(u32::MAX), BACKOFF_CAP);
    }

    #[test]
    fn jitter_spans_zero_to_the_ceiling() {
        let ceiling = Duration::from_secs(8);
        assert_eq!(jittered(ceiling, 0.0), Duration::ZERO);
        assert_eq!(jittered(ceiling, 0.5), Duration::from_secs(4));
        assert_eq!(jittered(ceiling, 1.0), ceiling);
    }

    #[test]
    fn backoff_stays_within_its_ceiling_and_varies() {
        let waits: Vec<Duration> = (0..200).map(|_| backoff(4)).collect();
        assert!(waits.iter().all(|w| *w <= ceiling(4)));
        let first = waits[0];
        assert!(waits.iter().any(|w| *w != first), "full jitter varies");
    }

    #[test]
    fn random_units_are_fractions() {
        for _ in 0..1000 {
            let unit = random_unit();
            assert!((0.0..1.0).contains(&unit), "{unit}");
        }
    }
}
