//! Shared helpers: the real RabbitMQ (a test-side [`Broker`] from `testkit`), per-test exchange
//! and queue names, events, received headers.

use std::time::Duration;

use chrono::Utc;
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, StoredResult, TerminalStatus};
use contract::Redacted;
use crypto::HmacKey;
use publisher::{AmqpUri, Publisher, PublisherConfig};
use uuid::Uuid;

// Not every binary that includes this module uses every re-export.
#[allow(unused_imports)]
pub use testkit::amqp::{amqp_uri, byte_array, long_string, Broker};

pub const SOURCE: &str = "//lerian/fetcher-tests";

/// The external HMAC key of the tests.
pub fn key() -> HmacKey {
    HmacKey::from_bytes([0x5a; 32])
}

/// A publisher for `exchange` on the test broker, with short timeouts.
pub fn publisher(exchange: &str) -> Publisher {
    let mut config = PublisherConfig::new(AmqpUri::new(amqp_uri()), exchange);
    config.confirm_timeout = Duration::from_secs(5);
    config.connect_timeout = Duration::from_secs(2);
    Publisher::new(config, key()).expect("publisher config")
}

/// A unique name for this test's exchange or queue: `publisher-test.<kind>.<uuid>`.
pub fn unique(kind: &str) -> String {
    testkit::amqp::unique("publisher-test", kind)
}

/// A `job.completed` event for a fresh job.
pub fn completed_event(tenant: Option<&str>, request_id: Option<&str>) -> OutboundEvent {
    let job_id = Uuid::new_v4();
    let result = StoredResult {
        path: format!("external-data/{job_id}.json"),
        size_bytes: 184_320,
        row_count: 1204,
        hmac: "9f1c".repeat(16),
    };
    let mut metadata = serde_json::Map::new();
    metadata.insert("source".into(), "payments".into());
    let outcome = Outcome::Completed {
        result: &result,
        execution_time_ms: 8421,
        completed_at: Utc::now(),
    };
    event(job_id, &metadata, &outcome, tenant, request_id)
}

/// A `job.failed` event for a fresh job.
pub fn failed_event(tenant: Option<&str>) -> OutboundEvent {
    let error = Redacted::new("failed to connect to datasource");
    event(
        Uuid::new_v4(),
        &serde_json::Map::new(),
        &Outcome::Failed { error: &error },
        tenant,
        None,
    )
}

fn event(
    job_id: Uuid,
    metadata: &serde_json::Map<String, serde_json::Value>,
    outcome: &Outcome<'_>,
    tenant: Option<&str>,
    request_id: Option<&str>,
) -> OutboundEvent {
    let status: TerminalStatus = outcome.status();
    let attributes = CloudEventAttributes::new(status, job_id, SOURCE, tenant, Utc::now());
    OutboundEvent::new(
        job_id,
        metadata,
        outcome,
        attributes,
        request_id.map(str::to_owned),
    )
    .expect("event body")
}
