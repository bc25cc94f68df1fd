//! Counters of the relay and the repairer. Labels stay low-cardinality (routing key, reason).

/// Counter: events published again by the repairer (their first publish did not land).
pub const REPUBLISHED: &str = "fetcher_events_republished_total";
/// Counter: repair passes, by outcome (`ok`, `error`).
pub const REPAIR_PASSES: &str = "fetcher_outbox_repair_passes_total";

/// Counter: statements of the published-marks batcher, by outcome (`ok`, `error`).
pub const MARK_FLUSHES: &str = "fetcher_outbox_mark_flushes_total";
/// Counter: confirmed events handed to the batcher, by what became of them: `marked`
/// published, or `left` to the repairer (the queue full or closed, a flush failed twice).
pub const MARK_ROWS: &str = "fetcher_outbox_mark_rows_total";
/// Gauge: confirmed events waiting for the batcher's next statement.
pub const MARKS_WAITING: &str = "fetcher_outbox_marks_waiting";

/// Help text of the repairer's families.
pub fn describe() {
    metrics::describe_counter!(
        MARK_FLUSHES,
        "Statements marking confirmed events published, several jobs' per statement, by outcome."
    );
    metrics::describe_counter!(
        MARK_ROWS,
        "Confirmed events handed to be marked published: marked, or left to the repairer (it publishes them again)."
    );
    metrics::describe_gauge!(
        MARKS_WAITING,
        "Confirmed events waiting to be marked published by the next statement."
    );
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

/// Every series of the marks batcher at 0, so a dashboard has them before the first job.
pub fn marks_at_zero() {
    for outcome in ["ok", "error"] {
        metrics::counter!(MARK_FLUSHES, "outcome" => outcome).absolute(0);
    }
    for outcome in ["marked", "left"] {
        metrics::counter!(MARK_ROWS, "outcome" => outcome).absolute(0);
    }
    metrics::gauge!(MARKS_WAITING).set(0.0);
}

pub(crate) fn mark_flush(ok: bool) {
    let outcome = if ok { "ok" } else { "error" };
    metrics::counter!(MARK_FLUSHES, "outcome" => outcome).increment(1);
}

pub(crate) fn mark_rows(marked: bool, rows: u64) {
    let outcome = if marked { "marked" } else { "left" };
    metrics::counter!(MARK_ROWS, "outcome" => outcome).increment(rows);
}

pub(crate) fn marks_waiting(rows: usize) {
    metrics::gauge!(MARKS_WAITING).set(rows as f64);
}
