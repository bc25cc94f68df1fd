//! [`Kept`] with every connection of a pool kept ([`Cap::All`], the sources' pools), on the real
//! PostgreSQL and MariaDB: connections reused without sqlx's give-back test, given back after a
//! failed use, detached for good, and all given back when the pool closes. (The state store's
//! [`Cap::Half`] and the idle sweep are tested through it: `outbox`'s `tests/it/kept.rs`.)
//!
//! sqlx runs a pool's `after_release` hook each time a connection is given back, just before
//! its test (a round trip): counting the hook's calls counts the tests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlpool::{Cap, Kept};
use sqlx::mysql::MySqlPoolOptions;
use sqlx::pool::PoolOptions;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Database, Pool};
use testkit::mariadb::MariaDb;
use testkit::pg::TestDb;

/// `options` with each give-back counted in the returned counter.
fn counted<DB: Database>(options: PoolOptions<DB>) -> (PoolOptions<DB>, Arc<AtomicUsize>) {
    let given_back = Arc::new(AtomicUsize::new(0));
    let counter = given_back.clone();
    let options = options.after_release(move |_, _| {
        let counter = counter.clone();
        Box::pin(async move {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(true)
        })
    });
    (options, given_back)
}

/// Waits until `f` holds (a give-back runs in a task of sqlx's), failing with `what` after 5 s.
async fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The server's id of the session on `conn`.
async fn pid(conn: &mut sqlx::PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .expect("the backend's pid")
}

async fn postgres_pool(db: &TestDb, max: u32) -> (Pool<sqlx::Postgres>, Arc<AtomicUsize>) {
    let (options, given_back) = counted(PgPoolOptions::new().max_connections(max));
    let pool = options
        .connect_with(db.options.clone())
        .await
        .expect("a counted pool");
    (pool, given_back)
}

#[tokio::test]
async fn every_connection_of_a_source_pool_is_kept_and_reused_without_a_test() {
    let db = TestDb::create().await;
    let (pool, given_back) = postgres_pool(&db, 2).await;
    let kept = Kept::new(pool.clone(), Cap::All);
    // Two uses at once take both connections; both are kept (a pool of two keeps two).
    let (mut a, mut b) = (kept.lend().await.expect("a"), kept.lend().await.expect("b"));
    let pid_a = pid(&mut a).await;
    let pid_b = pid(&mut b).await;
    a.finish(true);
    b.finish(true);
    for _ in 0..10 {
        let mut conn = kept.lend().await.expect("a kept connection");
        let id = pid(&mut conn).await;
        assert!(id == pid_a || id == pid_b, "a new connection: {id}");
        conn.finish(true);
    }
    assert_eq!(
        given_back.load(Ordering::SeqCst),
        0,
        "a connection was tested"
    );
    assert_eq!((pool.size(), pool.num_idle()), (2, 0));

    // A failed use gives it back, through the test; the next lend takes it from the pool.
    let mut conn = kept.lend().await.expect("a kept connection");
    let failed = sqlx::query("SELECT no_such_column FROM pg_class")
        .execute(&mut *conn)
        .await;
    assert!(failed.is_err());
    conn.finish(false);
    until("the failed connection was not given back", || {
        given_back.load(Ordering::SeqCst) == 1
    })
    .await;
    until("the pool did not take it back", || pool.num_idle() == 1).await;

    // The pool closes: the kept one goes back at once, and `close` ends.
    tokio::time::timeout(Duration::from_secs(10), pool.close())
        .await
        .expect("the pool closed with a connection kept");
    db.drop().await;
}

