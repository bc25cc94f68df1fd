//! How far behind the outbox is, as numbers and as metrics.

use std::time::Duration;

use sqlx::Row;

use crate::error::{OutboxError, Result};
use crate::sink::Sink;
use crate::store::Store;

/// Gauge: unpublished events.
pub const PENDING_EVENTS: &str = "fetcher_outbox_pending_events";
/// Gauge: age of the oldest unpublished event, in seconds (0 when there is none).
pub const OLDEST_UNPUBLISHED_AGE_SECONDS: &str = "fetcher_outbox_oldest_unpublished_age_seconds";
/// Gauge: unpublished events whose first publish did not succeed.
pub const FAILING_EVENTS: &str = "fetcher_outbox_failing_events";

/// Help text of the outbox's gauges.
pub(crate) fn describe() {
    metrics::describe_gauge!(PENDING_EVENTS, "Unpublished events in the outbox, by sink.");
    metrics::describe_gauge!(
        OLDEST_UNPUBLISHED_AGE_SECONDS,
        metrics::Unit::Seconds,
        "Age of the oldest unpublished event in seconds, by sink (0 when there is none)."
    );
    metrics::describe_gauge!(
        FAILING_EVENTS,
        "Unpublished events whose first publish did not succeed, by sink."
    );
}

/// A snapshot of the outbox's backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutboxStats {
    /// Unpublished events.
    pub pending: i64,
    /// How long the oldest unpublished event has waited; `None` when there is none.
    pub oldest_unpublished_age: Option<Duration>,
    /// Unpublished events whose publish was tried and did not succeed: AMQP rows leased more
    /// than once (the publish right after recording failed, or its Worker was lost, and the
    /// repairer has tried since), MQTT rows with a failed attempt (nobody publishes them at
    /// their commit, and a published one is deleted).
    pub failing: i64,
}

impl OutboxStats {
    /// Sets `sink`'s outbox gauges to this snapshot (label `sink`; one outbox per state
    /// database).
    pub fn record(&self, sink: Sink) {
        let sink = sink.as_str();
        metrics::gauge!(PENDING_EVENTS, "sink" => sink).set(self.pending as f64);
        metrics::gauge!(OLDEST_UNPUBLISHED_AGE_SECONDS, "sink" => sink).set(
            self.oldest_unpublished_age
                .map_or(0.0, |age| age.as_secs_f64()),
        );
        metrics::gauge!(FAILING_EVENTS, "sink" => sink).set(self.failing as f64);
    }
}

impl Store {
    /// `sink`'s backlog, read through the unpublished rows' index.
    pub async fn stats(&self, sink: Sink) -> Result<OutboxStats> {
        let db = |e| OutboxError::sqlx("reading outbox statistics", e);
        let row = sqlx::query(
            "SELECT count(*) AS pending,
                    count(*) FILTER (WHERE attempts > CASE sink WHEN 'amqp' THEN 1 ELSE 0 END) AS failing,
                    EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest_seconds
             FROM outbox WHERE published_at IS NULL AND sink = $1",
        )
        .bind(sink.as_str())
        .fetch_one(self.pool())
        .await
        .map_err(db)?;
        let oldest: Option<f64> = row.try_get("oldest_seconds").map_err(db)?;
        Ok(OutboxStats {
            pending: row.try_get("pending").map_err(db)?,
            // A row stamped by a clock ahead of this transaction's is 0 s old, not negative.
            oldest_unpublished_age: oldest.map(|s| Duration::from_secs_f64(s.max(0.0))),
            failing: row.try_get("failing").map_err(db)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    #[test]
    fn record_sets_the_three_gauges_in_base_units() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let stats = OutboxStats {
            pending: 7,
            oldest_unpublished_age: Some(Duration::from_millis(2_500)),
            failing: 2,
        };
        metrics::with_local_recorder(&recorder, || stats.record(Sink::Amqp));
        let mut gauges: Vec<(String, f64)> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| match value {
                DebugValue::Gauge(v) => (key.key().name().to_owned(), v.into_inner()),
                other => panic!("not a gauge: {other:?}"),
            })
            .collect();
        gauges.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            gauges,
            vec![
                (FAILING_EVENTS.to_owned(), 2.0),
                (OLDEST_UNPUBLISHED_AGE_SECONDS.to_owned(), 2.5),
                (PENDING_EVENTS.to_owned(), 7.0),
            ]
        );
    }

    #[test]
    fn an_empty_outbox_reports_age_zero() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || OutboxStats::default().record(Sink::Mqtt));
        let age = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find(|(key, ..)| key.key().name() == OLDEST_UNPUBLISHED_AGE_SECONDS)
            .map(|(.., value)| value);
        assert_eq!(age, Some(DebugValue::Gauge(0.0.into())));
    }
}
