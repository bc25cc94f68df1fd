//! [`Broker`]: a test-side connection that declares, binds, consumes and cleans up after itself.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use lapin::message::Delivery;
use lapin::options::{
    BasicCancelOptions, BasicConsumeOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{Channel, Connection, ConnectionProperties, Consumer, ExchangeKind};
use uuid::Uuid;

use super::{amqp_uri, collect};

/// How long a test queue lives unused: even a test killed outright leaves nothing for long.
const QUEUE_EXPIRES_MS: i32 = 600_000;

/// What a test created on the broker, deleted by [`Broker::close`] (or by `Drop` after a panic).
#[derive(Default)]
struct Created {
    exchanges: Vec<String>,
    queues: Vec<String>,
}

/// A test-side connection to the test broker. Its channel is in confirm mode, so a test's own
/// publish can wait for the broker to take it.
///
/// Every exchange and queue it declares (and every one given to [`Broker::track_exchange`] or
/// [`Broker::track_queue`]) is deleted by [`Broker::close`]; a test that panics first has
/// them deleted from `Drop`, on a thread of its own.
pub struct Broker {
    pub connection: Connection,
    pub channel: Channel,
    created: Mutex<Created>,
    closed: bool,
}

impl Broker {
    /// Connects to the test broker; a broker that cannot be reached fails the test loudly.
    pub async fn connect() -> Broker {
        let (connection, channel) = open().await;
        Broker {
            connection,
            channel,
            created: Mutex::new(Created::default()),
            closed: false,
        }
    }

    /// Closes the connection but keeps what the test created (before stopping the broker).
    pub async fn disconnect(&self) {
        let _ = self.connection.close(200, "OK".into()).await;
    }

    /// Opens a new connection, for a broker that was restarted.
    pub async fn reconnect(&mut self) {
        let (connection, channel) = open().await;
        self.connection = connection;
        self.channel = channel;
    }

    fn created(&self) -> MutexGuard<'_, Created> {
        self.created.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Declares the topic exchange `exchange` (durable, as the publisher declares it) and
    /// deletes it at the end of the test.
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
        self.track_exchange(exchange);
    }

    /// Deletes `exchange` at the end of the test (one the code under test declared).
    pub fn track_exchange(&self, exchange: &str) {
        let mut created = self.created();
        if !created.exchanges.iter().any(|e| e == exchange) {
            created.exchanges.push(exchange.to_owned());
        }
    }

    /// Deletes `queue` at the end of the test (one the code under test declared).
    pub fn track_queue(&self, queue: &str) {
        let mut created = self.created();
        if !created.queues.iter().any(|q| q == queue) {
            created.queues.push(queue.to_owned());
        }
    }

    /// Declares the durable queue `queue`, deleted at the end of the test. It also expires after
    /// 10 idle minutes.
    pub async fn declare_queue(&self, queue: &str) {
        let mut arguments = FieldTable::default();
        arguments.insert("x-expires".into(), AMQPValue::LongInt(QUEUE_EXPIRES_MS));
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                arguments,
            )
            .await
            .expect("declare queue");
        self.track_queue(queue);
    }

    /// Declares a queue ([`Broker::declare_queue`]) bound to `exchange` with `pattern`, named
    /// `<exchange>.queue.<uuid>`, and returns its name.
    pub async fn bound_queue(&self, exchange: &str, pattern: &str) -> String {
        let queue = format!("{exchange}.queue.{}", Uuid::new_v4().simple());
        self.declare_queue(&queue).await;
        self.bind(&queue, exchange, pattern).await;
        queue
    }

    /// Binds `queue` to `exchange` with `pattern`.
    pub async fn bind(&self, queue: &str, exchange: &str, pattern: &str) {
        self.channel
            .queue_bind(
                queue.into(),
                exchange.into(),
                pattern.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind queue");
    }

    /// Starts consuming `queue` (auto-ack).
    pub async fn consume(&self, queue: &str) -> Consumer {
        self.channel
            .basic_consume(
                queue.into(),
                ShortString::from(format!("consumer-{}", Uuid::new_v4().simple())),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("consume")
    }

    /// Stops `consumer`.
    pub async fn cancel(&self, consumer: &Consumer) {
        self.channel
            .basic_cancel(consumer.tag(), BasicCancelOptions::default())
            .await
            .expect("cancel consumer");
    }

    /// Receives exactly `count` messages from `queue` (auto-ack), failing after `within`.
    pub async fn receive(&self, queue: &str, count: usize, within: Duration) -> Vec<Delivery> {
        let mut consumer = self.consume(queue).await;
        let received = collect(&mut consumer, count, within, Duration::ZERO).await;
        self.cancel(&consumer).await;
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

    /// Deletes `queue` now. It stays on the list [`Broker::close`] deletes, so a queue declared
    /// again later (by the code under test) goes too; deleting what is gone is a no-op on
    /// RabbitMQ.
    pub async fn delete_queue(&self, queue: &str) {
        self.channel
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await
            .unwrap_or_else(|e| panic!("cannot delete queue {queue}: {e}"));
    }

    /// Deletes `exchange` now. It stays on the list [`Broker::close`] deletes, so an exchange
    /// declared again later (by the code under test) goes too; deleting what is gone is a no-op
    /// on RabbitMQ.
    pub async fn delete_exchange(&self, exchange: &str) {
        self.channel
            .exchange_delete(exchange.into(), ExchangeDeleteOptions::default())
            .await
            .expect("delete exchange");
    }

    /// Deletes everything the test created, then closes the connection.
    pub async fn close(mut self) {
        let created = std::mem::take(&mut *self.created());
        for queue in &created.queues {
            self.delete_queue(queue).await;
        }
        for exchange in &created.exchanges {
            self.delete_exchange(exchange).await;
        }
        let _ = self.connection.close(200, "OK".into()).await;
        self.closed = true;
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let created = std::mem::take(&mut *self.created());
        if self.closed || (created.queues.is_empty() && created.exchanges.is_empty()) {
            return;
        }
        // The test panicked before `close().await`.
        crate::cleanup::run_detached(move || async move {
            // The broker may be down for a moment (a test that restarts it): retry a while, or
            // the exchange outlives the test (queues expire on their own).
            let mut connection = None;
            for _ in 0..30 {
                let properties = ConnectionProperties::default();
                match Connection::connect(&amqp_uri(), properties).await {
                    Ok(open) => {
                        connection = Some(open);
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            }
            let Some(connection) = connection else {
                return;
            };
            if let Ok(channel) = connection.create_channel().await {
                for queue in &created.queues {
                    let options = QueueDeleteOptions::default();
                    let _ = channel.queue_delete(queue.as_str().into(), options).await;
                }
                for exchange in &created.exchanges {
                    let options = ExchangeDeleteOptions::default();
                    let _ = channel
                        .exchange_delete(exchange.as_str().into(), options)
                        .await;
                }
            }
            let _ = connection.close(200, "OK".into()).await;
        });
    }
}

/// A connection and a channel in confirm mode, or a failed test saying what to start.
async fn open() -> (Connection, Channel) {
    let connection = match Connection::connect(&amqp_uri(), ConnectionProperties::default()).await {
        Ok(connection) => connection,
        Err(error) => panic!(
            "RabbitMQ is unreachable ({error}). These tests need a real broker: run \
             `scripts/services.sh rabbitmq`, or point TEST_AMQP_URI at one (default \
             amqp://guest:***@127.0.0.1:5672/%2f)."
        ),
    };
    let channel = connection.create_channel().await.expect("test channel");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms on the test channel");
    (connection, channel)
}
