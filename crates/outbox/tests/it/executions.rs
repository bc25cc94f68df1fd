//! Executions against the real PostgreSQL (lifecycle §1, §4): queued by the claim, written as
//! the run reports them (only by the claim's owner), closed by the job's end with their events
//! before the job's own, removed by its deletion, each end's event recorded once.

use chrono::Utc;
use contract::lifecycle::{ExecutionStatus, Step};
use outbox::{
    Claim, Close, ControlRequest, Controlled, ExecutionEvents, ExecutionReport, Recorded, Store,
    TerminalRecord,
};
use serde_json::Value;
use uuid::Uuid;

use crate::support::{
    claim_with_spec, claimed_of, control_request, failed, mapped, metadata, TestDb, LONG, SOURCE,
};

const EVENTS: ExecutionEvents<'static> = ExecutionEvents {
    tenant: None,
    request_id: Some("req-1"),
    source: SOURCE,
    publisher: "worker-a",
    lease: LONG,
    traceparent: None,
};

fn report(datasource: &str, status: ExecutionStatus, rows: u64) -> ExecutionReport {
    let started = (status != ExecutionStatus::Queued).then(Utc::now);
    ExecutionReport {
        datasource: datasource.to_owned(),
        status,
        row_count: rows,
        started_at: started,
        ended_at: status.is_terminal().then(Utc::now),
        error: (status == ExecutionStatus::Rejected).then(|| "table x not found".to_owned()),
        attempts: u32::from(started.is_some()),
        last_error: None,
    }
}

/// Each datasource's tables in these tests.
const TABLES: [&str; 2] = ["a", "b"];

/// Claims a new job of `datasources` for `owner`.
async fn claimed_with(store: &Store, owner: &str, datasources: &[&str]) -> Uuid {
    claimed_of(store, owner, &mapped(datasources, &TABLES)).await
}

/// `(datasource, status, rows, tables, error)` of each execution.
async fn executions(
    store: &Store,
    job_id: Uuid,
) -> Vec<(String, String, i64, i32, Option<String>)> {
    store
        .executions(job_id)
        .await
        .expect("executions")
        .into_iter()
        .map(|e| (e.datasource, e.status, e.row_count, e.tables, e.error))
        .collect()
}

/// The job's outbox rows: ce-id and body, in commit order.
async fn outbox(store: &Store, job_id: Uuid) -> Vec<(String, Value)> {
    let rows: Vec<(String, Vec<u8>)> =
        sqlx::query_as("SELECT ce_id, body FROM outbox WHERE job_id = $1 ORDER BY id")
            .bind(job_id)
            .fetch_all(store.pool())
            .await
            .expect("outbox rows");
    rows.into_iter()
        .map(|(id, body)| (id, serde_json::from_slice(&body).expect("JSON")))
        .collect()
}

#[tokio::test]
async fn a_claim_queues_one_execution_per_datasource_and_a_run_moves_them() {
    let db = TestDb::migrated().await;
    let store = &db.store;
    let job_id = claimed_with(store, "worker-a", &["ledger", "crm"]).await;
    assert_eq!(
        executions(store, job_id).await,
        [
            ("crm".into(), "QUEUED".into(), 0, 2, None),
            ("ledger".into(), "QUEUED".into(), 0, 2, None),
        ]
    );

    let written = store
        .record_executions(
            job_id,
            "worker-a",
            &[
                report("ledger", ExecutionStatus::InProgress, 10_000),
                report("crm", ExecutionStatus::Rejected, 0),
            ],
            &EVENTS,
        )
        .await
        .expect("record");
    assert_eq!(written.len(), 1, "only the end has an event");
    assert_eq!(
        written[0].event.ce_id(),
        format!("fetcher.job.execution.rejected.{job_id}.crm")
    );
    assert_eq!(
        written[0].event.attributes.routing_key(),
        "job.execution.rejected"
    );

    // Someone else's reports change nothing; an ended execution is final.
    let foreign = store
        .record_executions(
            job_id,
            "worker-z",
            &[report("ledger", ExecutionStatus::Succeeded, 1)],
            &EVENTS,
        )
        .await
        .expect("foreign");
    assert!(foreign.is_empty());
    let again = store
        .record_executions(
            job_id,
            "worker-a",
            &[report("crm", ExecutionStatus::Succeeded, 5)],
            &EVENTS,
        )
        .await
        .expect("again");
    assert!(again.is_empty());
    assert_eq!(
        executions(store, job_id).await,
        [
            (
                "crm".into(),
                "REJECTED".into(),
                0,
                2,
                Some("table x not found".into())
            ),
            ("ledger".into(), "IN_PROGRESS".into(), 10_000, 2, None),
        ]
    );
    let body = &outbox(store, job_id).await[0].1;
    assert_eq!(body["datasource"], "crm");
    assert_eq!(body["status"], "REJECTED");
    assert_eq!(body["statusDetails"]["error"], "table x not found");
    assert!(body.get("rowCount").is_none(), "omitted when 0: {body}");
    db.drop().await;
}

