//! Datasource connections against the real server: TLS modes, and pools that are shared,
//! bounded and closed when idle.

mod support;

use std::time::{Duration, Instant};

use engine::connection::{from_env_vars, Resolver};
use engine::{Engine, EngineConfig};
use serde_json::{json, Value};
use support::harness::job;
use support::TestDb;

fn engine(db: &TestDb, sslmode: &str, options: &str, config: EngineConfig) -> Engine {
    let vars = [
        ("DATASOURCE_PG_TYPE", "POSTGRESQL".to_owned()),
        ("DATASOURCE_PG_HOST", db.options.get_host().to_owned()),
        ("DATASOURCE_PG_PORT", db.options.get_port().to_string()),
        ("DATASOURCE_PG_DATABASE", db.name.clone()),
        ("DATASOURCE_PG_USER", db.options.get_username().to_owned()),
        ("DATASOURCE_PG_SSLMODE", sslmode.to_owned()),
        ("DATASOURCE_PG_OPTIONS", options.to_owned()),
    ]
    .map(|(k, v)| (k.to_owned(), v));
    let env = from_env_vars(vars).expect("valid datasource");
    Engine::new(config, Resolver::new(env, None))
}

async fn extract(engine: &Engine, table: &str, field: &str) -> Result<Value, engine::EngineError> {
    let message = job(json!({"mappedFields": {"pg": {table: [field]}}}));
    let extraction = engine
        .extract(&message.mapped_fields, &message.filters)
        .await?;
    Ok(serde_json::from_slice(&extraction.plaintext).expect("JSON"))
}

#[tokio::test]
async fn tls_modes_are_honoured() {
    let db = TestDb::create().await;
    let server_has_tls: String = sqlx::query_scalar("SHOW ssl")
        .fetch_one(&db.pool)
        .await
        .expect("SHOW ssl");
    assert_eq!(
        server_has_tls, "on",
        "this test needs a PostgreSQL server with TLS enabled"
    );
    // The view reports whether the session reading it is encrypted: the engine's own session.
    sqlx::raw_sql("CREATE VIEW tls AS SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .execute(&db.pool)
        .await
        .expect("view");

    for (mode, encrypted) in [("disable", false), ("require", true)] {
        let result = extract(
            &engine(&db, mode, "", EngineConfig::default()),
            "tls",
            "ssl",
        )
        .await
        .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(
            result["pg"]["tls"][0]["ssl"],
            json!(encrypted),
            "sslmode={mode}"
        );
    }

    // verify-full checks the certificate: the server's self-signed one is refused, clearly.
    let error = extract(
        &engine(&db, "verify-full", "", EngineConfig::default()),
        "tls",
        "ssl",
    )
    .await
    .expect_err("an untrusted certificate is refused");
    let text = error.to_string();
    assert!(
        text.starts_with("failed to connect to datasource pg"),
        "{text}"
    );
    assert!(
        !text.contains(&db.name) && !text.contains("127.0.0.1"),
        "{text}"
    );
    db.drop().await;
}

async fn engine_sessions(db: &TestDb, application: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
        .bind(application)
        .fetch_one(&db.pool)
        .await
        .expect("pg_stat_activity")
}

#[tokio::test]
async fn pools_are_shared_bounded_and_closed_when_idle() {
    let db = TestDb::create().await;
    sqlx::raw_sql("CREATE VIEW slowish AS SELECT 1 AS id FROM pg_sleep(0.3)")
        .execute(&db.pool)
        .await
        .expect("view");
    let application = format!("fetcher_pool_{}", &db.name[db.name.len() - 8..]);
    let config = EngineConfig {
        pool_max_connections: 2,
        pool_idle_timeout: Duration::from_secs(1),
        ..EngineConfig::default()
    };
    let engine = engine(
        &db,
        "disable",
        &format!("application_name={application}"),
        config,
    );

    let jobs: Vec<_> = (0..6)
        .map(|_| {
            let engine = engine.clone();
            tokio::spawn(async move { extract(&engine, "slowish", "id").await })
        })
        .collect();
    let mut peak = 0;
    while jobs.iter().any(|j| !j.is_finished()) {
        peak = peak.max(engine_sessions(&db, &application).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for job in jobs {
        job.await.expect("task").expect("extraction");
    }
    assert!(peak >= 1, "the jobs were never seen running");
    assert!(peak <= 2, "{peak} sessions for a pool of 2");
    assert!(
        engine_sessions(&db, &application).await >= 1,
        "connections are kept for reuse"
    );

    let deadline = Instant::now() + Duration::from_secs(15);
    while engine_sessions(&db, &application).await > 0 {
        assert!(
            Instant::now() < deadline,
            "idle connections were not closed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    db.drop().await;
}
