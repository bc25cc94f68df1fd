//! The broker as upstream provisions it. `fixtures/upstream-definitions.json` is written from
//! the upstream notes on the broker (the work queue `fetcher.extract-external-data.queue`,
//! durable, dead-lettering to `fetcher.dlx` with `fetcher.dlq.key`; `fetcher.dlx` direct →
//! `fetcher.dlq` with `x-message-ttl` 604800000 and `x-max-length` 10000; the direct
//! `fetcher.extract-external-data.exchange` bound to the work queue with `fetcher.job.key`; the
//! topic `fetcher.job.events` bound to `fetcher.job.completed.queue` and
//! `fetcher.job.failed.queue`), not from the Worker's constants. It spells out the defaults
//! upstream's file leaves out (`auto_delete`, `internal`, empty `arguments`), which RabbitMQ
//! 3.10's importer requires. Each test imports it into a vhost of its own with `rabbitmqctl`
//! and deletes the vhost at the end. The Helm chart's provisioning is `provisioned.rs`'s.

use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{BasicConsumeOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use uuid::Uuid;

use super::vhost::{submit, Vhost, EVENTS_EXCHANGE, WORK_QUEUE};
use crate::harness::{free_port, Event, WorkerProcess, World};

const FIXTURE: &str = include_str!("fixtures/upstream-definitions.json");
const COMPLETED_QUEUE: &str = "fetcher.job.completed.queue";

#[tokio::test]
async fn a_worker_on_a_broker_provisioned_as_upstream_starts_and_runs_a_job() {
    let world = World::new().await;
    let vhost = Vhost::new(&world);
    vhost.provision(FIXTURE).await;
    let (connection, channel) = vhost.connect().await;
    // Upstream's own consumers read the events from the queues its definitions bind.
    let mut completed = channel
        .basic_consume(
            COMPLETED_QUEUE.into(),
            "".into(),
            BasicConsumeOptions {
                no_ack: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("consume the completed-events queue");

    let port = free_port();
    let worker = WorkerProcess::spawn(vhost.worker_env(&world, port), port);
    worker.wait_ready(Duration::from_secs(60)).await;
    let job_id = Uuid::now_v7();
    submit(
        &world,
        &channel,
        &world.job_body(job_id, "src", "payments", &["id", "memo"]),
        None,
    )
    .await;

    let event = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let delivery = completed
                .next()
                .await
                .expect("the consumer ended")
                .expect("delivery");
            let event = Event { delivery };
            if event.text("ce-subject") == job_id.to_string() {
                return event;
            }
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "no job.completed in {COMPLETED_QUEUE} within 60 s; output:\n{}",
            worker.output()
        )
    });
    event.verify(&world.keys).expect("the event's signature");
    assert_eq!(event.body()["status"], "completed");
    assert_eq!(world.job_status(job_id).await.as_deref(), Some("completed"));
    let output = worker.output();
    assert!(
        !output.contains("other retention"),
        "upstream's dead-letter queue is the Worker's own:\n{output}"
    );
    drop(worker);
    let _ = connection.close(200, "OK".into()).await;
    world.cleanup().await;
    drop(vhost);
}

#[tokio::test]
async fn a_work_queue_dead_lettering_elsewhere_refuses_the_start_naming_both_values() {
    let world = World::new().await;
    let vhost = Vhost::new(&world);
    let (connection, channel) = vhost.connect().await;
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(LongString::from("elsewhere.dlx")),
    );
    channel
        .queue_declare(
            WORK_QUEUE.into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            arguments,
        )
        .await
        .expect("declare the conflicting work queue");

    let port = free_port();
    let mut worker = WorkerProcess::spawn(vhost.worker_env(&world, port), port);
    let code = worker.wait_exit(Duration::from_secs(60)).await;
    let output = worker.output();
    assert!(
        matches!(code, Some(c) if c != 0),
        "exit {code:?}:\n{output}"
    );
    for expected in [
        &format!("the work queue {WORK_QUEUE:?} could not be declared"),
        "x-dead-letter-exchange = elsewhere.dlx on the broker",
        "the Worker declares x-dead-letter-exchange = fetcher.dlx",
        "fetcher.extract-external-data.dlx (LerianStudio's Helm chart)",
    ] {
        assert!(output.contains(expected), "{expected:?} not in:\n{output}");
    }
    drop(worker);
    let _ = connection.close(200, "OK".into()).await;
    world.cleanup().await;
    drop(vhost);
}

#[tokio::test]
async fn a_dead_letter_queue_with_other_retention_is_kept_with_a_warning() {
    let world = World::new().await;
    let vhost = Vhost::new(&world);
    let (connection, channel) = vhost.connect().await;
    // One retention argument with another value, the other missing (a broker provisioned from
    // an older definitions file).
    let mut arguments = FieldTable::default();
    arguments.insert("x-message-ttl".into(), AMQPValue::LongLongInt(3_600_000));
    channel
        .queue_declare(
            "fetcher.dlq".into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            arguments,
        )
        .await
        .expect("declare the dead-letter queue");

    let port = free_port();
    let worker = WorkerProcess::spawn(vhost.worker_env(&world, port), port);
    worker.wait_ready(Duration::from_secs(60)).await;
    let output = worker.output();
    let warnings: Vec<&str> = output
        .lines()
        .filter(|l| l.contains("other retention"))
        .collect();
    assert_eq!(warnings.len(), 2, "{output}");
    assert!(
        warnings.iter().any(|w| w.contains("x-message-ttl")
            && w.contains("3600000")
            && w.contains("604800000")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("x-max-length") && w.contains("none")),
        "{warnings:?}"
    );
    drop(worker);
    let _ = connection.close(200, "OK".into()).await;
    world.cleanup().await;
    drop(vhost);
}

#[test]
fn the_definitions_file_declares_what_upstreams_does_for_the_workers_objects() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/rabbitmq/definitions.json"
    );
    let ours: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("definitions.json"))
            .expect("JSON");
    let upstream: serde_json::Value = serde_json::from_str(FIXTURE).expect("fixture JSON");
    let find = |definitions: &serde_json::Value, kind: &str, name: &str| {
        definitions[kind]
            .as_array()
            .and_then(|list| list.iter().find(|o| o["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("{kind} {name} missing"))
    };
    for queue in [WORK_QUEUE, "fetcher.dlq"] {
        let (ours, upstream) = (
            find(&ours, "queues", queue),
            find(&upstream, "queues", queue),
        );
        assert_eq!(ours["durable"], upstream["durable"], "{queue}");
        assert_eq!(ours["arguments"], upstream["arguments"], "{queue}");
    }
    for exchange in ["fetcher.dlx", EVENTS_EXCHANGE] {
        let (ours, upstream) = (
            find(&ours, "exchanges", exchange),
            find(&upstream, "exchanges", exchange),
        );
        assert_eq!(ours["type"], upstream["type"], "{exchange}");
        assert_eq!(ours["durable"], upstream["durable"], "{exchange}");
    }
}
