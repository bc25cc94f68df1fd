//! The MQTT mirror's rows (`fetcher_worker_mirror`, see `mirror`) as a delivery queue, relayed with the
//! PostgreSQL mirror queue's rules (`outbox::MirrorBatch`): due rows taken oldest due first,
//! published, deleted once the broker acknowledged them (a row is only the delivery of a copy
//! nobody else publishes; it is no record to keep), the others backed off with their attempt
//! counted and their error kept.
//!
//! MongoDB has no row lock held across the publish, so a batch is taken under a lease instead
//! (the conditional update of `worker_outbox`, so relays of several Workers never take one row
//! at once); a relay that dies mid-batch leaves its rows to the next relay once the lease lapses.

use std::time::Duration;

use chrono::Utc;
use mongodb::bson::{doc, Bson, Document};
use outbox::{OutboxStats, PendingEvent, Sink};
use uuid::Uuid;

use crate::worker_outbox::{give_back, held, lease_due, pending_event};
use crate::{Error, Result, Store};

/// Leases up to `limit` due rows to `owner` for `lease`: recorded at least `grace` ago, due, and
/// not leased (or under a lapsed lease); oldest due first. Each event's `attempts` counts this
/// lease.
pub async fn claim_due(
    store: &Store,
    owner: &str,
    grace: Duration,
    lease: Duration,
    limit: i64,
) -> Result<Vec<PendingEvent>> {
    lease_due(
        &store.mirror_rows(),
        owner,
        grace,
        lease,
        limit,
        mirror_event,
    )
    .await
}

/// Deletes the rows the broker acknowledged, each while `owner` holds it or nobody does.
/// Returns how many were deleted.
pub async fn delete_published(store: &Store, ids: &[Uuid], owner: &str) -> Result<u64> {
    let mut deleted = 0;
    for id in ids {
        let done = store
            .mirror_rows()
            .delete_one(held(*id, owner))
            .await
            .map_err(|e| Error::unavailable(&e))?;
        deleted += done.deleted_count;
    }
    Ok(deleted)
}

/// Gives a row back after a failed publish: lease cleared, due again after `retry_after`,
/// `error` (redacted) kept.
pub async fn mark_failed(
    store: &Store,
    id: Uuid,
    owner: &str,
    error: &str,
    retry_after: Duration,
) -> Result<bool> {
    give_back(&store.mirror_rows(), id, owner, error, retry_after).await
}

/// The mirror's backlog, as the PostgreSQL mode reports its MQTT rows (`outbox::Store::stats`):
/// rows not delivered yet, the oldest one's age, and those with a failed publish (a `last_error`;
/// a delivered row is deleted). The collection holds only undelivered rows, so this reads few.
pub async fn stats(store: &Store) -> Result<OutboxStats> {
    let rows = store.mirror_rows();
    let pending = rows
        .count_documents(doc! {"published_at": Bson::Null})
        .await
        .map_err(|e| Error::unavailable(&e))?;
    let failing = rows
        .count_documents(doc! {"published_at": Bson::Null, "last_error": {"$exists": true}})
        .await
        .map_err(|e| Error::unavailable(&e))?;
    let oldest = rows
        .find_one(doc! {"published_at": Bson::Null})
        .sort(doc! {"created_at": 1})
        .await
        .map_err(|e| Error::unavailable(&e))?
        .and_then(|row| match row.get("created_at") {
            Some(Bson::DateTime(at)) => Some(at.timestamp_millis()),
            _ => None,
        });
    let now = Utc::now().timestamp_millis();
    Ok(OutboxStats {
        pending: i64::try_from(pending).unwrap_or(i64::MAX),
        // A row stamped by a clock ahead of this one's is 0 s old, not negative.
        oldest_unpublished_age: oldest
            .map(|at| Duration::from_millis(u64::try_from(now - at).unwrap_or(0))),
        failing: i64::try_from(failing).unwrap_or(i64::MAX),
    })
}

/// A mirror row as the MQTT message the publisher sends: its topic, and its payload as the body.
fn mirror_event(row: &Document) -> Result<PendingEvent> {
    let mut event = pending_event(row)?;
    let topic = row.get_str("topic").map_err(|_| Error::UndecodableRow {
        id: event.id.to_string(),
        reason: "topic is not a string".to_owned(),
    })?;
    event.sink = Sink::Mqtt;
    event.topic = Some(topic.to_owned());
    Ok(event)
}
