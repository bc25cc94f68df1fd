//! The publisher's metrics, one typed helper per event. Labels are low-cardinality: the sink
//! (`amqp`, `mqtt`), the routing key of the event (`job.completed`, `job.execution.failed`, …)
//! and the failure reason.

use crate::error::PublishError;
use crate::mqtt::MqttError;

/// Events the broker confirmed and did not return.
pub const PUBLISHED: &str = "fetcher_events_published_total";
/// Events that did not count as published, by `reason` (see [`PublishError::reason`]).
pub const PUBLISH_FAILED: &str = "fetcher_events_publish_failed_total";
/// Events the broker returned as unroutable (also counted in [`PUBLISH_FAILED`]).
pub const RETURNED: &str = "fetcher_events_returned_total";

/// Help text of the publisher's families.
pub fn describe() {
    metrics::describe_counter!(
        PUBLISHED,
        "Events the broker confirmed (and, on AMQP, routed), by sink and routing key."
    );
    metrics::describe_counter!(
        PUBLISH_FAILED,
        "Events that did not count as published, by sink, routing key and reason."
    );
    metrics::describe_counter!(
        RETURNED,
        "Events the broker returned as unroutable (also counted as failed), by routing key."
    );
}

/// One event confirmed (and, on AMQP, routed).
fn published(sink: &'static str, routing_key: &'static str) {
    metrics::counter!(PUBLISHED, "sink" => sink, "routing_key" => routing_key).increment(1);
}

/// One event that did not count as published, by reason.
fn failed(sink: &'static str, routing_key: &'static str, reason: &'static str) {
    metrics::counter!(
        PUBLISH_FAILED,
        "sink" => sink,
        "routing_key" => routing_key,
        "reason" => reason,
    )
    .increment(1);
}

/// One AMQP event that did not count as published.
pub(crate) fn publish_failed(routing_key: &'static str, error: &PublishError) {
    failed("amqp", routing_key, error.reason());
    if let PublishError::Returned { .. } = error {
        metrics::counter!(RETURNED, "sink" => "amqp", "routing_key" => routing_key).increment(1);
    }
}

/// Records the outcome of one AMQP event.
pub(crate) fn outcome(routing_key: &'static str, result: &Result<(), PublishError>) {
    match result {
        Ok(()) => published("amqp", routing_key),
        Err(error) => publish_failed(routing_key, error),
    }
}

/// Records the outcome of one MQTT message.
pub(crate) fn mqtt_outcome(routing_key: &'static str, result: &Result<(), MqttError>) {
    match result {
        Ok(()) => published("mqtt", routing_key),
        Err(error) => failed("mqtt", routing_key, error.reason()),
    }
}
