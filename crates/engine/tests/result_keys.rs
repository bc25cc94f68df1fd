//! Result keys as the Go Worker writes them, against the real servers: MySQL keys stay as the
//! job wrote them; PostgreSQL drops `public` (in any case) and the catalog part, and keys that
//! then name one table are merged (fields united, every filter applied) instead of failing.

mod support;

use engine::EngineError;
use serde_json::{json, Value};
use support::harness::{engine_for, job};
use support::mysql::{MariaDb, MariaDbEngine};
use support::TestDb;

/// Extracts a job body's `mappedFields` and `filters`: the result text, exactly as sealed.
async fn extract(engine: &engine::Engine, body: Value) -> Result<String, EngineError> {
    let message = job(body);
    let extraction = engine
        .extract(&message.mapped_fields, &message.filters)
        .await?;
    Ok(String::from_utf8(extraction.plaintext).expect("the result is UTF-8"))
}

#[tokio::test]
async fn mysql_keys_stay_as_the_job_wrote_them() {
    let shop = MariaDb::create().await;
    let archive = MariaDb::create().await;
    shop.exec(
        "CREATE TABLE orders (id INT, total INT); INSERT INTO orders VALUES (1, 10), (2, 20);",
    )
    .await;
    archive
        .exec("CREATE TABLE orders (id INT); INSERT INTO orders VALUES (3);")
        .await;
    let engine = shop.engine("my");
    let own = format!("{}.orders", shop.name);
    let foreign = format!("{}.orders", archive.name);

    let alone = extract(
        &engine,
        json!({"mappedFields": {"my": {own.clone(): ["id"]}}}),
    )
    .await
    .expect("the database-qualified name extracts");
    assert_eq!(
        alone,
        format!(
            "{{\n  \"my\": {{\n    \"{own}\": [\n      {{\n        \"id\": 1\n      }},\n      \
             {{\n        \"id\": 2\n      }}\n    ]\n  }}\n}}"
        ),
        "the key keeps the connection's database"
    );

    // `<shop>.orders` on a connection to `<shop>` keeps its database in the key; the bare
    // `orders` is the same table under its own key, each with its own fields and filters.
    let text = extract(
        &engine,
        json!({
            "mappedFields": {"my": {own.clone(): ["id"], "orders": ["total"], foreign.clone(): ["id"]}},
            "filters": {"my": {own.clone(): {"id": {"eq": [1]}}}},
        }),
    )
    .await
    .expect("extraction");
    // Keys sort byte-wise, as Go writes a map; the two databases' names are random.
    let mut tables = [(own.as_str(), "\"id\": 1"), (foreign.as_str(), "\"id\": 3")];
    tables.sort();
    let qualified: String = tables
        .iter()
        .map(|(key, row)| format!("\"{key}\": [\n      {{\n        {row}\n      }}\n    ],\n    "))
        .collect();
    let expected = format!(
        "{{\n  \"my\": {{\n    {qualified}\
         \"orders\": [\n      {{\n        \"total\": 10\n      }},\n      {{\n        \"total\": 20\n      }}\n    ]\n  }}\n}}"
    );
    assert_eq!(text, expected);

    // A filter written under the other spelling names a key the job did not map: the job fails
    // rather than extracting the table unfiltered.
    let result = extract(
        &engine,
        json!({
            "mappedFields": {"my": {own.clone(): ["id"]}},
            "filters": {"my": {"orders": {"id": {"eq": [1]}}}},
        }),
    )
    .await;
    assert!(
        matches!(result, Err(EngineError::Filter { .. })),
        "{result:?}"
    );
    archive.drop().await;
    shop.drop().await;
}

/// `public.t` (ids 1, 2, 3; ages 17, 30, 40) and `sales.t` (id 9), in a fresh database.
async fn postgres_fixture() -> TestDb {
    let db = TestDb::create().await;
    sqlx::raw_sql(
        "CREATE TABLE t (id int, name text, age int);
         INSERT INTO t VALUES (1, 'a', 17), (2, 'b', 30), (3, 'c', 40);
         CREATE SCHEMA sales; CREATE TABLE sales.t (id int); INSERT INTO sales.t VALUES (9);",
    )
    .execute(&db.pool)
    .await
    .expect("fixture");
    db
}

#[tokio::test]
async fn postgres_public_is_stripped_in_any_case() {
    let db = postgres_fixture().await;
    let engine = engine_for(&[("pg", &db)], Default::default());
    for table in ["PUBLIC.t", "Public.t", "public.t"] {
        let text = extract(
            &engine,
            json!({
                "mappedFields": {"pg": {table: ["id"]}},
                "filters": {"pg": {table: {"id": {"eq": [1]}}}},
            }),
        )
        .await
        .unwrap_or_else(|e| panic!("{table} is public's t: {e}"));
        assert_eq!(
            text,
            "{\n  \"pg\": {\n    \"t\": [\n      {\n        \"id\": 1\n      }\n    ]\n  }\n}",
            "{table}"
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn postgres_keys_naming_one_table_are_merged() {
    let db = postgres_fixture().await;
    let engine = engine_for(&[("pg", &db)], Default::default());
    let three_part = format!("{}.public.t", db.name);
    let text = extract(
        &engine,
        json!({
            "mappedFields": {"pg": {
                "public.t": ["id", "name"],
                "t": ["age"],
                three_part: ["id"],
                "sales.t": ["id"],
            }},
            "filters": {"pg": {
                "public.t": {"age": {"gte": [18]}},
                "t": {"id": {"lt": [3]}},
            }},
        }),
    )
    .await
    .expect("three spellings of one table are one table, not a failure");
    let expected = "{\n  \"pg\": {\n    \"sales.t\": [\n      {\n        \"id\": 9\n      }\n    ],\n    \
                    \"t\": [\n      {\n        \"age\": 30,\n        \"id\": 2,\n        \"name\": \"b\"\n      }\n    ]\n  }\n}";
    assert_eq!(text, expected, "fields united, both filters applied");
    db.drop().await;
}
