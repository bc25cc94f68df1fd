//! Fail-fast across kinds: a job whose MariaDB or SQL Server table is missing fails while its
//! MongoDB and PostgreSQL parts are mid-read, and their work is gone from the servers afterwards:
//! the PostgreSQL statement from `pg_stat_activity`, the MongoDB cursor from `currentOp`.
//!
//! The moments are the test's, not guessed: the PostgreSQL part reads a view that sleeps a
//! minute; the MongoDB part reaches its server through a [`FaultProxy`] that holds its first
//! `getMore` (the Worker then holds the cursor id of the first batch it received, and the server
//! the open cursor); the failing part's first bytes are held the same way (MariaDB's catalog
//! query; SQL Server's PRELOGIN, as everything after it is encrypted) until both are seen on
//! their servers, then let go: the table is missing, the job fails.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mongodb::bson::doc;
use serde_json::json;
use testkit::sqlbridge::SqlBridge;
use uuid::Uuid;

use super::job;
use crate::harness::sources::{MariaDb, MongoDb, PgSource, SourceDb};
use crate::harness::{FaultProxy, Trap, World};

/// A view whose read takes a minute: a statement the fail-fast must cancel.
const PG_FIXTURE: &str =
    "CREATE VIEW stalled AS SELECT id FROM generate_series(1, 3) id, pg_sleep(60);";

/// The first bytes of a TDS PRELOGIN packet (type 0x12, status end-of-message): what a SQL Server
/// client sends first on a connection.
const TDS_PRELOGIN: &[u8] = b"\x12\x01";

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
    let maria = MariaDb::create().await;
    maria
        .exec("CREATE TABLE present (id INT PRIMARY KEY);")
        .await;
    let addr = maria.addr().await;
    missing_table_cancels_the_others(&maria, addr, b"information_schema.COLUMNS").await;
    maria.drop().await;
}

#[tokio::test]
async fn a_missing_sql_server_table_fails_the_job_and_cancels_mongodb_and_postgresql_mid_read() {
    let mssql = SqlBridge::start(&[("present", json!([{"id": 1}]))]);
    let addr = ([127, 0, 0, 1], mssql.port).into();
    missing_table_cancels_the_others(&mssql, addr, TDS_PRELOGIN).await;
}

/// The job over `ledger` (PostgreSQL, stalled), `crm` (MongoDB, held mid-cursor) and `shop`
/// (`failing`, reached at `addr` through a proxy holding `held` until the others are mid-read),
/// whose table `missing` does not exist.
async fn missing_table_cancels_the_others(failing: &dyn SourceDb, addr: SocketAddr, held: &[u8]) {
    let world = World::new().await;
    let pg = PgSource::create(PG_FIXTURE).await;
    let mongo = MongoDb::create().await;
    // More than the first batch (101 documents): the cursor stays open after it.
    let documents = (0..500)
        .map(|i| doc! { "i": i, "v": "x".repeat(32) })
        .collect();
    mongo.insert("big", documents).await;

    let mongo_proxy = FaultProxy::start(mongo.addr().await).await;
    mongo_proxy.set_trap(Trap::hold(b"getMore"));
    let failing_proxy = FaultProxy::start(addr).await;
    failing_proxy.set_trap(Trap::hold(held));
    let mut env = pg.datasource("ledger");
    env.extend(mongo.datasource_at("crm", Some(mongo_proxy.addr())));
    env.extend(failing.datasource_at("shop", Some(failing_proxy.addr())));
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
    wait_until(
        "the failing part's first bytes are held",
        within,
        async || failing_proxy.trap_fired() == 1,
    )
    .await;
    assert_eq!(
        world.job_status(job_id).await.as_deref(),
        Some("processing")
    );

    // The failing part goes on and fails: the table is missing.
    failing_proxy.release_held();
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
    drop(failing_proxy);
    mongo.drop().await;
    pg.drop().await;
    world.cleanup().await;
}
