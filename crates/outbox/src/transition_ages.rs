//! How long jobs have stayed in the lifecycle's two in-between states, as numbers and as a
//! gauge: a cancel or delete that never ends is a stuck job an operator must see.

use std::time::Duration;

use sqlx::Row;

use crate::error::{OutboxError, Result};
use crate::store::Store;

/// Gauge: seconds the oldest job in `status` (`cancellation_in_progress`,
/// `deletion_in_progress`) has been in it; 0 when no job is.
pub const OLDEST_IN_TRANSITION_AGE_SECONDS: &str = "fetcher_jobs_oldest_in_transition_age_seconds";

/// Help text of the gauge.
pub(crate) fn describe() {
    metrics::describe_gauge!(
        OLDEST_IN_TRANSITION_AGE_SECONDS,
        metrics::Unit::Seconds,
        "Seconds the oldest job in an in-between state (cancellation or deletion in progress) has been in it, by status."
    );
}

/// The two in-between states and how their age is measured.
const CANCELING: &str = "cancellation_in_progress";
const DELETING: &str = "deletion_in_progress";

/// The age of the oldest job in each in-between state; `None` when no job is in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TransitionAges {
    /// Since the cancel of the oldest `cancellation_in_progress` job was accepted.
    pub canceling: Option<Duration>,
    /// Since the oldest `deletion_in_progress` job entered that state.
    pub deleting: Option<Duration>,
}

impl TransitionAges {
    /// Sets the gauge for both states (label `status`; 0 when no job is in it).
    pub fn record(&self) {
        for (status, age) in [(CANCELING, self.canceling), (DELETING, self.deleting)] {
            metrics::gauge!(OLDEST_IN_TRANSITION_AGE_SECONDS, "status" => status)
                .set(age.map_or(0.0, |age| age.as_secs_f64()));
        }
    }
}

impl Store {
    /// The oldest job's age in each in-between state. A cancel is timed from its acceptance
    /// (`cancel_requested_at`: lease renewals touch `updated_at`), a deletion from its entry
    /// (`updated_at`, which nothing touches while it waits for its object to go).
    pub async fn transition_ages(&self) -> Result<TransitionAges> {
        let db = |e| OutboxError::sqlx("reading the jobs in transition", e);
        let row = sqlx::query(
            "SELECT EXTRACT(EPOCH FROM now() - min(cancel_requested_at)
                        FILTER (WHERE status = 'cancellation_in_progress'))::float8 AS canceling,
                    EXTRACT(EPOCH FROM now() - min(updated_at)
                        FILTER (WHERE status = 'deletion_in_progress'))::float8 AS deleting
             FROM jobs WHERE status IN ('cancellation_in_progress', 'deletion_in_progress')",
        )
        .fetch_one(self.pool())
        .await
        .map_err(db)?;
        // A row stamped by a clock ahead of this transaction's is 0 s old, not negative.
        let age = |seconds: Option<f64>| seconds.map(|s| Duration::from_secs_f64(s.max(0.0)));
        Ok(TransitionAges {
            canceling: age(row.try_get("canceling").map_err(db)?),
            deleting: age(row.try_get("deleting").map_err(db)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    #[test]
    fn record_sets_both_states_and_zero_for_none() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let ages = TransitionAges {
            canceling: Some(Duration::from_millis(90_500)),
            deleting: None,
        };
        metrics::with_local_recorder(&recorder, || ages.record());
        let mut gauges: Vec<(String, f64)> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| {
                let status = key
                    .key()
                    .labels()
                    .find(|label| label.key() == "status")
                    .map(|label| label.value().to_owned())
                    .expect("a status label");
                match value {
                    DebugValue::Gauge(v) => (status, v.into_inner()),
                    other => panic!("not a gauge: {other:?}"),
                }
            })
            .collect();
        gauges.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            gauges,
            vec![(CANCELING.to_owned(), 90.5), (DELETING.to_owned(), 0.0)]
        );
    }
}
