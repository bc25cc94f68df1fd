//! The mirror's MQTT rows as a queue: taken under row locks, deleted once delivered, backed off
//! otherwise, free again when a batch is given back, and a pass's batches taken one after another.

use std::collections::HashSet;
use std::time::Duration;

use outbox::{Store, Unpublished};

use crate::support::{unpublished, TestDb, LONG};

const NO_GRACE: Duration = Duration::ZERO;

/// `n` events recorded with the mirror on: their AMQP rows leased to `worker`, their MQTT rows
/// free. Returns the MQTT rows' ids, ascending.
async fn mirrored_events(db: &TestDb, n: usize) -> Vec<i64> {
    let store = db.store.clone().mirrored("fetcher");
    unpublished(&store, n, "worker", LONG).await;
    sqlx::query_scalar("SELECT id FROM outbox WHERE sink = 'mqtt' ORDER BY id")
        .fetch_all(db.pool())
        .await
        .expect("mqtt rows")
}

async fn mqtt_rows(db: &TestDb) -> Vec<(i64, i32, Option<String>, bool)> {
    sqlx::query_as(
        "SELECT id, attempts, last_error, next_attempt_at > now() FROM outbox
         WHERE sink = 'mqtt' ORDER BY id",
    )
    .fetch_all(db.pool())
    .await
    .expect("mqtt rows")
}

fn ids(store_batch: &outbox::MirrorBatch) -> Vec<i64> {
    store_batch
        .events()
        .iter()
        .map(|e| e.id.serial().unwrap())
        .collect()
}

#[tokio::test]
async fn a_batch_holds_its_rows_until_it_ends_deleting_the_delivered_and_backing_off_the_rest() {
    let db = TestDb::migrated().await;
    let rows = mirrored_events(&db, 5).await;
    let other: Store = db.store_with(2).await;

    let batch = db
        .store
        .take_mirror_batch(NO_GRACE, 3, None)
        .await
        .expect("take");
    assert_eq!(ids(&batch), rows[..3], "oldest first, MQTT rows only");
    assert!(batch
        .events()
        .iter()
        .all(|e| e.attempts == 1 && e.topic.is_some()));
    // Another relay skips the locked rows (and takes the free ones).
    let rest = other
        .take_mirror_batch(NO_GRACE, 10, None)
        .await
        .expect("take");
    assert_eq!(ids(&rest), rows[3..]);
    rest.release().await.expect("release");

    let failure = Unpublished {
        id: outbox::RowId::Serial(rows[2]),
        error: "broker said no to amqp://user:secret@broker".into(),
        retry_after: Duration::from_secs(60),
    };
    // An id that is not the batch's is ignored, delivered or not.
    let deleted = batch
        .finish(
            &[rows[0], rows[1], rows[4]].map(outbox::RowId::Serial),
            &[failure],
        )
        .await
        .expect("finish");
    assert_eq!(deleted, 2);

    let left = mqtt_rows(&db).await;
    assert_eq!(left.len(), 3, "{left:?}");
    let (id, attempts, error, later) = &left[0];
    assert_eq!(*id, rows[2]);
    assert_eq!(*attempts, 1, "the failed attempt is counted");
    assert!(*later, "backed off");
    let error = error.as_deref().expect("last_error");
    assert!(
        error.contains("broker said no") && !error.contains("secret"),
        "{error}"
    );
    // The batch given back left its rows as they were.
    assert_eq!(left[1], (rows[3], 0, None, false));
    assert_eq!(left[2], (rows[4], 0, None, false));
    // The AMQP rows are untouched.
    let amqp: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM outbox WHERE sink = 'amqp' AND published_at IS NULL",
    )
    .fetch_one(db.pool())
    .await
    .expect("amqp rows");
    assert_eq!(amqp, 5);

    // The backed-off row is not due; the other two are.
    let again = db
        .store
        .take_mirror_batch(NO_GRACE, 10, None)
        .await
        .expect("take");
    assert_eq!(ids(&again), rows[3..]);
    again.release().await.expect("release");
    other.pool().close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_pass_takes_its_batches_one_after_another_and_a_grace_keeps_young_rows() {
    let db = TestDb::migrated().await;
    let rows = mirrored_events(&db, 7).await;
    let young = db
        .store
        .take_mirror_batch(Duration::from_secs(3600), 10, None)
        .await
        .expect("take");
    assert!(
        young.events().is_empty(),
        "every row is younger than the grace"
    );
    assert_eq!(young.cursor(), None);
    young.release().await.expect("release");

    // Each batch starts after the one before, though that one still holds its rows.
    let mut cursor = None;
    let mut held = Vec::new();
    let mut seen = Vec::new();
    loop {
        let batch = db
            .store
            .take_mirror_batch(NO_GRACE, 3, cursor)
            .await
            .expect("take");
        if batch.events().is_empty() {
            assert_eq!(batch.cursor(), cursor, "an empty batch keeps the cursor");
            break;
        }
        seen.extend(ids(&batch));
        cursor = batch.cursor();
        held.push(batch);
    }
    assert_eq!(seen, rows, "every row once, in order");
    let mut deleted = 0;
    for batch in held {
        let delivered: Vec<_> = ids(&batch).into_iter().map(outbox::RowId::Serial).collect();
        deleted += batch.finish(&delivered, &[]).await.expect("finish");
    }
    assert_eq!(deleted, 7);
    assert!(mqtt_rows(&db).await.is_empty());
    let distinct: HashSet<i64> = seen.into_iter().collect();
    assert_eq!(distinct.len(), 7);
    db.drop().await;
}
