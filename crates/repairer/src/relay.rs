//! Publishing leased outbox rows and recording the outcome of each.

use outbox::{backoff, OutboxError, PendingEvent, Store};
use publisher::Publisher;

/// What one relay of a batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayReport {
    /// Confirmed by the broker and marked published.
    pub published: u64,
    /// Not confirmed (unroutable, nacked, broker unreachable): backed off, to be retried.
    pub failed: u64,
}

/// Publishes `events` (leased to `owner`) in one pipelined batch, marks the confirmed ones
/// published, and gives each failed one back with a backoff that grows with its attempts.
/// A failed publish never stops the others. Errors are only the state database's: then rows
/// stay leased until their lease ends, and are taken again.
pub async fn relay(
    store: &Store,
    publisher: &Publisher,
    owner: &str,
    events: &[PendingEvent],
) -> Result<RelayReport, OutboxError> {
    if events.is_empty() {
        return Ok(RelayReport::default());
    }
    let outbound: Vec<_> = events.iter().map(|p| p.event.clone()).collect();
    let outcomes = publisher.publish_batch(&outbound).await;
    let mut confirmed = Vec::with_capacity(events.len());
    let mut report = RelayReport::default();
    for (pending, outcome) in events.iter().zip(outcomes) {
        match outcome {
            Ok(()) => {
                confirmed.push(pending.id);
                if pending.attempts > 1 {
                    crate::metrics::republished(pending.event.routing_key());
                }
            }
            Err(error) => {
                report.failed += 1;
                let retry_after = backoff(pending.attempts);
                tracing::warn!(
                    ce_id = %pending.event.ce_id(),
                    job_id = %pending.job_id,
                    attempts = pending.attempts,
                    error = %error,
                    retry_in_ms = retry_after.as_millis() as u64,
                    "Event not published; it will be retried."
                );
                store
                    .mark_failed(pending.id, owner, &error.to_string(), retry_after)
                    .await?;
            }
        }
    }
    report.published = store.mark_published(&confirmed, owner).await?;
    Ok(report)
}
