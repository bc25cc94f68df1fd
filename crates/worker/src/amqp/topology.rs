//! The broker objects the Worker relies on, declared idempotently at start as upstream's broker
//! definitions provision them (and as `deploy/rabbitmq/definitions.json` does for brokers
//! managed elsewhere).
//!
//! A declaration that differs from what the broker has is refused by RabbitMQ, which names the
//! first argument that differs and both values; the Worker refuses to start with that, naming
//! the queue. One difference is not a conflict: the dead-letter queue's retention (`x-message-ttl`,
//! `x-max-length`) decides only how long refused messages are kept, so a dead-letter queue
//! provisioned with other retention is kept as it is, with a warning.

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, Connection, ExchangeKind};

/// The dead-letter exchange rejected job messages go to.
pub const DEAD_LETTER_EXCHANGE: &str = "fetcher.dlx";
/// The routing key of dead-lettered job messages.
pub const DEAD_LETTER_ROUTING_KEY: &str = "fetcher.dlq.key";
/// The queue that keeps dead-lettered job messages.
pub const DEAD_LETTER_QUEUE: &str = "fetcher.dlq";
/// How long the dead-letter queue keeps a message (upstream: 7 days, in milliseconds).
pub const DEAD_LETTER_TTL_MS: i64 = 604_800_000;
/// How many messages the dead-letter queue keeps (upstream: 10,000; the oldest go first).
pub const DEAD_LETTER_MAX_LENGTH: i64 = 10_000;

/// The dead-letter queue's arguments a broker may have otherwise without harm.
const RETENTION_ARGUMENTS: [&str; 2] = ["x-message-ttl", "x-max-length"];

/// The dead-letter queue's arguments the broker last accepted, so that the declarations of
/// later connections (the consumer's, each reconnection) succeed at once instead of being
/// refused, and warned about, again.
static ACCEPTED_DEAD_LETTER_ARGUMENTS: std::sync::Mutex<Option<FieldTable>> =
    std::sync::Mutex::new(None);

