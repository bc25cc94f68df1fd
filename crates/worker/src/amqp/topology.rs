//! The broker objects the Worker relies on, declared idempotently at start (and provisioned the
//! same way by `deploy/rabbitmq/definitions.json` for brokers managed elsewhere).

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, ExchangeKind};

/// The dead-letter exchange rejected job messages go to.
pub const DEAD_LETTER_EXCHANGE: &str = "fetcher.dlx";
/// The routing key of dead-lettered job messages.
pub const DEAD_LETTER_ROUTING_KEY: &str = "fetcher.dlq.key";
/// The queue that keeps dead-lettered job messages.
pub const DEAD_LETTER_QUEUE: &str = "fetcher.dlq";

/// Declares the events exchange (topic, durable), the dead-letter exchange and queue, and the
/// work queue (durable, dead-lettering to them). A queue or exchange that exists with other
/// settings fails with a message that names it and says what to do.
pub async fn declare(
    channel: &Channel,
    events_exchange: &str,
    work_queue: &str,
) -> anyhow::Result<()> {
    let durable_exchange = ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    let durable_queue = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let conflict = |what: String| {
        move |error: lapin::Error| {
            anyhow::anyhow!(
                "{what} could not be declared ({error}); if it exists with other settings, delete \
                 it or align it with deploy/rabbitmq/definitions.json"
            )
        }
    };
    channel
        .exchange_declare(
            events_exchange.into(),
            ExchangeKind::Topic,
            durable_exchange,
            FieldTable::default(),
        )
        .await
        .map_err(conflict(format!("the events exchange {events_exchange:?}")))?;
    channel
        .exchange_declare(
            DEAD_LETTER_EXCHANGE.into(),
            ExchangeKind::Direct,
            durable_exchange,
            FieldTable::default(),
        )
        .await
        .map_err(conflict(format!(
            "the dead-letter exchange {DEAD_LETTER_EXCHANGE:?}"
        )))?;
    channel
        .queue_declare(
            DEAD_LETTER_QUEUE.into(),
            durable_queue,
            FieldTable::default(),
        )
        .await
        .map_err(conflict(format!(
            "the dead-letter queue {DEAD_LETTER_QUEUE:?}"
        )))?;
    channel
        .queue_bind(
            DEAD_LETTER_QUEUE.into(),
            DEAD_LETTER_EXCHANGE.into(),
            DEAD_LETTER_ROUTING_KEY.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(conflict(format!("the binding of {DEAD_LETTER_QUEUE:?}")))?;
    channel
        .queue_declare(work_queue.into(), durable_queue, work_queue_arguments())
        .await
        .map_err(conflict(format!("the work queue {work_queue:?}")))?;
    Ok(())
}

/// The work queue's arguments: rejected messages are dead-lettered.
pub fn work_queue_arguments() -> FieldTable {
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(LongString::from(DEAD_LETTER_EXCHANGE)),
    );
    arguments.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString(LongString::from(DEAD_LETTER_ROUTING_KEY)),
    );
    arguments
}
