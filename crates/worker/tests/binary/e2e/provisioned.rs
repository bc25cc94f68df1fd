//! The Worker on a broker provisioned by someone else, as each known provisioning declares it:
//! LerianStudio's Helm chart (`fixtures/helm-definitions.json`, written from the chart's
//! `load_definitions.json` as docs/UPSTREAM-MANAGER.md §8 describes it: the work queue
//! dead-letters to `fetcher.extract-external-data.dlx` with `….dlq.key` into `….dlq`, the
//! unused `fetcher.generate-fetcher.*` objects beside it, and no events exchange) and upstream's
//! repository (`fixtures/upstream-definitions.json`). On each, the Worker starts, runs a job,
//! places a refused message in that provisioning's dead-letter queue, creates none of the
//! other's objects, and leaves the events exchange declared.

use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::BasicConsumeOptions;
use lapin::types::FieldTable;
use uuid::Uuid;

use contract::wire::{self, DeadLetters, HELM_DEAD_LETTERS, REPOSITORY_DEAD_LETTERS};
use testkit::amqp::long_string;

use super::vhost::{submit, Vhost, EVENTS_EXCHANGE};
use crate::harness::{free_port, WorkerProcess, World};

const HELM: &str = include_str!("fixtures/helm-definitions.json");
const REPOSITORY: &str = include_str!("fixtures/upstream-definitions.json");

#[tokio::test]
async fn on_the_helm_charts_broker_the_worker_consumes_and_dead_letters_into_the_charts_queue() {
    consumes_and_dead_letters_as_provisioned(HELM, HELM_DEAD_LETTERS, REPOSITORY_DEAD_LETTERS)
        .await;
}

#[tokio::test]
async fn on_the_repositorys_broker_the_worker_consumes_and_dead_letters_into_fetcher_dlq() {
    consumes_and_dead_letters_as_provisioned(
        REPOSITORY,
        REPOSITORY_DEAD_LETTERS,
        HELM_DEAD_LETTERS,
    )
    .await;
}

async fn consumes_and_dead_letters_as_provisioned(
    definitions: &str,
    provisioned: DeadLetters,
    other: DeadLetters,
) {
    let world = World::new().await;
    let vhost = Vhost::new(&world);
    vhost.provision(definitions).await;
    let (connection, channel) = vhost.connect().await;
    let mut dead = channel
        .basic_consume(
            provisioned.queue.into(),
            "".into(),
            BasicConsumeOptions {
                no_ack: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("consume the provisioned dead-letter queue");

    let port = free_port();
    let worker = WorkerProcess::spawn(vhost.worker_env(&world, port), port);
    worker.wait_ready(Duration::from_secs(60)).await;

    let job_id = Uuid::now_v7();
    let body = world.job_body(job_id, "src", "payments", &["id"]);
    submit(&world, &channel, &body, None).await;
    world
        .wait_status(job_id, "completed", Duration::from_secs(60))
        .await;

    let refused = world.job_body(Uuid::now_v7(), "src", "payments", &["id"]);
    submit(&world, &channel, &refused, Some(&"0".repeat(64))).await;
    let letter = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let delivery = dead
                .next()
                .await
                .expect("the consumer ended")
                .expect("delivery");
            if delivery.data == refused {
                return delivery;
            }
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "the refused message never reached {} within 30 s; output:\n{}",
            provisioned.queue,
            worker.output()
        )
    });
    assert_eq!(
        long_string(&letter, wire::DEAD_LETTER_REASON_HEADER),
        b"signature_mismatch",
        "placed by the Worker with its reason, not by RabbitMQ's reject"
    );

    let (queues, exchanges) = (vhost.queues(), vhost.exchanges());
    assert!(
        !queues.iter().any(|q| q == other.queue),
        "{} was created: {queues:?}",
        other.queue
    );
    assert!(
        !exchanges.iter().any(|e| e == other.exchange),
        "{} was created: {exchanges:?}",
        other.exchange
    );
    assert!(
        exchanges.iter().any(|e| e == EVENTS_EXCHANGE),
        "no events exchange: {exchanges:?}"
    );
    let output = worker.output();
    assert!(output.contains(provisioned.origin), "{output}");
    drop(worker);
    let _ = connection.close(200, "OK".into()).await;
    world.cleanup().await;
    drop(vhost);
}
