//! The Manager mode's outbox rows for the tests: a Manager job claimed and ended by this Worker
//! (its row written already claimed by its publisher); a row as lib-streaming writes one is
//! `testkit::manager::lib_streaming_row`.

use std::time::Duration;

use chrono::Utc;
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, TerminalStatus};
use contract::Redacted;
use mongodb::bson::doc;
use mongostate::ManagerStore;
use outbox::{
    Claim, ClaimRequest, PendingEvent, Recorded, RowId, Sink, TerminalOutcome, TerminalRecord,
};
use serde_json::Map;
use testkit::manager::NewJob;
use uuid::Uuid;

use crate::support::SOURCE;

/// Who runs the jobs.
pub(crate) const OWNER: &str = "owner-a";
/// Who publishes a recorded end right after its commit: its row's `claim_token`.
pub(crate) const PUBLISHER: &str = "publisher-a";

/// A job as the Manager's stand-in creates it.
pub(crate) fn job() -> NewJob {
    NewJob {
        mapped_fields: doc! {"orders": {"public.orders": ["id"]}},
        filters: doc! {},
        metadata: doc! {"source": "tests"},
    }
}

/// `job_id` (a job the Manager created) claimed through `store` by [`OWNER`], its message
/// carrying `request_id`.
pub(crate) async fn claim(store: &ManagerStore, job_id: Uuid, request_id: Option<&str>) {
    let metadata = Map::new();
    let claim = store
        .claim(&ClaimRequest {
            job_id,
            tenant: None,
            request_id,
            metadata: &metadata,
            spec: None,
            message_sha256: None,
            timeout_seconds: None,
            owner: OWNER,
            lease: Duration::from_secs(60),
            traceparent: None,
        })
        .await
        .expect("claim");
    assert!(matches!(claim, Claim::Acquired { .. }), "{claim:?}");
}

/// A job's failed end as this Worker records it.
pub(crate) struct RecordedEnd {
    pub event: OutboundEvent,
    /// Its row of `streaming_outbox_events`, as its publisher holds it.
    pub pending: PendingEvent,
    pub row_id: Uuid,
}

/// `job_id` claimed (see [`claim`]) and ended `failed` through `store`: its row of lib-streaming's
/// outbox written `PROCESSING` under [`PUBLISHER`]'s token, for it to publish.
pub(crate) async fn record_failure(
    store: &ManagerStore,
    job_id: Uuid,
    request_id: Option<&str>,
) -> RecordedEnd {
    claim(store, job_id, request_id).await;
    let metadata = Map::new();
    let error = Redacted::new("the datasource refused the query");
    let attributes =
        CloudEventAttributes::new(TerminalStatus::Failed, job_id, SOURCE, None, Utc::now());
    let event = OutboundEvent::new(
        job_id,
        &metadata,
        &Outcome::Failed { error: &error },
        attributes,
        request_id.map(str::to_owned),
    )
    .expect("event");
    let recorded = store
        .record_terminal(&TerminalRecord {
            job_id,
            owner: Some(OWNER),
            tenant: None,
            outcome: TerminalOutcome::Failed { error },
            event: &event,
            publisher: PUBLISHER,
            lease: Duration::from_secs(60),
            leaves_object: false,
            metadata: &metadata,
            executions: &[],
            close: None,
        })
        .await
        .expect("record");
    let Recorded::Inserted { outbox_id, .. } = recorded else {
        panic!("{recorded:?}")
    };
    let RowId::Uuid(row_id) = outbox_id else {
        panic!("a Manager row")
    };
    let pending = PendingEvent {
        id: outbox_id,
        job_id,
        sink: Sink::Amqp,
        topic: None,
        event: event.clone(),
        attempts: 1,
        created_at: Utc::now(),
    };
    RecordedEnd {
        event,
        pending,
        row_id,
    }
}
