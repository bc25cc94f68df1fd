//! Upgrading a database the previous release filled: `tests/fixtures/release-0005.sql` was
//! written by that release's own `outbox::Store` on schema 0005 (a completed and published job,
//! a failed one with its event unpublished, one processing under a lease, one released, one
//! failed unrun, and a connection) and dumped. Migrating it to the latest schema loses nothing
//! and changes no value; the lifecycle's new columns start at what an old row means.

use serde_json::Value;
use sqlx::PgPool;

const FIXTURE: &str = include_str!("fixtures/release-0005.sql");

/// Every row of `table` as JSON, keyed columns only (those of the previous schema).
async fn rows(pool: &PgPool, table: &str, columns: &[&str]) -> Vec<Value> {
    let picked = columns
        .iter()
        .map(|c| format!("'{c}', {c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let query = format!("SELECT jsonb_build_object({picked}) FROM {table} ORDER BY 1");
    let found: Vec<(sqlx::types::Json<Value>,)> = sqlx::query_as(&query)
        .fetch_all(pool)
        .await
        .expect("read rows");
    found.into_iter().map(|(row,)| row.0).collect()
}

const JOB_COLUMNS: &[&str] = &[
    "job_id",
    "tenant_id",
    "status",
    "request_id",
    "metadata",
    "spec",
    "result_path",
    "result_hmac",
    "result_size_bytes",
    "result_row_count",
    "error_message",
    "attempts",
    "owner",
    "lease_expires_at",
    "created_at",
    "started_at",
    "finished_at",
    "updated_at",
    "message_sha256",
];
const OUTBOX_COLUMNS: &[&str] = &[
    "id",
    "ce_id",
    "job_id",
    "body",
    "attributes",
    "request_id",
    "created_at",
    "published_at",
    "attempts",
    "next_attempt_at",
    "leased_by",
    "lease_until",
    "last_error",
];
const CONNECTION_COLUMNS: &[&str] = &[
    "id",
    "name",
    "type",
    "host",
    "port",
    "database",
    "username",
    "key_version",
    "created_at",
];

/// A fresh database at the previous release's schema (0005), holding the fixture.
async fn filled_by_the_previous_release() -> testkit::pg::TestDb {
    let db = testkit::pg::TestDb::create().await;
    schema::migrate_to(&db.pool, 5)
        .await
        .expect("schema of the previous release");
    sqlx::raw_sql(FIXTURE)
        .execute(&db.pool)
        .await
        .expect("load the fixture");
    db
}

#[tokio::test]
async fn a_database_the_previous_release_filled_upgrades_without_losing_a_row() {
    let db = filled_by_the_previous_release().await;
    let pool = &db.pool;
    let jobs = rows(pool, "jobs", JOB_COLUMNS).await;
    let outbox = rows(pool, "outbox", OUTBOX_COLUMNS).await;
    let connections = rows(pool, "connections", CONNECTION_COLUMNS).await;
    assert_eq!((jobs.len(), outbox.len(), connections.len()), (5, 3, 1));

    schema::migrate(pool).await.expect("upgrade");

    assert_eq!(rows(pool, "jobs", JOB_COLUMNS).await, jobs);
    assert_eq!(rows(pool, "outbox", OUTBOX_COLUMNS).await, outbox);
    assert_eq!(
        rows(pool, "connections", CONNECTION_COLUMNS).await,
        connections
    );
    let lifecycle = rows(
        pool,
        "jobs",
        &[
            "cancel_requested",
            "force_canceled",
            "delete_requested",
            "comment",
            "reason_code",
            "timeout_seconds",
            "status_before_deletion",
            "deleted_at",
            "result_deleted",
        ],
    )
    .await;
    let untouched = serde_json::json!({
        "cancel_requested": false, "force_canceled": false, "delete_requested": false,
        "comment": null, "reason_code": null, "timeout_seconds": null,
        "status_before_deletion": null, "deleted_at": null, "result_deleted": null,
    });
    assert!(
        lifecycle.iter().all(|row| *row == untouched),
        "{lifecycle:#?}"
    );
    let unstarted: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE first_started_at IS DISTINCT FROM started_at",
    )
    .fetch_one(pool)
    .await
    .expect("count");
    assert_eq!(unstarted, 0, "a run's first start is its start");
    db.drop().await;
}

#[tokio::test]
async fn the_lifecycle_columns_refuse_what_the_lifecycle_does_not_allow() {
    let db = filled_by_the_previous_release().await;
    let pool = &db.pool;
    schema::migrate(pool).await.expect("upgrade");
    let completed: String =
        sqlx::query_scalar("SELECT job_id::text FROM jobs WHERE status = 'completed'")
            .fetch_one(pool)
            .await
            .expect("the completed job");

    let update = |sql: &'static str| {
        let job = completed.clone();
        async move { sqlx::query(sql).bind(job).execute(pool).await.map(drop) }
    };
    // Deleting: remembers what it was; deleted: has its time.
    update("UPDATE jobs SET status = 'deletion_in_progress' WHERE job_id = $1::uuid")
        .await
        .expect_err("a deletion must remember the status before it");
    update(
        "UPDATE jobs SET status = 'deletion_in_progress', status_before_deletion = 'completed' \
         WHERE job_id = $1::uuid",
    )
    .await
    .expect("a deletion in progress");
    update("UPDATE jobs SET status = 'deleted' WHERE job_id = $1::uuid")
        .await
        .expect_err("deleted without its time");
    update("UPDATE jobs SET status = 'deleted', deleted_at = now() WHERE job_id = $1::uuid")
        .await
        .expect("deleted");
    update("UPDATE jobs SET status = 'running' WHERE job_id = $1::uuid")
        .await
        .expect_err("not a status");
    update("UPDATE jobs SET reason_code = 'not upper' WHERE job_id = $1::uuid")
        .await
        .expect_err("a reason code is [A-Z0-9_]");

    // Executions: one per datasource, ended ones have their end, gone with their job.
    sqlx::query(
        "INSERT INTO job_executions (job_id, datasource, status, started_at, ended_at, row_count) \
         VALUES ($1::uuid, 'ledger', 'SUCCEEDED', now(), now(), 3)",
    )
    .bind(&completed)
    .execute(pool)
    .await
    .expect("an execution");
    sqlx::query(
        "INSERT INTO job_executions (job_id, datasource, status) VALUES ($1::uuid, 'crm', 'FAILED')",
    )
    .bind(&completed)
    .execute(pool)
    .await
    .expect_err("an ended execution has its end");
    sqlx::query("DELETE FROM outbox WHERE job_id = $1::uuid")
        .bind(&completed)
        .execute(pool)
        .await
        .expect("events");
    sqlx::query("DELETE FROM jobs WHERE job_id = $1::uuid")
        .bind(&completed)
        .execute(pool)
        .await
        .expect("the job");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM job_executions")
        .fetch_one(pool)
        .await
        .expect("count");
    assert_eq!(left, 0, "executions are deleted with their job");
    db.drop().await;
}
