//! The fence before a result is stored (`Store::hold_lease`): a lease with half or more left is
//! only read, a shorter one renewed, and a lost or canceled claim answered as a renewal would.

use contract::lifecycle::Step;
use outbox::Lease;
use uuid::Uuid;

use crate::support::{claimed, control_request, TestDb, LONG};

/// The job row's version (`xmin`, the transaction that wrote it last) and its lease's seconds
/// left.
async fn row_version(db: &TestDb, job_id: Uuid) -> (String, f64) {
    sqlx::query_as(
        "SELECT xmin::text, EXTRACT(EPOCH FROM lease_expires_at - now())::float8
         FROM jobs WHERE job_id = $1",
    )
    .bind(job_id)
    .fetch_one(db.pool())
    .await
    .expect("the job row")
}

#[tokio::test]
async fn a_lease_with_half_left_is_only_read_and_a_shorter_one_is_renewed() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let (claimed_version, left) = row_version(&db, job_id).await;
    assert!(left > LONG.as_secs_f64() - 60.0, "{left}");

    let held = db.store.hold_lease(job_id, "worker-a", LONG).await;
    assert_eq!(held.expect("fence"), Lease::Held);
    let (version, _) = row_version(&db, job_id).await;
    assert_eq!(
        version, claimed_version,
        "a long enough lease is not written"
    );

    // Less than half a lease left: the fence renews it to a whole one.
    sqlx::query(
        "UPDATE jobs SET lease_expires_at = now() + interval '10 seconds' WHERE job_id = $1",
    )
    .bind(job_id)
    .execute(db.pool())
    .await
    .expect("shorten the lease");
    let (shortened, left) = row_version(&db, job_id).await;
    assert!(left <= 10.0, "{left}");
    let held = db.store.hold_lease(job_id, "worker-a", LONG).await;
    assert_eq!(held.expect("fence"), Lease::Held);
    let (renewed, left) = row_version(&db, job_id).await;
    assert_ne!(renewed, shortened, "a short lease is written");
    assert!(
        left > LONG.as_secs_f64() - 60.0,
        "renewed to a whole lease: {left}"
    );

    // Another owner holds nothing, whatever is left.
    let other = db.store.hold_lease(job_id, "worker-b", LONG).await;
    assert_eq!(other.expect("fence"), Lease::Lost);
    assert_eq!(row_version(&db, job_id).await.0, renewed);
    db.drop().await;
}

#[tokio::test]
async fn a_cancel_asked_or_a_lapsed_lease_answers_as_a_renewal_does() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    db.store
        .control(&control_request(job_id, Step::Cancel { force: true }))
        .await
        .expect("cancel");
    let held = db.store.hold_lease(job_id, "worker-a", LONG).await;
    assert_eq!(held.expect("fence"), Lease::Canceling { force: true });

    // A lapsed lease that no one took over yet is still the owner's: renewed.
    let lapsed = claimed(&db.store, "worker-a").await;
    sqlx::query("UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE job_id = $1")
        .bind(lapsed)
        .execute(db.pool())
        .await
        .expect("lapse the lease");
    let held = db.store.hold_lease(lapsed, "worker-a", LONG).await;
    assert_eq!(held.expect("fence"), Lease::Held);
    let (_, left) = row_version(&db, lapsed).await;
    assert!(left > LONG.as_secs_f64() - 60.0, "{left}");
    db.drop().await;
}
