//! One message of the dead-letter queue as an operator sees it: why and where from it was
//! dead-lettered, its job id, age and size, and the route it first took, which a requeue
//! publishes it to again (the signature covers that route, contract §3).
//!
//! A message the Worker refused carries the Worker's own reason (`signature_mismatch`,
//! `tenant_mismatch`, ...: the `x-fetcher-*` headers of `contract::wire`, as the Worker places
//! its dead letters itself). One RabbitMQ dead-lettered carries `x-death`, whose reason is
//! `rejected` (refused by a Worker that could not place the dead letter itself), `expired` or
//! `maxlen`. A message the queue's retention dropped never reaches `fetcher.dlq`.

use chrono::{DateTime, Utc};
use contract::wire;
use lapin::message::Delivery;
use lapin::types::{AMQPValue, FieldTable};

use crate::amqp::{header, string_header};

/// What `dlq list` shows of a dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The `jobId` header, else the body's signed `jobId` (`-` when neither names one).
    pub job_id: String,
    /// The Worker's reason (`x-fetcher-reason`), else `x-first-death-reason`: `rejected`,
    /// `expired` or `maxlen`.
    pub reason: String,
    /// The queue it was refused from (`x-fetcher-queue`, else `x-first-death-queue`).
    pub queue: String,
    /// The exchange and routing key it was first published with.
    pub route: Option<(String, String)>,
    /// When it was refused (`x-fetcher-refused-at`), else first dead-lettered (`x-death`'s
    /// `time`), else when it was published.
    pub since: Option<DateTime<Utc>>,
    /// How many times RabbitMQ dead-lettered it from that queue (1 for one the Worker placed).
    pub deaths: i64,
    pub size: usize,
}

impl DeadLetter {
    pub fn read(delivery: &Delivery) -> DeadLetter {
        let headers = delivery.properties.headers().as_ref();
        let job_id = string_header(headers, wire::JOB_ID_HEADER)
            .map(str::to_owned)
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| contract::envelope::signed_job_id(&delivery.data));
        let text = |name| string_header(headers, name).map(str::to_owned);
        let placed = text(wire::DEAD_LETTER_REASON_HEADER);
        let queue = text(wire::DEAD_LETTER_QUEUE_HEADER)
            .or_else(|| text("x-first-death-queue"))
            .unwrap_or_else(|| "-".into());
        let death = first_death(headers, &queue);
        let field = |name: &str| death.and_then(|d| d.inner().get(name));
        let placed_route =
            text(wire::DEAD_LETTER_EXCHANGE_HEADER).zip(text(wire::DEAD_LETTER_ROUTING_KEY_HEADER));
        let route = placed_route.or_else(|| match (field("exchange"), field("routing-keys")) {
            (Some(exchange), Some(AMQPValue::FieldArray(keys))) => {
                match (as_text(exchange), keys.as_slice().first().and_then(as_text)) {
                    (Some(exchange), Some(key)) => Some((exchange.to_owned(), key.to_owned())),
                    _ => None,
                }
            }
            _ => None,
        });
        let refused_at = match header(headers, wire::DEAD_LETTER_AT_HEADER) {
            Some(AMQPValue::Timestamp(seconds)) => timestamp(*seconds),
            _ => None,
        };
        let since = refused_at.or_else(|| match field("time") {
            Some(AMQPValue::Timestamp(seconds)) => timestamp(*seconds),
            _ => delivery.properties.timestamp().and_then(timestamp),
        });
        let deaths = match field("count") {
            Some(AMQPValue::LongLongInt(n)) => *n,
            Some(AMQPValue::LongInt(n)) => i64::from(*n),
            _ => 0,
        };
        let (reason, deaths) = match placed {
            Some(reason) => (reason, deaths.max(1)),
            None => (
                text("x-first-death-reason").unwrap_or_else(|| "-".into()),
                deaths,
            ),
        };
        DeadLetter {
            job_id: if job_id.is_empty() {
                "-".into()
            } else {
                job_id
            },
            reason,
            queue,
            route,
            since,
            deaths,
            size: delivery.data.len(),
        }
    }

    /// Whole seconds since it was dead-lettered (`-` when unknown).
    pub fn age(&self, now: DateTime<Utc>) -> String {
        self.since.map_or_else(
            || "-".to_owned(),
            |since| format!("{}s", (now - since).num_seconds().max(0)),
        )
    }
}

/// The `x-death` entry of `queue` (the first one when none names it).
fn first_death<'a>(headers: Option<&'a FieldTable>, queue: &str) -> Option<&'a FieldTable> {
    let Some(AMQPValue::FieldArray(deaths)) = header(headers, "x-death") else {
        return None;
    };
    let tables = deaths.as_slice().iter().filter_map(|d| match d {
        AMQPValue::FieldTable(table) => Some(table),
        _ => None,
    });
    tables
        .clone()
        .find(|t| t.inner().get("queue").and_then(as_text) == Some(queue))
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
