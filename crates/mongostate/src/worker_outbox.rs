//! This Worker's own outbox in the Manager's database, [`WORKER_OUTBOX_COLLECTION`], for the
//! events a Go relay would refuse: every event but a job's `job.completed` / `job.failed`
//! (executions' events, and the lifecycle's cancel and delete events). lib-commons'
//! dispatcher claims every row of `streaming_outbox_events` whatever its type and makes what it
//! cannot route `INVALID` (UPSTREAM-MANAGER §4.5, §6.2), so these rows never go there; no Go
//! code reads this collection.
//!
//! A row is the PostgreSQL outbox's row in BSON: the event's `ce_id` (one row per event), its
//! CloudEvent attributes and body bytes as recorded, and a lease (`leased_by`, `lease_until`)
//! with a backoff (`next_attempt_at`), so it is relayed as the PostgreSQL mode relays its rows.

use std::time::Duration;

use chrono::{DateTime, Utc};
use contract::event::{CloudEventAttributes, OutboundEvent, TerminalStatus};
use mongodb::bson::{self, doc, spec::BinarySubtype, Binary, Bson, Document};
use mongodb::{ClientSession, Collection};
use outbox::{PendingEvent, RowId, Sink};
use uuid::Uuid;

use crate::claims::chrono_duration;
use crate::jobs::bson_time;
use crate::{binary_id, Error, Result, Store};

/// The collection of this Worker's own rows, in the `job` database.
pub const WORKER_OUTBOX_COLLECTION: &str = "fetcher_worker_outbox";

/// Whether `event` belongs in lib-streaming's `streaming_outbox_events` (a job's completed or
/// failed event, which Go relays publish); every other event goes to this Worker's own rows.
pub fn is_streaming_event(event: &OutboundEvent) -> bool {
    !event.attributes.is_execution()
        && event
            .attributes
            .status
            .as_str()
            .parse::<TerminalStatus>()
            .is_ok()
}

/// Inserts `event`'s row for `job_id` in `session`'s transaction, leased to `publisher` for
/// `lease`. `None` when a row of its ce-id exists: an event is recorded once.
///
/// One command: an upsert on the `ce_id` (unique) that only inserts (`$setOnInsert`), rather
/// than a read for the `ce_id` and then an insert; whether it inserted is its `upserted_id`.
pub(crate) async fn insert_leased(
    store: &Store,
    session: &mut ClientSession,
    job_id: Uuid,
    event: OutboundEvent,
    publisher: &str,
    lease: Duration,
    mirror: Option<&str>,
) -> std::result::Result<Option<PendingEvent>, crate::manager_store::Fail> {
    let rows = store.worker_rows();
    let id = Uuid::now_v7();
    let now = Utc::now();
    let attributes = bson::to_document(&event.attributes).map_err(|e| Error::InvalidWrite {
        what: "an event's attributes",
        reason: e.to_string(),
    })?;
    // The `ce_id` comes from the upsert's filter.
    let row = doc! {
        "id": id.hyphenated().to_string(),
        "job_id": binary_id(job_id),
        "attributes": attributes,
        "request_id": event.request_id.as_deref().map_or(Bson::Null, Bson::from),
        "body": Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: event.body.clone() }),
        "attempts": 1_i32,
        "leased_by": publisher,
        "lease_until": bson_time(now + chrono_duration(lease)),
        "next_attempt_at": bson_time(now),
        "published_at": Bson::Null,
        "created_at": bson_time(now),
    };
    let done = rows
        .update_one(doc! {"ce_id": event.ce_id()}, doc! {"$setOnInsert": row})
        .upsert(true)
        .session(&mut *session)
        .await?;
    if done.upserted_id.is_none() {
        return Ok(None);
    }
    crate::mirror::record(store, session, mirror, job_id, &event).await?;
    Ok(Some(PendingEvent {
        id: RowId::Uuid(id),
        job_id,
        sink: Sink::Amqp,
        topic: None,
        event,
        attempts: 1,
        created_at: now,
    }))
}

/// Leases up to `limit` unpublished rows to `owner` for `lease`: recorded at least `grace` ago,
/// due, and not leased (or under a lapsed lease); oldest due first. Each row is taken by a
/// conditional update on the lease it was read with, so two relays never take one row.
pub async fn claim_due(
    store: &Store,
    owner: &str,
    grace: Duration,
    lease: Duration,
    limit: i64,
) -> Result<Vec<PendingEvent>> {
    lease_due(
        &store.worker_rows(),
        owner,
        grace,
        lease,
        limit,
        pending_event,
    )
    .await
}

