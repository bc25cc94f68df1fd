//! SQL Server datasources against a private pysqlbridge per test (the TDS stand-in,
//! docs/TEST-SERVERS.md §2): login, validation before any query, `dbo` in keys, every filter
//! operator with hostile values, the result's bytes, and the connection closed when another
//! datasource fails the job mid-read.

mod support;

use std::time::{Duration, Instant};

use engine::{EngineConfig, EngineError};
use serde_json::json;
use support::harness::job;
use support::sqlserver::{client_connections, SqlBridge};

async fn extract(engine: &engine::Engine, body: serde_json::Value) -> Result<String, EngineError> {
    let message = job(body);
    let extraction = engine
        .extract(&message.mapped_fields, &message.filters)
        .await?;
    Ok(String::from_utf8(extraction.plaintext.to_vec()).expect("UTF-8"))
}

fn compact(text: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
    value.to_string()
}

fn people() -> serde_json::Value {
    json!([
        {"id": 1, "name": "Ada", "score": 0.5, "big": 9007199254740993i64, "note": "<b>&"},
        {"id": 2, "name": "Bob", "score": 1.25, "big": 1, "note": null},
    ])
}

#[tokio::test]
async fn a_table_is_read_with_its_values_and_dbo_stripped_from_the_key() {
    let server = SqlBridge::start(&[("people", people())]);
    let engine = support::sqlserver::engine(&server, "ledger", EngineConfig::default(), &[]);
    let result = extract(
        &engine,
        json!({"mappedFields": {"ledger": {"DBO.people": ["id", "name", "score", "big", "note"]}}}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", server.server_log()));
    assert_eq!(
        result,
        concat!(
            "{\n  \"ledger\": {\n    \"people\": [\n",
            "      {\n        \"big\": 9007199254740993,\n        \"id\": 1,\n",
            "        \"name\": \"Ada\",\n        \"note\": \"\\u003cb\\u003e\\u0026\",\n",
            "        \"score\": 0.5\n      },\n",
            "      {\n        \"big\": 1,\n        \"id\": 2,\n        \"name\": \"Bob\",\n",
            "        \"note\": null,\n        \"score\": 1.25\n      }\n    ]\n  }\n}"
        )
    );
}

#[tokio::test]
async fn a_missing_table_or_column_fails_before_any_row_is_read() {
    let server = SqlBridge::start(&[("people", people())]);
    let engine = support::sqlserver::engine(&server, "ledger", EngineConfig::default(), &[]);
    let missing_table = extract(
        &engine,
        json!({"mappedFields": {"ledger": {"people": ["id"], "nope": ["id"]}}}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        missing_table.to_string(),
        "datasource ledger failed schema validation: table \"nope\" does not exist"
    );
    let missing_column = extract(
        &engine,
        json!({"mappedFields": {"ledger": {"people": ["id", "Name"]}}}),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(missing_column, EngineError::Schema { .. }),
        "{missing_column}"
    );
    assert!(
        missing_column.to_string().contains("Name"),
        "{missing_column}"
    );
    // The server saw the catalog queries and nothing that reads the table.
    let log = server.queries();
    assert!(log.contains("INFORMATION_SCHEMA.COLUMNS"), "{log}");
    assert!(!log.contains("FROM [dbo].[people]"), "{log}");
}

#[tokio::test]
async fn system_and_role_schemas_do_not_exist_for_a_job() {
    let server = SqlBridge::start(&[("people", people())]);
    let engine = support::sqlserver::engine(&server, "ledger", EngineConfig::default(), &[]);
    // pysqlbridge serves sys.tables and INFORMATION_SCHEMA views: they exist on the server.
    for (table, field) in [
        ("sys.tables", "name"),
        ("SYS.tables", "name"),
        ("INFORMATION_SCHEMA.COLUMNS", "TABLE_NAME"),
        ("information_schema.tables", "TABLE_NAME"),
        ("db_owner.people", "id"),
    ] {
        let error = extract(
            &engine,
            json!({"mappedFields": {"ledger": {table: [field]}}}),
        )
        .await
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("datasource ledger failed schema validation: table {table:?} does not exist"),
        );
    }
}

#[tokio::test]
async fn names_match_case_insensitively_and_keep_the_requested_key() {
    let server = SqlBridge::start(&[("people", people())]);
    let engine = support::sqlserver::engine(&server, "ledger", EngineConfig::default(), &[]);
    let result = extract(
        &engine,
        json!({"mappedFields": {"ledger": {"PEOPLE": ["id"], "ledger.dbo.people": ["name"]}}}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", server.server_log()));
    assert_eq!(
        compact(&result),
        r#"{"ledger":{"PEOPLE":[{"id":1},{"id":2}],"people":[{"name":"Ada"},{"name":"Bob"}]}}"#
    );
}

#[tokio::test]
async fn every_filter_operator_binds_its_values_and_hostile_ones_match_literally() {
    let rows: Vec<serde_json::Value> = (1..=6)
        .map(|i| json!({"n": i, "s": format!("item-{i}"), "tag": if i % 2 == 0 { "even" } else { "odd" }}))
        .chain([
            json!({"n": 100, "s": "'; DROP TABLE items --", "tag": "hostile"}),
            json!({"n": 101, "s": "[a]", "tag": "bracket"}),
            json!({"n": 102, "s": "a", "tag": "bracket"}),
            json!({"n": 103, "s": "a%b", "tag": "percent"}),
            json!({"n": 104, "s": "axb", "tag": "percent"}),
            json!({"n": 105, "s": "]x[", "tag": "bracket"}),
        ])
        .collect();
    let server = SqlBridge::start(&[("items", json!(rows))]);
    let engine = support::sqlserver::engine(&server, "inv", EngineConfig::default(), &[]);
    let ns = |filters: serde_json::Value| {
        let engine = engine.clone();
        async move {
            let text = extract(
                &engine,
                json!({"mappedFields": {"inv": {"items": ["n"]}}, "filters": {"inv": {"items": filters}}}),
            )
            .await?;
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            let mut ns: Vec<i64> = value["inv"]["items"]
                .as_array()
                .map(|rows| rows.iter().map(|r| r["n"].as_i64().unwrap()).collect())
                .unwrap_or_default();
            ns.sort_unstable();
            Ok::<_, EngineError>(ns)
        }
    };
    assert_eq!(ns(json!({"n": {"eq": [3]}})).await.unwrap(), [3]);
    assert_eq!(ns(json!({"n": {"eq": [3, 4]}})).await.unwrap(), [3, 4]);
    assert_eq!(
        ns(json!({"n": {"gt": [4], "lte": [6]}})).await.unwrap(),
        [5, 6]
    );
    assert_eq!(
        ns(json!({"n": {"gte": [5], "lt": [7]}})).await.unwrap(),
        [5, 6]
    );
    assert_eq!(ns(json!({"n": {"between": [2, 3]}})).await.unwrap(), [2, 3]);
    assert_eq!(ns(json!({"n": {"in": [1, 6]}})).await.unwrap(), [1, 6]);
    assert_eq!(
        ns(json!({"tag": {"nin": ["odd", "bracket", "hostile", "percent"]}}))
            .await
            .unwrap(),
        [2, 4, 6]
    );
    assert_eq!(
        ns(json!({"tag": {"ne": ["odd"]}, "n": {"lt": [7]}}))
            .await
            .unwrap(),
        [2, 4, 6]
    );
    assert_eq!(
        ns(json!({"s": {"like": ["item-%"]}, "n": {"gte": [5]}}))
            .await
            .unwrap(),
        [5, 6]
    );
    // Values are values: SQL in a value matches the row holding that text, nothing else.
    assert_eq!(
        ns(json!({"s": {"eq": ["'; DROP TABLE items --"]}}))
            .await
            .unwrap(),
        [100]
    );
    assert_eq!(
        ns(json!({"s": {"in": ["' OR 1=1 --", "a"]}}))
            .await
            .unwrap(),
        [102]
    );
    // T-SQL's character classes are literals in a contract pattern; `\` escapes a wildcard.
    assert_eq!(ns(json!({"s": {"like": ["[a]"]}})).await.unwrap(), [101]);
    assert_eq!(ns(json!({"s": {"like": ["]x["]}})).await.unwrap(), [105]);
    assert_eq!(ns(json!({"s": {"like": ["a\\%b"]}})).await.unwrap(), [103]);
    assert_eq!(
        ns(json!({"s": {"like": ["a%b"]}})).await.unwrap(),
        [103, 104]
    );
    assert_eq!(
        ns(json!({"s": {"like": ["a_b"]}})).await.unwrap(),
        [103, 104]
    );
    // The table was never written to.
    assert_eq!(ns(json!({})).await.unwrap().len(), 12);
}

/// A PostgreSQL view that waits for the test's advisory lock, then divides by zero.
const GATE: &str = "CREATE TABLE one (n int); INSERT INTO one VALUES (1); \
     CREATE VIEW gate AS SELECT n / (SELECT count(*)::int - 1 \
     FROM (SELECT pg_advisory_xact_lock_shared(4242)) l) AS n FROM one;";

#[tokio::test]
async fn a_failing_datasource_closes_the_sql_server_connection_mid_read() {
    let rows: Vec<serde_json::Value> = (0..50_000).map(|n| json!({"n": n})).collect();
    let server = SqlBridge::start(&[("big", json!(rows))]);
    let pg = support::TestDb::create().await;
    sqlx::raw_sql(GATE)
        .execute(&pg.pool)
        .await
        .expect("fixture");
    let mut lock = pg.pool.acquire().await.expect("a connection");
    sqlx::query("SELECT pg_advisory_lock(4242)")
        .execute(&mut *lock)
        .await
        .expect("lock");

    let mut vars = server.vars("MSSQL0", "mssql", &[]);
    for (suffix, value) in [
        ("CONFIG_NAME", "pg".to_owned()),
        ("TYPE", "POSTGRESQL".to_owned()),
        ("HOST", pg.options.get_host().to_owned()),
        ("PORT", pg.options.get_port().to_string()),
        ("DATABASE", pg.name.clone()),
        ("USER", pg.options.get_username().to_owned()),
        ("SSLMODE", "disable".to_owned()),
    ] {
        vars.push((format!("DATASOURCE_PG0_{suffix}"), value));
    }
    let env = engine::connection::from_env_vars(vars).expect("valid datasources");
    let engine = engine::Engine::new(
        EngineConfig::default(),
        engine::connection::Resolver::new(env, None),
    );
    let running = tokio::spawn(async move {
        extract(
            &engine,
            json!({"mappedFields": {"mssql": {"big": ["n"]}, "pg": {"gate": ["n"]}}}),
        )
        .await
    });

    // The SQL Server statement has been sent, and its connection is open.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !server.queries().contains("FROM [dbo].[big]") {
        assert!(Instant::now() < deadline, "no SELECT reached the server");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(client_connections(server.port), 1);
    sqlx::query("SELECT pg_advisory_unlock(4242)")
        .execute(&mut *lock)
        .await
        .expect("unlock");

    let error = running.await.expect("the task").unwrap_err();
    assert!(
        matches!(error, EngineError::Query { ref connection, .. } if connection == "pg"),
        "{error}"
    );
    assert!(error.to_string().contains("division by zero"), "{error}");
    // The SQL Server read was abandoned: its connection is closed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while client_connections(server.port) > 0 {
        assert!(Instant::now() < deadline, "the connection is still open");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(lock);
    pg.drop().await;
}

#[tokio::test]
async fn every_tls_mode_the_stand_in_supports_logs_in() {
    let server = SqlBridge::start(&[("people", people())]);
    // prefer (the default; the probe then requires a fully encrypted session), disable
    // (login-only TLS) and require (full TLS, certificate unchecked).
    for mode in [None, Some("disable"), Some("require")] {
        let extra: Vec<(&str, &str)> = mode.iter().map(|m| ("SSLMODE", *m)).collect();
        let engine = support::sqlserver::engine(&server, "ledger", EngineConfig::default(), &extra);
        let result = extract(
            &engine,
            json!({"mappedFields": {"ledger": {"people": ["id"]}}}),
        )
        .await
        .unwrap_or_else(|e| panic!("{mode:?}: {e}\n{}", server.server_log()));
        assert_eq!(
            compact(&result),
            r#"{"ledger":{"people":[{"id":1},{"id":2}]}}"#,
            "{mode:?}"
        );
    }
    // verify-full: the stand-in's certificate is self-signed, so the login fails, and says so
    // without the password.
    let engine = support::sqlserver::engine(
        &server,
        "ledger",
        EngineConfig::default(),
        &[("SSLMODE", "verify-full")],
    );
    let error = extract(
        &engine,
        json!({"mappedFields": {"ledger": {"people": ["id"]}}}),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, EngineError::Connect { .. }), "{error:?}");
    assert!(
        !error.to_string().contains(support::sqlserver::PASSWORD),
        "{error}"
    );
}
