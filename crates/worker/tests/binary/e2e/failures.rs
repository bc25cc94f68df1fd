//! Jobs that cannot complete end `job.failed` with a redacted but meaningful message and leave
//! no object; refused messages are dead-lettered; unusable ones fail or are dropped.

use std::time::Duration;

use futures_util::StreamExt;
use uuid::Uuid;

use contract::dead_letter::Stamp;
use contract::wire;
use lapin::types::{AMQPValue, FieldTable};
use testkit::amqp::{header, long_string};

use crate::harness::{publish, Headers, Signing, World, RUN_HEADER};

#[tokio::test]
async fn failing_jobs_publish_redacted_reasons_and_store_nothing() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut events = world.listen().await;

    let cases = [
        (
            "nope",
            "payments",
            "connection not found for database: nope",
        ),
        ("src", "missing_table", "failed schema validation"),
        ("down", "payments", "failed to connect to datasource down"),
    ];
    for (connection, table, expected) in cases {
        let job_id = Uuid::now_v7();
        world.submit_job(job_id, connection, table, &["id"]).await;
        let event = events.event_for(job_id, Duration::from_secs(40)).await;
        assert_eq!(event.delivery.routing_key.as_str(), "job.failed");
        event.verify(&world.keys).expect("signature");
        assert_eq!(event.text("ce-tenantid"), "single-tenant");
        let body = event.body();
        assert_eq!(body["status"], "failed");
        assert_eq!(body["metadata"]["source"], "e2e", "caller metadata is kept");
        let message = body["metadata"]["error"]["message"]
            .as_str()
            .expect("message")
            .to_owned();
        assert!(
            message.contains(expected),
            "{message:?} should say {expected:?}"
        );
        for secret in ["127.0.0.1", "ghost", "ds-secret-pw", "nowhere"] {
            assert!(!message.contains(secret), "{secret} leaked: {message}");
        }
        assert!(body.get("result").is_none());
        let stored: Option<String> =
            sqlx::query_scalar("SELECT error_message FROM jobs WHERE job_id = $1")
                .bind(job_id)
                .fetch_one(&world.state)
                .await
                .expect("job row");
        assert_eq!(stored.as_deref(), Some(message.as_str()));
    }
    assert!(
        world.object_keys().await.is_empty(),
        "a failed job left an object"
    );
    let output = worker.output();
    for secret in ["ds-secret-pw", "fetcher-secret", world.master_key.as_str()] {
        assert!(!output.contains(secret), "a secret appeared in the logs");
    }
    drop(worker);
    world.cleanup().await;
}

/// The text header `name` of `delivery`.
fn text(delivery: &lapin::message::Delivery, name: &str) -> String {
    String::from_utf8_lossy(long_string(delivery, name)).into_owned()
}

/// `delivery` is a dead letter the Worker placed for `reason`, refused from `queue` where it came
/// by the default exchange, not one RabbitMQ dead-lettered (no `x-death`), and stamped with the
/// internal key of `keys` over those headers and its body.
fn assert_refused(
    delivery: &lapin::message::Delivery,
    queue: &str,
    reason: &str,
    keys: &crypto::KeySet,
) {
    let text = |name| text(delivery, name);
    assert_eq!(text(wire::DEAD_LETTER_REASON_HEADER), reason);
    assert_eq!(text(wire::DEAD_LETTER_QUEUE_HEADER), queue);
    assert_eq!(text(wire::DEAD_LETTER_EXCHANGE_HEADER), "");
    assert_eq!(text(wire::DEAD_LETTER_ROUTING_KEY_HEADER), queue);
    assert!(matches!(
        header(delivery, wire::DEAD_LETTER_AT_HEADER),
        Some(AMQPValue::Timestamp(_))
    ));
    assert!(
        header(delivery, "x-death").is_none(),
        "dead-lettered by RabbitMQ"
    );
    let Some(AMQPValue::Timestamp(refused_at)) = header(delivery, wire::DEAD_LETTER_AT_HEADER)
    else {
        unreachable!("checked above")
    };
    let digest = crypto::sha256_hex(&delivery.data);
    let stamp = Stamp {
        reason,
        queue,
        exchange: "",
        routing_key: queue,
        refused_at: *refused_at,
        body_sha256: &digest,
    };
    let value = text(wire::DEAD_LETTER_STAMP_HEADER);
    assert!(
        stamp.verify(&value, |t, v| keys.internal_hmac().verify_hex(t, v)),
        "the Worker's stamp does not verify"
    );
}

