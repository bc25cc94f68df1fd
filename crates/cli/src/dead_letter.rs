//! One message of the dead-letter queue as an operator sees it: its job id, age and size, and
//! either the Worker's stamped account of it (why and whence it was refused, the route it first
//! took, which a requeue publishes it to again: the signature covers that route, contract §3)
//! or, unverified, only RabbitMQ's.
//!
//! A message the Worker refused carries its reason (`signature_mismatch`, `tenant_mismatch`,
//! ...), queue, route and time in the `x-fetcher-*` headers of `contract::wire`, stamped with
//! the internal key ([`contract::dead_letter::Stamp`]). Anyone who may publish to the work queue
//! can write those headers too, so they count only when the stamp verifies; otherwise the letter
//! is unverified and shown with `x-death` alone: its reason `rejected` (refused by a Worker that
//! could not place the dead letter itself), `expired` or `maxlen`. A direct publisher can forge
//! `x-death` as well: it is shown, never trusted with a route. A message the queue's retention
//! dropped never reaches `fetcher.dlq`.

use chrono::{DateTime, Utc};
use contract::dead_letter::Stamp;
use contract::wire;
use crypto::HmacKey;
use lapin::message::Delivery;
use lapin::types::{AMQPValue, FieldTable};

use crate::amqp::{header, string_header};

/// What `dlq list` shows of a dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The `jobId` header, else the body's signed `jobId` (`-` when neither names one).
    pub job_id: String,
    /// The Worker's account, when its stamp verifies; else why not.
    pub stamp: Result<Stamped, Unverified>,
    /// RabbitMQ's account (`x-death`), as it reads: anyone who publishes to the queue can write it.
    pub death: Death,
    pub size: usize,
}

/// What the Worker stamped on a dead letter it placed, the stamp verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamped {
    /// Why the Worker refused it (`x-fetcher-reason`).
    pub reason: String,
    /// The queue it was refused from.
    pub queue: String,
    /// The exchange and routing key it was first published with.
    pub route: (String, String),
    /// When it was refused.
    pub refused_at: Option<DateTime<Utc>>,
}

/// Why a dead letter's `x-fetcher-*` headers are not the Worker's word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unverified {
    /// No internal key was given, so no stamp could be checked.
    NoKey,
    /// No `x-fetcher-stamp`: the Worker did not place it.
    NoStamp,
    /// A stamp that does not verify over its headers and body.
    BadStamp,
}

impl Unverified {
    pub fn why(self) -> &'static str {
        match self {
            Unverified::NoKey => "no internal key given to check its stamp",
            Unverified::NoStamp => "no stamp of the Worker",
            Unverified::BadStamp => "its stamp does not verify",
        }
    }
}

/// RabbitMQ's `x-death` entry for the queue the letter names (shown, never trusted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Death {
    /// `x-first-death-reason`: `rejected`, `expired`, `maxlen`.
    pub reason: Option<String>,
    /// `x-first-death-queue`.
    pub queue: Option<String>,
    /// The exchange and first routing key `x-death` names.
    pub route: Option<(String, String)>,
    /// When it was first dead-lettered, else when it was published.
    pub since: Option<DateTime<Utc>>,
    /// How many times it was dead-lettered from that queue.
    pub count: i64,
}

impl DeadLetter {
    /// Reads `delivery`, checking the Worker's stamp with `key` (the internal HMAC key).
    pub fn read(delivery: &Delivery, key: Option<&HmacKey>) -> DeadLetter {
        let headers = delivery.properties.headers().as_ref();
        let job_id = string_header(headers, wire::JOB_ID_HEADER)
            .map(str::to_owned)
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| contract::envelope::signed_job_id(&delivery.data));
        DeadLetter {
            job_id: if job_id.is_empty() {
                "-".into()
            } else {
                job_id
            },
            stamp: stamped(headers, &delivery.data, key),
            death: death(headers, *delivery.properties.timestamp()),
            size: delivery.data.len(),
        }
    }

    /// The verified reason, if any.
    pub fn verified_reason(&self) -> Option<&str> {
        self.stamp.as_ref().ok().map(|s| s.reason.as_str())
    }

    /// `<reason> from <queue>`: the Worker's when stamped, else
    /// `unverified (<why>): <x-death reason> from <x-death queue>`.
    pub fn summary(&self) -> String {
        match &self.stamp {
            Ok(stamped) => format!("{} from {}", stamped.reason, stamped.queue),
            Err(why) => format!(
                "unverified ({}): {} from {}",
                why.why(),
                self.death.reason.as_deref().unwrap_or("-"),
                self.death.queue.as_deref().unwrap_or("-")
            ),
        }
    }

    /// How many times it was dead-lettered (1 at least for one the Worker placed).
    pub fn deaths(&self) -> i64 {
        match &self.stamp {
            Ok(_) => self.death.count.max(1),
            Err(_) => self.death.count,
        }
    }

    /// Whole seconds since it was dead-lettered (`-` when unknown).
    pub fn age(&self, now: DateTime<Utc>) -> String {
        let since = match &self.stamp {
            Ok(stamped) => stamped.refused_at.or(self.death.since),
            Err(_) => self.death.since,
        };
        since.map_or_else(
            || "-".to_owned(),
            |since| format!("{}s", (now - since).num_seconds().max(0)),
        )
    }
}

