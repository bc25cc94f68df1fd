//! System schemas are never extractable: table discovery does not see them, so a job naming one
//! fails schema validation exactly like a missing table, even for a superuser datasource.

mod support;

use engine::{EngineConfig, EngineError};
use serde_json::{json, Value};
use support::harness::{assert_missing, engine_for, extract, job};
use support::mysql::{MariaDb, MariaDbEngine};
use support::TestDb;

#[tokio::test]
async fn postgres_system_relations_fail_like_missing_tables() {
    let db = TestDb::create().await;
    // The datasource user can read all of these itself: only discovery keeps them out.
    let superuser: bool =
        sqlx::query_scalar("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user")
            .fetch_one(&db.pool)
            .await
            .expect("pg_roles");
    assert!(superuser, "this test wants a privileged datasource user");
    let toast: String = sqlx::query_scalar(
        "SELECT 'pg_toast.' || c.relname FROM pg_catalog.pg_class c \
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = 'pg_toast' AND c.relkind = 't' ORDER BY c.oid LIMIT 1",
    )
    .fetch_one(&db.pool)
    .await
    .expect("a TOAST table");
    // A temporary table (relkind 'r') in another session's `pg_temp_<n>` schema.
    let mut holder = db
        .pool
        .acquire()
        .await
        .expect("a session for the temp table");
    sqlx::raw_sql("CREATE TEMP TABLE scratch (secret text); INSERT INTO scratch VALUES ('s');")
        .execute(&mut *holder)
        .await
        .expect("temp table");
    let temp_schema: String = sqlx::query_scalar("SELECT pg_my_temp_schema()::regnamespace::text")
        .fetch_one(&mut *holder)
        .await
        .expect("temp schema");
    assert!(temp_schema.starts_with("pg_temp_"), "{temp_schema}");
    let temp_table = format!("{temp_schema}.scratch");

    sqlx::raw_sql("CREATE TABLE t (v text); INSERT INTO t VALUES ('v');")
        .execute(&db.pool)
        .await
        .expect("fixture");
    let qualified = format!("{}.pg_catalog.pg_authid", db.name);

    let engine = engine_for(&[("pg", &db)], EngineConfig::default());
    let cases: [(&str, &[&str]); 8] = [
        ("pg_catalog.pg_authid", &["rolname", "rolpassword"]),
        ("pg_catalog.pg_class", &["relname"]),
        ("information_schema.tables", &["table_name"]),
        ("information_schema.columns", &["column_name"]),
        // Unqualified names are `public`'s, never the catalog's.
        ("pg_authid", &["rolname"]),
        (&qualified, &["rolname"]),
        (&toast, &["chunk_id"]),
        (&temp_table, &["secret"]),
    ];
    for (table, fields) in cases {
        assert_missing(extract(&engine, "pg", table, fields).await, "pg", table);
    }
    // A system relation next to a user table still fails the whole job.
    let message = job(json!({"mappedFields": {"pg": {
        "t": ["v"],
        "pg_catalog.pg_authid": ["rolname"],
    }}}));
    let Err(error) = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
    else {
        panic!("a job naming pg_catalog.pg_authid was extracted");
    };
    assert!(matches!(error, EngineError::Schema { .. }), "{error}");
    drop(holder);
    db.drop().await;
}

#[tokio::test]
async fn postgres_user_tables_outside_public_still_extract() {
    let db = TestDb::create().await;
    sqlx::raw_sql(
        "CREATE SCHEMA extra;
         CREATE TABLE extra.items (id int, name text);
         INSERT INTO extra.items VALUES (1, 'one'), (2, 'two');
         CREATE TABLE plain (v text);
         INSERT INTO plain VALUES ('p');",
    )
    .execute(&db.pool)
    .await
    .expect("fixture");
    let engine = engine_for(&[("pg", &db)], EngineConfig::default());
    let message = job(json!({"mappedFields": {"pg": {
        "extra.items": ["id", "name"],
        "plain": ["v"],
    }}}));
    let extraction = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect("user tables extract");
    let result: Value = serde_json::from_slice(&extraction.plaintext).expect("JSON");
    assert_eq!(
        result,
        json!({"pg": {
            "extra.items": [{"id": 1, "name": "one"}, {"id": 2, "name": "two"}],
            "plain": [{"v": "p"}],
        }})
    );
    db.drop().await;
}

/// Whether `schema.table` has `column` in the server's catalog, as the test's own user sees it.
async fn mysql_has_column(db: &MariaDb, schema: &str, table: &str, column: &str) -> bool {
    let count: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = ?",
    )
    .bind(schema)
    .bind(table)
    .bind(column)
    .fetch_one(&db.pool)
    .await
    .expect("information_schema is readable");
    count == 1
}

#[tokio::test]
async fn mysql_system_schemas_fail_like_missing_tables() {
    let db = MariaDb::create().await;
    let engine = db.engine("my");
    let cases = [
        ("mysql", "user", "User"),
        ("mysql", "global_priv", "Priv"),
        ("information_schema", "TABLES", "TABLE_NAME"),
        ("performance_schema", "threads", "THREAD_ID"),
        ("sys", "version", "sys_version"),
    ];
    for (schema, table, field) in cases {
        // The datasource user can see it: only discovery keeps it out.
        assert!(
            mysql_has_column(&db, schema, table, field).await,
            "{schema}.{table}.{field} should exist on the test server"
        );
        let name = format!("{schema}.{table}");
        assert_missing(extract(&engine, "my", &name, &[field]).await, "my", &name);
    }
    // Other spellings name no table either (names match exactly).
    for name in ["INFORMATION_SCHEMA.TABLES", "MySQL.user", "def.mysql.user"] {
        let result = extract(&engine, "my", name, &["User"]).await;
        assert!(
            matches!(result, Err(EngineError::Schema { .. })),
            "{name}: {:?}",
            result.err()
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn mysql_tables_of_the_database_still_extract() {
    let db = MariaDb::create().await;
    db.exec(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20));
         INSERT INTO items VALUES (1, 'one'), (2, 'two');",
    )
    .await;
    let engine = db.engine("my");
    let plain = extract(&engine, "my", "items", &["id", "name"])
        .await
        .expect("a table of the database extracts");
    let expected = json!({"my": {"items": [{"id": 1, "name": "one"}, {"id": 2, "name": "two"}]}});
    assert_eq!(plain, expected);
    let key = format!("{}.items", db.name);
    let qualified = extract(&engine, "my", &key, &["id", "name"])
        .await
        .expect("the database-qualified name extracts");
    assert_eq!(
        qualified,
        json!({"my": {key: [{"id": 1, "name": "one"}, {"id": 2, "name": "two"}]}}),
        "under the key the job wrote"
    );
    db.drop().await;
}
