//! The job path's kept connections: reused across statements without sqlx's give-back test,
//! given back on an error, on a cancelled statement, when idle, over the cap and at close.
//!
//! sqlx runs a pool's `after_release` hook each time a connection is given back, just before
//! its test (a round trip): counting the hook's calls counts the tests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox::{Lease, Store};
use sqlpool::TEST_AFTER_IDLE;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

use crate::support::{claimed, TestDb, LONG};

/// A pool of `max` connections on `db`'s database whose give-backs are counted.
async fn counted_pool(db: &TestDb, max: u32) -> (PgPool, Arc<AtomicUsize>) {
    let given_back = Arc::new(AtomicUsize::new(0));
    let counter = given_back.clone();
    let options = (*db.pool().connect_options()).clone();
    let pool = PgPoolOptions::new()
        .max_connections(max)
        .after_release(move |_, _| {
            let counter = counter.clone();
            Box::pin(async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(true)
            })
        })
        .connect_with(options)
        .await
        .expect("a counted pool");
    (pool, given_back)
}

/// The backends connected to the test's database, besides this one.
async fn backends(db: &TestDb) -> Vec<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid() ORDER BY pid",
    )
    .fetch_all(db.pool())
    .await
    .expect("pg_stat_activity")
}

/// Waits until `given_back` reaches `n` (the give-back runs in a task of sqlx's).
async fn given_back_reaches(given_back: &AtomicUsize, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while given_back.load(Ordering::SeqCst) < n {
        assert!(
            Instant::now() < deadline,
            "{} connections given back, not {n}",
            given_back.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `pool` has `idle` of its `size` connections idle (a connection given back is
/// idle once its test answered).
async fn pool_reaches(pool: &PgPool, size: u32, idle: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while (pool.size(), pool.num_idle()) != (size, idle) {
        assert!(
            Instant::now() < deadline,
            "{} connections, {} idle; not {size}, {idle}",
            pool.size(),
            pool.num_idle()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_job_paths_statements_reuse_one_kept_connection_without_a_test() {
    let db = TestDb::migrated().await;
    let (pool, given_back) = counted_pool(&db, 4).await;
    let store = Store::new(pool.clone());
    let job_id = claimed(&store, "w1").await;
    let pid: i32 = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity
         WHERE datname = current_database() AND query LIKE 'WITH claimed AS%'",
    )
    .fetch_one(db.pool())
    .await
    .expect("the claim's backend");
    for _ in 0..5 {
        let lease = store.renew_lease(job_id, "w1", LONG).await.expect("renew");
        assert_eq!(lease, Lease::Held);
    }
    let marked = store.mark_published(&[-1], "w1").await.expect("mark");
    assert_eq!(marked, 0);
    // Seven statements, one connection, never given back (so never tested).
    let last: String = sqlx::query_scalar("SELECT query FROM pg_stat_activity WHERE pid = $1")
        .bind(pid)
        .fetch_one(db.pool())
        .await
        .expect("the kept backend");
    assert!(last.contains("published_at = now()"), "{last}");
    assert_eq!(given_back.load(Ordering::SeqCst), 0);
    assert_eq!((pool.size(), pool.num_idle()), (1, 0));
    store.close().await;
    assert!(pool.is_closed());
    db.drop().await;
}

#[tokio::test]
async fn a_failed_statement_gives_its_connection_back_and_the_next_gets_a_live_one() {
    let db = TestDb::migrated().await;
    let (pool, given_back) = counted_pool(&db, 4).await;
    let store = Store::new(pool.clone());
    let job_id = claimed(&store, "w1").await;
    // The kept connection is killed as a server restart kills it, within the untested second.
    let killed: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity, pg_terminate_backend(pid)
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_all(db.pool())
    .await
    .expect("terminate");
    assert_eq!(killed.len(), 1, "{killed:?}");
    store
        .renew_lease(job_id, "w1", LONG)
        .await
        .expect_err("a statement on a killed connection");
    given_back_reaches(&given_back, 1).await;
    let lease = store.renew_lease(job_id, "w1", LONG).await.expect("renew");
    assert_eq!(lease, Lease::Held);
    let now = backends(&db).await;
    assert!(!now.contains(&killed[0]), "{now:?}");
    store.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_cancelled_statement_never_leaves_its_connection_kept() {
    let db = TestDb::migrated().await;
    let (pool, given_back) = counted_pool(&db, 4).await;
    let store = Store::new(pool.clone());
    let job_id = claimed(&store, "w1").await;
    // Another session holds the job's row: the renewal waits for it, and is given up on.
    let locker = lock_job_row(&db, job_id).await;
    let cancelled = tokio::time::timeout(
        Duration::from_millis(300),
        store.renew_lease(job_id, "w1", LONG),
    )
    .await;
    assert!(
        cancelled.is_err(),
        "the renewal did not wait: {cancelled:?}"
    );
    locker.rollback().await.expect("rollback");
    // The connection went back mid-statement: the pool's test settles it.
    given_back_reaches(&given_back, 1).await;
    for _ in 0..3 {
        let lease = store.renew_lease(job_id, "w1", LONG).await.expect("renew");
        assert_eq!(lease, Lease::Held);
    }
    assert_eq!(given_back.load(Ordering::SeqCst), 1);
    store.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_kept_connection_idle_past_the_second_goes_back_to_the_pool() {
    let db = TestDb::migrated().await;
    let (pool, given_back) = counted_pool(&db, 4).await;
    let store = Store::new(pool.clone());
    let job_id = claimed(&store, "w1").await;
    assert_eq!(pool.num_idle(), 0);
    tokio::time::sleep(TEST_AFTER_IDLE + Duration::from_millis(300)).await;
    // The sweep gave it back, through the test; the pool lends it again.
    given_back_reaches(&given_back, 1).await;
    pool_reaches(&pool, 1, 1).await;
    let lease = store.renew_lease(job_id, "w1", LONG).await.expect("renew");
    assert_eq!(lease, Lease::Held);
    assert_eq!((pool.size(), pool.num_idle()), (1, 0));
    store.close().await;
    db.drop().await;
}

#[tokio::test]
async fn at_most_half_the_pool_is_kept_and_a_pool_of_one_keeps_none() {
    let db = TestDb::migrated().await;
    let (pool, given_back) = counted_pool(&db, 4).await;
    let store = Store::new(pool.clone());
    let job_id = claimed(&store, "w1").await;
    // Four renewals at once, held up by a lock so each has a connection of its own.
    let locker = lock_job_row(&db, job_id).await;
    let renewals: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.renew_lease(job_id, "w1", LONG).await })
        })
        .collect();
    // Each holds its connection once its statement waits on the lock (the pool's size counts a
    // connection still being opened: a lend still waiting on the pool would make the others
    // give theirs back instead of keeping them).
    let deadline = Instant::now() + Duration::from_secs(5);
    while waiting_on_a_lock(&db).await < 4 {
        assert!(Instant::now() < deadline, "{} connections", pool.size());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(pool.size(), 4);
    locker.rollback().await.expect("rollback");
    for renewal in renewals {
        assert_eq!(renewal.await.expect("task").expect("renew"), Lease::Held);
    }
    // Two kept (the claim's and one more), two given back.
    given_back_reaches(&given_back, 2).await;
    pool_reaches(&pool, 4, 2).await;
    assert_eq!(given_back.load(Ordering::SeqCst), 2);
    store.close().await;

    let (pool, given_back) = counted_pool(&db, 1).await;
    let store = Store::new(pool.clone());
    claimed(&store, "w2").await;
    given_back_reaches(&given_back, 1).await;
    pool_reaches(&pool, 1, 1).await;
    store.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_bare_pool_close_does_not_wait_for_the_kept_connections() {
    let db = TestDb::migrated().await;
    let (pool, _) = counted_pool(&db, 4).await;
    let store = Store::new(pool.clone());
    claimed(&store, "w1").await;
    assert_eq!((pool.size(), pool.num_idle()), (1, 0));
    tokio::time::timeout(Duration::from_millis(500), pool.close())
        .await
        .expect("the pool closed with a connection kept");
    // Nothing is kept once the pool is closed.
    let metadata = crate::support::metadata();
    let request = crate::support::claim_request(uuid::Uuid::new_v4(), "w1", LONG, &metadata);
    store.claim(&request).await.expect_err("a closed pool");
    assert_eq!(pool.size(), 0);
    drop(store);
    db.drop().await;
}

/// How many backends on the test's database wait on a lock.
async fn waiting_on_a_lock(db: &TestDb) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .fetch_one(db.pool())
    .await
    .expect("pg_stat_activity")
}

/// A transaction of another session holding job `job_id`'s row: statements on it wait until
/// the transaction ends.
async fn lock_job_row(
    db: &TestDb,
    job_id: uuid::Uuid,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut locker = db.pool().begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM jobs WHERE job_id = $1 FOR UPDATE")
        .bind(job_id)
        .execute(&mut *locker)
        .await
        .expect("lock the row");
    locker
}
