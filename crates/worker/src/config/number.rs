//! Numeric settings: the range each variable may take, and what a value outside it does.
//!
//! Every numeric variable is read through one [`Number`], so none can reach the Worker as a
//! value that panics a timer (`tokio::time::interval(0)`), overflows a duration or a
//! multiplication, or asks a server for more than it accepts. A value at or below 0 is replaced
//! by the default with a warning, as upstream does for its `<=0` settings (ports of servers the
//! Worker connects to are refused instead: no default can be right for them). A value above the
//! range, or one that is not a whole number, is refused with the others at start.

use std::fmt;

/// What a numeric variable counts, for its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    Milliseconds,
    Seconds,
    Hours,
    Days,
    Bytes,
    Count,
    Port,
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unit::Milliseconds => " ms",
            Unit::Seconds => " seconds",
            Unit::Hours => " hours",
            Unit::Days => " days",
            Unit::Bytes => " bytes",
            Unit::Count | Unit::Port => "",
        })
    }
}

/// What a value outside the range does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outside {
    /// Refused at start, with every other problem.
    Refuse,
    /// Replaced by the default, with a warning.
    UseDefault,
}

/// One numeric variable: its default and its range.
#[derive(Debug, Clone, Copy)]
pub(super) struct Number {
    pub(super) name: &'static str,
    pub(super) unit: Unit,
    pub(super) default: u64,
    pub(super) min: u64,
    pub(super) max: u64,
    /// For 0 and negative values.
    pub(super) not_positive: Outside,
    /// For values above `max`.
    pub(super) too_large: Outside,
}

/// What reading one numeric variable found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reading {
    Value(u64),
    /// The default, and the warning that says why.
    Replaced(u64, String),
    /// The default (so reading can go on), and the problem that refuses the start.
    Refused(u64, String),
}

impl Number {
    const fn new(name: &'static str, unit: Unit, default: u64, max: u64) -> Number {
        Number {
            name,
            unit,
            default,
            min: 1,
            max,
            not_positive: Outside::UseDefault,
            too_large: Outside::Refuse,
        }
    }

    /// `text` (unset or blank: `None`) read against this variable's range. Never echoes a
    /// refused value; a replaced one is a number at or below 0, shown in the warning.
    pub(super) fn read(&self, text: Option<&str>) -> Reading {
        let Some(text) = text else {
            return Reading::Value(self.default);
        };
        let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Reading::Refused(self.default, self.must_be());
        }
        // A whole number too long for i128 is huge either way; its sign decides which end.
        let value: i128 = text.parse().unwrap_or(if text.starts_with('-') {
            i128::MIN
        } else {
            i128::MAX
        });
        if value == 0 && self.min == 0 {
            return Reading::Value(0);
        }
        if value <= 0 {
            return match self.not_positive {
                Outside::Refuse => Reading::Refused(self.default, self.must_be()),
                Outside::UseDefault => Reading::Replaced(
                    self.default,
                    format!(
                        "{} is {text}, not above 0: using the default, {}{}",
                        self.name, self.default, self.unit
                    ),
                ),
            };
        }
        if value > i128::from(self.max) {
            return match self.too_large {
                Outside::Refuse => Reading::Refused(self.default, self.must_be()),
                Outside::UseDefault => Reading::Replaced(
                    self.default,
                    format!(
                        "{} is above {}: using the default, {}{}",
                        self.name, self.max, self.default, self.unit
                    ),
                ),
            };
        }
        if value < i128::from(self.min) {
            return Reading::Refused(self.default, self.must_be());
        }
        // In range, so within u64 (`max` is one).
        Reading::Value(u64::try_from(value).unwrap_or(self.default))
    }

    /// The range and what a value outside it does, for the configuration reference:
    /// `1 to 86400 seconds; 0 or below → the default, above → refused`.
    pub(super) fn limits(&self) -> String {
        let outside = |what: Outside| match what {
            Outside::Refuse => "refused",
            Outside::UseDefault => "the default",
        };
        let not_positive = if self.min == 0 {
            "below 0"
        } else {
            "0 or below"
        };
        let low = match self.min {
            0 | 1 => String::new(),
            2 => "1 → refused, ".to_owned(),
            min => format!("1 to {} → refused, ", min - 1),
        };
        format!(
            "{} to {}{}; {not_positive} → {}, {low}above → {}",
            self.min,
            self.max,
            self.unit,
            outside(self.not_positive),
            outside(self.too_large)
        )
    }

    fn must_be(&self) -> String {
        let what = match self.unit {
            Unit::Port => "a port number",
            _ => "a whole number",
        };
        format!(
            "{} must be {what} from {} to {}{}",
            self.name, self.min, self.max, self.unit
        )
    }
}

