//! Published marks batched across jobs (`repairer::Marks`) on the real PostgreSQL: one
//! statement per flush, after a window or at a size; beyond the cap, after a flush that failed
//! twice or after the close, rows stay leased and the repairer publishes them again.

use std::time::{Duration, Instant};

use outbox::Store;
use repairer::{Marks, MarksConfig, Repairer};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::support::{self, TestDb, RECORDER};

const LONG: Duration = Duration::from_secs(600);

/// `n` recorded events, their rows leased to [`RECORDER`] for ten minutes; their outbox ids.
async fn leased_rows(store: &Store, n: usize) -> Vec<i64> {
    support::record_many(store, n, 4, support::mixed, LONG)
        .await
        .iter()
        .map(|r| r.outbox_id)
        .collect()
}

/// How many of `ids` are marked published.
async fn published(pool: &PgPool, ids: &[i64]) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM outbox WHERE id = ANY($1) AND published_at IS NOT NULL",
    )
    .bind(ids)
    .fetch_one(pool)
    .await
    .expect("count")
}

/// Waits until all of `ids` are marked published.
async fn until_published(pool: &PgPool, ids: &[i64], within: Duration) {
    let deadline = Instant::now() + within;
    while published(pool, ids).await < ids.len() as i64 {
        assert!(
            Instant::now() < deadline,
            "{ids:?} not all marked within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `done` holds of the batcher's stats.
async fn until(marks: &Marks, done: impl Fn(&repairer::MarksStats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(&marks.stats()) {
        assert!(Instant::now() < deadline, "{:?}", marks.stats());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn config(window: Duration, flush_rows: usize, cap: usize) -> MarksConfig {
    MarksConfig {
        window,
        flush_rows,
        cap,
    }
}

async fn lease_to(pool: &PgPool, id: i64, owner: &str) {
    sqlx::query("UPDATE outbox SET leased_by = $2 WHERE id = $1")
        .bind(id)
        .bind(owner)
        .execute(pool)
        .await
        .expect("lease");
}

#[tokio::test]
async fn the_window_gathers_several_owners_marks_into_one_statement() {
    let db = TestDb::migrated().await;
    let ids = leased_rows(&db.store, 4).await;
    lease_to(db.pool(), ids[2], "another-job").await;
    lease_to(db.pool(), ids[3], "another-job").await;
    let marks = Marks::start(
        db.store.clone(),
        config(Duration::from_millis(200), 256, 8192),
    );
    assert_eq!(marks.mark_later(RECORDER, &ids[..2]), 2);
    assert_eq!(marks.mark_later("another-job", &ids[2..3]), 1);
    // The wrong owner: the row is another-job's.
    assert_eq!(marks.mark_later(RECORDER, &ids[3..]), 1);
    assert_eq!(marks.stats().flushes, 0, "nothing before the window ends");
    until_published(db.pool(), &ids[..3], Duration::from_secs(10)).await;
    until(&marks, |s| s.flushes == 1 && s.marked == 3).await;
    assert_eq!(
        published(db.pool(), &ids[3..]).await,
        0,
        "only its lease holder marks it"
    );
    marks.close(Duration::from_secs(5)).await;
    assert_eq!(marks.stats().flushes, 1, "{:?}", marks.stats());
    db.drop().await;
}

#[tokio::test]
async fn enough_rows_flush_before_the_window_ends() {
    let db = TestDb::migrated().await;
    let ids = leased_rows(&db.store, 5).await;
    let marks = Marks::start(db.store.clone(), config(Duration::from_secs(60), 4, 8192));
    marks.mark_later(RECORDER, &ids[..1]);
    marks.mark_later(RECORDER, &ids[1..4]);
    until_published(db.pool(), &ids[..4], Duration::from_secs(10)).await;
    assert_eq!(marks.stats().flushes, 1, "{:?}", marks.stats());
    marks.mark_later(RECORDER, &ids[4..]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        published(db.pool(), &ids[4..]).await,
        0,
        "one row waits for its window"
    );
    marks.close(Duration::from_secs(5)).await;
    db.drop().await;
}

#[tokio::test]
async fn close_flushes_what_waits_and_later_rows_are_left() {
    let db = TestDb::migrated().await;
    let ids = leased_rows(&db.store, 4).await;
    let marks = Marks::start(db.store.clone(), config(Duration::from_secs(60), 256, 8192));
    marks.mark_later(RECORDER, &ids[..3]);
    marks.close(Duration::from_secs(5)).await;
    assert_eq!(published(db.pool(), &ids[..3]).await, 3);
    assert_eq!(marks.mark_later(RECORDER, &ids[3..]), 0, "closed");
    marks.close(Duration::from_secs(5)).await;
    let stats = marks.stats();
    assert_eq!(
        (stats.flushes, stats.marked, stats.left),
        (1, 3, 1),
        "{stats:?}"
    );
    assert_eq!(published(db.pool(), &ids[3..]).await, 0);
    db.drop().await;
}

#[tokio::test]
async fn rows_beyond_the_cap_are_left_to_the_repairer() {
    let (db, broker, exchange, publisher) = support::start().await;
    let queue = broker.bound_queue(&exchange, "job.#").await;
    support::record_many(&db.store, 6, 2, support::mixed, Duration::ZERO).await;
    // Leased to this publisher as right after their commit.
    let pending = db
        .store
        .claim_unpublished(RECORDER, Duration::ZERO, LONG, 100)
        .await
        .expect("lease");
    assert_eq!(pending.len(), 6);
    let marks = Marks::start(db.store.clone(), config(Duration::from_secs(60), 256, 4));
    let report = repairer::relay_marked_later(
        &db.store,
        &publisher.clone().into(),
        &marks,
        RECORDER,
        &pending,
    )
    .await
    .expect("relay");
    assert_eq!((report.published, report.failed), (4, 0), "{report:?}");
    assert_eq!(marks.stats().left, 2);
    marks.close(Duration::from_secs(5)).await;
    assert_eq!(support::unpublished_count(db.pool()).await, 2);
    let rows = support::outbox_rows(db.pool()).await;
    for row in rows.iter().filter(|r| r.published_at.is_none()) {
        assert_eq!(
            row.leased_by.as_deref(),
            Some(RECORDER),
            "still leased: {row:?}"
        );
    }

    // Once their lease ends, the repairer publishes them again: at least once.
    sqlx::query(
        "UPDATE outbox SET lease_until = now() - interval '1 second' WHERE published_at IS NULL",
    )
    .execute(db.pool())
    .await
    .expect("end leases");
    let repairer = Repairer::new(
        db.store.clone(),
        publisher.clone(),
        support::config("repairer-marks", 25),
    );
    let pass = repairer
        .repair_once(&CancellationToken::new())
        .await
        .expect("pass");
    assert_eq!(pass.relayed.published, 2, "{pass:?}");
    assert_eq!(support::unpublished_count(db.pool()).await, 0);
    let deliveries = broker.receive(&queue, 8, Duration::from_secs(10)).await;
    let (duplicates, _) = support::duplicates(&deliveries);
    assert_eq!((deliveries.len(), duplicates), (8, 2));
    support::finish(publisher, broker, db).await;
}

/// Makes every `UPDATE` of the outbox fail (`on`) or succeed again.
async fn refuse_marks(pool: &PgPool, on: bool) {
    let statements: &[&str] = if on {
        &[
            "CREATE OR REPLACE FUNCTION refuse_marks() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'marks refused by the test'; END $$",
            "CREATE TRIGGER refuse_marks BEFORE UPDATE ON outbox
             FOR EACH STATEMENT EXECUTE FUNCTION refuse_marks()",
        ]
    } else {
        &["DROP TRIGGER refuse_marks ON outbox"]
    };
    for statement in statements {
        sqlx::query(statement).execute(pool).await.expect("trigger");
    }
}

#[tokio::test]
async fn a_failed_flush_is_retried_once_then_left_to_the_repairer() {
    let db = TestDb::migrated().await;
    let ids = leased_rows(&db.store, 2).await;
    let marks = Marks::start(
        db.store.clone(),
        config(Duration::from_millis(500), 256, 8192),
    );

    // One failure: the next flush marks the row.
    refuse_marks(db.pool(), true).await;
    marks.mark_later(RECORDER, &ids[..1]);
    until(&marks, |s| s.failed_flushes == 1).await;
    refuse_marks(db.pool(), false).await;
    until_published(db.pool(), &ids[..1], Duration::from_secs(10)).await;
    let stats = marks.stats();
    assert_eq!((stats.flushes, stats.left), (2, 0), "{stats:?}");

    // Two failures: the row is left, still leased, and not tried again.
    refuse_marks(db.pool(), true).await;
    marks.mark_later(RECORDER, &ids[1..]);
    until(&marks, |s| s.left == 1).await;
    refuse_marks(db.pool(), false).await;
    let stats = marks.stats();
    assert_eq!((stats.flushes, stats.failed_flushes), (4, 3), "{stats:?}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    marks.close(Duration::from_secs(5)).await;
    assert_eq!(marks.stats().flushes, 4, "{:?}", marks.stats());
    assert_eq!(published(db.pool(), &ids[1..]).await, 0);
    let leased_by: Option<String> =
        sqlx::query_scalar("SELECT leased_by FROM outbox WHERE id = $1")
            .bind(ids[1])
            .fetch_one(db.pool())
            .await
            .expect("row");
    assert_eq!(
        leased_by.as_deref(),
        Some(RECORDER),
        "left to its lease's end"
    );
    db.drop().await;
}
