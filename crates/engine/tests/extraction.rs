//! Whole extractions against the real server: several datasources, fail-fast with server-side
//! cancellation, the size cap, the timeout, and unreachable or unknown connections.

mod support;

use std::time::{Duration, Instant};

use engine::{EngineConfig, EngineError, TimeLimit};
use serde_json::{json, Value};
use support::harness::{engine_for, job};
use support::TestDb;

const ROWS: &str =
    "CREATE TABLE numbers AS SELECT id, 'row ' || id AS label FROM generate_series(1, 20000) id;";
/// A view that streams rows, then fails at row 15,000 (division by zero), mid-stream.
const FAILING: &str =
    "CREATE VIEW failing AS SELECT id, 100 / (15000 - id) AS x FROM generate_series(1, 20000) id;";
/// A view whose query sleeps on the server for a minute before returning anything.
const SLOW: &str = "CREATE VIEW slow AS SELECT 1 AS id FROM pg_sleep(60);";

async fn running_sleeps(db: &TestDb) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND query LIKE '%slow%' AND state = 'active' AND pid <> pg_backend_pid()",
    )
    .bind(&db.name)
    .fetch_one(&db.pool)
    .await
    .expect("pg_stat_activity")
}

#[tokio::test]
async fn several_datasources_are_joined_in_name_order() {
    let a = TestDb::create().await;
    let b = TestDb::create().await;
    sqlx::raw_sql(ROWS)
        .execute(&a.pool)
        .await
        .expect("fixture a");
    sqlx::raw_sql("CREATE TABLE t (v text); INSERT INTO t VALUES ('b'), ('c');")
        .execute(&b.pool)
        .await
        .expect("fixture b");
    let engine = engine_for(&[("zeta", &a), ("alpha", &b)], EngineConfig::default());
    let message = job(json!({
        "mappedFields": {"zeta": {"numbers": ["id"]}, "alpha": {"t": ["v"]}},
        "filters": {"zeta": {"numbers": {"id": {"lte": [2]}}}},
    }));
    let extraction = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect("extraction");
    let expected = "{\n  \"alpha\": {\n    \"t\": [\n      {\n        \"v\": \"b\"\n      },\n      {\n        \"v\": \"c\"\n      }\n    ]\n  },\n  \"zeta\": {\n    \"numbers\": [\n      {\n        \"id\": 1\n      },\n      {\n        \"id\": 2\n      }\n    ]\n  }\n}";
    assert_eq!(String::from_utf8_lossy(&extraction.plaintext), expected);
    assert_eq!(extraction.row_count, 4);
    a.drop().await;
    b.drop().await;
}

