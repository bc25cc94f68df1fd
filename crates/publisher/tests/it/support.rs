//! Shared helpers: the real RabbitMQ, per-test exchange and queue names, events, received headers.

use std::time::Duration;

use chrono::Utc;
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, StoredResult, TerminalStatus};
use contract::Redacted;
use crypto::HmacKey;
use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicConsumeOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use publisher::{AmqpUri, Publisher, PublisherConfig};
use uuid::Uuid;

pub const DEFAULT_AMQP_URI: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
pub const SOURCE: &str = "//lerian/fetcher-tests";

/// `TEST_AMQP_URI`, or the local broker.
pub fn amqp_uri() -> String {
    std::env::var("TEST_AMQP_URI").unwrap_or_else(|_| DEFAULT_AMQP_URI.to_owned())
}

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

/// A unique name for this test's exchange or queue.
pub fn unique(kind: &str) -> String {
    format!("publisher-test.{kind}.{}", Uuid::new_v4().simple())
}

/// A test-side connection for declaring, binding, consuming and cleaning up.
pub struct Broker {
    pub connection: Connection,
    pub channel: Channel,
}

impl Broker {
    /// Connects to the test broker; a broker that cannot be reached fails the test loudly.
    pub async fn connect() -> Broker {
        let connection =
            match Connection::connect(&amqp_uri(), ConnectionProperties::default()).await {
                Ok(connection) => connection,
                Err(error) => panic!(
                "RabbitMQ is unreachable ({error}). These tests need a real broker: start it, or \
                 point TEST_AMQP_URI at one (default amqp://guest:***@127.0.0.1:5672/%2f)."
            ),
            };
        let channel = connection.create_channel().await.expect("test channel");
        Broker {
            connection,
            channel,
        }
    }

    pub async fn declare_exchange(&self, exchange: &str) {
        self.channel
            .exchange_declare(
                exchange.into(),
                ExchangeKind::Topic,
                ExchangeDeclareOptions {
                    durable: true,
                    ..ExchangeDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("declare exchange");
    }

    /// Declares a queue bound to `exchange` with `pattern`. It expires after 10 idle minutes, so
    /// a test that dies before its cleanup leaves nothing behind for long.
    pub async fn bound_queue(&self, exchange: &str, pattern: &str) -> String {
        let queue = unique("queue");
        let mut arguments = FieldTable::default();
        arguments.insert("x-expires".into(), AMQPValue::LongInt(600_000));
        self.channel
            .queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                arguments,
            )
            .await
            .expect("declare queue");
        self.channel
            .queue_bind(
                queue.as_str().into(),
                exchange.into(),
                pattern.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind queue");
        queue
    }

    /// Receives exactly `count` messages from `queue` (auto-ack), failing after `within`.
    pub async fn receive(&self, queue: &str, count: usize, within: Duration) -> Vec<Delivery> {
        let mut consumer = self
            .channel
            .basic_consume(
                queue.into(),
                "".into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("consume");
        let mut received = Vec::with_capacity(count);
        let collect = async {
            while received.len() < count {
                match consumer.next().await {
                    Some(Ok(delivery)) => received.push(delivery),
                    Some(Err(error)) => panic!("consumer failed: {error}"),
                    None => panic!("consumer ended"),
                }
            }
        };
        if tokio::time::timeout(within, collect).await.is_err() {
            panic!("received {} of {count} messages", received.len());
        }
        received
    }

    /// How many messages wait in `queue`.
    pub async fn depth(&self, queue: &str) -> u32 {
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("passive declare")
            .message_count()
    }

    pub async fn delete_queue(&self, queue: &str) {
        self.channel
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await
            .expect("delete queue");
    }

    pub async fn delete_exchange(&self, exchange: &str) {
        self.channel
            .exchange_delete(exchange.into(), ExchangeDeleteOptions::default())
            .await
            .expect("delete exchange");
    }

    pub async fn close(self) {
        let _ = self.connection.close(200, "OK".into()).await;
    }
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

/// A received header by exact name.
pub fn header<'a>(delivery: &'a Delivery, name: &str) -> &'a AMQPValue {
    delivery
        .properties
        .headers()
        .as_ref()
        .and_then(|headers| headers.inner().get(name))
        .unwrap_or_else(|| panic!("header {name:?} is missing"))
}

/// A received header that must be an AMQP long string.
pub fn long_string<'a>(delivery: &'a Delivery, name: &str) -> &'a [u8] {
    match header(delivery, name) {
        AMQPValue::LongString(value) => value.as_bytes(),
        other => panic!("header {name:?} must be a long string, got {other:?}"),
    }
}

/// A received header that must be an AMQP byte array.
pub fn byte_array<'a>(delivery: &'a Delivery, name: &str) -> &'a [u8] {
    match header(delivery, name) {
        AMQPValue::ByteArray(value) => value.as_slice(),
        other => panic!("header {name:?} must be a byte array, got {other:?}"),
    }
}
