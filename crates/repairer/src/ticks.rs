//! The timer of every relay's loop.

use std::time::Duration;

use tokio::time::{Interval, MissedTickBehavior};

/// A timer that ticks at once and then every `period`, or every `default` when `period` is
/// zero (`tokio::time::interval` panics on zero, and in a spawned task that panic would leave
/// the Worker running without its relay). A tick missed while a pass ran long is delayed, not
/// bunched: passes never run back to back to catch up.
pub(crate) fn ticks(period: Duration, default: Duration) -> Interval {
    let period = if period.is_zero() { default } else { period };
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_zero_period_ticks_at_the_default_and_missed_ticks_are_delayed() {
        let default = Duration::from_secs(30);
        let zero = ticks(Duration::ZERO, default);
        assert_eq!(zero.period(), default);
        assert_eq!(zero.missed_tick_behavior(), MissedTickBehavior::Delay);
        let set = ticks(Duration::from_millis(50), default);
        assert_eq!(set.period(), Duration::from_millis(50));
    }
}
