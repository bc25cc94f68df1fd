//! Finding: with the legacy body-only signature allowed, a legacy-signed message replayed with
//! another `X-Tenant-ID` completed into that tenant's folder and events, and nothing said the
//! flag was on or used.

use std::time::Duration;

use contract::envelope;
use uuid::Uuid;

use crate::harness::{free_port, WorkerProcess, World};
use crate::harness::{metric_sum, publish, DeadLetters, Headers, RUN_HEADER};

/// Headers of the legacy form: `HMAC("<t>." + body)`.
fn legacy(world: &World, body: &[u8]) -> Headers {
    let t = chrono::Utc::now().timestamp().to_string();
    let signature = world
        .keys
        .internal_hmac()
        .sign_hex(&envelope::legacy_payload(&t, body));
    Headers::default()
        .text(RUN_HEADER, &world.id)
        .text(envelope::SIGNATURE_HEADER, &signature)
        .text(envelope::TIMESTAMP_HEADER, &t)
        .text(envelope::VERSION_HEADER, "v1")
}

#[tokio::test]
async fn a_legacy_signature_cannot_choose_a_tenant_and_is_counted() {
    let world = World::new().await;
    let port = free_port();
    let mut env = world.env(port);
    env.insert(
        "RABBITMQ_ALLOW_LEGACY_BODY_SIGNATURE_FALLBACK".into(),
        "true".into(),
    );
    let worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;
    assert!(
        worker
            .output()
            .contains("RABBITMQ_ALLOW_LEGACY_BODY_SIGNATURE_FALLBACK is on"),
        "no startup warning:\n{}",
        worker.output()
    );
    let mut dead = DeadLetters::tap(&world).await;

    let retenanted = Uuid::new_v4();
    let body = world.job_body(retenanted, "src", "payments", &["id"]);
    let headers = legacy(&world, &body).text("X-Tenant-ID", "someone-else");
    publish(&world.broker.channel, "", &world.queue, &body, &headers).await;
    assert_eq!(dead.collect(1, Duration::from_secs(60)).await.len(), 1);
    assert_eq!(world.job_status(retenanted).await, None);
    assert!(world.object_keys().await.is_empty());

    let plain = Uuid::new_v4();
    let body = world.job_body(plain, "src", "payments", &["id"]);
    publish(
        &world.broker.channel,
        "",
        &world.queue,
        &body,
        &legacy(&world, &body),
    )
    .await;
    world
        .wait_status(plain, "completed", Duration::from_secs(60))
        .await;
    let metrics = worker.get("/metrics").expect("metrics").1;
    assert_eq!(
        metric_sum(&metrics, "fetcher_messages_legacy_signature_total", ""),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        metric_sum(
            &metrics,
            "fetcher_messages_rejected_total",
            "reason=\"signature_legacy_tenant\""
        ),
        1.0
    );
    drop(worker);
    world.cleanup().await;
}
