//! Retention of published events and the backlog statistics.

use outbox::Sink;
use std::time::Duration;

use outbox::OutboxError;

use crate::support::{age_outbox, expire_outbox_leases, unpublished, TestDb, LONG};

const DAY: Duration = Duration::from_secs(86_400);

/// Backdates the publication of `ids` by `by`.
async fn published_ago(db: &TestDb, ids: &[i64], by: Duration) {
    sqlx::query("UPDATE outbox SET published_at = now() - $2 WHERE id = ANY($1)")
        .bind(ids)
        .bind(by)
        .execute(db.pool())
        .await
        .expect("backdate");
}

async fn remaining(db: &TestDb) -> Vec<i64> {
    sqlx::query_scalar("SELECT id FROM outbox ORDER BY id")
        .fetch_all(db.pool())
        .await
        .expect("ids")
}

#[tokio::test]
async fn purge_deletes_only_published_rows_past_retention_in_batches() {
    let db = TestDb::migrated().await;
    let ids = unpublished(&db.store, 40, "worker-a", LONG).await;
    let (old, rest) = ids.split_at(23);
    let (recent, never) = rest.split_at(10);
    let marked = db
        .store
        .mark_published(&ids[..33], "worker-a")
        .await
        .expect("mark");
    assert_eq!(marked, 33);
    published_ago(&db, old, 2 * DAY).await;
    published_ago(&db, recent, Duration::from_secs(3600)).await;
    // Unpublished rows are never purged, however old.
    age_outbox(db.pool(), 30 * DAY).await;

    let purged = db.store.purge_published(DAY, 5).await.expect("purge");
    assert_eq!(purged, 23, "4 full batches of 5 and one of 3");
    let mut expected: Vec<i64> = recent.iter().chain(never).copied().collect();
    expected.sort();
    assert_eq!(remaining(&db).await, expected);
    assert_eq!(db.store.purge_published(DAY, 5).await.expect("purge"), 0);

    // A batch size that divides the backlog ends on an empty batch.
    published_ago(&db, recent, 2 * DAY).await;
    assert_eq!(db.store.purge_published(DAY, 1).await.expect("purge"), 10);
    assert_eq!(remaining(&db).await, never.to_vec());
    db.drop().await;
}

#[tokio::test]
async fn purge_refuses_an_empty_batch() {
    let db = TestDb::migrated().await;
    let error = db
        .store
        .purge_published(DAY, 0)
        .await
        .expect_err("batch of 0");
    assert!(
        matches!(error, OutboxError::InvalidArgument { .. }),
        "{error:?}"
    );
    db.drop().await;
}

#[tokio::test]
async fn stats_report_the_backlog() {
    let db = TestDb::migrated().await;
    let empty = db.store.stats(Sink::Amqp).await.expect("stats");
    assert_eq!(
        (empty.pending, empty.oldest_unpublished_age, empty.failing),
        (0, None, 0)
    );

    let ids = unpublished(&db.store, 5, "worker-a", LONG).await;
    db.store
        .mark_published(&ids[..1], "worker-a")
        .await
        .expect("mark");
    age_outbox(db.pool(), Duration::from_secs(3600)).await;
    expire_outbox_leases(db.pool()).await;
    // The repairer takes two of them: their first publish failed.
    let retried = db
        .store
        .claim_unpublished("relay", Duration::from_secs(10), LONG, 2)
        .await
        .expect("claim");
    assert_eq!(retried.len(), 2);

    let stats = db.store.stats(Sink::Amqp).await.expect("stats");
    assert_eq!(stats.pending, 4);
    assert_eq!(stats.failing, 2);
    let age = stats.oldest_unpublished_age.expect("an unpublished row");
    assert!(
        age >= Duration::from_secs(3600) && age < Duration::from_secs(3660),
        "{age:?}"
    );
    db.drop().await;
}
