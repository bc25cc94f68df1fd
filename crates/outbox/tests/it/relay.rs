//! Leasing unpublished events: disjoint concurrent claims, grace, lease expiry, backoff.

use outbox::Sink;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;
use tokio::sync::Barrier;

use crate::support::{
    age_outbox, claimed, expire_outbox_leases, failed, record, unpublished, TestDb, LONG,
};

const GRACE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_concurrent_claimers_never_get_the_same_row() {
    let db = TestDb::migrated().await;
    let ids = unpublished(&db.store, 200, "worker-a", Duration::ZERO).await;
    age_outbox(db.pool(), Duration::from_secs(60)).await;
    let store = db.store_with(4).await;

    let start = Arc::new(Barrier::new(2));
    let claimer = |owner: &'static str| {
        let store = store.clone();
        let start = start.clone();
        tokio::spawn(async move {
            start.wait().await;
            let mut got = Vec::new();
            loop {
                let batch = store
                    .claim_unpublished(owner, GRACE, LONG, 7)
                    .await
                    .expect("claim");
                if batch.is_empty() {
                    return got;
                }
                assert!(batch.iter().all(|e| e.attempts == 2), "{batch:?}");
                got.extend(batch.into_iter().map(|e| e.id.serial().unwrap()));
            }
        })
    };
    let (a, b) = (claimer("relay-a"), claimer("relay-b"));
    let (a, b) = (a.await.expect("task a"), b.await.expect("task b"));

    let a_set: HashSet<i64> = a.iter().copied().collect();
    let b_set: HashSet<i64> = b.iter().copied().collect();
    assert_eq!(a_set.len(), a.len(), "no row twice to one claimer");
    assert_eq!(b_set.len(), b.len(), "no row twice to one claimer");
    assert!(a_set.is_disjoint(&b_set), "no row to both claimers");
    let all: HashSet<i64> = a_set.union(&b_set).copied().collect();
    assert_eq!(all, ids.iter().copied().collect::<HashSet<_>>());
    assert!(
        !a.is_empty() && !b.is_empty(),
        "both claimers ran: {} / {}",
        a.len(),
        b.len()
    );
    let leased_to: Vec<(i64, String)> = sqlx::query("SELECT id, leased_by FROM outbox")
        .fetch_all(db.pool())
        .await
        .expect("rows")
        .iter()
        .map(|r| (r.get("id"), r.get("leased_by")))
        .collect();
    for (id, owner) in leased_to {
        let expected = if a_set.contains(&id) {
            "relay-a"
        } else {
            "relay-b"
        };
        assert_eq!(owner, expected, "row {id}");
    }
    store.pool().close().await;
    db.drop().await;
}

#[tokio::test]
async fn young_rows_and_live_leases_are_left_alone_until_they_end() {
    let db = TestDb::migrated().await;
    // Recorded just now and leased to the Worker that publishes it right away.
    let ids = unpublished(&db.store, 3, "worker-a", LONG).await;
    let claim = || db.store.claim_unpublished("relay", GRACE, LONG, 10);
    assert!(claim().await.expect("claim").is_empty(), "within grace");
    age_outbox(db.pool(), Duration::from_secs(60)).await;
    assert!(claim().await.expect("claim").is_empty(), "lease still live");
    expire_outbox_leases(db.pool()).await;
    let got: Vec<i64> = claim()
        .await
        .expect("claim")
        .iter()
        .map(|e| e.id.serial().unwrap())
        .collect();
    assert_eq!(got, ids);
    assert!(
        claim().await.expect("claim").is_empty(),
        "now leased to relay"
    );

    // A relay that dies leaves its rows to the next one when its lease ends.
    expire_outbox_leases(db.pool()).await;
    let again = db
        .store
        .claim_unpublished("relay-2", GRACE, Duration::from_millis(200), 10)
        .await
        .expect("claim");
    assert_eq!(again.len(), 3);
    assert!(again.iter().all(|e| e.attempts == 3));
    tokio::time::sleep(Duration::from_millis(400)).await;
    let third = db
        .store
        .claim_unpublished("relay-3", GRACE, LONG, 10)
        .await
        .expect("claim");
    assert_eq!(third.len(), 3, "an expired lease is free");
    db.drop().await;
}

#[tokio::test]
async fn a_failed_publish_backs_off() {
    let db = TestDb::migrated().await;
    let ids = unpublished(&db.store, 2, "worker-a", LONG).await;
    age_outbox(db.pool(), Duration::from_secs(60)).await;
    let error = "publish to amqp://guest:guest@10.0.0.9:5672 failed: connection refused";
    assert!(db
        .store
        .mark_failed(ids[0], "worker-a", error, Duration::from_secs(300))
        .await
        .expect("mark failed"));
    assert!(db
        .store
        .mark_failed(ids[1], "worker-a", error, Duration::ZERO)
        .await
        .expect("mark failed"));

    let row = sqlx::query(
        "SELECT next_attempt_at > now() + interval '200 seconds' AS later, leased_by, last_error
         FROM outbox WHERE id = $1",
    )
    .bind(ids[0])
    .fetch_one(db.pool())
    .await
    .expect("row");
    assert!(row.get::<bool, _>("later"));
    assert!(row.get::<Option<String>, _>("leased_by").is_none());
    let last_error: String = row.get("last_error");
    assert!(!last_error.contains("guest"), "{last_error}");
    assert!(!last_error.contains("10.0.0.9"), "{last_error}");
    assert!(last_error.contains("connection refused"), "{last_error}");

    let due: Vec<i64> = db
        .store
        .claim_unpublished("relay", GRACE, LONG, 10)
        .await
        .expect("claim")
        .iter()
        .map(|e| e.id.serial().unwrap())
        .collect();
    assert_eq!(due, vec![ids[1]], "the backed-off row is not due");
    assert!(
        !db.store
            .mark_failed(ids[1], "worker-a", error, Duration::ZERO)
            .await
            .expect("mark failed"),
        "the row is leased to the relay now"
    );
    db.drop().await;
}