/// `RABBITMQ_PORT_AMQP`: the broker's port; no default can stand in for a wrong one.
pub(super) const RABBITMQ_PORT_AMQP: Number = Number {
    not_positive: Outside::Refuse,
    ..Number::new("RABBITMQ_PORT_AMQP", Unit::Port, 5672, 65535)
};
/// `RABBITMQ_NUMBERS_OF_WORKERS` (upstream: ≤0 → 5).
pub(super) const RABBITMQ_NUMBERS_OF_WORKERS: Number =
    Number::new("RABBITMQ_NUMBERS_OF_WORKERS", Unit::Count, 5, 1000);
/// `RABBITMQ_MAX_MESSAGE_BYTES`: at most RabbitMQ's own ceiling, 512 MiB.
pub(super) const RABBITMQ_MAX_MESSAGE_BYTES: Number = Number::new(
    "RABBITMQ_MAX_MESSAGE_BYTES",
    Unit::Bytes,
    super::DEFAULT_MAX_MESSAGE_BYTES as u64,
    512 << 20,
);
/// `EVENT_MAX_METADATA_BYTES`: at most 16 MiB, so an event stays a message a broker takes.
pub(super) const EVENT_MAX_METADATA_BYTES: Number = Number::new(
    "EVENT_MAX_METADATA_BYTES",
    Unit::Bytes,
    super::DEFAULT_MAX_METADATA_BYTES,
    16 << 20,
);
/// `RABBITMQ_SIGNATURE_MAX_AGE_SEC`: at most a day; 0 would refuse every job.
pub(super) const RABBITMQ_SIGNATURE_MAX_AGE_SEC: Number =
    Number::new("RABBITMQ_SIGNATURE_MAX_AGE_SEC", Unit::Seconds, 300, 86_400);
/// `DATABASE_MAX_CONNECTIONS`.
pub(super) const DATABASE_MAX_CONNECTIONS: Number =
    Number::new("DATABASE_MAX_CONNECTIONS", Unit::Count, 10, 1000);
/// `MONGO_PORT`: the Manager's MongoDB port (upstream has no default and builds `host:`
/// without one); a port no default can stand in for is refused.
pub(super) const MONGO_PORT: Number = Number {
    not_positive: Outside::Refuse,
    ..Number::new("MONGO_PORT", Unit::Port, 27017, 65535)
};
/// `MONGO_MAX_POOL_SIZE` (upstream: ≤0 → 100); lib-commons lowers more than 1000 to 1000
/// silently, this Worker refuses it.
pub(super) const MONGO_MAX_POOL_SIZE: Number =
    Number::new("MONGO_MAX_POOL_SIZE", Unit::Count, 100, 1000);
/// `ENGINE_MAX_RESULT_BYTES` (upstream: ≤0 → 256 MiB); at most 1 TiB.
pub(super) const ENGINE_MAX_RESULT_BYTES: Number = Number::new(
    "ENGINE_MAX_RESULT_BYTES",
    Unit::Bytes,
    engine::config::DEFAULT_MAX_RESULT_BYTES,
    1 << 40,
);
/// `ENGINE_EXTRACTION_TIMEOUT_SEC`: at most a day (PostgreSQL's `statement_timeout` is set
/// from it, and refuses more than about 24 days).
pub(super) const ENGINE_EXTRACTION_TIMEOUT_SEC: Number =
    Number::new("ENGINE_EXTRACTION_TIMEOUT_SEC", Unit::Seconds, 300, 86_400);
