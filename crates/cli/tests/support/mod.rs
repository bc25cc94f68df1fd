//! Shared by the integration tests: the real `fetcherctl` binary with a clean environment, the
//! test master key, and a test-side connection to the real RabbitMQ.

// Not every test binary uses every helper.
#![allow(dead_code)]

use std::process::Command;
use std::time::Duration;

use crypto::KeySet;
use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicConsumeOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties};
use uuid::Uuid;

/// base64 of the 32 ASCII bytes `0123456789abcdef0123456789abcdef`.
pub const MASTER: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

pub const DEFAULT_AMQP_URI: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// Every variable `fetcherctl` reads, removed so the caller's shell cannot leak into a test.
const READ_VARS: &[&str] = &[
    "APP_ENC_KEY",
    "AMQP_URI",
    "RABBITMQ_FETCHER_WORK_QUEUE",
    "RABBITMQ_JOB_EVENTS_EXCHANGE",
    "FETCHER_EXTERNAL_HMAC_KEY",
    "OBJECT_STORAGE_ENDPOINT",
    "OBJECT_STORAGE_REGION",
    "OBJECT_STORAGE_BUCKET",
    "OBJECT_STORAGE_KEY_PREFIX",
    "OBJECT_STORAGE_ACCESS_KEY_ID",
    "OBJECT_STORAGE_SECRET_KEY",
    "OBJECT_STORAGE_USE_PATH_STYLE",
];

pub fn keys() -> KeySet {
    KeySet::from_base64(MASTER).expect("test master key")
}

/// `TEST_AMQP_URI`, or the local broker of `scripts/services.sh rabbitmq`.
pub fn amqp_uri() -> String {
    std::env::var("TEST_AMQP_URI").unwrap_or_else(|_| DEFAULT_AMQP_URI.to_owned())
}

/// The real binary, with none of the variables it reads but `AMQP_URI` (the test broker).
pub fn fetcherctl() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fetcherctl"));
    for var in READ_VARS {
        command.env_remove(var);
    }
    command.env("AMQP_URI", amqp_uri());
    command
}

/// A unique name for this test's queue, exchange or bucket.
pub fn unique(kind: &str) -> String {
    format!("fetcherctl-test.{kind}.{}", Uuid::new_v4().simple())
}

/// A test-side connection for declaring, publishing, receiving and cleaning up.
pub struct Broker {
    pub connection: Connection,
    pub channel: Channel,
}

impl Broker {
    pub async fn connect() -> Broker {
        let connection =
            match Connection::connect(&amqp_uri(), ConnectionProperties::default()).await {
                Ok(connection) => connection,
                Err(error) => panic!(
                    "RabbitMQ is unreachable ({error}). These tests need a real broker: run \
                     `bash scripts/services.sh rabbitmq`, or point TEST_AMQP_URI at one."
                ),
            };
        let channel = connection.create_channel().await.expect("test channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms on the test channel");
        Broker {
            connection,
            channel,
        }
    }

    /// Declares a queue that expires after 10 idle minutes, so a test that dies before its
    /// cleanup leaves nothing behind for long.
    pub async fn declare_queue(&self, queue: &str) {
        let mut arguments = FieldTable::default();
        arguments.insert("x-expires".into(), AMQPValue::LongInt(600_000));
        self.channel
            .queue_declare(queue.into(), QueueDeclareOptions::default(), arguments)
            .await
            .expect("declare queue");
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

    /// Receives exactly `count` messages from `queue` (auto-ack), failing after 10 s.
    pub async fn receive(&self, queue: &str, count: usize) -> Vec<Delivery> {
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
        if tokio::time::timeout(Duration::from_secs(10), collect)
            .await
            .is_err()
        {
            panic!("received {} of {count} messages", received.len());
        }
        received
    }

    pub async fn delete_queue(&self, queue: &str) {
        let _ = self
            .channel
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await;
    }

    pub async fn close(self) {
        let _ = self.connection.close(200, "OK".into()).await;
    }
}

/// A received header by exact name.
pub fn header<'a>(delivery: &'a Delivery, name: &str) -> Option<&'a AMQPValue> {
    delivery
        .properties
        .headers()
        .as_ref()
        .and_then(|headers| headers.inner().get(name))
}

/// A received header that must be an AMQP long string.
pub fn long_string<'a>(delivery: &'a Delivery, name: &str) -> &'a [u8] {
    match header(delivery, name) {
        Some(AMQPValue::LongString(value)) => value.as_bytes(),
        other => panic!("header {name:?} must be a long string, got {other:?}"),
    }
}