#[tokio::test]
async fn a_datasource_failing_mid_stream_cancels_the_others_on_the_server() {
    let failing = TestDb::create().await;
    let slow = TestDb::create().await;
    sqlx::raw_sql(FAILING)
        .execute(&failing.pool)
        .await
        .expect("fixture");
    sqlx::raw_sql(SLOW)
        .execute(&slow.pool)
        .await
        .expect("fixture");
    let engine = engine_for(
        &[("bad", &failing), ("slow", &slow)],
        EngineConfig::default(),
    );
    let message = job(json!({"mappedFields": {
        "bad": {"failing": ["id", "x"]},
        "slow": {"slow": ["id"]},
    }}));
    let started = Instant::now();
    let error = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect_err("the failing datasource fails the job");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "not fail-fast: {:?}",
        started.elapsed()
    );
    assert!(
        matches!(error, EngineError::Query { ref connection, .. } if connection == "bad"),
        "{error}"
    );
    assert!(error.to_string().contains("division by zero"), "{error}");

    // The sleeping statement of the other datasource is cancelled on the server too.
    let deadline = Instant::now() + Duration::from_secs(10);
    while running_sleeps(&slow).await > 0 {
        assert!(
            Instant::now() < deadline,
            "the slow query is still running on the server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    failing.drop().await;
    slow.drop().await;
}

/// An engine over `db` whose results may not exceed 10,000 bytes.
fn capped_at_10_000_bytes(db: &TestDb) -> engine::Engine {
    let config = EngineConfig {
        max_result_bytes: 10_000,
        ..EngineConfig::default()
    };
    engine_for(&[("pg", db)], config)
}

#[tokio::test]
async fn the_size_cap_fails_the_job_while_writing() {
    let db = TestDb::create().await;
    sqlx::raw_sql(ROWS)
        .execute(&db.pool)
        .await
        .expect("fixture");
    let engine = capped_at_10_000_bytes(&db);
    let message = job(json!({"mappedFields": {"pg": {"numbers": ["id", "label"]}}}));
    let error = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect_err("too large");
    assert!(
        matches!(error, EngineError::ResultTooLarge { limit: 10_000 }),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "result exceeds ENGINE_MAX_RESULT_BYTES (10000 bytes)"
    );

    // The same job under a cap it fits completes, and the cap is measured on the final JSON.
    let engine = engine_for(&[("pg", &db)], EngineConfig::default());
    let full = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect("fits");
    let exact = EngineConfig {
        max_result_bytes: full.size_bytes(),
        ..EngineConfig::default()
    };
    let engine = engine_for(&[("pg", &db)], exact);
    let again = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect("a result exactly at the cap fits");
    assert_eq!(again.plaintext, full.plaintext);
    let result: Value = serde_json::from_slice(&full.plaintext).expect("JSON");
    assert_eq!(
        result["pg"]["numbers"].as_array().map(Vec::len),
        Some(20_000)
    );
    db.drop().await;
}

/// A job that fails on the Worker's side while its rows are still arriving (here the size cap)
/// leaves its connection mid-copy: the connection is closed, never pooled for the next job,
/// which reads its own rows.
#[tokio::test]
async fn a_read_abandoned_mid_stream_never_hands_its_connection_to_the_next_job() {
    let db = TestDb::create().await;
    sqlx::raw_sql(&format!(
        "{ROWS} CREATE TABLE t (v text); INSERT INTO t VALUES ('b'), ('c');"
    ))
    .execute(&db.pool)
    .await
    .expect("fixture");
    let engine = capped_at_10_000_bytes(&db);
    let big = job(json!({"mappedFields": {"pg": {"numbers": ["id", "label"]}}}));
    let small = job(json!({"mappedFields": {"pg": {"t": ["v"]}}}));
    for round in 0..3 {
        let error = engine
            .extract(&big.mapped_fields, &big.filters)
            .await
            .expect_err("too large");
        assert!(
            matches!(error, EngineError::ResultTooLarge { limit: 10_000 }),
            "round {round}: {error}"
        );
        let extraction = engine
            .extract(&small.mapped_fields, &small.filters)
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let result: Value = serde_json::from_slice(&extraction.plaintext).expect("JSON");
        assert_eq!(
            result,
            json!({"pg": {"t": [{"v": "b"}, {"v": "c"}]}}),
            "round {round}"
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn the_timeout_ends_the_extraction_and_its_query() {
    let db = TestDb::create().await;
    sqlx::raw_sql(SLOW)
        .execute(&db.pool)
        .await
        .expect("fixture");
    let config = EngineConfig {
        timeout: Duration::from_secs(1),
        ..EngineConfig::default()
    };
    let engine = engine_for(&[("pg", &db)], config);
    let message = job(json!({"mappedFields": {"pg": {"slow": ["id"]}}}));
    let started = Instant::now();
    let error = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect_err("timed out");
    assert!(matches!(error, EngineError::Timeout(_)), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let deadline = Instant::now() + Duration::from_secs(10);
    while running_sleeps(&db).await > 0 {
        assert!(
            Instant::now() < deadline,
            "the query is still running on the server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    db.drop().await;
}

#[tokio::test]
async fn a_job_limit_counts_its_earlier_runs_and_names_its_whole_timeout() {
    let db = TestDb::create().await;
    sqlx::raw_sql(SLOW)
        .execute(&db.pool)
        .await
        .expect("fixture");
    let engine = engine_for(&[("pg", &db)], EngineConfig::default());
    let message = job(json!({"mappedFields": {"pg": {"slow": ["id"]}}}));
    // 29 of its 30 s were used by an earlier run: one second is left.
    let limit = TimeLimit {
        timeout: Duration::from_secs(30),
        elapsed: Duration::from_secs(29),
    };
    let started = Instant::now();
    let error = engine
        .extract_within(
            &message.mapped_fields,
            &message.filters,
            limit,
            engine::Watch::none(),
        )
        .await
        .expect_err("timed out");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(error.to_string(), "extraction timed out after 30s");
    let deadline = Instant::now() + Duration::from_secs(10);
    while running_sleeps(&db).await > 0 {
        assert!(
            Instant::now() < deadline,
            "the query is still running on the server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A job whose time is spent does not query at all.
    let spent = TimeLimit {
        timeout: Duration::from_secs(5),
        elapsed: Duration::from_secs(6),
    };
    let error = engine
        .extract_within(
            &message.mapped_fields,
            &message.filters,
            spent,
            engine::Watch::none(),
        )
        .await
        .expect_err("no time left");
    assert!(matches!(error, EngineError::Timeout(t) if t == Duration::from_secs(5)));
    assert_eq!(running_sleeps(&db).await, 0);
    db.drop().await;
}

#[tokio::test]
async fn unreachable_and_unknown_connections_fail_with_safe_messages() {
    let vars = [
        ("DATASOURCE_GONE_TYPE", "POSTGRESQL"),
        ("DATASOURCE_GONE_HOST", "127.0.0.1"),
        ("DATASOURCE_GONE_PORT", "1"),
        ("DATASOURCE_GONE_DATABASE", "nowhere"),
        ("DATASOURCE_GONE_USER", "someone"),
        ("DATASOURCE_GONE_PASSWORD", "hunter2-secret"),
        ("DATASOURCE_GONE_SSLMODE", "disable"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let env = engine::connection::from_env_vars(vars).expect("valid");
    let config = EngineConfig {
        connect_timeout: Duration::from_secs(3),
        ..EngineConfig::default()
    };
    let engine = engine::Engine::new(config, engine::connection::Resolver::new(env, None));

    let message = job(json!({"mappedFields": {"gone": {"t": ["id"]}}}));
    let error = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect_err("unreachable");
    let text = error.to_string();
    assert!(
        text.starts_with("failed to connect to datasource gone"),
        "{text}"
    );
    for secret in ["127.0.0.1", ":1", "someone", "hunter2", "nowhere"] {
        assert!(!text.contains(secret), "{secret:?} leaked: {text}");
    }

    let message = job(json!({"mappedFields": {"missing": {"t": ["id"]}}}));
    let error = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect_err("unknown");
    assert_eq!(
        error.to_string(),
        "connection not found for database: missing"
    );
}