/// `JOB_RETRY_ATTEMPTS`: 0 (a datasource that fails fails the job at once, as upstream) to
/// [`engine::RetryPolicy::MAX_ATTEMPTS`]; a negative count is refused, not defaulted, so a typo
/// never turns retries off silently.
pub(super) const JOB_RETRY_ATTEMPTS: Number = Number {
    min: 0,
    not_positive: Outside::Refuse,
    ..Number::new(
        "JOB_RETRY_ATTEMPTS",
        Unit::Count,
        0,
        engine::RetryPolicy::MAX_ATTEMPTS as u64,
    )
};
/// `JOB_RETRY_BACKOFF_MS`: the ceiling of the first retry's wait, at most a minute.
pub(super) const JOB_RETRY_BACKOFF_MS: Number =
    Number::new("JOB_RETRY_BACKOFF_MS", Unit::Milliseconds, 500, 60_000);
/// `JOB_RETRY_BACKOFF_MAX_MS`: no retry waits longer, at most ten minutes (the wait counts
/// toward the job's timeout anyway).
pub(super) const JOB_RETRY_BACKOFF_MAX_MS: Number = Number::new(
    "JOB_RETRY_BACKOFF_MAX_MS",
    Unit::Milliseconds,
    10_000,
    600_000,
);
/// `JOB_LEASE_SEC`: at least 2 s, so a lease can be renewed before it lapses.
pub(super) const JOB_LEASE_SEC: Number = Number {
    min: 2,
    ..Number::new("JOB_LEASE_SEC", Unit::Seconds, 30, 3600)
};
/// `OBJECT_STORAGE_RETRY_SEC` (never past the job's timeout either).
pub(super) const OBJECT_STORAGE_RETRY_SEC: Number =
    Number::new("OBJECT_STORAGE_RETRY_SEC", Unit::Seconds, 60, 86_400);
/// `OUTBOX_REPAIR_INTERVAL_SEC`: 0 would panic the repairer's timer.
pub(super) const OUTBOX_REPAIR_INTERVAL_SEC: Number =
    Number::new("OUTBOX_REPAIR_INTERVAL_SEC", Unit::Seconds, 30, 86_400);
/// `OUTBOX_REPAIR_BATCH`.
pub(super) const OUTBOX_REPAIR_BATCH: Number =
    Number::new("OUTBOX_REPAIR_BATCH", Unit::Count, 25, 10_000);
/// `OUTBOX_REPAIR_GRACE_SEC`.
pub(super) const OUTBOX_REPAIR_GRACE_SEC: Number =
    Number::new("OUTBOX_REPAIR_GRACE_SEC", Unit::Seconds, 10, 86_400);
/// `MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC`: lib-commons' `ProcessingTimeout`, 10 minutes
/// (UPSTREAM-MANAGER §4.5), the takeover of a claimed row of the Manager's outbox; at least
/// 10 s, below which a relay's own publish of a batch would be taken over routinely; at most
/// a day.
pub(super) const MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC: Number = Number {
    min: 10,
    ..Number::new(
        "MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC",
        Unit::Seconds,
        600,
        86_400,
    )
};
/// `MANAGER_OUTBOX_RETRY_AFTER_SEC`: lib-commons' `RetryWindow`, 5 minutes (§4.5), before a
/// failed row of the Manager's outbox is retried; at most a day.
pub(super) const MANAGER_OUTBOX_RETRY_AFTER_SEC: Number =
    Number::new("MANAGER_OUTBOX_RETRY_AFTER_SEC", Unit::Seconds, 300, 86_400);
/// `OUTBOX_RETENTION_HOURS`: at most ten years; 0 would delete rows as soon as published.
pub(super) const OUTBOX_RETENTION_HOURS: Number =
    Number::new("OUTBOX_RETENTION_HOURS", Unit::Hours, 168, 87_600);
