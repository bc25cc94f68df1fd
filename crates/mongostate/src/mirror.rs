//! The MQTT mirror's rows in the Manager mode (lifecycle §5, issue 35 item 4): each event a
//! transition records gets, when the mirror is on, a row of its MQTT topic and payload in
//! [`MIRROR_COLLECTION`], written in the same transaction as the state change.
//!
//! The rows never go in lib-streaming's `streaming_outbox_events` (a Go relay would claim them
//! and make them `INVALID`, UPSTREAM-MANAGER §4.5) nor in `fetcher_worker_outbox` (the AMQP
//! relay's): the collection is this Worker's alone and no Go code reads it. The payload is built
//! by `contract::event::mirror` from the event and the job's facts as this transaction leaves
//! them (its executions, its end), as the PostgreSQL mode builds it, so it never contradicts the
//! state committed with it. Rows are recorded unleased: the mirror's relay takes them at once
//! (`mirror_queue`).
//!
//! Events re-emitted from a crashed Go Worker's marker (`marker_repair`) are not mirrored: the
//! Go Worker that recorded that end had no mirror either.

use chrono::{DateTime, Utc};
use contract::event::mirror::{JobFacts, MirrorMessage};
use contract::event::OutboundEvent;
use contract::lifecycle::{ExecutionStatus, JobProcessDetails};
use mongodb::bson::{self, doc, spec::BinarySubtype, Binary, Bson};
use mongodb::ClientSession;
use uuid::Uuid;

use crate::jobs::{bson_time, JobDocument};
use crate::manager_store::{field, Fail};
use crate::{binary_id, Error, Store};

/// The collection of the mirror's rows, in the `job` database.
pub const MIRROR_COLLECTION: &str = "fetcher_worker_mirror";

/// Records the MQTT row of `event` (recorded for `job_id` in `session`'s transaction) under the
/// topic prefix `mirror`; nothing when the mirror is off or the event has a row already.
pub(crate) async fn record(
    store: &Store,
    session: &mut ClientSession,
    mirror: Option<&str>,
    job_id: Uuid,
    event: &OutboundEvent,
) -> Result<(), Fail> {
    let Some(prefix) = mirror else {
        return Ok(());
    };
    let rows = store.mirror_rows();
    let ce_id = event.ce_id();
    if rows
        .find_one(doc! {"ce_id": &ce_id})
        .session(&mut *session)
        .await?
        .is_some()
    {
        return Ok(());
    }
    let facts = if event.attributes.is_execution() {
        // An execution's payload needs nothing of its job's document.
        JobFacts::default()
    } else {
        facts(store, session, job_id).await?
    };
    let message = MirrorMessage::of(prefix, event, &facts).map_err(|e| Error::InvalidWrite {
        what: "the MQTT mirror's row",
        reason: e.to_string(),
    })?;
    let attributes = bson::to_document(&event.attributes).map_err(|e| Error::InvalidWrite {
        what: "an event's attributes",
        reason: e.to_string(),
    })?;
    let now = Utc::now();
    let row = doc! {
        "id": Uuid::now_v7().hyphenated().to_string(),
        "ce_id": ce_id,
        "job_id": binary_id(job_id),
        "topic": message.topic,
        "attributes": attributes,
        "request_id": event.request_id.as_deref().map_or(Bson::Null, Bson::from),
        "body": Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: message.payload }),
        "attempts": 0_i32,
        "leased_by": Bson::Null,
        "lease_until": Bson::Null,
        "next_attempt_at": bson_time(now),
        "published_at": Bson::Null,
        "created_at": bson_time(now),
    };
    rows.insert_one(row).session(&mut *session).await?;
    Ok(())
}

/// The job's facts as this transaction sees them (its writes included): its datasources in byte
/// order (as the claim queues them), `metadata.source` when it is a string, its times and its
/// executions' statuses counted.
async fn facts(store: &Store, session: &mut ClientSession, job_id: Uuid) -> Result<JobFacts, Fail> {
    let found = store
        .jobs()
        .find_one(doc! {"_id": binary_id(job_id)})
        .session(&mut *session)
        .await?;
    let Some(document) = found else {
        return Err(Fail::Store(Error::JobNotFound(job_id)));
    };
    let job = crate::jobs::decode(document)
        .map_err(|reason| Fail::Store(Error::UndecodableJob { id: job_id, reason }))?;
    Ok(facts_of(&job, Utc::now()))
}

/// [`JobFacts`] of `job` as read; `now` stands for a time the document lacks.
pub(crate) fn facts_of(job: &JobDocument, now: DateTime<Utc>) -> JobFacts {
    let worker = job.fetcher_worker.clone().unwrap_or_default();
    let time = |key: &str| match worker.get(key) {
        Some(Bson::DateTime(at)) => DateTime::from_timestamp_millis(at.timestamp_millis()),
        _ => None,
    };
    let mut datasources: Vec<String> = job.mapped_fields.keys().cloned().collect();
    datasources.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let statuses = crate::executions::stored(&worker)
        .iter()
        .filter_map(|e| e.get_str("status").ok()?.parse::<ExecutionStatus>().ok())
        .collect::<Vec<_>>();
    let created_at = job.created_at.unwrap_or(now);
    JobFacts {
        datasources,
        description: job.metadata.get_str("source").ok().map(str::to_owned),
        created_at,
        last_updated_at: time(field::UPDATED_AT).unwrap_or(now).max(created_at),
        finished_at: time(field::FINISHED_AT).or(job.completed_at),
        details: JobProcessDetails::of(statuses),
    }
}
