//! Fail-fast across kinds: a job whose MariaDB table is missing fails while its MongoDB and
//! PostgreSQL parts are mid-read, and their work is gone from the servers afterwards: the
//! PostgreSQL statement from `pg_stat_activity`, the MongoDB cursor from `currentOp`.
//!
//! The moments are the test's, not guessed: the PostgreSQL part reads a view that sleeps a
//! minute; the MongoDB part reaches its server through a [`FaultProxy`] that holds its first
//! `getMore` (the Worker then holds the cursor id of the first batch it received, and the server
//! the open cursor); the MariaDB part's catalog query is held the same way until both are seen
//! on their servers, then let go: the table is missing, the job fails.

use std::time::{Duration, Instant};

use mongodb::bson::doc;
use serde_json::json;
use uuid::Uuid;

use super::job;
use crate::harness::sources::{MariaDb, MongoDb, PgSource, SourceDb};
use crate::harness::{FaultProxy, Trap, World};

/// A view whose read takes a minute: a statement the fail-fast must cancel.
const PG_FIXTURE: &str =
    "CREATE VIEW stalled AS SELECT id FROM generate_series(1, 3) id, pg_sleep(60);";

/// Waits until `condition` holds, or fails naming `what`.
async fn wait_until<F: AsyncFn() -> bool>(what: &str, within: Duration, condition: F) {
    let deadline = Instant::now() + within;
    while !condition().await {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_missing_mariadb_table_fails_the_job_and_cancels_mongodb_and_postgresql_mid_read() {
    let world = World::new().await;
    let pg = PgSource::create(PG_FIXTURE).await;
    let mongo = MongoDb::create().await;
    // More than the first batch (101 documents): the cursor stays open after it.
    let documents = (0..500)
        .map(|i| doc! { "i": i, "v": "x".repeat(32) })
        .collect();
    mongo.insert("big", documents).await;
    let maria = MariaDb::create().await;
    maria
        .exec("CREATE TABLE present (id INT PRIMARY KEY);")
        .await;

    let mongo_proxy = FaultProxy::start(mongo.addr().await).await;
    mongo_proxy.set_trap(Trap::hold(b"getMore"));
    let maria_proxy = FaultProxy::start(maria.addr().await).await;
    maria_proxy.set_trap(Trap::hold(b"information_schema.COLUMNS"));
    let mut env = pg.datasource("ledger");
    env.extend(mongo.datasource_at("crm", Some(mongo_proxy.addr())));
    env.extend(maria.datasource_at("shop", Some(maria_proxy.addr())));
    let worker = world.start_worker_with(env).await;
    let mut events = world.listen().await;

    let job_id = Uuid::now_v7();
    let mapped = json!({
        "ledger": {"stalled": ["id"]},
        "crm": {"big": ["i", "v"]},
        "shop": {"missing": ["id"]},
    });
    world
        .submit(&job(job_id, mapped, json!(null)), None, &[])
        .await;

    // All three mid-way, and seen on their servers: the check below can fail.
    let within = Duration::from_secs(30);
    wait_until("the PostgreSQL statement runs", within, async || {
        pg.running("stalled").await == 1
    })
    .await;
    wait_until("the MongoDB cursor is open mid-read", within, async || {
        mongo_proxy.trap_fired() == 1 && mongo.open_cursors("big").await == 1
    })
    .await;
    wait_until("the MariaDB catalog query is held", within, async || {
        maria_proxy.trap_fired() == 1
    })
    .await;
    assert_eq!(
        world.job_status(job_id).await.as_deref(),
        Some("processing")
    );

    // The MariaDB part goes on and fails: the table is missing.
    maria_proxy.release_held();
    let message = world.failure_of(&mut events, job_id).await;
    assert!(
        message.contains("failed schema validation") && message.contains("shop"),
        "{message}"
    );

    // The others' work is gone from their servers (the MongoDB getMore is still held, its
    // connection open: only a killCursors closes the cursor).
    wait_until(
        "the PostgreSQL statement is cancelled",
        within,
        async || pg.running("stalled").await == 0,
    )
    .await;
    wait_until("the MongoDB cursor is killed", within, async || {
        mongo.open_cursors("big").await == 0
    })
    .await;
    assert!(
        world.object_keys().await.is_empty(),
        "a failed job stored a result"
    );

    drop(worker);
    drop(mongo_proxy);
    drop(maria_proxy);
    mongo.drop().await;
    pg.drop().await;
    maria.drop().await;
    world.cleanup().await;
}
