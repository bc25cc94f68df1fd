//! Cancel and delete requests against the real PostgreSQL: each state change and its events'
//! outbox rows commit together, in the lifecycle's order; refusals write nothing.

use std::time::Duration;

use contract::lifecycle::{JobStatus, Refusal, Step, Then};
use outbox::{ControlRequest, Controlled, Store};
use serde_json::Value;
use uuid::Uuid;

use crate::support::{claimed, completed, record, TestDb, LONG, SOURCE};

fn request(job_id: Uuid, step: Step) -> ControlRequest<'static> {
    ControlRequest {
        job_id,
        tenant: None,
        step,
        comment: Some("runaway query"),
        reason_code: Some("OPS_1"),
        source: SOURCE,
        request_id: Some("req-ctl"),
        publisher: "api-1",
        lease: LONG,
    }
}

const CANCEL: Step = Step::Cancel { force: false };
const FORCE_CANCEL: Step = Step::Cancel { force: true };
const DELETE: Step = Step::Delete { force: false };

/// The job's status and flags, and its outbox rows' routing keys and bodies, in commit order.
async fn state(store: &Store, job_id: Uuid) -> (String, bool, bool, Vec<(String, Value)>) {
    let (status, cancel_requested, force): (String, bool, bool) = sqlx::query_as(
        "SELECT status, cancel_requested, force_canceled FROM jobs WHERE job_id = $1",
    )
    .bind(job_id)
    .fetch_one(store.pool())
    .await
    .expect("job row");
    let rows: Vec<(String, Vec<u8>)> =
        sqlx::query_as("SELECT ce_id, body FROM outbox WHERE job_id = $1 ORDER BY id")
            .bind(job_id)
            .fetch_all(store.pool())
            .await
            .expect("outbox rows");
    let events = rows
        .into_iter()
        .map(|(ce_id, body)| (ce_id, serde_json::from_slice(&body).expect("JSON body")))
        .collect();
    (status, cancel_requested, force, events)
}

fn done(controlled: Controlled) -> (contract::lifecycle::Transition, usize) {
    match controlled {
        Controlled::Done {
            transition, events, ..
        } => (transition, events.len()),
        Controlled::Refused(refusal) => panic!("refused: {refusal}"),
    }
}

#[tokio::test]
async fn a_cancel_before_the_message_waits_for_it_in_a_pending_row() {
    let db = TestDb::migrated().await;
    let job_id = Uuid::new_v4();
    let (transition, events) = done(
        db.store
            .control(&request(job_id, CANCEL))
            .await
            .expect("cancel"),
    );
    assert_eq!(transition.to.status, JobStatus::Pending);
    assert_eq!(events, 0);
    let (status, requested, _, rows) = state(&db.store, job_id).await;
    assert_eq!(
        (status.as_str(), requested, rows.len()),
        ("pending", true, 0)
    );
    // Again, with force: accepted, upgraded, still nothing published.
    let (transition, events) = done(
        db.store
            .control(&request(job_id, FORCE_CANCEL))
            .await
            .expect("again"),
    );
    assert!(transition.to.force);
    assert_eq!(events, 0);
    // A delete of a job never seen is unknown; so is the job to another tenant.
    let other = Uuid::new_v4();
    assert_eq!(
        db.store
            .control(&request(other, DELETE))
            .await
            .expect("delete"),
        Controlled::Refused(Refusal::Unknown)
    );
    let foreign = ControlRequest {
        tenant: Some("acme"),
        ..request(job_id, CANCEL)
    };
    assert_eq!(
        db.store.control(&foreign).await.expect("foreign"),
        Controlled::Refused(Refusal::Unknown)
    );
    db.drop().await;
}

#[tokio::test]
async fn a_cancel_of_a_running_job_records_cancellation_in_progress_and_its_event() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let (transition, events) = done(
        db.store
            .control(&request(job_id, FORCE_CANCEL))
            .await
            .expect("cancel"),
    );
    assert_eq!(transition.to.status, JobStatus::CancellationInProgress);
    assert_eq!(transition.then, Then::StopStatements { force: true });
    assert_eq!(events, 1);
    let (status, _, force, rows) = state(&db.store, job_id).await;
    assert_eq!((status.as_str(), force), ("cancellation_in_progress", true));
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].0,
        format!("fetcher.job.cancellation_in_progress.{job_id}")
    );
    let body = &rows[0].1;
    assert_eq!(body["status"], "cancellation_in_progress");
    assert_eq!(body["forceCanceled"], true);
    assert_eq!(body["comment"], "runaway query");
    assert_eq!(body["reasonCode"], "OPS_1");
    assert_eq!(body["metadata"]["source"], "payments", "the job's metadata");
    db.drop().await;
}