/// [`claim_due`] on `rows` (this Worker's outbox or the mirror's, `mirror_queue`), each row
/// read back by `decode`.
pub(crate) async fn lease_due(
    rows: &Collection<Document>,
    owner: &str,
    grace: Duration,
    lease: Duration,
    limit: i64,
    decode: fn(&Document) -> Result<PendingEvent>,
) -> Result<Vec<PendingEvent>> {
    let now = Utc::now();
    let filter = doc! {
        "published_at": Bson::Null,
        "created_at": {"$lte": bson_time(now - chrono_duration(grace))},
        "next_attempt_at": {"$lte": bson_time(now)},
        "$or": [{"lease_until": Bson::Null}, {"lease_until": {"$lte": bson_time(now)}}],
    };
    lease_rows(rows, filter, owner, lease, limit, decode).await
}

/// Leases `job_id`'s unpublished rows to `owner` for `lease`, whatever their age or backoff
/// (a redelivery of its ended job asks for them); rows another publisher holds are left to it.
pub async fn claim_for_job(
    store: &Store,
    job_id: Uuid,
    owner: &str,
    lease: Duration,
) -> Result<Vec<PendingEvent>> {
    let now = Utc::now();
    let filter = doc! {
        "job_id": binary_id(job_id),
        "published_at": Bson::Null,
        "$or": [{"lease_until": Bson::Null}, {"lease_until": {"$lte": bson_time(now)}}],
    };
    lease_rows(
        &store.worker_rows(),
        filter,
        owner,
        lease,
        1000,
        pending_event,
    )
    .await
}

/// Leases the rows of `rows` that `filter` matches (up to `limit`, oldest due first) to `owner`,
/// each read back by `decode`.
async fn lease_rows(
    rows: &Collection<Document>,
    filter: Document,
    owner: &str,
    lease: Duration,
    limit: i64,
    decode: fn(&Document) -> Result<PendingEvent>,
) -> Result<Vec<PendingEvent>> {
    let mut cursor = rows
        .find(filter)
        .sort(doc! {"next_attempt_at": 1, "id": 1})
        .limit(limit)
        .await
        .map_err(|e| Error::unavailable(&e))?;
    let mut seen = Vec::new();
    while cursor.advance().await.map_err(|e| Error::unavailable(&e))? {
        seen.push(
            cursor
                .deserialize_current()
                .map_err(|e| Error::unavailable(&e))?,
        );
    }
    let until = bson_time(Utc::now() + chrono_duration(lease));
    let mut leased = Vec::new();
    for row in seen {
        let version = doc! {
            "id": row.get("id").cloned().unwrap_or(Bson::Null),
            "published_at": Bson::Null,
            "leased_by": row.get("leased_by").cloned().unwrap_or(Bson::Null),
            "lease_until": row.get("lease_until").cloned().unwrap_or(Bson::Null),
        };
        let done = rows
            .update_one(
                version,
                doc! {"$set": {"leased_by": owner, "lease_until": until}, "$inc": {"attempts": 1_i32}},
            )
            .await
            .map_err(|e| Error::unavailable(&e))?;
        if done.modified_count != 1 {
            continue;
        }
        match decode(&row) {
            Ok(mut event) => {
                event.attempts = event.attempts.saturating_add(1);
                leased.push(event);
            }
            Err(error) => tracing::error!(
                %error,
                "Outbox row is unreadable; it stays unpublished until it is repaired."
            ),
        }
    }
    Ok(leased)
}

/// Marks the row published (the broker confirmed it) while `owner` holds it or nobody does.
pub async fn mark_published(store: &Store, id: Uuid, owner: &str) -> Result<bool> {
    let done = store
        .worker_rows()
        .update_one(
            held(id, owner),
            doc! {"$set": {
                "published_at": bson_time(Utc::now()),
                "leased_by": Bson::Null,
                "lease_until": Bson::Null,
            }},
        )
        .await
        .map_err(|e| Error::unavailable(&e))?;
    Ok(done.modified_count == 1)
}

