//! Settings as the Worker binary takes them: what `config check` refuses, the start refuses
//! too, with the same problems and no secret; numeric settings at 0, a misspelt and an
//! upstream-only variable are each logged once at WARN and the Worker runs jobs, with its state
//! database's URL and key read from secret files (`<NAME>_FILE`).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use uuid::Uuid;

use crate::harness::{free_port, WorkerProcess, World};

/// `fetcher-worker config check` with exactly `env`: its exit code and its output.
fn config_check(env: &BTreeMap<String, String>) -> (Option<i32>, String) {
    let output = Command::new(WorkerProcess::binary())
        .args(["config", "check"])
        .env_clear()
        .envs(env)
        .output()
        .expect("run fetcher-worker config check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

#[tokio::test]
async fn the_start_refuses_what_config_check_refuses() {
    let world = World::new().await;
    let port = free_port();
    let mut env = world.env(port);
    for (name, value) in [
        ("LOG_LEVEL", "verbose"),
        ("LOG_FORMAT", "xml"),
        ("OBJECT_STORAGE_ENDPOINT", "notaurl"),
        ("RABBITMQ_URI", "http"),
        ("DATASOURCE_BROKEN_TYPE", "POSTGRESQL"),
        ("DATASOURCE_BROKEN_PORT", "-1"),
        ("DATASOURCE_BROKEN_PASSWORD", "broken-secret-pw"),
        ("DATASOURCE_ORACLE_TYPE", "ORACLE"),
        ("DATASOURCE_ORACLE_HOST", "oracle.internal"),
        ("DATASOURCE_ORACLE_DATABASE", "ledger"),
        ("DATASOURCE_ORACLE_USER", "reader"),
        ("RABBITMQ_NUMBER_OF_WORKERS", "8"),
        // Tokio's own, on which its runtime builder panics: refused like the others.
        ("TOKIO_WORKER_THREADS", "0"),
    ] {
        env.insert(name.into(), value.into());
    }
    env.insert(
        "DATABASE_URL".into(),
        "mysql://fetcher:state-secret-pw@127.0.0.1:3306/state".into(),
    );
    let problems = [
        "LOG_LEVEL must be a level",
        "LOG_FORMAT must be json or text",
        "OBJECT_STORAGE_ENDPOINT must be an http:// or https:// URL",
        "RABBITMQ_URI must be amqp or amqps",
        "DATABASE_URL must be a postgres:// or postgresql:// URL",
        "DATASOURCE_BROKEN_* does not define a usable datasource \"broken\"",
        "DATASOURCE_BROKEN_HOST is not set",
        "DATASOURCE_BROKEN_PORT is not a port number",
        "DATASOURCE_ORACLE_TYPE is ORACLE, a type this Worker has no connector for",
        "TOKIO_WORKER_THREADS must be a whole number of threads from 1 to 1024",
        "warning: RABBITMQ_NUMBER_OF_WORKERS is not a variable the Worker reads, it is ignored: \
         did you mean RABBITMQ_NUMBERS_OF_WORKERS?",
    ];

    let (code, checked) = config_check(&env);
    assert_eq!(code, Some(2), "{checked}");
    let mut worker = WorkerProcess::spawn(env, port);
    assert_eq!(
        worker.wait_exit(Duration::from_secs(30)).await,
        Some(2),
        "{}",
        worker.output()
    );
    worker
        .wait_for_lines(
            "the refusal's last line",
            1,
            Duration::from_secs(10),
            |line| line.contains("warning: RABBITMQ_NUMBER_OF_WORKERS"),
        )
        .await;
    let started = worker.output();
    for (what, output) in [("config check", &checked), ("the start", &started)] {
        assert!(
            output.contains("the Worker cannot start, its configuration has 8 problem(s)"),
            "{what}:\n{output}"
        );
        for problem in problems {
            assert!(
                output.contains(problem),
                "{what}: {problem:?} not in:\n{output}"
            );
        }
        for secret in ["broken-secret-pw", "state-secret-pw"] {
            assert!(
                !output.contains(secret),
                "{what} printed {secret}:\n{output}"
            );
        }
    }
    world.cleanup().await;
}

#[tokio::test]
async fn the_manager_mode_is_checked_and_waits_for_its_mongodb_naming_it_never_its_password() {
    let world = World::new().await;
    let port = free_port();
    let mut env = world.env(port);
    env.remove("DATABASE_URL");
    env.remove("API_PORT");
    for (name, value) in [
        ("MONGO_URI", "mongodb"),
        ("MONGO_HOST", "127.0.0.1"),
        // Nothing listens there: the Worker waits for it.
        ("MONGO_PORT", "1"),
        ("MONGO_NAME", "fetcher-db"),
        ("MONGO_USER", "fetcher"),
        ("MONGO_PASSWORD", "mongo-start-secret"),
        ("ALLOW_INSECURE_TLS", "true"),
    ] {
        env.insert(name.into(), value.into());
    }
    let (code, checked) = config_check(&env);
    assert_eq!(code, Some(0), "{checked}");
    assert!(
        checked.contains("state backend: mongodb (chosen by the environment"),
        "{checked}"
    );

    let mut worker = WorkerProcess::spawn(env, port);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let readyz = loop {
        if let Some((503, body)) = worker.get("/readyz") {
            if body.contains("\"mongodb\"") {
                break body;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "/readyz never named mongodb; output:\n{}",
            worker.output()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(!readyz.contains("postgres"), "{readyz}");
    worker.signal("TERM");
    assert_eq!(
        worker.wait_exit(Duration::from_secs(30)).await,
        Some(0),
        "{}",
        worker.output()
    );
    for output in [&checked, &worker.output(), &readyz] {
        assert!(!output.contains("mongo-start-secret"), "{output}");
    }
    world.cleanup().await;
}

#[tokio::test]
async fn zero_settings_a_typo_and_upstream_only_variables_are_warned_about_and_secret_files_read() {
    let world = World::new().await;
    let port = free_port();
    let mut env = world.env(port);
    let dir = std::env::temp_dir().join(format!("worker-secrets-{}", Uuid::new_v4()));
    std::fs::create_dir(&dir).expect("secret dir");
    for (name, file) in [
        ("DATABASE_URL", "database-url"),
        ("APP_ENC_KEY", "app-enc-key"),
    ] {
        let value = env.remove(name).expect("the world sets it");
        let path = dir.join(file);
        std::fs::write(&path, format!("{value}\n")).expect("secret file");
        env.insert(format!("{name}_FILE"), path.to_str().expect("UTF-8").into());
    }
    for (name, value) in [
        ("OUTBOX_REPAIR_INTERVAL_SEC", "0"),
        ("ENGINE_EXTRACTION_TIMEOUT_SEC", "0"),
        ("RABBITMQ_NUMBER_OF_WORKERS", "8"),
        ("OTEL_LIBRARY_NAME", "fetcher"),
        ("MULTI_TENANT_REDIS_PASSWORD", "mongo-secret-pw"),
    ] {
        env.insert(name.into(), value.into());
    }
    let (code, checked) = config_check(&env);
    assert_eq!(code, Some(0), "{checked}");
    assert!(
        checked.starts_with("configuration OK (5 warning(s))"),
        "{checked}"
    );

    let worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;
    let mut events = world.listen().await;
    // A zero extraction timeout is the default one, not an instant failure; the job proves the
    // state database (its URL from a file) and the key (from a file) are the ones in use.
    let fine = Uuid::now_v7();
    world.submit_job(fine, "src", "payments", &["id"]).await;
    let event = events.event_for(fine, Duration::from_secs(40)).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.completed");
    assert_eq!(world.job_status(fine).await.as_deref(), Some("completed"));

    let output = worker.output();
    let warnings: Vec<&str> = output
        .lines()
        .filter(|l| l.contains("\"level\":\"WARN\"") && l.contains("a variable set is not read"))
        .collect();
    assert_eq!(warnings.len(), 5, "{output}");
    for expected in [
        "OUTBOX_REPAIR_INTERVAL_SEC is 0, not above 0: using the default, 30 seconds",
        "ENGINE_EXTRACTION_TIMEOUT_SEC is 0, not above 0: using the default, 300 seconds",
        "RABBITMQ_NUMBER_OF_WORKERS is not a variable the Worker reads, it is ignored: did you \
         mean RABBITMQ_NUMBERS_OF_WORKERS?",
        "OTEL_LIBRARY_NAME is ignored (upstream only: ",
        "MULTI_TENANT_REDIS_PASSWORD is ignored (upstream only: ",
    ] {
        assert!(
            warnings.iter().any(|w| w.contains(expected)),
            "{expected:?} not in {warnings:?}"
        );
        assert!(checked.contains(expected), "{expected:?} not in {checked}");
    }
    assert!(!output.contains("mongo-secret-pw"), "a value is in the log");
    drop(worker);
    let _ = std::fs::remove_dir_all(&dir);
    world.cleanup().await;
}
