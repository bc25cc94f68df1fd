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

/// Dead-letters `delivery`, consumed from `queue`, for `reason`; `Err` when it could be neither
/// acknowledged nor rejected (the channel is gone: the broker redelivers it).
pub async fn refuse(
    confirms: &Channel,
    delivery: &Delivery,
    queue: &str,
    reason: &'static str,
) -> lapin::Result<bool> {
    match place(confirms, delivery, queue, reason).await {
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
