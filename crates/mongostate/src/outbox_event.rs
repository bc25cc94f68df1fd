//! An outbox row of `streaming_outbox_events` as the event the job core and the publisher know
//! (`outbox::PendingEvent`), and a new row leased to its publisher.
//!
//! Upstream's gaps and what is chosen here:
//! - lib-streaming writes a row `PENDING` and any relay claims it. A row this Worker publishes
//!   right after its commit is written already claimed, as a relay's claim leaves it
//!   (`PROCESSING`, `updated_at` now, `claim_token` = the publisher): Go relays take a
//!   `PROCESSING` row only once it has not been updated for 10 minutes (§4.5 `ResetStuckProcessing`),
//!   so they do not publish it while this Worker does, and they do take it over should this
//!   Worker die before marking it, which keeps "at least once" (a takeover while a slow publisher
//!   still publishes is a duplicate, which consumers drop by `ce-id`, as upstream's own takeovers).
//! - A row carries no request id; a row's event is published without `X-Request-Id` unless the
//!   caller knows it (this Worker keeps it with the job).

use std::str::FromStr;

use chrono::{DateTime, Utc};
use contract::event::{CloudEventAttributes, Operation, OutboundEvent, TerminalStatus};
use mongodb::bson::{doc, Document};
use outbox::{PendingEvent, RowId, Sink};
use uuid::Uuid;

use crate::jobs::bson_time;
use crate::outbox::{new_row, Emit, OutboxRow, RowStatus};
use crate::{Error, Result, Store};

/// A new row of `emit`, claimed by `publisher` (see the module's docs), and its `id`.
pub fn leased_row(emit: &Emit<'_>, publisher: &str) -> Result<(Uuid, Document)> {
    let (id, mut row) = new_row(emit)?;
    row.insert("status", RowStatus::Processing.as_str());
    row.insert("updated_at", bson_time(Utc::now()));
    row.insert("claim_token", publisher);
    Ok((id, row))
}

/// The event a relay publishes from `row`: its envelope's body, and CloudEvent attributes equal
/// to those the PostgreSQL mode records for the same event (the envelope's `EventID`, `Source`,
/// `Timestamp`, `Subject` and `TenantID`). `attempts` counts this lease: the row's dispatch
/// attempts so far plus one. Refuses a row whose envelope is not a job's terminal event.
pub fn pending_event(row: &OutboxRow, request_id: Option<String>) -> Result<PendingEvent> {
    let envelope = row.envelope()?;
    let invalid = |reason: &str| Error::InvalidEnvelope {
        id: row.id.clone(),
        reason: reason.to_owned(),
    };
    let id = Uuid::parse_str(&row.id).map_err(|_| invalid("id is not a UUID"))?;
    let job_id =
        Uuid::parse_str(&envelope.subject).map_err(|_| invalid("Subject is not a job id"))?;
    let status = TerminalStatus::from_str(&envelope.event_type)
        .map_err(|_| invalid("EventType is not completed or failed"))?;
    let operation = Operation::from(status);
    let attributes = CloudEventAttributes {
        id: envelope.event_id,
        source: envelope.source,
        status: operation,
        datasource: None,
        time: envelope.timestamp,
        subject: envelope.subject,
        tenant: envelope.tenant,
        traceparent: None,
    };
    if envelope.routing_key != attributes.routing_key() {
        return Err(invalid(
            "destination.address is not the event's routing key",
        ));
    }
    Ok(PendingEvent {
        id: RowId::Uuid(id),
        job_id,
        sink: Sink::Amqp,
        topic: None,
        event: OutboundEvent {
            attributes,
            request_id,
            body: envelope.body.into_bytes(),
        },
        attempts: row.attempts.saturating_add(1).unsigned_abs(),
        created_at: row.created_at,
    })
}

/// The event time of `event`, as its envelope's `Timestamp` must repeat it.
pub(crate) fn event_time(event: &OutboundEvent) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(&event.attributes.time)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|_| Error::InvalidWrite {
            what: "the event",
            reason: "its time is not RFC 3339".to_owned(),
        })
}

/// Marks `id` (of `tenant`) published after the broker confirmed it, while `owner` still holds
/// it (`PROCESSING` under its `claim_token`): lib-commons' `MarkPublished` with the claim's
/// token in the filter, so a row a relay took over is not marked by its earlier holder.
/// `false` when `owner` no longer held it.
pub async fn mark_published_by(
    store: &Store,
    id: Uuid,
    tenant: &str,
    owner: &str,
    now: DateTime<Utc>,
) -> Result<bool> {
    let at = bson_time(now);
    let done = store
        .outbox_rows()
        .update_one(
            held(id, tenant, owner),
            doc! {
                "$set": {"status": RowStatus::Published.as_str(), "published_at": at, "updated_at": at},
                "$unset": {"claim_token": ""},
            },
        )
        .await
        .map_err(|e| Error::unavailable(&e))?;
    Ok(done.modified_count == 1)
}

/// Gives `id` back after a failed publish while `owner` holds it: lib-commons' `MarkFailed`
/// (`FAILED`, retried by any relay after its 5-minute window, or `INVALID` at its tenth
/// attempt), with the claim's token in the filter. The status written, or `None` when `owner`
/// no longer held it.
pub async fn mark_failed_by(
    store: &Store,
    id: Uuid,
    tenant: &str,
    owner: &str,
    error: &str,
    now: DateTime<Utc>,
) -> Result<Option<RowStatus>> {
    let found = store
        .outbox_rows()
        .find_one(held(id, tenant, owner))
        .await
        .map_err(|e| Error::unavailable(&e))?;
    let Some(found) = found else {
        return Ok(None);
    };
    let row = OutboxRow::from_document(&found)?;
    crate::outbox_claim::mark_failed(store, &row, error, now).await
}

fn held(id: Uuid, tenant: &str, owner: &str) -> Document {
    doc! {
        "id": id.hyphenated().to_string(),
        "tenant_id": tenant,
        "status": RowStatus::Processing.as_str(),
        "claim_token": owner,
    }
}
