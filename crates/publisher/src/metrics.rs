//! The publisher's metrics, one typed helper per event. Labels are low-cardinality: the routing
//! key (`job.completed` / `job.failed`) and the failure reason.

use crate::error::PublishError;

/// Events the broker confirmed and did not return.
pub const PUBLISHED: &str = "events_published_total";
/// Events that did not count as published, by `reason` (see [`PublishError::reason`]).
pub const PUBLISH_FAILED: &str = "events_publish_failed_total";
/// Events the broker returned as unroutable (also counted in [`PUBLISH_FAILED`]).
pub const RETURNED: &str = "events_returned_total";

/// One event confirmed and routed.
pub(crate) fn published(routing_key: &'static str) {
    metrics::counter!(PUBLISHED, "routing_key" => routing_key).increment(1);
}

/// One event that did not count as published.
pub(crate) fn publish_failed(routing_key: &'static str, error: &PublishError) {
    metrics::counter!(
        PUBLISH_FAILED,
        "routing_key" => routing_key,
        "reason" => error.reason(),
    )
    .increment(1);
    if let PublishError::Returned { .. } = error {
        metrics::counter!(RETURNED, "routing_key" => routing_key).increment(1);
    }
}

/// Records the outcome of one event.
pub(crate) fn outcome(routing_key: &'static str, result: &Result<(), PublishError>) {
    match result {
        Ok(()) => published(routing_key),
        Err(error) => publish_failed(routing_key, error),
    }
}
