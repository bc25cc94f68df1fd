//! How long to wait before trying again: exponential backoff with full jitter.
//!
//! [`Backoff`] is the rule with its base and cap; [`backoff()`] is the publishing one (1 s to
//! 5 min). Whether to retry at all is not decided here: an unpublished event is always retried
//! (the contract loses no event); the publisher's error decides whether the failure counts.

use std::time::Duration;

/// The ceiling of the first retry.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// No retry waits longer than this.
pub const BACKOFF_CAP: Duration = Duration::from_secs(300);

/// Exponential backoff with full jitter: after `attempts` failures, a wait uniformly random in
/// `[0, min(cap, base × 2^(attempts-1))]`, so peers that failed together do not retry together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Backoff {
    /// Publishing an event again: [`BACKOFF_BASE`] to [`BACKOFF_CAP`].
    pub const PUBLISH: Backoff = Backoff {
        base: BACKOFF_BASE,
        cap: BACKOFF_CAP,
    };

    /// The wait after `attempts` failures.
    pub fn delay(&self, attempts: u32) -> Duration {
        jittered(self.ceiling(attempts), random_unit())
    }

    /// The upper bound of [`delay`](Self::delay) after `attempts` failures (0 counts as 1).
    pub fn ceiling(&self, attempts: u32) -> Duration {
        let doublings = attempts.saturating_sub(1).min(31);
        self.base.saturating_mul(1u32 << doublings).min(self.cap)
    }
}

/// The wait before the next publish of an event that failed `attempts` times
/// ([`Backoff::PUBLISH`]).
pub fn backoff(attempts: u32) -> Duration {
    Backoff::PUBLISH.delay(attempts)
}

/// The upper bound of [`backoff`] after `attempts` failures (0 counts as 1).
pub fn ceiling(attempts: u32) -> Duration {
    Backoff::PUBLISH.ceiling(attempts)
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
    fn another_rule_doubles_from_its_own_base_to_its_own_cap() {
        let rule = Backoff {
            base: Duration::from_millis(250),
            cap: Duration::from_secs(5),
        };
        assert_eq!(rule.ceiling(1), Duration::from_millis(250));
        assert_eq!(rule.ceiling(3), Duration::from_secs(1));
        assert_eq!(rule.ceiling(6), Duration::from_secs(5));
        assert!((0..100).all(|_| rule.delay(9) <= rule.cap));
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
