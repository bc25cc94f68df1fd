//! Retention of jobs (issue 37): the completed jobs whose results are due, the pruning of ended
//! jobs' rows, and the lease of the pass.

use std::time::Duration;

use outbox::Recorded;
use uuid::Uuid;

use crate::support::{claimed, completed, failed, record, TestDb, LONG};

const DAY: Duration = Duration::from_secs(86_400);

/// A claimed job ended as `outcome` says; its event published unless `publish` is false.
async fn ended(db: &TestDb, completed_job: bool, publish: bool) -> Uuid {
    let job_id = claimed(&db.store, "worker-a").await;
    let outcome = if completed_job {
        completed(job_id)
    } else {
        failed(job_id, "boom")
    };
    let recorded = record(
        &db.store,
        job_id,
        Some("worker-a"),
        outcome,
        "worker-a",
        LONG,
    )
    .await;
    let Recorded::Inserted { outbox_id, .. } = recorded else {
        panic!("{recorded:?}");
    };
    if publish {
        db.store
            .mark_published(&[outbox_id.serial().unwrap()], "worker-a")
            .await
            .expect("mark");
    }
    job_id
}

/// Backdates the job's end and last change by `by`.
async fn ended_ago(db: &TestDb, job_id: Uuid, by: Duration) {
    sqlx::query(
        "UPDATE jobs SET finished_at = now() - $2, updated_at = now() - $2 WHERE job_id = $1",
    )
    .bind(job_id)
    .bind(by)
    .execute(db.pool())
    .await
    .expect("backdate");
}

async fn jobs_left(db: &TestDb) -> Vec<Uuid> {
    sqlx::query_scalar("SELECT job_id FROM jobs ORDER BY job_id")
        .fetch_all(db.pool())
        .await
        .expect("jobs")
}

#[tokio::test]
async fn results_due_are_the_completed_jobs_past_the_age_oldest_first() {
    let db = TestDb::migrated().await;
    let old = ended(&db, true, true).await;
    let older = ended(&db, true, true).await;
    let recent = ended(&db, true, true).await;
    let failed_old = ended(&db, false, true).await;
    ended_ago(&db, old, 2 * DAY).await;
    ended_ago(&db, older, 3 * DAY).await;
    ended_ago(&db, recent, DAY / 2).await;
    ended_ago(&db, failed_old, 3 * DAY).await;

    let due = db.store.results_due(DAY, 10).await.expect("due");
    assert_eq!(due, [(older, None), (old, None)]);
    let first = db.store.results_due(DAY, 1).await.expect("due");
    assert_eq!(first, [(older, None)], "at most the limit, oldest first");
    db.drop().await;
}

#[tokio::test]
async fn pruning_deletes_ended_jobs_without_objects_past_the_age_with_their_rows() {
    let db = TestDb::migrated().await;
    let mut gone = Vec::new();
    for _ in 0..5 {
        let job_id = ended(&db, false, true).await;
        ended_ago(&db, job_id, 2 * DAY).await;
        gone.push(job_id);
    }
    // Kept: a recent failure, an old completed job (its object exists), an old failure whose
    // event is still unpublished.
    let recent = ended(&db, false, true).await;
    let completed_old = ended(&db, true, true).await;
    ended_ago(&db, completed_old, 2 * DAY).await;
    let unpublished = ended(&db, false, false).await;
    ended_ago(&db, unpublished, 2 * DAY).await;

    for job_id in [gone[0], recent] {
        sqlx::query(
            "INSERT INTO job_executions (job_id, datasource, status, ended_at)
             VALUES ($1, 'src', 'CANCELED', now())",
        )
        .bind(job_id)
        .execute(db.pool())
        .await
        .expect("an execution");
    }

    let pruned = db.store.prune_ended_jobs(DAY, 2).await.expect("prune");
    assert_eq!(pruned, 5, "batches of 2, 2 and 1");
    let mut kept = vec![recent, completed_old, unpublished];
    kept.sort();
    assert_eq!(jobs_left(&db).await, kept);
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE job_id = ANY($1)")
        .bind(&gone)
        .fetch_one(db.pool())
        .await
        .expect("count");
    assert_eq!(events, 0, "their published events went with them");
    let executions: i64 =
        sqlx::query_scalar("SELECT count(*) FROM job_executions WHERE job_id = ANY($1)")
            .bind(&gone)
            .fetch_one(db.pool())
            .await
            .expect("count");
    assert_eq!(executions, 0, "their executions went with them");
    let kept_executions: i64 =
        sqlx::query_scalar("SELECT count(*) FROM job_executions WHERE job_id = $1")
            .bind(recent)
            .fetch_one(db.pool())
            .await
            .expect("count");
    assert_eq!(kept_executions, 1);
    assert_eq!(db.store.prune_ended_jobs(DAY, 2).await.expect("prune"), 0);
    db.drop().await;
}

#[tokio::test]
async fn a_pass_lease_is_held_by_one_owner_until_it_lapses() {
    let db = TestDb::migrated().await;
    let store = &db.store;
    assert!(store
        .take_pass_lease("retention", "a", LONG)
        .await
        .expect("take"));
    assert!(!store
        .take_pass_lease("retention", "b", LONG)
        .await
        .expect("take"));
    assert!(store
        .take_pass_lease("retention", "a", LONG)
        .await
        .expect("renew"));
    assert!(
        store
            .take_pass_lease("other", "b", LONG)
            .await
            .expect("take"),
        "each pass has its own lease"
    );
    sqlx::query("UPDATE pass_leases SET expires_at = now() - interval '1 second'")
        .execute(db.pool())
        .await
        .expect("lapse");
    assert!(store
        .take_pass_lease("retention", "b", LONG)
        .await
        .expect("take"));
    assert!(!store
        .take_pass_lease("retention", "a", LONG)
        .await
        .expect("take"));
    db.drop().await;
}