#[tokio::test]
async fn a_cancel_of_a_pending_job_ends_it_canceled_with_both_events_in_order() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    db.store.release(job_id, "worker-a").await.expect("release");
    sqlx::query("UPDATE jobs SET status = 'pending' WHERE job_id = $1")
        .bind(job_id)
        .execute(db.pool())
        .await
        .expect("pending");
    let (transition, events) = done(
        db.store
            .control(&request(job_id, CANCEL))
            .await
            .expect("cancel"),
    );
    assert_eq!(transition.to.status, JobStatus::Canceled);
    assert_eq!(events, 2);
    let (status, _, _, rows) = state(&db.store, job_id).await;
    assert_eq!(status, "canceled");
    let keys: Vec<_> = rows.iter().map(|(ce_id, _)| ce_id.as_str()).collect();
    assert_eq!(
        keys,
        [
            format!("fetcher.job.cancellation_in_progress.{job_id}"),
            format!("fetcher.job.canceled.{job_id}")
        ]
    );
    assert_eq!(rows[1].1["jobProcessDetails"]["numberOfCanceledThings"], 0);
    assert!(rows[1].1["canceledAt"].is_string());
    // Canceled again: accepted, nothing new.
    let (_, events) = done(
        db.store
            .control(&request(job_id, CANCEL))
            .await
            .expect("again"),
    );
    assert_eq!(events, 0);
    db.drop().await;
}

#[tokio::test]
async fn a_finished_job_refuses_a_cancel_and_is_deleted_in_two_phases() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    record(
        &db.store,
        job_id,
        Some("worker-a"),
        completed(job_id),
        "worker-a",
        LONG,
    )
    .await;
    assert_eq!(
        db.store
            .control(&request(job_id, FORCE_CANCEL))
            .await
            .expect("cancel"),
        Controlled::Refused(Refusal::InvalidTransition {
            from: JobStatus::Completed
        })
    );
    let (transition, events) = done(
        db.store
            .control(&request(job_id, DELETE))
            .await
            .expect("delete"),
    );
    assert_eq!(transition.to.status, JobStatus::DeletionInProgress);
    assert_eq!(transition.then, Then::DeleteObject);
    assert_eq!(events, 1);
    // Until its object is deleted, the sweeper's pass finds it.
    let deleting = db
        .store
        .deletions_in_progress(Duration::ZERO, 10)
        .await
        .expect("list");
    assert_eq!(deleting, vec![(job_id, None)]);
    let (transition, events) = done(
        db.store
            .object_deleted(job_id, true, SOURCE, "api-1", Duration::from_secs(30))
            .await
            .expect("deleted"),
    );
    assert_eq!(transition.to.status, JobStatus::Deleted);
    assert_eq!(events, 1);
    let (status, _, _, rows) = state(&db.store, job_id).await;
    assert_eq!(status, "deleted");
    let keys: Vec<_> = rows.iter().map(|(ce_id, _)| ce_id.clone()).collect();
    assert_eq!(
        keys,
        [
            format!("fetcher.job.completed.{job_id}"),
            format!("fetcher.job.deletion_in_progress.{job_id}"),
            format!("fetcher.job.deleted.{job_id}"),
        ]
    );
    assert_eq!(rows[2].1["resultDeleted"], true);
    let (before, path): (Option<String>, Option<String>) =
        sqlx::query_as("SELECT status_before_deletion, result_path FROM jobs WHERE job_id = $1")
            .bind(job_id)
            .fetch_one(db.pool())
            .await
            .expect("row");
    assert_eq!(before.as_deref(), Some("completed"));
    assert_eq!(path, None, "a tombstone names no object");
    assert!(db
        .store
        .deletions_in_progress(Duration::ZERO, 10)
        .await
        .expect("list")
        .is_empty());
    // Deleted again: accepted, nothing emitted.
    let (_, events) = done(
        db.store
            .control(&request(job_id, DELETE))
            .await
            .expect("again"),
    );
    assert_eq!(events, 0);
    db.drop().await;
}

#[tokio::test]
async fn concurrent_cancels_of_an_unseen_job_make_one_row_and_no_event() {
    let db = TestDb::migrated().await;
    let store = db.store_with(8).await;
    let job_id = Uuid::new_v4();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let step = Step::Cancel { force: i % 2 == 0 };
                store.control(&request(job_id, step)).await
            })
        })
        .collect();
    for task in tasks {
        let controlled = task.await.expect("task").expect("cancel");
        assert!(
            matches!(controlled, Controlled::Done { .. }),
            "{controlled:?}"
        );
    }
    let (status, requested, force, rows) = state(&store, job_id).await;
    assert_eq!((status.as_str(), requested, force), ("pending", true, true));
    assert!(rows.is_empty());
    db.drop().await;
}