/// The Worker's stamped headers, when the stamp verifies under `key`.
fn stamped(
    headers: Option<&FieldTable>,
    body: &[u8],
    key: Option<&HmacKey>,
) -> Result<Stamped, Unverified> {
    let Some(value) = string_header(headers, wire::DEAD_LETTER_STAMP_HEADER) else {
        return Err(Unverified::NoStamp);
    };
    let key = key.ok_or(Unverified::NoKey)?;
    let text = |name| string_header(headers, name).ok_or(Unverified::BadStamp);
    let Some(AMQPValue::Timestamp(refused_at)) = header(headers, wire::DEAD_LETTER_AT_HEADER)
    else {
        return Err(Unverified::BadStamp);
    };
    let body_sha256 = crypto::sha256_hex(body);
    let stamp = Stamp {
        reason: text(wire::DEAD_LETTER_REASON_HEADER)?,
        queue: text(wire::DEAD_LETTER_QUEUE_HEADER)?,
        exchange: text(wire::DEAD_LETTER_EXCHANGE_HEADER)?,
        routing_key: text(wire::DEAD_LETTER_ROUTING_KEY_HEADER)?,
        refused_at: *refused_at,
        body_sha256: &body_sha256,
    };
    if !stamp.verify(value, |text, value| key.verify_hex(text, value)) {
        return Err(Unverified::BadStamp);
    }
    Ok(Stamped {
        reason: stamp.reason.to_owned(),
        queue: stamp.queue.to_owned(),
        route: (stamp.exchange.to_owned(), stamp.routing_key.to_owned()),
        refused_at: timestamp(stamp.refused_at),
    })
}

/// RabbitMQ's account of the letter, from `x-first-death-*` and the matching `x-death` entry.
fn death(headers: Option<&FieldTable>, published: Option<u64>) -> Death {
    let text = |name| string_header(headers, name).map(str::to_owned);
    let queue = text("x-first-death-queue");
    let entry = first_death(headers, queue.as_deref());
    let field = |name: &str| entry.and_then(|d| d.inner().get(name));
    let route = match (field("exchange"), field("routing-keys")) {
        (Some(exchange), Some(AMQPValue::FieldArray(keys))) => {
            match (as_text(exchange), keys.as_slice().first().and_then(as_text)) {
                (Some(exchange), Some(key)) => Some((exchange.to_owned(), key.to_owned())),
                _ => None,
            }
        }
        _ => None,
    };
    let since = match field("time") {
        Some(AMQPValue::Timestamp(seconds)) => timestamp(*seconds),
        _ => published.and_then(timestamp),
    };
    let count = match field("count") {
        Some(AMQPValue::LongLongInt(n)) => *n,
        Some(AMQPValue::LongInt(n)) => i64::from(*n),
        _ => 0,
    };
    Death {
        reason: text("x-first-death-reason"),
        queue: queue.or_else(|| field("queue").and_then(as_text).map(str::to_owned)),
        route,
        since,
        count,
    }
}

/// The `x-death` entry of `queue` (the first one when none names it).
fn first_death<'a>(headers: Option<&'a FieldTable>, queue: Option<&str>) -> Option<&'a FieldTable> {
    let Some(AMQPValue::FieldArray(deaths)) = header(headers, "x-death") else {
        return None;
    };
    let tables = deaths.as_slice().iter().filter_map(|d| match d {
        AMQPValue::FieldTable(table) => Some(table),
        _ => None,
    });
    tables
        .clone()
        .find(|t| queue.is_some() && t.inner().get("queue").and_then(as_text) == queue)
        .or_else(|| tables.clone().next())
}

fn as_text(value: &AMQPValue) -> Option<&str> {
    match value {
        AMQPValue::LongString(s) => std::str::from_utf8(s.as_bytes()).ok(),
        AMQPValue::ShortString(s) => Some(s.as_str()),
        _ => None,
    }
}

