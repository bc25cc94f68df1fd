//! Refusing a delivery into the dead-letter queue with the Worker's reason.
//!
//! `basic.reject` dead-letters a message with RabbitMQ's reason alone (`rejected`), and takes no
//! headers. So the Worker places the dead letter itself: a copy of the message (its body and
//! properties as they came) with the `x-fetcher-*` headers of [`contract::wire`] added (the
//! reason, the queue it came from, the route it was published with, when) and stamped: the
//! HMAC of [`contract::dead_letter::Stamp`] under the internal key over those and the body's
//! SHA-256, published with `mandatory` on a confirm channel to the work queue's own dead-letter
//! exchange and routing key (as [`crate::amqp::topology`] found them), where RabbitMQ would
//! send the rejected original. Only once the broker confirmed the copy is the original
//! acknowledged; when the copy cannot be placed (nacked, unroutable, the channel gone), the
//! original is rejected without requeue as before, so it is dead-lettered all the same, without
//! the reason. A crash between the confirm and the ack redelivers the original,
//! which is refused again: at worst two dead letters of one message, never none.
//!
//! Copying costs the Worker a publish of the message, so only a message it could have handled
//! is copied: one within `RABBITMQ_MAX_MESSAGE_BYTES` whose headers are a plain table (at most
//! [`MAX_HEADER_DEPTH`] levels of nesting and [`MAX_HEADER_VALUES`] values). Anything larger or
//! stranger (an oversized body, a header table nested thousands deep) is rejected as before:
//! a refused message never makes the Worker do more than refuse it.
//!
//! Nothing of the message is changed or re-signed: the signature covers the body and the route,
//! not these headers, and `fetcherctl dlq requeue` publishes the copy to the route it names once
//! the stamp verifies. A message that was not copied keeps whatever `x-fetcher-*` headers its
//! publisher gave it, unstamped (any stamp it brought fails, as its fields are not the Worker's
//! to vouch for): `fetcherctl` shows such a letter as unverified and never trusts its route.

use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicPublishOptions, BasicRejectOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, Confirmation};

use contract::wire::{
    DEAD_LETTER_AT_HEADER, DEAD_LETTER_EXCHANGE_HEADER, DEAD_LETTER_QUEUE_HEADER,
    DEAD_LETTER_REASON_HEADER, DEAD_LETTER_ROUTING_KEY_HEADER,
};

use contract::dead_letter::Stamp;
use contract::wire::DEAD_LETTER_STAMP_HEADER;
use crypto::HmacKey;

use crate::amqp::topology::DeadLetters;

/// The deepest nesting of header tables and arrays a copied dead letter may have.
pub const MAX_HEADER_DEPTH: usize = 4;
/// The most header values (nested ones included) a copied dead letter may have.
pub const MAX_HEADER_VALUES: usize = 256;

/// Where and how a refused delivery is placed: the confirm channel, the queue it was consumed
/// from and where that queue dead-letters, the largest body copied, and the internal key that
/// stamps the copy.
pub struct Refusal<'a> {
    pub confirms: &'a Channel,
    pub queue: &'a str,
    /// The work queue's own dead-letter exchange and routing key, as [`crate::amqp::topology`]
    /// found them: the copy goes where RabbitMQ would send the rejected original.
    pub dead_letters: &'a DeadLetters,
    pub max_bytes: usize,
    pub key: &'a HmacKey,
}

