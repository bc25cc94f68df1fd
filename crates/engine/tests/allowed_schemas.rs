//! `DATASOURCE_<NAME>_SCHEMAS` and the `schemas` column: with an allow-list, a table outside
//! it fails schema validation exactly like a missing table; without one, nothing changes.

mod support;

use engine::{Engine, EngineConfig, EngineError};
use serde_json::json;
use support::harness::{assert_missing, engine_with, extract};
use support::mysql::{MariaDb, MariaDbEngine};
use support::TestDb;

async fn pg_exec(db: &TestDb, sql: &str) {
    sqlx::raw_sql(sql)
        .execute(&db.pool)
        .await
        .unwrap_or_else(|e| panic!("fixture SQL failed: {e}\n{sql}"));
}

fn pg_engine(db: &TestDb, schemas: Option<&str>) -> Engine {
    let extra: Vec<(&str, &str)> = schemas.map(|s| ("SCHEMAS", s)).into_iter().collect();
    engine_with(&[("pg", db)], EngineConfig::default(), &extra)
}

#[tokio::test]
async fn postgres_tables_outside_the_allow_list_fail_like_missing_ones() {
    let db = TestDb::create().await;
    pg_exec(
        &db,
        "CREATE SCHEMA other;
         CREATE TABLE public.t (v text); INSERT INTO public.t VALUES ('public');
         CREATE TABLE other.t (v text); INSERT INTO other.t VALUES ('other');",
    )
    .await;
    // Without an allow-list, every schema the user can read is extractable.
    let open = pg_engine(&db, None);
    assert_eq!(
        extract(&open, "pg", "other.t", &["v"]).await.expect("open"),
        json!({"pg": {"other.t": [{"v": "other"}]}})
    );

    let public_only = pg_engine(&db, Some("public"));
    assert_missing(
        extract(&public_only, "pg", "other.t", &["v"]).await,
        "pg",
        "other.t",
    );
    let three_part = format!("{}.other.t", db.name);
    assert_missing(
        extract(&public_only, "pg", &three_part, &["v"]).await,
        "pg",
        &three_part,
    );
    assert_eq!(
        extract(&public_only, "pg", "t", &["v"]).await.expect("t"),
        json!({"pg": {"t": [{"v": "public"}]}})
    );
    assert_eq!(
        extract(&public_only, "pg", "public.t", &["v"])
            .await
            .expect("public.t"),
        json!({"pg": {"t": [{"v": "public"}]}})
    );

    // A bare name is `public`'s: unlisted `public` hides it, whatever else is listed.
    let other_only = pg_engine(&db, Some(" other "));
    assert_missing(extract(&other_only, "pg", "t", &["v"]).await, "pg", "t");
    assert_eq!(
        extract(&other_only, "pg", "other.t", &["v"])
            .await
            .expect("other.t"),
        json!({"pg": {"other.t": [{"v": "other"}]}})
    );
    db.drop().await;
}

#[tokio::test]
async fn postgres_system_schemas_stay_hidden_even_when_listed() {
    let db = TestDb::create().await;
    let engine = pg_engine(&db, Some("public,pg_catalog,information_schema"));
    for table in ["pg_catalog.pg_authid", "information_schema.tables"] {
        assert_missing(
            extract(&engine, "pg", table, &["rolname"]).await,
            "pg",
            table,
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn postgres_foreign_tables_are_read_only_when_their_schema_is_listed() {
    let db = TestDb::create().await;
    // A wrapper without a handler: the table exists in the catalog, and reading it fails on
    // the server, which tells a validated table from a hidden one.
    pg_exec(
        &db,
        "CREATE SCHEMA remote;
         CREATE FOREIGN DATA WRAPPER inert;
         CREATE SERVER nowhere FOREIGN DATA WRAPPER inert;
         CREATE FOREIGN TABLE remote.ft (v text) SERVER nowhere;",
    )
    .await;
    assert_missing(
        extract(&pg_engine(&db, Some("public")), "pg", "remote.ft", &["v"]).await,
        "pg",
        "remote.ft",
    );
    let listed = extract(
        &pg_engine(&db, Some("public,remote")),
        "pg",
        "remote.ft",
        &["v"],
    )
    .await;
    match listed {
        Err(error @ EngineError::Query { .. }) => {
            assert!(error.to_string().contains("no handler"), "{error}")
        }
        other => panic!("a listed foreign table should pass validation, got {other:?}"),
    }
    db.drop().await;
}

#[tokio::test]
async fn mysql_databases_outside_the_allow_list_fail_like_missing_tables() {
    let a = MariaDb::create().await;
    let b = MariaDb::create().await;
    b.exec(
        "CREATE TABLE payroll (who VARCHAR(10), salary INT);
         INSERT INTO payroll VALUES ('ceo', 1000000);",
    )
    .await;
    a.exec("CREATE TABLE items (id INT); INSERT INTO items VALUES (1);")
        .await;
    let payroll = format!("{}.payroll", b.name);

    // Without an allow-list, a connection to `a` reads whatever the user may read.
    let open = a.engine("my");
    assert_eq!(
        extract(&open, "my", &payroll, &["who"])
            .await
            .expect("open"),
        json!({"my": {payroll.clone(): [{"who": "ceo"}]}})
    );

    let only_a = a.engine_with("my", &[("SCHEMAS", &a.name)]);
    assert_missing(
        extract(&only_a, "my", &payroll, &["who"]).await,
        "my",
        &payroll,
    );
    assert_eq!(
        extract(&only_a, "my", "items", &["id"])
            .await
            .expect("items"),
        json!({"my": {"items": [{"id": 1}]}})
    );

    // The connection database is a bare name's: unlisted, its tables are hidden too.
    let only_b = a.engine_with("my", &[("SCHEMAS", &b.name)]);
    assert_missing(
        extract(&only_b, "my", "items", &["id"]).await,
        "my",
        "items",
    );
    assert_eq!(
        extract(&only_b, "my", &payroll, &["who"])
            .await
            .expect("listed"),
        json!({"my": {payroll.clone(): [{"who": "ceo"}]}})
    );
    a.drop().await;
    b.drop().await;
}
