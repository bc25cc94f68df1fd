//! Publishing leased outbox rows and recording the outcome of each.

use std::time::Duration;

use outbox::{backoff, MirrorBatch, OutboxError, PendingEvent, RowId, Store, Unpublished};

use crate::marks::Marks;
use crate::sink::{Outcomes, SinkPublisher};

/// The shortest wait before a failed event is due again. [`backoff()`] draws "full jitter" from
/// zero, so without a floor a failed row could be due at once and be leased again by the same
/// repair pass, which would only fail it again (a returned message is returned again at once).
pub const MIN_RETRY_DELAY: Duration = Duration::from_secs(1);

/// What one relay of a batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayReport {
    /// Confirmed by the broker and marked published.
    pub published: u64,
    /// Not confirmed (unroutable, nacked, broker unreachable): backed off, to be retried.
    pub failed: u64,
    /// Of `failed`, those the broker answered for (returned as unroutable, nacked) or that cannot
    /// be built as a message: failures of the event, not of the broker, which is reachable.
    pub rejected: u64,
}

/// Publishes `events` (leased to `owner`) in one pipelined batch, marks the confirmed ones
/// published, and gives each failed one back with a backoff that grows with its attempts (at
/// least [`MIN_RETRY_DELAY`]). A failed publish never stops the others. Errors are only the
/// state database's: then rows not yet marked stay leased until their lease ends, and are taken
/// again.
pub async fn relay(
    store: &Store,
    publisher: &SinkPublisher,
    owner: &str,
    events: &[PendingEvent],
) -> Result<RelayReport, OutboxError> {
    let outcomes = publisher.send(events).await;
    record(store, owner, events, outcomes).await
}

/// Whether a batch's outcomes say the broker is away: nothing confirmed, and not only because
/// the broker returned or refused the events (then it answered, and is there).
pub(crate) fn broker_away(outcomes: &Outcomes) -> bool {
    let mut away = false;
    for outcome in outcomes {
        match outcome {
            Ok(()) => return false,
            Err(failure) => away |= !failure.is_rejection(),
        }
    }
    away
}

/// The second half of [`relay`]: records each event's outcome in the outbox.
pub(crate) async fn record(
    store: &Store,
    owner: &str,
    events: &[PendingEvent],
    outcomes: Outcomes,
) -> Result<RelayReport, OutboxError> {
    if events.is_empty() {
        return Ok(RelayReport::default());
    }
    let sorted = Sorted::of(events, outcomes);
    let mut report = sorted.report;
    // The confirmed rows first: they are on the broker, and a database error while backing off
    // the failed ones must not leave them leased, to be published a second time.
    let confirmed = sorted.confirmed_serials();
    if !confirmed.is_empty() {
        report.published = store.mark_published(&confirmed, owner).await?;
    }
    give_back(store, owner, &sorted.unpublished).await?;
    Ok(report)
}

/// [`relay`], the confirmed rows handed to `marks` instead of marked here: their marks share
/// one statement with other jobs' ([`Marks`]). What the Worker does right after a job's
/// commit; the repairer's passes mark their own batches. `published` counts the rows queued
/// to be marked; a row the queue could not take stays leased to `owner` until its lease ends,
/// and the repairer publishes it again. Errors are only the state database's, while giving
/// back the failed rows.
pub async fn relay_marked_later(
    store: &Store,
    publisher: &SinkPublisher,
    marks: &Marks,
    owner: &str,
    events: &[PendingEvent],
) -> Result<RelayReport, OutboxError> {
    if events.is_empty() {
        return Ok(RelayReport::default());
    }
    let outcomes = publisher.send(events).await;
    let sorted = Sorted::of(events, outcomes);
    let mut report = sorted.report;
    let confirmed = sorted.confirmed_serials();
    report.published = marks.mark_later(owner, &confirmed) as u64;
    give_back(store, owner, &sorted.unpublished).await?;
    Ok(report)
}

/// Gives the rows a publish failed back to the outbox, each with its backoff, so the repairer
/// takes them again once due. Only this store's rows: a row another backend leased is given
/// back by that backend.
async fn give_back(
    store: &Store,
    owner: &str,
    unpublished: &[Unpublished],
) -> Result<(), OutboxError> {
    for row in unpublished {
        let Some(id) = row.id.serial() else { continue };
        store
            .mark_failed(id, owner, &row.error, row.retry_after)
            .await?;
    }
    Ok(())
}

/// Ends a batch of the mirror's rows with its outcomes: the acknowledged rows deleted, the
/// others backed off, in the batch's transaction.
pub(crate) async fn finish(
    batch: MirrorBatch,
    outcomes: Outcomes,
) -> Result<RelayReport, OutboxError> {
    let sorted = Sorted::of(batch.events(), outcomes);
    let mut report = sorted.report;
    report.published = batch.finish(&sorted.confirmed, &sorted.unpublished).await?;
    Ok(report)
}

/// A batch's outcomes sorted into the rows to mark published and those to back off (each
/// failure logged, with the backoff its attempts earn). Shared by both state backends' relays.
pub(crate) struct Sorted {
    pub(crate) confirmed: Vec<RowId>,
    pub(crate) unpublished: Vec<Unpublished>,
    /// `failed` and `rejected` counted; `published` is what the store then marks.
    pub(crate) report: RelayReport,
}

impl Sorted {
    /// The confirmed rows of this store (PostgreSQL serials): a row another backend leased is
    /// marked by that backend.
    pub(crate) fn confirmed_serials(&self) -> Vec<i64> {
        self.confirmed.iter().filter_map(|id| id.serial()).collect()
    }

    pub(crate) fn of(events: &[PendingEvent], outcomes: Outcomes) -> Sorted {
        let mut sorted = Sorted {
            confirmed: Vec::with_capacity(events.len()),
            unpublished: Vec::new(),
            report: RelayReport::default(),
        };
        for (pending, outcome) in events.iter().zip(outcomes) {
            let error = match outcome {
                Ok(()) => {
                    sorted.confirmed.push(pending.id);
                    if pending.attempts > 1 {
                        crate::metrics::republished(pending.sink, pending.event.routing_key());
                    }
                    continue;
                }
                // An execution's event is for whoever binds `job.execution.*` or `job.#`
                // (lifecycle §4); returned unroutable, it has no subscriber to lose it, and is not
                // retried forever (the publisher counts it in `fetcher_events_returned_total`).
                Err(failure)
                    if failure.is_unroutable() && pending.event.attributes.is_execution() =>
                {
                    sorted.confirmed.push(pending.id);
                    continue;
                }
                Err(error) => error,
            };
            sorted.report.failed += 1;
            if error.is_rejection() {
                sorted.report.rejected += 1;
            }
            let retry_after = backoff(pending.attempts).max(MIN_RETRY_DELAY);
            tracing::warn!(
                ce_id = %pending.event.ce_id(),
                sink = %pending.sink,
                job_id = %pending.job_id,
                attempts = pending.attempts,
                error = %error,
                retry_in_ms = retry_after.as_millis() as u64,
                "Event not published; it will be retried."
            );
            sorted.unpublished.push(Unpublished {
                id: pending.id,
                error: error.to_string(),
                retry_after,
            });
        }
        sorted
    }
}
