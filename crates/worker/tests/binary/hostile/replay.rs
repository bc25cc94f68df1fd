//! Replay and scope: a genuine signature only holds for the tenant, exchange, routing key and
//! time it was made for, on job messages (internal key) and on events (external key).

use std::time::Duration;

use contract::envelope::{
    self, HeaderValue, Route, SignatureError, SignatureHeaders, VerifyPolicy,
};
use lapin::options::QueueBindOptions;
use lapin::types::{AMQPValue, FieldTable};
use uuid::Uuid;

use crate::harness::World;
use crate::harness::{publish, signed, work_route, DeadLetters};

#[tokio::test]
async fn job_messages_replayed_out_of_scope_are_dead_lettered_without_a_job() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut dead = DeadLetters::tap(&world).await;
    let now = chrono::Utc::now().timestamp();
    let body = |id: Uuid| world.job_body(id, "src", "payments", &["id"]);

    // Signed for tenant acme, delivered as tenant evil.
    let other_tenant = Uuid::now_v7();
    let headers = signed(
        &world,
        now,
        &work_route(&world, "acme"),
        &body(other_tenant),
        Some("acme"),
    );
    let headers = crate::harness::Headers(
        headers
            .0
            .into_iter()
            .map(|(n, v)| {
                if n == "X-Tenant-ID" {
                    (n, AMQPValue::LongString("evil".into()))
                } else {
                    (n, v)
                }
            })
            .collect(),
    );
    publish(
        &world.broker.channel,
        "",
        &world.queue,
        &body(other_tenant),
        &headers,
    )
    .await;

    // Signed with a tenant, delivered with none.
    let tenant_dropped = Uuid::now_v7();
    let headers = signed(
        &world,
        now,
        &work_route(&world, "acme"),
        &body(tenant_dropped),
        None,
    );
    publish(
        &world.broker.channel,
        "",
        &world.queue,
        &body(tenant_dropped),
        &headers,
    )
    .await;

    // Signed for routing key A (another queue), delivered to the work queue B.
    let other_key = Uuid::now_v7();
    let route_a = Route {
        tenant: "",
        exchange: "",
        routing_key: "fetcher.extract-external-data.other",
    };
    let headers = signed(&world, now, &route_a, &body(other_key), None);
    publish(
        &world.broker.channel,
        "",
        &world.queue,
        &body(other_key),
        &headers,
    )
    .await;

    // Signed for the default exchange, delivered through amq.direct.
    world
        .broker
        .channel
        .queue_bind(
            world.queue.as_str().into(),
            "amq.direct".into(),
            world.queue.as_str().into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("bind amq.direct");
    let other_exchange = Uuid::now_v7();
    let headers = signed(
        &world,
        now,
        &work_route(&world, ""),
        &body(other_exchange),
        None,
    );
    publish(
        &world.broker.channel,
        "amq.direct",
        &world.queue,
        &body(other_exchange),
        &headers,
    )
    .await;

    // Signed more than 5 minutes ago, everything else right.
    let stale = Uuid::now_v7();
    let headers = signed(
        &world,
        now - 301,
        &work_route(&world, ""),
        &body(stale),
        None,
    );
    publish(
        &world.broker.channel,
        "",
        &world.queue,
        &body(stale),
        &headers,
    )
    .await;

    // The control: the same construction, in scope and fresh, runs.
    let control = Uuid::now_v7();
    let headers = signed(&world, now, &work_route(&world, ""), &body(control), None);
    publish(
        &world.broker.channel,
        "",
        &world.queue,
        &body(control),
        &headers,
    )
    .await;
    world
        .wait_status(control, "completed", Duration::from_secs(30))
        .await;

    let refused = [
        other_tenant,
        tenant_dropped,
        other_key,
        other_exchange,
        stale,
    ];
    let letters = dead.collect(refused.len(), Duration::from_secs(30)).await;
    assert_eq!(letters.len(), refused.len(), "dead-lettered replays");
    for id in refused {
        assert!(
            letters.contains(&body(id)),
            "the replay of {id} was not dead-lettered"
        );
        assert_eq!(
            world.job_status(id).await,
            None,
            "replay {id} created a job"
        );
    }
    let output = worker.output();
    assert!(output.contains("signature_mismatch") && output.contains("signature_stale"));
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn an_event_replayed_under_another_route_fails_verification() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["id"]),
            Some("acme"),
            &[],
        )
        .await;
    let event = events.event_for(job_id, Duration::from_secs(30)).await;
    event
        .verify(&world.keys)
        .expect("the genuine event verifies with the external key");

    let header = |name: &str| match event.header(name) {
        Some(AMQPValue::LongString(s)) => Some(HeaderValue::Text(s.as_bytes())),
        _ => None,
    };
    let headers = SignatureHeaders {
        signature: header(envelope::SIGNATURE_HEADER),
        timestamp: header(envelope::TIMESTAMP_HEADER),
        version: header(envelope::VERSION_HEADER),
    };
    let now = chrono::Utc::now().timestamp();
    let verify = |route: &Route<'_>, body: &[u8], now: i64, internal: bool| {
        envelope::verify(
            &headers,
            route,
            body,
            &VerifyPolicy::default(),
            now,
            |p, s| {
                if internal {
                    world.keys.internal_hmac().verify_hex_parts(p, s)
                } else {
                    world.keys.external_hmac().verify_hex_parts(p, s)
                }
            },
        )
    };
    let exchange = event.delivery.exchange.as_str().to_owned();
    let key = event.delivery.routing_key.as_str().to_owned();
    let genuine = Route {
        tenant: "acme",
        exchange: &exchange,
        routing_key: &key,
    };
    let data = &event.delivery.data;
    assert!(verify(&genuine, data, now, false).is_ok());

    let replays = [
        (
            "another tenant",
            Route {
                tenant: "evil",
                ..genuine
            },
        ),
        (
            "no tenant",
            Route {
                tenant: "",
                ..genuine
            },
        ),
        (
            "another exchange",
            Route {
                exchange: "fetcher.job.events",
                ..genuine
            },
        ),
        (
            "another routing key",
            Route {
                routing_key: "job.failed",
                ..genuine
            },
        ),
    ];
    for (what, route) in replays {
        assert_eq!(
            verify(&route, data, now, false),
            Err(SignatureError::Mismatch),
            "an event replayed under {what} verified"
        );
    }
    let mut edited = data.clone();
    edited.extend_from_slice(b" ");
    assert_eq!(
        verify(&genuine, &edited, now, false),
        Err(SignatureError::Mismatch),
        "an edited body verified"
    );
    assert!(
        matches!(
            verify(&genuine, data, now + 301, false),
            Err(SignatureError::Stale { .. })
        ),
        "an event replayed 5 minutes later verified"
    );
    assert_eq!(
        verify(&genuine, data, now, true),
        Err(SignatureError::Mismatch),
        "an event verified with the internal key"
    );
    drop(worker);
    world.cleanup().await;
}
