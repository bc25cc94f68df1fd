//! What a job's events say of its runs and its trace, against the real PostgreSQL: a job whose
//! message ran again shows `deliveries` in its executions' details (read and evented) and ends
//! through the locked transaction; a traced job's trace is kept with it and carried by every
//! event recorded for it, the control API's included; an untraced job's events have none.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use contract::lifecycle::{ExecutionStatus, Step};
use contract::message::MappedFields;
use outbox::{
    Claim, ClaimRequest, Close, ControlRequest, Controlled, ExecutionReport, JobSpec, PendingEvent,
    Recorded, Store, TerminalRecord,
};
use serde_json::Value;
use uuid::Uuid;

use crate::support::{claim_request, completed, control_request, metadata, TestDb, LONG, SOURCE};

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Claims `job_id` (one datasource, `src`) for `owner` with `lease` and `traceparent`.
async fn claim(
    store: &Store,
    job_id: Uuid,
    owner: &str,
    lease: Duration,
    traceparent: Option<&str>,
) -> Claim {
    let metadata = metadata();
    let mapped: MappedFields = BTreeMap::from([(
        "src".to_owned(),
        BTreeMap::from([("t".to_owned(), vec!["id".to_owned()])]),
    )]);
    let filters = Default::default();
    let request = ClaimRequest {
        spec: Some(JobSpec {
            mapped_fields: &mapped,
            filters: &filters,
        }),
        traceparent,
        ..claim_request(job_id, owner, lease, &metadata)
    };
    store.claim(&request).await.expect("claim")
}

fn succeeded() -> Vec<ExecutionReport> {
    let at = Utc::now();
    vec![ExecutionReport {
        datasource: "src".to_owned(),
        status: ExecutionStatus::Succeeded,
        row_count: 3,
        started_at: Some(at),
        ended_at: Some(at),
        error: None,
        attempts: 1,
        last_error: None,
    }]
}

/// Records the job's completion by `owner`, its event carrying `traceparent`; the events
/// written (executions' first, the job's last).
async fn complete(
    store: &Store,
    job_id: Uuid,
    owner: &str,
    traceparent: Option<&str>,
) -> (Recorded, Vec<PendingEvent>) {
    let (outcome, mut event) = completed(job_id);
    event.attributes.traceparent = traceparent.map(str::to_owned);
    let reports = succeeded();
    let metadata = metadata();
    let recorded = store
        .record_terminal(&TerminalRecord {
            job_id,
            owner: Some(owner),
            tenant: None,
            outcome,
            event: &event,
            publisher: owner,
            lease: LONG,
            leaves_object: false,
            metadata: &metadata,
            executions: &reports,
            close: Some(Close::CANCELED),
        })
        .await
        .expect("record");
    let events = match &recorded {
        Recorded::Inserted { executions, .. } => executions.clone(),
        other => panic!("not recorded: {other:?}"),
    };
    (recorded, events)
}

