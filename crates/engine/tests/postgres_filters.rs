//! Filters of every operator, and hostile identifiers and values, against the real server.

mod support;

use serde_json::{json, Value};
use support::harness::{engine_for, job};
use support::TestDb;

const FIXTURE: &str = r#"
CREATE TABLE payments (
    id integer PRIMARY KEY,
    amount numeric(12,2),
    status text,
    settled_at timestamptz,
    day date
);
INSERT INTO payments VALUES
    (1, 10.00, 'paid',     '2026-01-01 00:00:00+00', '2026-01-01'),
    (2, 20.50, 'pending',  '2026-01-15 12:00:00+00', '2026-01-15'),
    (3, 30.00, 'paid',     '2026-01-31 23:59:59+00', '2026-01-31'),
    (4, 40.00, 'refunded', '2026-02-01 00:00:00+00', '2026-02-01'),
    (5, NULL,  'it''s; --', NULL, NULL);
CREATE TABLE empty_table (id integer);
CREATE SCHEMA sales;
CREATE TABLE sales.orders (id integer, total numeric);
INSERT INTO sales.orders VALUES (7, 70);
"#;

/// The ids the job returns for `filter` on `payments.<field>`.
async fn ids(db: &TestDb, field: &str, condition: Value) -> Vec<i64> {
    let message = job(json!({
        "mappedFields": {"pg": {"payments": ["id"]}},
        "filters": {"pg": {"payments": {field: condition}}},
    }));
    let engine = engine_for(&[("pg", db)], Default::default());
    let extraction = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .unwrap_or_else(|e| panic!("extraction failed: {e}"));
    let result: Value = serde_json::from_slice(&extraction.plaintext).expect("JSON");
    let Some(rows) = result["pg"]["payments"].as_array() else {
        return Vec::new();
    };
    let mut ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().expect("id")).collect();
    ids.sort_unstable();
    ids
}

#[tokio::test]
async fn every_operator_selects_the_rows_it_names() {
    let db = TestDb::create().await;
    sqlx::raw_sql(FIXTURE)
        .execute(&db.pool)
        .await
        .expect("fixture");
    let cases = [
        ("id", json!({"eq": [2]}), vec![2]),
        ("id", json!({"eq": [1, 3]}), vec![1, 3]),
        ("id", json!({"ne": [1, 2]}), vec![3, 4, 5]),
        ("amount", json!({"gt": ["20.50"]}), vec![3, 4]),
        ("amount", json!({"gte": [20.5]}), vec![2, 3, 4]),
        ("amount", json!({"lt": [20.5]}), vec![1]),
        ("amount", json!({"lte": ["20.50"]}), vec![1, 2]),
        ("id", json!({"between": [2, 4]}), vec![2, 3, 4]),
        ("id", json!({"in": [4, 5, 99]}), vec![4, 5]),
        ("id", json!({"nin": [1, 2]}), vec![3, 4, 5]),
        ("status", json!({"like": ["pa%"]}), vec![1, 3]),
        ("id", json!({"gte": [2], "lt": [4]}), vec![2, 3]),
        // A date-only upper bound covers the whole end day on a timestamp column.
        (
            "settled_at",
            json!({"between": ["2026-01-01", "2026-01-31"]}),
            vec![1, 2, 3],
        ),
        (
            "day",
            json!({"between": ["2026-01-15", "2026-02-01"]}),
            vec![2, 3, 4],
        ),
        (
            "settled_at",
            json!({"between": ["2026-01-01", "2026-01-31T12:00:00Z"]}),
            vec![1, 2],
        ),
    ];
    for (field, condition, expected) in cases {
        assert_eq!(
            ids(&db, field, condition.clone()).await,
            expected,
            "{field} {condition}"
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn hostile_values_are_data_not_sql() {
    let db = TestDb::create().await;
    sqlx::raw_sql(FIXTURE)
        .execute(&db.pool)
        .await
        .expect("fixture");
    let hostile = [
        "it's; --",
        "x' OR '1'='1",
        "'; DROP TABLE payments; --",
        "/* comment */ paid",
        "paid\" OR \"\"=\"",
    ];
    assert_eq!(
        ids(&db, "status", json!({"eq": [hostile[0]]})).await,
        vec![5]
    );
    for value in &hostile[1..] {
        assert!(
            ids(&db, "status", json!({"eq": [value]})).await.is_empty(),
            "{value}"
        );
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM payments")
        .fetch_one(&db.pool)
        .await
        .expect("the table is still there");
    assert_eq!(count, 5);
    db.drop().await;
}

#[tokio::test]
async fn hostile_identifiers_fail_schema_validation_and_change_nothing() {
    let db = TestDb::create().await;
    sqlx::raw_sql(FIXTURE)
        .execute(&db.pool)
        .await
        .expect("fixture");
    let engine = engine_for(&[("pg", &db)], Default::default());
    let attempts = [
        json!({"payments; DROP TABLE payments; --": ["id"]}),
        json!({"payments\"--": ["id"]}),
        json!({"payments": ["id\" FROM payments; DROP TABLE payments; --"]}),
        json!({"payments": ["id /* x */"]}),
        json!({"nope": ["id"]}),
        json!({"payments": ["nope"]}),
    ];
    for tables in attempts {
        let message = job(json!({"mappedFields": {"pg": tables.clone()}}));
        let error = engine
            .extract(&message.mapped_fields, &message.filters)
            .await
            .expect_err("must fail");
        let text = error.to_string();
        assert!(
            text.contains("failed schema validation"),
            "{tables}: {text}"
        );
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM payments")
        .fetch_one(&db.pool)
        .await
        .expect("the table is still there");
    assert_eq!(count, 5);
    db.drop().await;
}

#[tokio::test]
async fn schemas_are_kept_in_keys_and_empty_tables_are_absent() {
    let db = TestDb::create().await;
    sqlx::raw_sql(FIXTURE)
        .execute(&db.pool)
        .await
        .expect("fixture");
    let engine = engine_for(&[("pg", &db)], Default::default());
    let message = job(json!({"mappedFields": {"pg": {
        "public.empty_table": ["id"],
        "sales.orders": ["total", "id"],
        format!("{}.public.payments", db.name): ["id"],
    }}, "filters": {"pg": {"payments": {"id": {"eq": [1]}}}}}));
    let extraction = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect("extraction");
    let expected = "{\n  \"pg\": {\n    \"payments\": [\n      {\n        \"id\": 1\n      }\n    ],\n    \"sales.orders\": [\n      {\n        \"id\": 7,\n        \"total\": \"70\"\n      }\n    ]\n  }\n}";
    assert_eq!(String::from_utf8_lossy(&extraction.plaintext), expected);
    assert_eq!(extraction.row_count, 2);
    db.drop().await;
}