fn timestamp(seconds: u64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(i64::try_from(seconds).ok()?, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldArray, LongString};

    const BODY: &[u8] = br#"{"jobId":"6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88"}"#;

    fn key() -> HmacKey {
        crypto::KeySet::from_base64("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
            .expect("key")
            .internal_hmac()
            .clone()
    }

    fn text(value: &str) -> AMQPValue {
        AMQPValue::LongString(LongString::from(value))
    }

    /// The `x-fetcher-*` headers of a refusal from `work`, stamped over `body` with `key`.
    fn placed(body: &[u8], key: &HmacKey) -> FieldTable {
        let digest = crypto::sha256_hex(body);
        let stamp = Stamp {
            reason: "signature_mismatch",
            queue: "work",
            exchange: "",
            routing_key: "work",
            refused_at: 1_700_000_000,
            body_sha256: &digest,
        };
        let mut headers = FieldTable::default();
        headers.insert(wire::DEAD_LETTER_REASON_HEADER.into(), text(stamp.reason));
        headers.insert(wire::DEAD_LETTER_QUEUE_HEADER.into(), text(stamp.queue));
        headers.insert(
            wire::DEAD_LETTER_EXCHANGE_HEADER.into(),
            text(stamp.exchange),
        );
        headers.insert(
            wire::DEAD_LETTER_ROUTING_KEY_HEADER.into(),
            text(stamp.routing_key),
        );
        headers.insert(
            wire::DEAD_LETTER_AT_HEADER.into(),
            AMQPValue::Timestamp(stamp.refused_at),
        );
        let value = stamp.sign(|t| key.sign_hex(t));
        headers.insert(wire::DEAD_LETTER_STAMP_HEADER.into(), text(&value));
        headers
    }

    fn letter(headers: FieldTable, body: &[u8], key: Option<&HmacKey>) -> DeadLetter {
        let mut delivery = Delivery::mock(1, "".into(), "dlq".into(), false, body.to_vec());
        delivery.properties = delivery.properties.with_headers(headers);
        DeadLetter::read(&delivery, key)
    }

    #[test]
    fn a_stamped_letter_is_the_workers_account() {
        let letter = letter(placed(BODY, &key()), BODY, Some(&key()));
        let stamped = letter.stamp.clone().expect("verified");
        assert_eq!(stamped.route, (String::new(), "work".to_owned()));
        assert_eq!(letter.summary(), "signature_mismatch from work");
        assert_eq!(letter.verified_reason(), Some("signature_mismatch"));
        assert_eq!(letter.deaths(), 1);
        assert_eq!(letter.job_id, "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88");
    }

    #[test]
    fn any_change_to_a_stamped_letter_makes_it_unverified() {
        let other = br#"{"jobId":"6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e89"}"#;
        assert_eq!(
            letter(placed(BODY, &key()), other, Some(&key())).stamp,
            Err(Unverified::BadStamp),
            "another body"
        );
        for name in [
            wire::DEAD_LETTER_REASON_HEADER,
            wire::DEAD_LETTER_QUEUE_HEADER,
            wire::DEAD_LETTER_EXCHANGE_HEADER,
            wire::DEAD_LETTER_ROUTING_KEY_HEADER,
        ] {
            let mut headers = placed(BODY, &key());
            headers.insert(name.into(), text("attacker"));
            let read = letter(headers, BODY, Some(&key()));
            assert_eq!(read.stamp, Err(Unverified::BadStamp), "{name}");
            assert_eq!(read.verified_reason(), None);
        }
        let mut later = placed(BODY, &key());
        later.insert(
            wire::DEAD_LETTER_AT_HEADER.into(),
            AMQPValue::Timestamp(1_700_000_001),
        );
        assert_eq!(
            letter(later, BODY, Some(&key())).stamp,
            Err(Unverified::BadStamp)
        );
        let forger = crypto::KeySet::from_base64("ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=")
            .expect("key");
        let forged = placed(BODY, forger.internal_hmac());
        assert_eq!(
            letter(forged, BODY, Some(&key())).stamp,
            Err(Unverified::BadStamp)
        );
    }

    #[test]
    fn an_unverified_letter_shows_only_x_death() {
        let mut headers = FieldTable::default();
        for (name, value) in placed(BODY, &key()).inner() {
            if name.as_str() != wire::DEAD_LETTER_STAMP_HEADER {
                headers.insert(name.clone(), value.clone());
            }
        }
        headers.insert("x-first-death-reason".into(), text("rejected"));
        headers.insert("x-first-death-queue".into(), text("work"));
        let mut death = FieldTable::default();
        death.insert("queue".into(), text("work"));
        death.insert("exchange".into(), text("attacker"));
        death.insert(
            "routing-keys".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![text("attacker.key")])),
        );
        death.insert("count".into(), AMQPValue::LongLongInt(1));
        headers.insert(
            "x-death".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(death)])),
        );
        let read = letter(headers.clone(), BODY, Some(&key()));
        assert_eq!(read.stamp, Err(Unverified::NoStamp));
        assert_eq!(
            read.summary(),
            "unverified (no stamp of the Worker): rejected from work"
        );
        assert_eq!(read.verified_reason(), None);
        assert_eq!(
            read.death.route,
            Some(("attacker".to_owned(), "attacker.key".to_owned()))
        );
        let genuine = letter(placed(BODY, &key()), BODY, None);
        assert_eq!(genuine.stamp, Err(Unverified::NoKey), "no key, no trust");
        assert_eq!(
            genuine.summary(),
            "unverified (no internal key given to check its stamp): - from -"
        );
    }
}