fn end<'a>(job_id: Uuid, metadata: &'a serde_json::Map<String, Value>) -> outbox::EndCancel<'a> {
    outbox::EndCancel {
        job_id,
        tenant: None,
        metadata,
        request_id: Some("req-msg"),
        source: SOURCE,
        publisher: "worker-b",
        lease: LONG,
        owner: None,
        executions: &[],
        traceparent: None,
    }
}

#[tokio::test]
async fn the_message_of_a_job_canceled_first_ends_the_cancel_with_its_metadata() {
    let db = TestDb::migrated().await;
    let job_id = Uuid::new_v4();
    done(
        db.store
            .control(&request(job_id, CANCEL))
            .await
            .expect("cancel"),
    );
    let metadata = crate::support::metadata();
    let claim = db
        .store
        .claim(&crate::support::claim_request(
            job_id, "worker-b", LONG, &metadata,
        ))
        .await
        .expect("claim");
    assert_eq!(claim, outbox::Claim::CancelRequested, "not run");
    let (transition, events) = done(
        db.store
            .end_cancel(&end(job_id, &metadata))
            .await
            .expect("end"),
    );
    assert_eq!(transition.to.status, JobStatus::Canceled);
    assert_eq!(events, 2);
    let (status, _, _, rows) = state(&db.store, job_id).await;
    assert_eq!(status, "canceled");
    assert_eq!(rows.len(), 2);
    for (_, body) in &rows {
        assert_eq!(
            body["metadata"]["source"], "payments",
            "the message's metadata"
        );
        assert_eq!(body["comment"], "runaway query", "the request's comment");
    }
    // A later delivery finds it ended, its events not yet published.
    let again = db
        .store
        .claim(&crate::support::claim_request(
            job_id, "worker-c", LONG, &metadata,
        ))
        .await
        .expect("claim");
    assert_eq!(
        again,
        outbox::Claim::Terminal {
            status: JobStatus::Canceled,
            event_published: false
        }
    );
    // Ending it twice is refused: nothing more is written.
    assert!(matches!(
        db.store
            .end_cancel(&end(job_id, &metadata))
            .await
            .expect("twice"),
        Controlled::Refused(Refusal::InvalidTransition { .. })
    ));
    assert_eq!(state(&db.store, job_id).await.3.len(), 2);
    db.drop().await;
}

#[tokio::test]
async fn a_cancel_whose_owner_died_is_ended_by_the_next_claim() {
    let db = TestDb::migrated().await;
    let job_id = Uuid::new_v4();
    let metadata = crate::support::metadata();
    let short = Duration::from_millis(200);
    db.store
        .claim(&crate::support::claim_request(
            job_id, "worker-a", short, &metadata,
        ))
        .await
        .expect("claim");
    done(
        db.store
            .control(&request(job_id, FORCE_CANCEL))
            .await
            .expect("cancel"),
    );
    // While the owner's lease holds, the job is its to end.
    let busy = db
        .store
        .claim(&crate::support::claim_request(
            job_id, "worker-b", LONG, &metadata,
        ))
        .await
        .expect("claim");
    assert!(matches!(busy, outbox::Claim::Busy { .. }), "{busy:?}");
    assert!(matches!(
        db.store
            .end_cancel(&end(job_id, &metadata))
            .await
            .expect("early"),
        Controlled::Refused(Refusal::InvalidTransition { .. })
    ));
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The sweeper sees it as a cancel to end, not a job to fail.
    let expired = db
        .store
        .expired_jobs(Duration::ZERO, 10)
        .await
        .expect("expired");
    assert_eq!(expired.len(), 1);
    assert!(expired[0].canceling);
    let taken = db
        .store
        .claim(&crate::support::claim_request(
            job_id, "worker-b", LONG, &metadata,
        ))
        .await
        .expect("claim");
    assert_eq!(taken, outbox::Claim::CancelRequested);
    let (transition, events) = done(
        db.store
            .end_cancel(&end(job_id, &metadata))
            .await
            .expect("end"),
    );
    assert_eq!(transition.to.status, JobStatus::Canceled);
    assert_eq!(transition.then, Then::DiscardObject);
    assert_eq!(events, 1);
    let (status, _, _, rows) = state(&db.store, job_id).await;
    assert_eq!(status, "canceled");
    let keys: Vec<_> = rows.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(
        keys,
        [
            format!("fetcher.job.cancellation_in_progress.{job_id}"),
            format!("fetcher.job.canceled.{job_id}")
        ]
    );
    db.drop().await;
}

