//! Counters of the relay and the repairer. Labels stay low-cardinality (routing key, reason).

/// Counter: events published again by the repairer (their first publish did not land).
pub const REPUBLISHED: &str = "fetcher_events_republished_total";
/// Counter: repair passes, by outcome (`ok`, `error`).
pub const REPAIR_PASSES: &str = "fetcher_outbox_repair_passes_total";

/// Help text of the repairer's families.
pub fn describe() {
    metrics::describe_counter!(
        REPUBLISHED,
        "Events the repairer published again because their first publish did not land."
    );
    metrics::describe_counter!(REPAIR_PASSES, "Outbox repair passes, by sink and outcome.");
}

pub(crate) fn republished(sink: outbox::Sink, routing_key: &'static str) {
    metrics::counter!(REPUBLISHED, "sink" => sink.as_str(), "routing_key" => routing_key)
        .increment(1);
}

pub(crate) fn repair_pass(sink: outbox::Sink, ok: bool) {
    let outcome = if ok { "ok" } else { "error" };
    metrics::counter!(REPAIR_PASSES, "sink" => sink.as_str(), "outcome" => outcome).increment(1);
}