/// `RESULT_RETENTION_DAYS` (unset: off): at most a hundred years (36,525 days); 0 would delete every result
/// as it is stored, so it is refused rather than taken.
pub(super) const RESULT_RETENTION_DAYS: Number = Number {
    not_positive: Outside::Refuse,
    ..Number::new("RESULT_RETENTION_DAYS", Unit::Days, 0, 36_525)
};
/// `JOB_RETENTION_DAYS` (unset: off), as `RESULT_RETENTION_DAYS`.
pub(super) const JOB_RETENTION_DAYS: Number = Number {
    not_positive: Outside::Refuse,
    ..Number::new("JOB_RETENTION_DAYS", Unit::Days, 0, 36_525)
};
/// `RETENTION_INTERVAL_SEC`: how often a retention pass runs (0 would panic its timer).
pub(super) const RETENTION_INTERVAL_SEC: Number =
    Number::new("RETENTION_INTERVAL_SEC", Unit::Seconds, 300, 86_400);
/// `MQTT_KEEP_ALIVE_SEC`: MQTT's keep-alive is a 16-bit count of seconds.
pub(super) const MQTT_KEEP_ALIVE_SEC: Number =
    Number::new("MQTT_KEEP_ALIVE_SEC", Unit::Seconds, 30, 65_535);
/// `HEALTH_PORT` (upstream: ≤0 or >65535 → 4007).
pub(super) const HEALTH_PORT: Number = Number {
    too_large: Outside::UseDefault,
    ..Number::new("HEALTH_PORT", Unit::Port, 4007, 65535)
};
/// `API_PORT` (lifecycle §3: 4008; like `HEALTH_PORT`, ≤0 or >65535 → the default).
pub(super) const API_PORT: Number = Number {
    too_large: Outside::UseDefault,
    ..Number::new("API_PORT", Unit::Port, 4008, 65535)
};
/// `READYZ_DRAIN_DELAY_SEC` (upstream: 0 → 12 s).
pub(super) const READYZ_DRAIN_DELAY_SEC: Number =
    Number::new("READYZ_DRAIN_DELAY_SEC", Unit::Seconds, 12, 3600);
/// `SHUTDOWN_GRACE_SEC`.
pub(super) const SHUTDOWN_GRACE_SEC: Number =
    Number::new("SHUTDOWN_GRACE_SEC", Unit::Seconds, 330, 86_400);

#[cfg(test)]
mod tests {
    use super::*;

    const SECONDS: Number = Number::new("X_SEC", Unit::Seconds, 30, 100);

    #[test]
    fn unset_is_the_default_and_a_value_in_range_is_itself() {
        assert_eq!(SECONDS.read(None), Reading::Value(30));
        assert_eq!(SECONDS.read(Some("1")), Reading::Value(1));
        assert_eq!(SECONDS.read(Some("+100")), Reading::Value(100));
    }

    #[test]
    fn zero_and_negatives_take_the_default_with_a_warning() {
        for text in [
            "0",
            "-1",
            "-0",
            "-99999999999999999999999999999999999999999",
        ] {
            match SECONDS.read(Some(text)) {
                Reading::Replaced(30, warning) => {
                    assert!(warning.starts_with(&format!("X_SEC is {text}, not above 0")));
                    assert!(warning.ends_with("using the default, 30 seconds"));
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn words_and_values_above_the_range_are_refused_without_echo() {
        for text in [
            "101",
            "99999999999999999999",
            "1e3",
            "ten",
            "-",
            "3.5",
            "0x10",
        ] {
            match SECONDS.read(Some(text)) {
                Reading::Refused(30, problem) => {
                    assert_eq!(
                        problem,
                        "X_SEC must be a whole number from 1 to 100 seconds"
                    );
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_broker_port_at_zero_is_refused_and_a_health_port_above_the_range_replaced() {
        assert!(matches!(
            RABBITMQ_PORT_AMQP.read(Some("0")),
            Reading::Refused(5672, _)
        ));
        assert!(matches!(
            HEALTH_PORT.read(Some("99999")),
            Reading::Replaced(4007, _)
        ));
        assert!(matches!(
            JOB_LEASE_SEC.read(Some("1")),
            Reading::Refused(30, _)
        ));
    }
}