#[tokio::test]
async fn only_the_lease_holder_marks_a_row_published() {
    let db = TestDb::migrated().await;
    let ids = unpublished(&db.store, 3, "worker-a", LONG).await;
    assert_eq!(
        db.store
            .mark_published(&ids, "worker-b")
            .await
            .expect("mark"),
        0
    );
    assert_eq!(
        db.store
            .mark_published(&ids[..2], "worker-a")
            .await
            .expect("mark"),
        2
    );
    assert_eq!(
        db.store
            .mark_published(&ids[..2], "worker-a")
            .await
            .expect("mark"),
        0,
        "already published"
    );
    // An unleased row (given back after a failure) can be marked by whoever published it.
    db.store
        .mark_failed(ids[2], "worker-a", "nack", Duration::ZERO)
        .await
        .expect("mark failed");
    assert_eq!(
        db.store
            .mark_published(&ids[2..], "relay")
            .await
            .expect("mark"),
        1
    );
    let stats = db.store.stats(Sink::Amqp).await.expect("stats");
    assert_eq!(stats.pending, 0);
    db.drop().await;
}

#[tokio::test]
async fn a_batch_of_several_owners_rows_marks_each_only_for_its_lease_holder() {
    let db = TestDb::migrated().await;
    let a = unpublished(&db.store, 2, "worker-a", LONG).await;
    let b = unpublished(&db.store, 2, "worker-b", LONG).await;
    let given_back = unpublished(&db.store, 1, "worker-c", LONG).await;
    db.store
        .mark_failed(given_back[0], "worker-c", "nack", Duration::ZERO)
        .await
        .expect("mark failed");
    // b[1]'s lease was taken over: its old owner's mark must not land.
    sqlx::query("UPDATE outbox SET leased_by = 'relay' WHERE id = $1")
        .bind(b[1])
        .execute(db.pool())
        .await
        .expect("take over");
    let marked = db
        .store
        .mark_published_by(&[
            (a[0], "worker-a"),
            (b[0], "worker-b"),
            (a[1], "worker-a"),
            (b[1], "worker-b"),
            (given_back[0], "worker-c"),
            // Another owner's row, named with the wrong owner.
            (a[0], "worker-b"),
        ])
        .await
        .expect("mark");
    assert_eq!(marked, 4);
    let published: Vec<(i64, bool, Option<String>)> =
        sqlx::query_as("SELECT id, published_at IS NOT NULL, leased_by FROM outbox ORDER BY id")
            .fetch_all(db.pool())
            .await
            .expect("rows");
    for (id, is_published, leased_by) in published {
        if id == b[1] {
            assert!(
                !is_published,
                "the taken-over row is left to its new holder"
            );
            assert_eq!(leased_by.as_deref(), Some("relay"));
        } else {
            assert!(is_published, "row {id}");
            assert_eq!(leased_by, None, "row {id}'s lease is cleared");
        }
    }
    assert_eq!(
        db.store
            .mark_published_by(&[(a[0], "worker-a"), (b[1], "relay")])
            .await
            .expect("mark"),
        1,
        "an already published row is not marked again"
    );
    assert_eq!(db.store.mark_published_by(&[]).await.expect("mark"), 0);
    db.drop().await;
}

#[tokio::test]
async fn a_batched_marks_unflushed_commit_is_its_own_and_not_the_connections() {
    let db = TestDb::migrated().await;
    // One connection: the mark's and every later statement's.
    let store = db.store_with(1).await;
    let ids = unpublished(&store, 2, "worker-a", LONG).await;
    let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(store.pool())
        .await
        .expect("backend");
    let marks: Vec<(i64, &str)> = ids.iter().map(|&id| (id, "worker-a")).collect();
    assert_eq!(store.mark_published_by(&marks).await.expect("mark"), 2);
    let (after, setting): (i32, String) =
        sqlx::query_as("SELECT pg_backend_pid(), current_setting('synchronous_commit')")
            .fetch_one(store.pool())
            .await
            .expect("setting");
    assert_eq!(after, backend, "the same connection");
    assert_eq!(
        setting, "on",
        "a later commit on the connection waits for the flush"
    );
    store.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_redelivered_terminal_job_leases_its_unpublished_event_now() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    record(
        &db.store,
        job_id,
        Some("worker-a"),
        failed(job_id, "boom"),
        "worker-a",
        LONG,
    )
    .await;
    assert!(
        db.store
            .claim_for_job(job_id, "worker-b", LONG)
            .await
            .expect("claim")
            .is_empty(),
        "the recording Worker still holds it"
    );
    expire_outbox_leases(db.pool()).await;
    // Backed off and young: a redelivery asks for it anyway.
    sqlx::query("UPDATE outbox SET next_attempt_at = now() + interval '1 hour'")
        .execute(db.pool())
        .await
        .expect("back off");
    let pending = db
        .store
        .claim_for_job(job_id, "worker-b", LONG)
        .await
        .expect("claim");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].attempts, 2);
    assert_eq!(
        db.store
            .mark_published(&[pending[0].id.serial().unwrap()], "worker-b")
            .await
            .expect("mark"),
        1
    );
    assert!(db
        .store
        .claim_for_job(job_id, "worker-c", LONG)
        .await
        .expect("claim")
        .is_empty());
    db.drop().await;
}