/// Dead-letters `delivery` for `reason`; a stamped copy only when the body is at most
/// `max_bytes` and its headers are plain. `Err` when it could be neither acknowledged nor
/// rejected (the channel is gone: the broker redelivers it).
pub async fn refuse(
    refusal: &Refusal<'_>,
    delivery: &Delivery,
    reason: &'static str,
) -> lapin::Result<bool> {
    let placed = if delivery.data.len() > refusal.max_bytes {
        Err("the message is larger than RABBITMQ_MAX_MESSAGE_BYTES")
    } else if !plain(delivery.properties.headers().as_ref()) {
        Err("its headers are nested too deep or too many")
    } else {
        place(refusal, delivery, reason).await
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
    refusal: &Refusal<'_>,
    delivery: &Delivery,
    reason: &'static str,
) -> Result<(), &'static str> {
    let now = u64::try_from(chrono::Utc::now().timestamp()).unwrap_or(0);
    let headers = headers(delivery, refusal.queue, reason, now, refusal.key);
    let properties = delivery.properties.clone().with_headers(headers);
    let confirmation = refusal
        .confirms
        .basic_publish(
            refusal.dead_letters.exchange.into(),
            refusal.dead_letters.routing_key.into(),
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

/// The message's own headers, with the dead letter's added and stamped (replacing any of a
/// former refusal, or any its publisher set).
fn headers(
    delivery: &Delivery,
    queue: &str,
    reason: &'static str,
    now: u64,
    key: &HmacKey,
) -> FieldTable {
    let mut headers = delivery.properties.headers().clone().unwrap_or_default();
    let text = |value: &str| AMQPValue::LongString(LongString::from(value));
    let body_sha256 = crypto::sha256_hex(&delivery.data);
    let stamp = Stamp {
        reason,
        queue,
        exchange: delivery.exchange.as_str(),
        routing_key: delivery.routing_key.as_str(),
        refused_at: now,
        body_sha256: &body_sha256,
    };
    headers.insert(DEAD_LETTER_REASON_HEADER.into(), text(stamp.reason));
    headers.insert(DEAD_LETTER_QUEUE_HEADER.into(), text(stamp.queue));
    headers.insert(DEAD_LETTER_EXCHANGE_HEADER.into(), text(stamp.exchange));
    headers.insert(
        DEAD_LETTER_ROUTING_KEY_HEADER.into(),
        text(stamp.routing_key),
    );
    headers.insert(DEAD_LETTER_AT_HEADER.into(), AMQPValue::Timestamp(now));
    let signed = stamp.sign(|text| key.sign_hex(text));
    headers.insert(DEAD_LETTER_STAMP_HEADER.into(), text(&signed));
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

    fn text<'a>(headers: &'a FieldTable, name: &str) -> &'a str {
        match headers.inner().get(name) {
            Some(AMQPValue::LongString(s)) => std::str::from_utf8(s.as_bytes()).expect("utf-8"),
            other => panic!("{name}: {other:?}"),
        }
    }

    /// Whether the letter's stamp verifies over its headers and `body`, as `fetcherctl` checks.
    fn verifies(headers: &FieldTable, body: &[u8], key: &HmacKey) -> bool {
        let Some(AMQPValue::Timestamp(refused_at)) = headers.inner().get(DEAD_LETTER_AT_HEADER)
        else {
            return false;
        };
        let digest = crypto::sha256_hex(body);
        let stamp = Stamp {
            reason: text(headers, DEAD_LETTER_REASON_HEADER),
            queue: text(headers, DEAD_LETTER_QUEUE_HEADER),
            exchange: text(headers, DEAD_LETTER_EXCHANGE_HEADER),
            routing_key: text(headers, DEAD_LETTER_ROUTING_KEY_HEADER),
            refused_at: *refused_at,
            body_sha256: &digest,
        };
        stamp.verify(text(headers, DEAD_LETTER_STAMP_HEADER), |t, v| {
            key.verify_hex(t, v)
        })
    }

    #[test]
    fn the_copy_is_stamped_over_its_headers_and_body_and_replaces_forged_ones() {
        let keys = crypto::KeySet::from_base64("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
            .expect("key");
        let key = keys.internal_hmac();
        let body = br#"{"jobId":"x"}"#.to_vec();
        let mut forged = FieldTable::default();
        let attacker = |v: &str| AMQPValue::LongString(LongString::from(v));
        forged.insert(DEAD_LETTER_EXCHANGE_HEADER.into(), attacker("attacker"));
        forged.insert(DEAD_LETTER_STAMP_HEADER.into(), attacker(&"0".repeat(64)));
        let mut delivery = Delivery::mock(1, "".into(), "work".into(), false, body.clone());
        delivery.properties = delivery.properties.with_headers(forged);
        let headers = headers(&delivery, "work", "signature_mismatch", 1_700_000_000, key);
        assert_eq!(text(&headers, DEAD_LETTER_EXCHANGE_HEADER), "");
        assert_eq!(text(&headers, DEAD_LETTER_ROUTING_KEY_HEADER), "work");
        assert!(verifies(&headers, &body, key));
        assert!(
            !verifies(&headers, br#"{"jobId":"y"}"#, key),
            "another body"
        );
        let other = crypto::KeySet::from_base64("ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=")
            .expect("key");
        assert!(
            !verifies(&headers, &body, other.internal_hmac()),
            "another key"
        );
        for name in [
            DEAD_LETTER_REASON_HEADER,
            DEAD_LETTER_QUEUE_HEADER,
            DEAD_LETTER_EXCHANGE_HEADER,
            DEAD_LETTER_ROUTING_KEY_HEADER,
        ] {
            let mut changed = headers.clone();
            changed.insert(name.into(), attacker("changed"));
            assert!(!verifies(&changed, &body, key), "{name} changed");
        }
        let mut later = headers.clone();
        later.insert(
            DEAD_LETTER_AT_HEADER.into(),
            AMQPValue::Timestamp(1_700_000_001),
        );
        assert!(!verifies(&later, &body, key), "the time changed");
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
