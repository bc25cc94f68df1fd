//! The broker objects the Worker relies on, declared idempotently at start, following the work
//! queue as it was provisioned.
//!
//! A work queue that exists is consumed as it is: its dead-letter topology is read
//! ([`work_queue`]: upstream's repository definitions, `fetcher.dlx`, or LerianStudio's Helm
//! chart, `fetcher.extract-external-data.dlx`) and only that topology's dead-letter exchange and
//! queue are declared, as that provisioning declares them (a no-op when they exist). A missing
//! work queue is declared with the repository's topology, as `deploy/rabbitmq/definitions.json`
//! provisions it. The events exchange is declared whenever it is missing: the chart creates
//! none.
//!
//! A declaration that differs from what the broker has is refused by RabbitMQ, which names the
//! first argument that differs and both values; the Worker refuses to start with that, naming
//! the object. One difference is not a conflict: the dead-letter queue's retention
//! ([`retention`]).

mod inequivalent;
mod retention;
mod work_queue;

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, Connection, ExchangeKind};

pub use contract::wire::{DeadLetters, HELM_DEAD_LETTERS, REPOSITORY_DEAD_LETTERS};

use inequivalent::refusal;
use work_queue::Found;

/// How long the dead-letter queue keeps a message (upstream: 7 days, in milliseconds).
pub const DEAD_LETTER_TTL_MS: i64 = 604_800_000;
/// How many messages the dead-letter queue keeps (upstream: 10,000; the oldest go first).
pub const DEAD_LETTER_MAX_LENGTH: i64 = 10_000;

/// Declares the events exchange (topic, durable), the work queue's dead-letter exchange and
/// queue (bound), and the work queue when it is missing; returns where the work queue
/// dead-letters. Each declaration has a channel of its own, since a refused one closes its
/// channel. Fails with a message that names the object, the argument that differs and both
/// values, and says what to do.
pub async fn declare(
    connection: &Connection,
    events_exchange: &str,
    work_queue: &str,
) -> anyhow::Result<DeadLetters> {
    let found = work_queue::find(connection, work_queue).await?;
    let dead_letters = match found {
        Found::Missing => REPOSITORY_DEAD_LETTERS,
        Found::Provisioned(dead_letters) => dead_letters,
    };
    exchange(connection, events_exchange, ExchangeKind::Topic)
        .await
        .map_err(refusal(format!("the events exchange {events_exchange:?}")))?;
    exchange(connection, dead_letters.exchange, ExchangeKind::Direct)
        .await
        .map_err(refusal(format!(
            "the dead-letter exchange {:?}",
            dead_letters.exchange
        )))?;
    retention::declare(connection, dead_letters.queue).await?;
    let channel = connection.create_channel().await?;
    channel
        .queue_bind(
            dead_letters.queue.into(),
            dead_letters.exchange.into(),
            dead_letters.routing_key.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(refusal(format!("the binding of {:?}", dead_letters.queue)))?;
    if found == Found::Missing {
        channel
            .queue_declare(
                work_queue.into(),
                durable(),
                work_queue_arguments(&dead_letters),
            )
            .await
            .map_err(refusal(format!("the work queue {work_queue:?}")))?;
    }
    close(channel).await;
    Ok(dead_letters)
}

/// The work queue's arguments: rejected messages are dead-lettered to `dead_letters`.
pub fn work_queue_arguments(dead_letters: &DeadLetters) -> FieldTable {
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(LongString::from(dead_letters.exchange)),
    );
    arguments.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString(LongString::from(dead_letters.routing_key)),
    );
    arguments
}

/// The dead-letter queue's arguments: upstream's retention.
pub fn dead_letter_queue_arguments() -> FieldTable {
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-message-ttl".into(),
        AMQPValue::LongLongInt(DEAD_LETTER_TTL_MS),
    );
    arguments.insert(
        "x-max-length".into(),
        AMQPValue::LongLongInt(DEAD_LETTER_MAX_LENGTH),
    );
    arguments
}

fn durable() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    }
}

async fn exchange(connection: &Connection, name: &str, kind: ExchangeKind) -> lapin::Result<()> {
    let channel = connection.create_channel().await?;
    let options = ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    channel
        .exchange_declare(name.into(), kind, options, FieldTable::default())
        .await?;
    close(channel).await;
    Ok(())
}

async fn close(channel: Channel) {
    let _ = channel.close(200, "OK".into()).await;
}