/// Gives the row back after a failed publish: lease cleared, due again after `retry_after`,
/// `error` (redacted) kept.
pub async fn mark_failed(
    store: &Store,
    id: Uuid,
    owner: &str,
    error: &str,
    retry_after: Duration,
) -> Result<bool> {
    give_back(&store.worker_rows(), id, owner, error, retry_after).await
}

/// Gives the row `id` of `rows` (this Worker's outbox or the mirror's) back while `owner` holds
/// it: lease cleared, due again after `retry_after`, `error` (redacted) kept.
pub(crate) async fn give_back(
    rows: &Collection<Document>,
    id: Uuid,
    owner: &str,
    error: &str,
    retry_after: Duration,
) -> Result<bool> {
    let done = rows
        .update_one(
            held(id, owner),
            doc! {"$set": {
                "leased_by": Bson::Null,
                "lease_until": Bson::Null,
                "next_attempt_at": bson_time(Utc::now() + chrono_duration(retry_after)),
                "last_error": contract::redact(error),
            }},
        )
        .await
        .map_err(|e| Error::unavailable(&e))?;
    Ok(done.modified_count == 1)
}

pub(crate) fn held(id: Uuid, owner: &str) -> Document {
    doc! {
        "id": id.hyphenated().to_string(),
        "published_at": Bson::Null,
        "$or": [{"leased_by": owner}, {"leased_by": Bson::Null}],
    }
}

/// A row as the event the publisher sends.
pub(crate) fn pending_event(row: &Document) -> Result<PendingEvent> {
    let id_text = row.get_str("id").unwrap_or_default().to_owned();
    let corrupt = |reason: &str| Error::UndecodableRow {
        id: id_text.clone(),
        reason: reason.to_owned(),
    };
    let id = Uuid::parse_str(&id_text).map_err(|_| corrupt("id is not a UUID"))?;
    let job_id = match row.get("job_id") {
        Some(Bson::Binary(b)) => Uuid::from_slice(&b.bytes).map_err(|_| corrupt("job_id"))?,
        _ => return Err(corrupt("job_id is not binary")),
    };
    let attributes: CloudEventAttributes = row
        .get_document("attributes")
        .ok()
        .and_then(|a| bson::from_document(a.clone()).ok())
        .ok_or_else(|| corrupt("attributes do not decode"))?;
    let body = match row.get("body") {
        Some(Bson::Binary(b)) => b.bytes.clone(),
        _ => return Err(corrupt("body is not binary")),
    };
    let created_at: DateTime<Utc> = match row.get("created_at") {
        Some(Bson::DateTime(at)) => {
            DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or_default()
        }
        _ => return Err(corrupt("created_at is not a date")),
    };
    let attempts = row.get_i32("attempts").unwrap_or(0).unsigned_abs();
    Ok(PendingEvent {
        id: RowId::Uuid(id),
        job_id,
        sink: Sink::Amqp,
        topic: None,
        event: OutboundEvent {
            attributes,
            request_id: row.get_str("request_id").ok().map(str::to_owned),
            body,
        },
        attempts,
        created_at,
    })
}

/// Deletes rows published more than `older_than` ago, `batch` at a time, until a batch finds
/// fewer: this collection is this Worker's alone (lib-streaming's rows are never pruned, as
/// upstream never prunes them). Returns how many were deleted.
pub async fn purge_published(store: &Store, older_than: Duration, batch: i64) -> Result<u64> {
    let before = bson_time(Utc::now() - chrono_duration(older_than));
    let rows = store.worker_rows();
    let mut total = 0;
    loop {
        let mut cursor = rows
            .find(doc! {"published_at": {"$lte": before}})
            .projection(doc! {"_id": 1})
            .limit(batch.max(1))
            .await
            .map_err(|e| Error::unavailable(&e))?;
        let mut ids = Vec::new();
        while cursor.advance().await.map_err(|e| Error::unavailable(&e))? {
            let row: Document = cursor
                .deserialize_current()
                .map_err(|e| Error::unavailable(&e))?;
            if let Some(id) = row.get("_id") {
                ids.push(id.clone());
            }
        }
        if ids.is_empty() {
            return Ok(total);
        }
        let found = ids.len();
        let deleted = rows
            .delete_many(doc! {"_id": {"$in": ids}})
            .await
            .map_err(|e| Error::unavailable(&e))?;
        total += deleted.deleted_count;
        if (found as i64) < batch.max(1) {
            return Ok(total);
        }
    }
}
