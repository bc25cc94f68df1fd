//! Findings: a table validated as `public.<t>` was queried as bare `"<t>"` and resolved through
//! `search_path` (the real `pg_catalog.pg_authid` behind a decoy, the `"$user"` schema's table
//! instead of `public`'s); extractions did not run read-only; and a datasource's database was no
//! boundary. Each through the real binary against the world's PostgreSQL source database.

use std::time::Duration;

use serde_json::{json, Value};
use uuid::Uuid;

use crate::harness::{free_port, WorkerProcess, World};

async fn source(world: &World, sql: &str) {
    let pool = sqlx::PgPool::connect(world.source_url())
        .await
        .expect("connect source");
    sqlx::raw_sql(sql)
        .execute(&pool)
        .await
        .expect("source fixture");
    pool.close().await;
}

/// Runs a one-table job on the `src` connection; its event's body and, when completed, the
/// stored result.
async fn run(world: &World, table: &str, fields: &[&str]) -> (Value, Option<Value>) {
    let mut listener = world.listen().await;
    let job_id = Uuid::new_v4();
    world
        .submit(&world.job_body(job_id, "src", table, fields), None, &[])
        .await;
    let event = listener
        .event_for(job_id, Duration::from_secs(60))
        .await
        .body();
    let result = match event["result"]["path"].as_str() {
        Some(path) => Some(
            serde_json::from_slice(&world.open_object(path).await.expect("stored result"))
                .expect("result JSON"),
        ),
        None => None,
    };
    (event, result)
}

#[tokio::test]
async fn a_decoy_in_public_never_reaches_the_system_catalog() {
    let world = World::new().await;
    source(
        &world,
        "CREATE TABLE public.pg_authid (rolname text); INSERT INTO public.pg_authid VALUES ('decoy');",
    )
    .await;
    let worker = world.start_worker().await;
    let (event, result) = run(&world, "pg_authid", &["rolname"]).await;
    assert_eq!(event["status"], "completed", "{event}");
    assert_eq!(
        result.expect("result")["src"]["pg_authid"],
        json!([{"rolname": "decoy"}]),
        "the job read pg_catalog.pg_authid"
    );
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_bare_table_is_public_s_not_the_user_schema_s() {
    let world = World::new().await;
    source(
        &world,
        "CREATE SCHEMA postgres; CREATE TABLE postgres.t (v text); INSERT INTO postgres.t VALUES ('user schema');
         CREATE TABLE public.t (v text); INSERT INTO public.t VALUES ('public');",
    )
    .await;
    let worker = world.start_worker().await;
    let (event, result) = run(&world, "t", &["v"]).await;
    assert_eq!(event["status"], "completed", "{event}");
    assert_eq!(
        result.expect("result")["src"]["t"],
        json!([{"v": "public"}])
    );
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn an_extraction_cannot_write() {
    let world = World::new().await;
    source(
        &world,
        "CREATE TABLE audit (x int);
         CREATE FUNCTION write_audit() RETURNS int VOLATILE LANGUAGE plpgsql
             AS $$ BEGIN INSERT INTO audit VALUES (1); RETURN 1; END $$;
         CREATE VIEW sneaky AS SELECT write_audit() AS x;",
    )
    .await;
    let worker = world.start_worker().await;
    let (event, _) = run(&world, "sneaky", &["x"]).await;
    assert_eq!(event["status"], "failed", "{event}");
    let pool = sqlx::PgPool::connect(world.source_url())
        .await
        .expect("connect source");
    let written: i64 = sqlx::query_scalar("SELECT count(*) FROM audit")
        .fetch_one(&pool)
        .await
        .expect("count");
    pool.close().await;
    assert_eq!(written, 0, "the extraction wrote a row");
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn the_schema_allow_list_is_the_boundary() {
    let world = World::new().await;
    source(
        &world,
        "CREATE SCHEMA payroll; CREATE TABLE payroll.salaries (v text); INSERT INTO payroll.salaries VALUES ('secret');",
    )
    .await;
    // Without the allow-list, the user's grants are the boundary (upstream's behaviour).
    let worker = world.start_worker().await;
    let (open, _) = run(&world, "payroll.salaries", &["v"]).await;
    assert_eq!(open["status"], "completed", "{open}");
    drop(worker);

    let port = free_port();
    let mut env = world.env(port);
    env.insert("DATASOURCE_SRC_SCHEMAS".into(), "public".into());
    let worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;
    let (closed, _) = run(&world, "payroll.salaries", &["v"]).await;
    assert_eq!(closed["status"], "failed", "{closed}");
    let message = closed["metadata"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("schema validation"), "{message}");
    let (allowed, _) = run(&world, "payments", &["id"]).await;
    assert_eq!(allowed["status"], "completed", "{allowed}");
    drop(worker);
    world.cleanup().await;
}