/// Declares the events exchange (topic, durable), the dead-letter exchange and queue (bound),
/// and the work queue (durable, dead-lettering to them). Each declaration has a channel of its
/// own, since a refused one closes its channel. Fails with a message that names the object,
/// the argument that differs and both values, and says what to do.
pub async fn declare(
    connection: &Connection,
    events_exchange: &str,
    work_queue: &str,
) -> anyhow::Result<()> {
    exchange(connection, events_exchange, ExchangeKind::Topic)
        .await
        .map_err(refusal(format!("the events exchange {events_exchange:?}")))?;
    exchange(connection, DEAD_LETTER_EXCHANGE, ExchangeKind::Direct)
        .await
        .map_err(refusal(format!(
            "the dead-letter exchange {DEAD_LETTER_EXCHANGE:?}"
        )))?;
    dead_letter_queue(connection).await?;
    let channel = connection.create_channel().await?;
    channel
        .queue_bind(
            DEAD_LETTER_QUEUE.into(),
            DEAD_LETTER_EXCHANGE.into(),
            DEAD_LETTER_ROUTING_KEY.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(refusal(format!("the binding of {DEAD_LETTER_QUEUE:?}")))?;
    channel
        .queue_declare(work_queue.into(), durable(), work_queue_arguments())
        .await
        .map_err(refusal(format!("the work queue {work_queue:?}")))?;
    let _ = channel.close(200, "OK".into()).await;
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

/// Declares the dead-letter queue with upstream's retention; where the broker has other
/// retention, declares it with the broker's (each retention argument at most once), warning.
async fn dead_letter_queue(connection: &Connection) -> anyhow::Result<()> {
    let accepted = || {
        ACCEPTED_DEAD_LETTER_ARGUMENTS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    let mut arguments = accepted()
        .clone()
        .unwrap_or_else(dead_letter_queue_arguments);
    let what = format!("the dead-letter queue {DEAD_LETTER_QUEUE:?}");
    for _ in 0..=RETENTION_ARGUMENTS.len() {
        let channel = connection.create_channel().await?;
        let declared = channel
            .queue_declare(DEAD_LETTER_QUEUE.into(), durable(), arguments.clone())
            .await;
        let error = match declared {
            Ok(_) => {
                close(channel).await;
                *accepted() = Some(arguments);
                return Ok(());
            }
            Err(error) => error,
        };
        let Some(differs) = Inequivalent::parse(&error.to_string()) else {
            return Err(refusal(what)(error));
        };
        if !RETENTION_ARGUMENTS.contains(&differs.argument.as_str()) {
            return Err(differs.refusal(&what));
        }
        let kept = match differs.current.as_str() {
            "none" => None,
            text => match text.parse::<i64>() {
                Ok(value) => Some(value),
                Err(_) => return Err(differs.refusal(&what)),
            },
        };
        tracing::warn!(
            queue = DEAD_LETTER_QUEUE,
            argument = %differs.argument,
            broker = %differs.current,
            worker = %differs.received,
            "The dead-letter queue exists with other retention; it is kept as the broker has it."
        );
        let mut adjusted = FieldTable::default();
        for (key, value) in arguments.inner() {
            if key.as_str() != differs.argument {
                adjusted.insert(key.clone(), value.clone());
            }
        }
        if let Some(value) = kept {
            adjusted.insert(
                differs.argument.as_str().into(),
                AMQPValue::LongLongInt(value),
            );
        }
        arguments = adjusted;
    }
    Err(anyhow::anyhow!(
        "{what} could not be declared: the broker keeps refusing its retention arguments"
    ))
}

async fn close(channel: Channel) {
    let _ = channel.close(200, "OK".into()).await;
}

/// Turns a refused declaration into the startup error: the broker's own words (which name the
/// argument and both values) in ours.
fn refusal(what: String) -> impl FnOnce(lapin::Error) -> anyhow::Error {
    move |error: lapin::Error| match Inequivalent::parse(&error.to_string()) {
        Some(differs) => differs.refusal(&what),
        None => anyhow::anyhow!(
            "{what} could not be declared ({error}); if it exists with other settings, delete \
             it or align it with deploy/rabbitmq/definitions.json"
        ),
    }
}

/// RabbitMQ's `PRECONDITION_FAILED - inequivalent arg '<argument>' for <object>: received
/// <value> but current is <value>`.
#[derive(Debug, PartialEq, Eq)]
struct Inequivalent {
    argument: String,
    /// What the Worker declared.
    received: String,
    /// What the broker has.
    current: String,
}

impl Inequivalent {
    fn parse(text: &str) -> Option<Inequivalent> {
        let rest = &text[text.find("inequivalent arg '")? + "inequivalent arg '".len()..];
        let (argument, rest) = rest.split_once('\'')?;
        let rest = &rest[rest.find(": received ")? + ": received ".len()..];
        let (received, current) = rest.split_once(" but current is ")?;
        Some(Inequivalent {
            argument: argument.to_owned(),
            received: value(received),
            current: value(current.trim_end_matches(['"', ')', ' '])),
        })
    }

    fn refusal(&self, what: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "{what} could not be declared: it exists with {} = {} on the broker, and the Worker \
             declares {} = {}; delete it or align it with deploy/rabbitmq/definitions.json",
            self.argument,
            self.current,
            self.argument,
            self.received
        )
    }
}

/// `none`, `'x'`, or `the value 'x' of type 'longstr'` → `none` or `x`.
fn value(text: &str) -> String {
    let text = text.trim();
    let text = text.strip_prefix("the value ").unwrap_or(text);
    let text = match text.rfind(" of type '") {
        Some(at) => &text[..at],
        None => text,
    };
    text.trim_matches('\'').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brokers_refusal_is_read_into_argument_and_both_values() {
        let text = "protocol error: AMQP soft error: PRECONDITION-FAILED: PRECONDITION_FAILED - \
                    inequivalent arg 'x-dead-letter-exchange' for queue 'q' in vhost '/': \
                    received the value 'fetcher.dlx' of type 'longstr' but current is none";
        assert_eq!(
            Inequivalent::parse(text),
            Some(Inequivalent {
                argument: "x-dead-letter-exchange".into(),
                received: "fetcher.dlx".into(),
                current: "none".into(),
            })
        );
        let text = "inequivalent arg 'x-message-ttl' for queue 'fetcher.dlq' in vhost 'v': \
                    received '604800000' but current is '1000'";
        let differs = Inequivalent::parse(text).expect("parsed");
        assert_eq!(
            (differs.received.as_str(), differs.current.as_str()),
            ("604800000", "1000")
        );
        let message = differs
            .refusal("the dead-letter queue \"fetcher.dlq\"")
            .to_string();
        assert!(
            message.contains("x-message-ttl = 1000 on the broker")
                && message.contains("declares x-message-ttl = 604800000"),
            "{message}"
        );
        assert_eq!(Inequivalent::parse("NOT_FOUND - no queue 'q'"), None);
    }
}