fn details(event: &PendingEvent) -> Value {
    let body: Value = serde_json::from_slice(&event.event.body).expect("body");
    body.get("statusDetails").cloned().unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_job_run_again_shows_its_deliveries_in_the_details_and_the_events() {
    let db = TestDb::migrated().await;
    let store = &db.store;
    let job_id = Uuid::new_v4();
    // The first run's claim lapses at once: the message came back and another run takes it.
    assert!(matches!(
        claim(store, job_id, "worker-a", Duration::ZERO, None).await,
        Claim::Acquired { attempt: 1, .. }
    ));
    assert!(matches!(
        claim(store, job_id, "worker-b", LONG, None).await,
        Claim::Acquired { attempt: 2, .. }
    ));
    // Not the one statement: the locked transaction builds the events from the rows.
    let (outcome, event) = completed(job_id);
    let reports = succeeded();
    let metadata = metadata();
    let record = TerminalRecord {
        job_id,
        owner: Some("worker-b"),
        tenant: None,
        outcome,
        event: &event,
        publisher: "worker-b",
        lease: LONG,
        leaves_object: false,
        metadata: &metadata,
        executions: &reports,
        close: Some(Close::CANCELED),
    };
    assert_eq!(
        store.record_terminal_claimed(&record).await.expect("one"),
        None
    );
    let (_, events) = complete(store, job_id, "worker-b", None).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(details(&events[0]), serde_json::json!({"deliveries": 2}));
    let rows = store.executions(job_id).await.expect("executions");
    assert_eq!(rows[0].status_details()["deliveries"], 2);

    // A job run once: no `deliveries`, as before.
    let once = Uuid::new_v4();
    claim(store, once, "worker-a", LONG, None).await;
    let (_, events) = complete(store, once, "worker-a", None).await;
    assert_eq!(details(&events[0]), Value::Null);
    let rows = store.executions(once).await.expect("executions");
    assert!(rows[0].status_details().is_empty());
    db.drop().await;
}

fn control(job_id: Uuid, step: Step) -> ControlRequest<'static> {
    ControlRequest {
        publisher: "api-1",
        ..control_request(job_id, step)
    }
}

/// The `traceparent` of each event of `controlled`.
fn traces(controlled: &Controlled) -> Vec<Option<String>> {
    match controlled {
        Controlled::Done { events, .. } => events
            .iter()
            .map(|e| e.event.attributes.traceparent.clone())
            .collect(),
        Controlled::Refused(refusal) => panic!("refused: {refusal:?}"),
    }
}

#[tokio::test]
async fn a_traced_jobs_trace_is_kept_and_carried_by_every_later_event() {
    let db = TestDb::migrated().await;
    let store = &db.store;
    let job_id = Uuid::new_v4();
    claim(store, job_id, "worker-a", LONG, Some(TRACE)).await;
    let (_, events) = complete(store, job_id, "worker-a", Some(TRACE)).await;
    assert_eq!(
        events[0].event.attributes.traceparent.as_deref(),
        Some(TRACE)
    );
    // The control API knows no trace: the job's is used, for both of the deletion's steps.
    let deleting = store
        .control(&control(job_id, Step::Delete { force: false }))
        .await
        .expect("delete");
    assert_eq!(traces(&deleting), [Some(TRACE.to_owned())]);
    let deleted = store
        .object_deleted(job_id, true, SOURCE, "api-1", LONG)
        .await
        .expect("deleted");
    let carried = traces(&deleted);
    assert_eq!(carried.len(), 2, "the execution's removal and job.deleted");
    assert!(
        carried.iter().all(|t| t.as_deref() == Some(TRACE)),
        "{carried:?}"
    );
    // As recorded: the relay and the repairer publish the same.
    let stored: Vec<Option<String>> = sqlx::query_scalar(
        "SELECT attributes ->> 'traceparent' FROM outbox WHERE job_id = $1 ORDER BY id",
    )
    .bind(job_id)
    .fetch_all(db.pool())
    .await
    .expect("outbox rows");
    assert_eq!(stored.len(), 5);
    assert!(
        stored.iter().all(|t| t.as_deref() == Some(TRACE)),
        "{stored:?}"
    );

    // Untraced: no event has one, nothing is kept.
    let plain = Uuid::new_v4();
    claim(store, plain, "worker-a", LONG, None).await;
    let canceled = store
        .control(&control(plain, Step::Cancel { force: true }))
        .await
        .expect("cancel");
    assert_eq!(traces(&canceled), [None]);
    let stored: Vec<Option<String>> =
        sqlx::query_scalar("SELECT attributes ->> 'traceparent' FROM outbox WHERE job_id = $1")
            .bind(plain)
            .fetch_all(db.pool())
            .await
            .expect("outbox rows");
    assert!(stored.iter().all(Option::is_none), "{stored:?}");
    db.drop().await;
}
