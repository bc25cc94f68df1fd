//! Start and stop: refusals with every problem listed, the topology the Worker declares (and
//! `deploy/rabbitmq/definitions.json` provisions), and the SIGTERM drain.

use std::process::Command;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::harness::World;

#[test]
fn startup_refusals_name_every_problem_and_no_secret() {
    let output = Command::new(env!("CARGO_BIN_EXE_fetcher-worker"))
        .env_clear()
        .env("APP_ENC_KEY", "c2hvcnQ=")
        .env("STREAMING_ENABLED", "false")
        .env("OBJECT_STORAGE_ACCESS_KEY_ID", "AKIA-PARTIAL")
        .env("DATABASE_URL", "postgres://u:db-secret@h/db")
        .output()
        .expect("run fetcher-worker");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    for expected in [
        "APP_ENC_KEY",
        "STREAMING_ENABLED must be true",
        "RABBITMQ_JOB_EVENTS_EXCHANGE is required",
        "STREAMING_CLOUDEVENTS_SOURCE is required",
        "OBJECT_STORAGE_BUCKET is required",
        "must be set together",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    for secret in ["c2hvcnQ=", "db-secret", "AKIA-PARTIAL"] {
        assert!(!stderr.contains(secret), "{secret} printed:\n{stderr}");
    }
}

#[tokio::test]
async fn sigterm_drains_in_flight_jobs_with_readyz_at_503() {
    let world = World::new().await;
    let mut worker = world.start_worker().await;
    let mut events = world.listen().await;

    let jobs: Vec<Uuid> = (0..2).map(|_| Uuid::now_v7()).collect();
    for job_id in &jobs {
        world.submit_job(*job_id, "src", "slow", &["id"]).await;
    }
    for job_id in &jobs {
        world
            .wait_status(*job_id, "processing", Duration::from_secs(20))
            .await;
    }
    worker.signal("TERM");
    let signalled = Instant::now();
    let mut saw_503 = false;
    while signalled.elapsed() < Duration::from_secs(2) {
        if let Some((503, body)) = worker.get("/readyz") {
            let body: serde_json::Value = serde_json::from_str(&body).expect("readyz JSON");
            assert_eq!(body["status"], "unhealthy", "{body}");
            assert_eq!(body["checks"]["draining"]["status"], "down", "{body}");
            assert_eq!(
                body["checks"]["draining"]["reason"], "graceful drain in progress",
                "{body}"
            );
            saw_503 = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(saw_503, "/readyz did not turn 503 during the drain");
    assert_eq!(
        worker.wait_exit(Duration::from_secs(60)).await,
        Some(0),
        "output:\n{}",
        worker.output()
    );
    for job_id in &jobs {
        let event = events.event_for(*job_id, Duration::from_secs(10)).await;
        assert_eq!(event.delivery.routing_key.as_str(), "job.completed");
        assert_eq!(
            world.job_status(*job_id).await.as_deref(),
            Some("completed")
        );
    }
    // Slow statements that complete, and a drain, are routine: nothing at WARN or above about
    // them (sqlx's slow-statement warning, lapin's lines about the connection's close).
    let output = worker.output();
    let loud: Vec<&str> = output
        .lines()
        .filter(|line| line.contains("\"level\":\"WARN\"") || line.contains("\"level\":\"ERROR\""))
        .collect();
    assert!(loud.is_empty(), "WARN or ERROR lines:\n{}", loud.join("\n"));
    drop(worker);
    world.cleanup().await;
}

#[test]
fn the_definitions_file_provisions_what_the_worker_declares() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/rabbitmq/definitions.json"
    );
    let text = std::fs::read_to_string(path).expect("definitions.json");
    let definitions: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let queue = |name: &str| {
        definitions["queues"]
            .as_array()
            .and_then(|qs| qs.iter().find(|q| q["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("queue {name} missing"))
    };
    let work = queue(worker::config::DEFAULT_WORK_QUEUE);
    assert_eq!(work["durable"], true);
    assert_eq!(
        work["arguments"]["x-dead-letter-exchange"],
        worker::amqp::topology::REPOSITORY_DEAD_LETTERS.exchange
    );
    assert_eq!(
        work["arguments"]["x-dead-letter-routing-key"],
        worker::amqp::topology::REPOSITORY_DEAD_LETTERS.routing_key
    );
    assert_eq!(
        queue(worker::amqp::topology::REPOSITORY_DEAD_LETTERS.queue)["durable"],
        true
    );
    let exchanges = definitions["exchanges"].as_array().expect("exchanges");
    assert!(exchanges.iter().any(|e| e["name"] == "fetcher.job.events"
        && e["type"] == "topic"
        && e["durable"] == true));
    assert!(exchanges
        .iter()
        .any(|e| e["name"] == worker::amqp::topology::REPOSITORY_DEAD_LETTERS.exchange));
}

#[tokio::test]
async fn a_work_queue_declared_with_other_arguments_refuses_the_start() {
    let world = World::new().await;
    world
        .broker
        .channel
        .queue_declare(
            world.queue.as_str().into(),
            lapin::options::QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await
        .expect("declare a conflicting queue");
    let port = crate::harness::free_port();
    let mut worker = crate::harness::WorkerProcess::spawn(world.env(port), port);
    let code = worker.wait_exit(Duration::from_secs(30)).await;
    assert_eq!(code, Some(1));
    let output = worker.output();
    assert!(
        output.contains("the work queue") && output.contains("could not be declared"),
        "{output}"
    );
    drop(worker);
    world.cleanup().await;
}