#[tokio::test]
async fn a_run_canceled_while_it_works_is_told_so_and_its_commit_ends_the_cancel() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    done(
        db.store
            .control(&request(job_id, CANCEL))
            .await
            .expect("cancel"),
    );
    assert_eq!(
        db.store
            .renew_lease(job_id, "worker-a", LONG)
            .await
            .expect("renew"),
        outbox::Lease::Canceling { force: false },
        "the owner keeps its lease to end the cancel"
    );
    let metadata = crate::support::metadata();
    let someone = outbox::EndCancel {
        owner: Some("worker-z"),
        ..end(job_id, &metadata)
    };
    assert!(matches!(
        db.store.end_cancel(&someone).await.expect("not the owner"),
        Controlled::Refused(Refusal::InvalidTransition { .. })
    ));
    // Its commit loses the race: the record ends the cancel instead, in its own transaction;
    // nothing is completed.
    let recorded = record(
        &db.store,
        job_id,
        Some("worker-a"),
        completed(job_id),
        "worker-a",
        LONG,
    )
    .await;
    let outbox::Recorded::Canceled {
        transition,
        events,
        canceled,
    } = recorded
    else {
        panic!("the cancel wins: {recorded:?}");
    };
    assert_eq!(transition.to.status, JobStatus::Canceled);
    assert_eq!(transition.then, Then::DiscardObject);
    assert_eq!(events.len(), 1, "job.canceled, leased to the publisher");
    assert!(
        canceled.is_some_and(|c| !c.force),
        "a graceful cancel ended"
    );
    let (status, _, _, rows) = state(&db.store, job_id).await;
    assert_eq!(status, "canceled");
    assert_eq!(
        rows.len(),
        2,
        "cancellation_in_progress, canceled; never completed"
    );
    assert!(rows.iter().all(|(ce_id, _)| !ce_id.contains("completed")));
    assert_eq!(
        db.store
            .renew_lease(job_id, "worker-a", LONG)
            .await
            .expect("renew"),
        outbox::Lease::Lost
    );
    db.drop().await;
}

#[tokio::test]
async fn a_cancel_of_a_running_job_is_announced_at_its_commit() {
    let db = TestDb::migrated().await;
    let mut listener = db.store.listen_for_cancels().await.expect("listen");
    let job_id = claimed(&db.store, "worker-a").await;
    // A cancel that changes nothing for a runner is not announced: a job never seen.
    done(
        db.store
            .control(&request(Uuid::new_v4(), CANCEL))
            .await
            .expect("unseen"),
    );
    done(
        db.store
            .control(&request(job_id, FORCE_CANCEL))
            .await
            .expect("cancel"),
    );
    let announced = tokio::time::timeout(Duration::from_secs(10), listener.recv())
        .await
        .expect("announced in time")
        .expect("listener");
    assert_eq!(announced, job_id);
    drop(listener);
    db.drop().await;
}

#[tokio::test]
async fn transition_ages_time_a_cancel_from_its_request_and_a_deletion_from_its_start() {
    let db = TestDb::migrated().await;
    assert_eq!(
        db.store.transition_ages().await.expect("ages"),
        outbox::TransitionAges::default()
    );
    let canceling = claimed(&db.store, "worker-a").await;
    db.store
        .control(&request(canceling, FORCE_CANCEL))
        .await
        .expect("cancel");
    let deleting = claimed(&db.store, "worker-b").await;
    record(
        &db.store,
        deleting,
        Some("worker-b"),
        completed(deleting),
        "worker-b",
        LONG,
    )
    .await;
    db.store
        .control(&request(deleting, DELETE))
        .await
        .expect("delete");
    // An hour ago the cancel was asked and the deletion began; the cancel's lease was renewed
    // since (updated_at is now), which must not make it younger.
    sqlx::query(
        "UPDATE jobs SET cancel_requested_at = now() - interval '1 hour', updated_at = now()
         WHERE job_id = $1",
    )
    .bind(canceling)
    .execute(db.pool())
    .await
    .expect("backdate the cancel");
    sqlx::query("UPDATE jobs SET updated_at = now() - interval '2 hours' WHERE job_id = $1")
        .bind(deleting)
        .execute(db.pool())
        .await
        .expect("backdate the deletion");
    let ages = db.store.transition_ages().await.expect("ages");
    let hour = Duration::from_secs(3600);
    let canceling_age = ages.canceling.expect("a job canceling");
    let deleting_age = ages.deleting.expect("a job deleting");
    assert!(
        canceling_age >= hour && canceling_age < hour + Duration::from_secs(60),
        "{ages:?}"
    );
    assert!(
        deleting_age >= 2 * hour && deleting_age < 2 * hour + Duration::from_secs(60),
        "{ages:?}"
    );

    db.store
        .object_deleted(deleting, true, SOURCE, "api-1", Duration::from_secs(30))
        .await
        .expect("deleted");
    let ages = db.store.transition_ages().await.expect("ages");
    assert_eq!(
        ages.deleting, None,
        "a deleted job is no longer in transition"
    );
    assert!(ages.canceling.is_some());
    db.drop().await;
}