#[tokio::test]
async fn a_failed_end_closes_what_is_open_before_the_job_event_in_one_transaction() {
    let db = TestDb::migrated().await;
    let store = &db.store;
    let job_id = claimed_with(store, "worker-a", &["a", "b", "c"]).await;
    let (outcome, event) = failed(job_id, "extraction timed out after 2s");
    let reports = [
        report("a", ExecutionStatus::Succeeded, 7),
        report("b", ExecutionStatus::InProgress, 3),
        report("c", ExecutionStatus::Queued, 0),
    ];
    let recorded = store
        .record_terminal(&TerminalRecord {
            job_id,
            owner: Some("worker-a"),
            tenant: None,
            outcome,
            event: &event,
            metadata: &Default::default(),
            leaves_object: false,
            publisher: "worker-a",
            lease: LONG,
            executions: &reports,
            close: Some(Close {
                running: ExecutionStatus::TimedOut,
                error: Some("extraction timed out after 2s"),
            }),
        })
        .await
        .expect("record");
    let Recorded::Inserted {
        executions: ended, ..
    } = recorded
    else {
        panic!("{recorded:?}");
    };
    assert_eq!(ended.len(), 3);
    let rows = executions(store, job_id).await;
    let statuses: Vec<_> = rows
        .iter()
        .map(|r| (r.0.as_str(), r.1.as_str(), r.2))
        .collect();
    assert_eq!(
        statuses,
        [
            ("a", "SUCCEEDED", 7),
            ("b", "TIMED_OUT", 3),
            ("c", "CANCELED", 0)
        ]
    );
    let ids: Vec<String> = outbox(store, job_id)
        .await
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(
        ids,
        [
            format!("fetcher.job.execution.succeeded.{job_id}.a"),
            format!("fetcher.job.execution.timed_out.{job_id}.b"),
            format!("fetcher.job.execution.canceled.{job_id}.c"),
            format!("fetcher.job.failed.{job_id}"),
        ],
        "executions first, then the job's end"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_cancel_closes_the_executions_counted_in_its_event_and_a_delete_removes_them() {
    let db = TestDb::migrated().await;
    let store = &db.store;
    let job_id = claimed_with(store, "worker-a", &["a", "b"]).await;
    store
        .record_executions(
            job_id,
            "worker-a",
            &[report("a", ExecutionStatus::Succeeded, 4)],
            &EVENTS,
        )
        .await
        .expect("record");
    let cancel = control_request(job_id, Step::Cancel { force: true });
    assert!(matches!(
        store.control(&cancel).await.expect("cancel"),
        Controlled::Done { .. }
    ));
    let metadata = metadata();
    let end = outbox::EndCancel {
        job_id,
        tenant: None,
        metadata: &metadata,
        request_id: None,
        source: SOURCE,
        publisher: "worker-a",
        lease: LONG,
        owner: Some("worker-a"),
        executions: &[report("b", ExecutionStatus::InProgress, 2)],
        traceparent: None,
    };
    assert!(matches!(
        store.end_cancel(&end).await.expect("end"),
        Controlled::Done { .. }
    ));
    let rows = executions(store, job_id).await;
    assert_eq!(
        rows.iter().map(|r| (r.1.as_str(), r.2)).collect::<Vec<_>>(),
        [("SUCCEEDED", 4), ("CANCELED", 2)]
    );
    let events = outbox(store, job_id).await;
    let canceled = events
        .iter()
        .find(|(id, _)| id == &format!("fetcher.job.canceled.{job_id}"))
        .expect("canceled");
    assert_eq!(
        canceled.1["jobProcessDetails"]["numberOfSucceededThings"],
        1
    );
    assert_eq!(canceled.1["jobProcessDetails"]["numberOfCanceledThings"], 1);
    let b_canceled = events
        .iter()
        .position(|(id, _)| id == &format!("fetcher.job.execution.canceled.{job_id}.b"))
        .expect("b's end");
    let job_canceled = events
        .iter()
        .position(|(id, _)| id == &format!("fetcher.job.canceled.{job_id}"))
        .unwrap();
    assert!(b_canceled < job_canceled);

    let delete = ControlRequest {
        step: Step::Delete { force: false },
        ..cancel
    };
    assert!(matches!(
        store.control(&delete).await.expect("delete"),
        Controlled::Done { .. }
    ));
    assert!(matches!(
        store
            .object_deleted(job_id, false, SOURCE, "api", LONG)
            .await
            .expect("deleted"),
        Controlled::Done { .. }
    ));
    assert!(
        executions(store, job_id).await.is_empty(),
        "gone with the job"
    );
    let ids: Vec<String> = outbox(store, job_id)
        .await
        .into_iter()
        .map(|r| r.0)
        .collect();
    let tail: Vec<&str> = ids[ids.len() - 3..].iter().map(String::as_str).collect();
    assert_eq!(
        tail,
        [
            format!("fetcher.job.execution.deleted.{job_id}.a").as_str(),
            format!("fetcher.job.execution.deleted.{job_id}.b").as_str(),
            format!("fetcher.job.deleted.{job_id}").as_str(),
        ]
    );
    db.drop().await;
}

#[tokio::test]
async fn a_takeover_queues_the_executions_again() {
    let db = TestDb::migrated().await;
    let store = &db.store;
    let job_id = claimed_with(store, "worker-a", &["a"]).await;
    store
        .record_executions(
            job_id,
            "worker-a",
            &[report("a", ExecutionStatus::InProgress, 9)],
            &EVENTS,
        )
        .await
        .expect("record");
    sqlx::query("UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE job_id = $1")
        .bind(job_id)
        .execute(store.pool())
        .await
        .expect("expire");
    let takeover = claim_with_spec(store, job_id, "worker-b", &mapped(&["a"], &TABLES)).await;
    assert!(matches!(takeover, Claim::Acquired { attempt: 2, .. }));
    assert_eq!(
        executions(store, job_id).await,
        [("a".into(), "QUEUED".into(), 0, 2, None)]
    );
    db.drop().await;
}

#[tokio::test]
async fn a_retried_executions_attempts_reach_its_event_and_the_read_model_and_a_takeover_clears_them(
) {
    let db = TestDb::migrated().await;
    let store = &db.store;
    let job_id = claimed_with(store, "worker-a", &["a", "b"]).await;
    let retried = ExecutionReport {
        attempts: 3,
        last_error: Some("failed to connect to datasource a: connection reset".into()),
        ..report("a", ExecutionStatus::Succeeded, 4)
    };
    let running = ExecutionReport {
        attempts: 2,
        last_error: Some("query on datasource b failed: deadlock detected".into()),
        ..report("b", ExecutionStatus::InProgress, 0)
    };
    store
        .record_executions(job_id, "worker-a", &[retried, running], &EVENTS)
        .await
        .expect("record");
    let bodies = outbox(store, job_id).await;
    let (_, body) = bodies
        .iter()
        .find(|(id, _)| id.starts_with("fetcher.job.execution.succeeded."))
        .expect("the succeeded event");
    assert_eq!(
        body["statusDetails"],
        serde_json::json!({
            "attempts": 3,
            "lastError": "failed to connect to datasource a: connection reset",
        })
    );
    let rows = store.executions(job_id).await.expect("executions");
    assert_eq!(rows[0].attempts, 3);
    assert_eq!(rows[0].status_details()["attempts"], 3);
    assert_eq!(rows[1].attempts, 2);

    sqlx::query("UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE job_id = $1")
        .bind(job_id)
        .execute(store.pool())
        .await
        .expect("expire");
    let takeover = claim_with_spec(store, job_id, "worker-b", &mapped(&["a", "b"], &TABLES)).await;
    assert!(matches!(takeover, Claim::Acquired { attempt: 2, .. }));
    let b = &store.executions(job_id).await.expect("executions")[1];
    assert_eq!((b.status.as_str(), b.attempts), ("QUEUED", 0));
    assert!(b.last_error.is_none());
    // The retries are cleared; the run it is now counts as the job's second.
    assert_eq!(
        serde_json::Value::Object(b.status_details()),
        serde_json::json!({"deliveries": 2})
    );
    db.drop().await;
}
