//! Refusing a delivery into the dead-letter queue with the Worker's reason.
//!
//! `basic.reject` dead-letters a message with RabbitMQ's reason alone (`rejected`), and takes no
//! headers. So the Worker places the dead letter itself: a copy of the message (its body and
//! properties as they came) with the `x-fetcher-*` headers of [`contract::wire`] added (the
//! reason, the queue it came from, the route it was published with, when), published to the
//! dead-letter exchange with `mandatory` on a confirm channel. Only once the broker confirmed the
//! copy is the original acknowledged; when the copy cannot be placed (nacked, unroutable, the
//! channel gone), the original is rejected without requeue as before, so it is dead-lettered all
//! the same, without the reason. A crash between the confirm and the ack redelivers the original,
//! which is refused again: at worst two dead letters of one message, never none.
//!
//! Copying costs the Worker a publish of the message, so only a message it could have handled
//! is copied: one within `RABBITMQ_MAX_MESSAGE_BYTES` whose headers are a plain table (at most
//! [`MAX_HEADER_DEPTH`] levels of nesting and [`MAX_HEADER_VALUES`] values). Anything larger or
//! stranger (an oversized body, a header table nested thousands deep) is rejected as before:
//! a refused message never makes the Worker do more than refuse it.
//!
//! Nothing of the message is changed or re-signed: the signature covers the body and the route,
//! not these headers, and `fetcherctl dlq requeue` publishes the copy to the route it names.

use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicPublishOptions, BasicRejectOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, Confirmation};

use contract::wire::{
    DEAD_LETTER_AT_HEADER, DEAD_LETTER_EXCHANGE_HEADER, DEAD_LETTER_QUEUE_HEADER,
    DEAD_LETTER_REASON_HEADER, DEAD_LETTER_ROUTING_KEY_HEADER,
};

use crate::amqp::topology::{DEAD_LETTER_EXCHANGE, DEAD_LETTER_ROUTING_KEY};

/// The deepest nesting of header tables and arrays a copied dead letter may have.
pub const MAX_HEADER_DEPTH: usize = 4;
/// The most header values (nested ones included) a copied dead letter may have.
pub const MAX_HEADER_VALUES: usize = 256;

/// Dead-letters `delivery`, consumed from `queue`, for `reason`; a copy only when the body is at
/// most `max_bytes` and its headers are plain. `Err` when it could be neither acknowledged nor
/// rejected (the channel is gone: the broker redelivers it).
pub async fn refuse(
    confirms: &Channel,
    delivery: &Delivery,
    queue: &str,
    reason: &'static str,
    max_bytes: usize,
) -> lapin::Result<bool> {
    let placed = if delivery.data.len() > max_bytes {
        Err("the message is larger than RABBITMQ_MAX_MESSAGE_BYTES")
    } else if !plain(delivery.properties.headers().as_ref()) {
        Err("its headers are nested too deep or too many")
    } else {
        place(confirms, delivery, queue, reason).await
    };
    match placed {
        Ok(()) => delivery.acker.ack(BasicAckOptions::default()).await,
        Err(why) => {
            tracing::warn!(reason, why, "Could not place the dead letter with its reason; rejecting the message, which dead-letters it without one.");
            delivery
                .acker
                .reject(BasicRejectOptions { requeue: false })
                .await
        }
    }
}

/// Publishes the copy and waits for the broker's confirm.
async fn place(
    confirms: &Channel,
    delivery: &Delivery,
    queue: &str,
    reason: &'static str,
) -> Result<(), &'static str> {
    let properties = delivery.properties.clone().with_headers(headers(
        delivery,
        queue,
        reason,
        chrono::Utc::now().timestamp(),
    ));
    let confirmation = confirms
        .basic_publish(
            DEAD_LETTER_EXCHANGE.into(),
            DEAD_LETTER_ROUTING_KEY.into(),
            BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            },
            &delivery.data,
            properties,
        )
        .await
        .map_err(|_| "the publish failed")?
        .await
        .map_err(|_| "the confirm was lost")?;
    match confirmation {
        Confirmation::Ack(None) => Ok(()),
        Confirmation::Ack(Some(_)) => Err("no queue is bound to the dead-letter exchange"),
        Confirmation::Nack(_) => Err("the broker refused it"),
        Confirmation::NotRequested => Err("the channel does not confirm"),
    }
}

/// The message's own headers, with the dead letter's added (replacing any of a former refusal).
fn headers(delivery: &Delivery, queue: &str, reason: &'static str, now: i64) -> FieldTable {
    let mut headers = delivery.properties.headers().clone().unwrap_or_default();
    let text = |value: &str| AMQPValue::LongString(LongString::from(value));
    headers.insert(DEAD_LETTER_REASON_HEADER.into(), text(reason));
    headers.insert(DEAD_LETTER_QUEUE_HEADER.into(), text(queue));
    headers.insert(
        DEAD_LETTER_EXCHANGE_HEADER.into(),
        text(delivery.exchange.as_str()),
    );
    headers.insert(
        DEAD_LETTER_ROUTING_KEY_HEADER.into(),
        text(delivery.routing_key.as_str()),
    );
    headers.insert(
        DEAD_LETTER_AT_HEADER.into(),
        AMQPValue::Timestamp(u64::try_from(now).unwrap_or(0)),
    );
    headers
}

/// Whether `headers` nest at most [`MAX_HEADER_DEPTH`] levels and hold at most
/// [`MAX_HEADER_VALUES`] values: walked without recursion, stopping at the first excess.
fn plain(headers: Option<&FieldTable>) -> bool {
    let Some(headers) = headers else {
        return true;
    };
    let mut values = 0;
    let mut stack: Vec<(&AMQPValue, usize)> = headers.inner().values().map(|v| (v, 1)).collect();
    while let Some((value, depth)) = stack.pop() {
        values += 1;
        if values > MAX_HEADER_VALUES || depth > MAX_HEADER_DEPTH {
            return false;
        }
        match value {
            AMQPValue::FieldTable(table) => {
                stack.extend(table.inner().values().map(|v| (v, depth + 1)));
            }
            AMQPValue::FieldArray(array) => {
                stack.extend(array.as_slice().iter().map(|v| (v, depth + 1)));
            }
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> FieldTable {
        let mut table = FieldTable::default();
        for _ in 0..depth {
            let mut outer = FieldTable::default();
            outer.insert("t".into(), AMQPValue::FieldTable(table));
            table = outer;
        }
        table
    }

    #[test]
    fn only_plain_headers_are_copied() {
        assert!(plain(None));
        assert!(plain(Some(&FieldTable::default())));
        // x-death: an array of tables, as a requeued dead letter carries it.
        assert!(plain(Some(&nested(MAX_HEADER_DEPTH))));
        assert!(!plain(Some(&nested(MAX_HEADER_DEPTH + 1))));
        assert!(!plain(Some(&nested(18_000))));
        let mut many = FieldTable::default();
        for i in 0..=MAX_HEADER_VALUES {
            many.insert(format!("h{i}").into(), AMQPValue::Boolean(true));
        }
        assert!(!plain(Some(&many)));
    }
}
