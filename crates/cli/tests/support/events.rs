//! Job events as the Worker builds them, and a publisher that signs one as of any second (the
//! Worker's own publisher always signs with the current time).

use chrono::Utc;
use contract::envelope::{sign, Route, SIGNATURE_HEADER, TIMESTAMP_HEADER, VERSION_HEADER};
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, StoredResult};
use contract::Redacted;
use crypto::HmacKey;
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, ByteArray, FieldTable, LongString};
use lapin::{BasicProperties, Channel};
use uuid::Uuid;

/// A `job.completed` event of `job_id`, as the Worker builds it.
pub fn completed(job_id: Uuid, tenant: Option<&str>) -> OutboundEvent {
    let result = StoredResult {
        path: format!("external-data/{job_id}.json"),
        size_bytes: 17,
        row_count: 1,
        hmac: "ab".repeat(32),
    };
    let mut metadata = serde_json::Map::new();
    metadata.insert("source".into(), "payments".into());
    let outcome = Outcome::Completed {
        result: &result,
        execution_time_ms: 12,
        completed_at: Utc::now(),
    };
    let attributes = CloudEventAttributes::new(
        outcome.status(),
        job_id,
        "//fetcherctl-tests",
        tenant,
        Utc::now(),
    );
    OutboundEvent::new(job_id, &metadata, &outcome, attributes, None).expect("event")
}

/// A `job.failed` event of `job_id` with request id `req-9`, as the Worker builds it.
pub fn failed(job_id: Uuid) -> OutboundEvent {
    let error = Redacted::new("failed to connect to datasource");
    let outcome = Outcome::Failed { error: &error };
    let attributes = CloudEventAttributes::new(
        outcome.status(),
        job_id,
        "//fetcherctl-tests",
        None,
        Utc::now(),
    );
    OutboundEvent::new(
        job_id,
        &serde_json::Map::new(),
        &outcome,
        attributes,
        Some("req-9".into()),
    )
    .expect("event")
}

/// Publishes `event` on `exchange` with the headers the Worker's publisher sends, signed with
/// `key` as of Unix second `signed_at`, and waits for the broker's confirm (`channel` is in
/// confirm mode).
pub async fn publish_signed_at(
    channel: &Channel,
    exchange: &str,
    event: &OutboundEvent,
    signed_at: i64,
    key: &HmacKey,
) {
    let route = Route {
        tenant: event.tenant(),
        exchange,
        routing_key: event.routing_key(),
    };
    let signature = sign(signed_at, &route, &event.body, |payload| {
        key.sign_hex(payload)
    });
    let long_string = |text: &str| AMQPValue::LongString(LongString::from(text));
    let mut headers = FieldTable::default();
    for (name, value) in event.attributes.headers() {
        headers.insert(
            name.into(),
            AMQPValue::ByteArray(ByteArray::from(value.as_bytes())),
        );
    }
    headers.insert("X-Tenant-ID".into(), long_string(event.tenant()));
    headers.insert(SIGNATURE_HEADER.into(), long_string(&signature.signature));
    headers.insert(TIMESTAMP_HEADER.into(), long_string(&signature.timestamp));
    headers.insert(VERSION_HEADER.into(), long_string(signature.version));
    let properties = BasicProperties::default()
        .with_delivery_mode(2)
        .with_content_type("application/json".into())
        .with_headers(headers);
    channel
        .basic_publish(
            exchange.into(),
            event.routing_key().into(),
            BasicPublishOptions {
                mandatory: true,
                immediate: false,
            },
            &event.body,
            properties,
        )
        .await
        .expect("publish the event")
        .await
        .expect("the broker confirms the event");
}
