//! What a test consumer receives: deliveries collected with a deadline, and their headers.

use std::time::Duration;

use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::types::AMQPValue;
use lapin::Consumer;

/// Collects at least `count` deliveries, then keeps collecting until none arrives for `idle`
/// (zero: stop at `count`). Fails when `count` did not arrive within `within`.
pub async fn collect(
    consumer: &mut Consumer,
    count: usize,
    within: Duration,
    idle: Duration,
) -> Vec<Delivery> {
    let mut received = Vec::with_capacity(count);
    let deadline = tokio::time::Instant::now() + within;
    while received.len() < count {
        match tokio::time::timeout_at(deadline, consumer.next()).await {
            Ok(Some(Ok(delivery))) => received.push(delivery),
            Ok(Some(Err(error))) => panic!("consumer failed: {error}"),
            Ok(None) => panic!("consumer ended"),
            Err(_) => panic!("received {} of {count} messages", received.len()),
        }
    }
    if !idle.is_zero() {
        while let Ok(next) = tokio::time::timeout(idle, consumer.next()).await {
            match next {
                Some(Ok(delivery)) => received.push(delivery),
                Some(Err(error)) => panic!("consumer failed: {error}"),
                None => break,
            }
        }
    }
    received
}

/// A received header by exact name, if the message has it.
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
        None => panic!("header {name:?} is missing"),
        Some(other) => panic!("header {name:?} must be a long string, got {other:?}"),
    }
}

/// A received header that must be an AMQP byte array.
pub fn byte_array<'a>(delivery: &'a Delivery, name: &str) -> &'a [u8] {
    match header(delivery, name) {
        Some(AMQPValue::ByteArray(value)) => value.as_slice(),
        None => panic!("header {name:?} is missing"),
        Some(other) => panic!("header {name:?} must be a byte array, got {other:?}"),
    }
}