#[tokio::test]
async fn refused_messages_are_dead_lettered_with_their_reason_and_unusable_bodies_fail_or_drop() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut events = world.listen().await;

    // A queue of our own on the dead-letter exchange.
    let dlq = format!("fetcher.test.dlq.{}", world.id);
    let mut dead = world.tap(&dlq, "fetcher.dlx", "fetcher.dlq.key").await;

    // Bad signature: dead-lettered, no event, the job untouched.
    let bad_job = Uuid::now_v7();
    let body = world.job_body(bad_job, "src", "payments", &["id"]);
    world
        .submit(&body, None, &[("x-message-signature", &"0".repeat(64))])
        .await;
    let dead_letter = tokio::time::timeout(Duration::from_secs(20), dead.next())
        .await
        .expect("the refused message was dead-lettered")
        .expect("delivery")
        .expect("delivery");
    assert_eq!(dead_letter.data, body);
    assert_eq!(world.job_status(bad_job).await, None, "the job was touched");
    // Placed by the Worker with its reason and the route the message came by, not by RabbitMQ.
    assert_refused(
        &dead_letter,
        &world.queue,
        "signature_mismatch",
        &world.keys,
    );

    // Requeued as `fetcherctl dlq requeue` does it (to the route it names, body and headers as
    // they are, nothing re-signed): refused again, the job still untouched.
    let headers = Headers(
        dead_letter
            .properties
            .headers()
            .clone()
            .unwrap_or_default()
            .inner()
            .iter()
            .map(|(name, value)| (name.to_string(), value.clone()))
            .collect(),
    );
    publish(
        &world.broker.channel,
        &text(&dead_letter, wire::DEAD_LETTER_EXCHANGE_HEADER),
        &text(&dead_letter, wire::DEAD_LETTER_ROUTING_KEY_HEADER),
        &dead_letter.data,
        &headers,
    )
    .await;
    let again = tokio::time::timeout(Duration::from_secs(20), dead.next())
        .await
        .expect("the requeued message was refused again")
        .expect("delivery")
        .expect("delivery");
    assert_eq!(again.data, body);
    assert_refused(&again, &world.queue, "signature_mismatch", &world.keys);
    assert_eq!(world.job_status(bad_job).await, None, "the job was touched");

    // Forged: a message the Worker cannot copy (headers nested past MAX_HEADER_DEPTH) is rejected,
    // so RabbitMQ dead-letters it with the `x-fetcher-*` headers it came with; no stamp of the
    // Worker verifies on it, which is how `fetcherctl dlq` tells it from the Worker's.
    let forged_job = Uuid::now_v7();
    let forged_body = world.job_body(forged_job, "src", "payments", &["id"]);
    let mut deep = FieldTable::default();
    for _ in 0..6 {
        let mut outer = FieldTable::default();
        outer.insert("t".into(), AMQPValue::FieldTable(deep));
        deep = outer;
    }
    let forged_headers = Headers::default()
        .text(RUN_HEADER, &world.id)
        .text("x-message-signature", &"0".repeat(64))
        .text("t", &chrono::Utc::now().timestamp().to_string())
        .text("signature-version", "v1")
        .text(wire::DEAD_LETTER_REASON_HEADER, "signature_mismatch")
        .text(wire::DEAD_LETTER_QUEUE_HEADER, &world.queue)
        .text(wire::DEAD_LETTER_EXCHANGE_HEADER, "attacker")
        .text(wire::DEAD_LETTER_ROUTING_KEY_HEADER, "loot")
        .value(
            wire::DEAD_LETTER_AT_HEADER,
            AMQPValue::Timestamp(1_700_000_000),
        )
        .text(wire::DEAD_LETTER_STAMP_HEADER, &"0".repeat(64))
        .value("deep", AMQPValue::FieldTable(deep));
    publish(
        &world.broker.channel,
        "",
        &world.queue,
        &forged_body,
        &forged_headers,
    )
    .await;
    let forged = loop {
        let letter = tokio::time::timeout(Duration::from_secs(20), dead.next())
            .await
            .expect("the forged message was dead-lettered")
            .expect("delivery")
            .expect("delivery");
        if letter.data == forged_body {
            break letter;
        }
    };
    assert!(
        header(&forged, "x-death").is_some(),
        "dead-lettered by RabbitMQ"
    );
    assert_eq!(text(&forged, wire::DEAD_LETTER_EXCHANGE_HEADER), "attacker");
    let digest = crypto::sha256_hex(&forged.data);
    let claimed = Stamp {
        reason: "signature_mismatch",
        queue: &world.queue,
        exchange: "attacker",
        routing_key: "loot",
        refused_at: 1_700_000_000,
        body_sha256: &digest,
    };
    assert!(
        !claimed.verify(&text(&forged, wire::DEAD_LETTER_STAMP_HEADER), |t, v| world
            .keys
            .internal_hmac()
            .verify_hex(t, v))
    );
    assert_eq!(
        world.job_status(forged_job).await,
        None,
        "the job was touched"
    );

    // Unparseable body, job id in a header: job.failed with the reason.
    let broken_job = Uuid::now_v7();
    let broken = br#"{"jobId": "#.to_vec();
    world
        .submit(&broken, None, &[("jobId", &broken_job.to_string())])
        .await;
    let event = events.event_for(broken_job, Duration::from_secs(20)).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.failed");
    let message = event.body()["metadata"]["error"]["message"]
        .as_str()
        .expect("message")
        .to_owned();
    assert!(message.starts_with("invalid job message"), "{message}");
    assert_eq!(
        world.job_status(broken_job).await.as_deref(),
        Some("failed")
    );

    // Unparseable body, no job id anywhere: dropped with a log line, no event.
    world.submit(b"not json at all", None, &[]).await;
    let stray = events.drain(Duration::from_secs(4)).await;
    assert!(stray.is_empty(), "{} unexpected events", stray.len());
    assert!(
        worker.output().contains("Job message dropped"),
        "no log line for the dropped message"
    );
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_job_over_its_own_timeout_fails_and_its_query_is_stopped_on_the_server() {
    let world = World::new().await;
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    let body = serde_json::json!({
        "jobId": job_id,
        "mappedFields": {"src": {"slow": ["id"]}},
        "metadata": {"source": "e2e"},
        "timeoutSeconds": 2,
    });
    // The 6 s statement, seen on the source server, is cancelled there when the job times out.
    world.submit(body.to_string().as_bytes(), None, &[]).await;
    // The statement runs on the source server (what is watched below is really it)...
    let seen_by = std::time::Instant::now() + Duration::from_secs(20);
    while world.slow_queries().await == 0 {
        assert!(std::time::Instant::now() < seen_by, "the query never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let event = events.event_for(job_id, Duration::from_secs(40)).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.failed");
    event.verify(&world.keys).expect("signature");
    assert_eq!(
        event.body()["metadata"]["error"]["message"],
        "extraction timed out after 2s"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while world.slow_queries().await > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the query still runs on the source server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stored: Option<i32> =
        sqlx::query_scalar("SELECT timeout_seconds FROM jobs WHERE job_id = $1")
            .bind(job_id)
            .fetch_one(&world.state)
            .await
            .expect("job row");
    assert_eq!(stored, Some(2));
    assert_eq!(
        world.executions(job_id).await,
        [("src".to_owned(), "TIMED_OUT".to_owned())]
    );
    // Why it failed is where a person looks first: the log line of its end, at WARN, and the
    // job document `fetcherctl status` prints.
    let id = job_id.to_string();
    worker
        .wait_for_lines(
            "the WARN line of the timed-out job",
            1,
            Duration::from_secs(10),
            |line| {
                line.contains("\"level\":\"WARN\"")
                    && line.contains(&id)
                    && line.contains("\"reason\":\"extraction timed out after 2s\"")
            },
        )
        .await;
    let (status, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(status, 200, "{document}");
    assert_eq!(
        document["errorMessage"], "extraction timed out after 2s",
        "{document}"
    );
    assert_eq!(
        document["executions"][0]["statusDetails"]["error"], "extraction timed out after 2s",
        "{document}"
    );
    assert!(world.object_keys().await.is_empty(), "nothing stored");
    let metrics = worker.get("/metrics").expect("metrics").1;
    assert_eq!(
        crate::harness::metric_sum(&metrics, "fetcher_job_timeouts_total", ""),
        1.0,
        "{metrics}"
    );
    drop(worker);
    world.cleanup().await;
}
