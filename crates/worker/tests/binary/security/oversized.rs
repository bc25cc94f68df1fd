//! Finding: the whole body was parsed (a full JSON tree) to find the signed `jobId` before the
//! signature was checked: one 64 MiB body with an all-zero signature took a Worker from 34 MB to
//! 1.16 GB. A signed 20 MB job (large `metadata`) published a 20 MB event to every consumer.

use std::time::Duration;

use uuid::Uuid;

use super::bodies;
use super::memory::{self, mib};
use crate::harness::{free_port, WorkerProcess, World};
use crate::harness::{metric_sum, publish, signed, work_route, DeadLetters, Headers, RUN_HEADER};

/// Prefetch of the e2e worlds (`RABBITMQ_NUMBERS_OF_WORKERS`).
const PREFETCH: u64 = 3;
/// `RABBITMQ_MAX_MESSAGE_BYTES`'s default.
const MAX_MESSAGE: u64 = 4 << 20;

#[tokio::test]
async fn an_unsigned_giant_is_dead_lettered_without_being_parsed() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut dead = DeadLetters::tap(&world).await;
    let job_id = Uuid::new_v4();
    let body = bodies::padded_job(job_id, 64 << 20);
    let headers = Headers::default()
        .text(RUN_HEADER, &world.id)
        .text("x-message-signature", &"0".repeat(64))
        .text("t", &chrono::Utc::now().timestamp().to_string())
        .text("signature-version", "v1");
    let pid = worker.child.id();
    let growth = memory::peak_growth(pid, async {
        publish(&world.broker.channel, "", &world.queue, &body, &headers).await;
        assert_eq!(dead.collect(1, Duration::from_secs(120)).await.len(), 1);
    })
    .await;
    let bound = (64 << 20) + PREFETCH * 2 * MAX_MESSAGE;
    assert!(
        growth <= bound,
        "peak RSS grew {:.1} MiB, the bound is {:.1} MiB",
        mib(growth),
        mib(bound)
    );
    assert_eq!(
        world.job_status(job_id).await,
        None,
        "an unsigned message touched its job"
    );
    let metrics = worker.get("/metrics").expect("metrics").1;
    assert_eq!(
        metric_sum(
            &metrics,
            "fetcher_messages_rejected_total",
            "reason=\"message_too_large\""
        ),
        1.0
    );
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_signed_message_over_the_limit_fails_its_job_and_is_dead_lettered() {
    let world = World::new().await;
    let port = free_port();
    let mut env = world.env(port);
    env.insert("RABBITMQ_MAX_MESSAGE_BYTES".into(), (1 << 20).to_string());
    let worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;
    let mut listener = world.listen().await;
    let mut dead = DeadLetters::tap(&world).await;
    let job_id = Uuid::new_v4();
    let body = bodies::padded_job(job_id, 2 << 20);
    let t = chrono::Utc::now().timestamp();
    let headers = signed(&world, t, &work_route(&world, ""), &body, None);
    publish(&world.broker.channel, "", &world.queue, &body, &headers).await;
    let event = listener.event_for(job_id, Duration::from_secs(60)).await;
    let message = bodies::failure_message(&event);
    assert!(message.contains("more than the 1048576 bytes"), "{message}");
    assert!(
        event.delivery.data.len() < 1024,
        "the event carries the message's size"
    );
    assert_eq!(dead.collect(1, Duration::from_secs(60)).await.len(), 1);
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn metadata_too_large_for_an_event_fails_the_job_as_invalid() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut listener = world.listen().await;
    let job_id = Uuid::new_v4();
    // 200 KiB of metadata: under the message limit, over EVENT_MAX_METADATA_BYTES (64 KiB).
    let body = bodies::padded_job(job_id, 200 << 10);
    world.submit(&body, None, &[]).await;
    let event = listener.event_for(job_id, Duration::from_secs(60)).await;
    let message = bodies::failure_message(&event);
    assert!(
        message.starts_with("invalid job message: metadata is"),
        "{message}"
    );
    assert!(
        event.delivery.data.len() < 1024,
        "the event carries the metadata"
    );
    assert!(world.object_keys().await.is_empty());
    drop(worker);
    world.cleanup().await;
}