#[tokio::test]
async fn a_detached_connection_frees_its_place_and_is_never_lent_again() {
    let db = TestDb::create().await;
    let (pool, given_back) = postgres_pool(&db, 1).await;
    let kept = Kept::new(pool.clone(), Cap::All);
    let mut conn = kept.lend().await.expect("a connection");
    let first = pid(&mut conn).await;
    conn.finish(true);
    // Kept, then detached (as an abandoned read's session is): the pool's one place is free.
    let conn = kept.lend().await.expect("the kept connection");
    drop(conn.detach());
    until("the detached connection still holds its place", || {
        pool.size() == 0
    })
    .await;
    let mut conn = kept.lend().await.expect("a new connection");
    let second = pid(&mut conn).await;
    assert_ne!(first, second, "the detached connection was lent again");
    conn.finish(true);
    // It is kept: the count of kept connections went down with the detach.
    let mut conn = kept.lend().await.expect("the kept connection");
    let third = pid(&mut conn).await;
    assert_eq!(second, third);
    conn.finish(true);
    assert_eq!(given_back.load(Ordering::SeqCst), 0);
    kept.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_mariadb_connection_is_kept_without_com_ping() {
    let maria = MariaDb::create().await;
    let (options, given_back) = counted(MySqlPoolOptions::new().max_connections(2));
    let pool = options
        .connect_with(
            (*maria.pool.connect_options())
                .clone()
                .database(&maria.name),
        )
        .await
        .expect("a counted pool");
    let kept = Kept::new(pool.clone(), Cap::All);
    let mut ids = Vec::new();
    for _ in 0..5 {
        let mut conn = kept.lend().await.expect("a connection");
        let id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
            .fetch_one(&mut *conn)
            .await
            .expect("connection id");
        ids.push(id);
        conn.finish(true);
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "not one connection reused: {ids:?}");
    assert_eq!(
        given_back.load(Ordering::SeqCst),
        0,
        "a connection was pinged"
    );
    // Dropped mid-use (a cancelled read): back to the pool, through its test.
    let conn = kept.lend().await.expect("a connection");
    drop(conn);
    until("the dropped connection was not given back", || {
        given_back.load(Ordering::SeqCst) == 1
    })
    .await;
    kept.close().await;
    maria.drop().await;
}

#[tokio::test]
async fn a_use_waiting_on_a_pool_whose_every_connection_is_kept_gets_the_next_one_ended() {
    let db = TestDb::create().await;
    // Every connection of the pool kept, and each in use: a third use waits on the pool. A
    // kept connection never goes back there by itself (only after a second idle, which under
    // load never comes), so the next use to end gives its connection back instead of keeping it.
    let (pool, given_back) = postgres_pool(&db, 2).await;
    let kept = Kept::new(pool.clone(), Cap::All);
    let (a, b) = (kept.lend().await.expect("a"), kept.lend().await.expect("b"));
    a.finish(true);
    b.finish(true);
    let (mut a, b) = (kept.lend().await.expect("a"), kept.lend().await.expect("b"));
    assert_eq!(kept.kept(), 2);
    let pid_a = pid(&mut a).await;
    let waiting = tokio::spawn({
        let kept = kept.clone();
        async move {
            let mut conn = kept.lend().await.expect("a connection for the waiting use");
            let id = pid(&mut conn).await;
            conn.finish(true);
            id
        }
    });
    // The third use waits on the pool, not served.
    until("the third use is not waiting on the pool", || {
        kept.waiting() == 1
    })
    .await;
    assert!(
        !waiting.is_finished(),
        "a pool of two lent a third connection"
    );
    a.finish(true);
    // Given back at once, not kept: the waiting use gets it through the pool.
    assert_eq!(
        kept.kept(),
        1,
        "the ended connection was kept with a use waiting"
    );
    let id = waiting.await.expect("the waiting use");
    assert_eq!(
        id, pid_a,
        "the waiting use did not get the connection given back"
    );
    assert_eq!(given_back.load(Ordering::SeqCst), 1);
    // Nobody waits any more: it was kept again after the waiting use.
    assert_eq!(kept.kept(), 2);
    b.finish(true);
    kept.close().await;
    db.drop().await;
}
