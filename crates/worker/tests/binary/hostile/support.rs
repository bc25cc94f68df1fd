//! What the hostile tests share: a run marker that survives dead-lettering, a dead-letter tap,
//! signing with any timestamp and route, raw publishing with typed headers, and metric reading.

use std::time::{Duration, Instant};

use contract::envelope::{self, Route};
use futures_util::StreamExt;
use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::Channel;

use crate::harness::World;

/// Header that marks a test run's messages; the broker keeps it on dead-lettered copies, so a
/// run counts its own dead letters on the shared `fetcher.dlx`.
pub const RUN_HEADER: &str = "X-Test-Run";

/// A queue of the test's own on the shared dead-letter exchange.
pub struct DeadLetters {
    consumer: lapin::Consumer,
    run: String,
}

impl DeadLetters {
    pub async fn tap(world: &World) -> DeadLetters {
        let queue = format!("fetcher.test.dlq.{}", world.id);
        let consumer = world.tap(&queue, "fetcher.dlx", "fetcher.dlq.key").await;
        DeadLetters {
            consumer,
            run: world.id.clone(),
        }
    }

    /// The bodies of this run's dead letters: waits up to `within` for `expected` of them, then
    /// a second more for any extra. The exchange is shared, so other tests' dead letters pass
    /// through too; they are skipped, and never keep this waiting.
    pub async fn collect(&mut self, expected: usize, within: Duration) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + within;
        let linger = || Some(Instant::now() + Duration::from_secs(1));
        let mut linger_until = if expected == 0 { linger() } else { None };
        let mut bodies = Vec::new();
        loop {
            let until = linger_until.map_or(deadline, |l| l.min(deadline));
            let left = until.saturating_duration_since(Instant::now());
            let Ok(Some(Ok(delivery))) = tokio::time::timeout(left, self.consumer.next()).await
            else {
                break;
            };
            let ours = delivery
                .properties
                .headers()
                .as_ref()
                .and_then(|h| h.inner().get(RUN_HEADER).cloned())
                .is_some_and(|v| {
                    matches!(v, AMQPValue::LongString(s) if s.as_bytes() == self.run.as_bytes())
                });
            if ours {
                bodies.push(delivery.data);
                if bodies.len() >= expected && linger_until.is_none() {
                    linger_until = linger();
                }
            }
        }
        bodies
    }
}

/// Headers of one message, each value with its AMQP type.
#[derive(Default, Clone)]
pub struct Headers(pub Vec<(String, AMQPValue)>);

impl Headers {
    pub fn text(mut self, name: &str, value: &str) -> Headers {
        self.0.push((
            name.to_owned(),
            AMQPValue::LongString(LongString::from(value)),
        ));
        self
    }

    pub fn bytes(mut self, name: &str, value: &[u8]) -> Headers {
        self.0.push((
            name.to_owned(),
            AMQPValue::LongString(LongString::from(value.to_vec())),
        ));
        self
    }

    pub fn value(mut self, name: &str, value: AMQPValue) -> Headers {
        self.0.push((name.to_owned(), value));
        self
    }

    pub fn without(mut self, name: &str) -> Headers {
        self.0.retain(|(n, _)| n != name);
        self
    }

    pub fn table(&self) -> FieldTable {
        let mut table = FieldTable::default();
        for (name, value) in &self.0 {
            table.insert(name.as_str().into(), value.clone());
        }
        table
    }
}

/// The three signature headers of `body` signed with the internal key at `t` for `route`, plus
/// the run marker (and `X-Tenant-ID` when `tenant` is given).
pub fn signed(
    world: &World,
    t: i64,
    route: &Route<'_>,
    body: &[u8],
    tenant: Option<&str>,
) -> Headers {
    let signature = envelope::sign(t, route, body, |p| world.keys.internal_hmac().sign_hex(p));
    let mut headers = Headers::default()
        .text(RUN_HEADER, &world.id)
        .text(envelope::SIGNATURE_HEADER, &signature.signature)
        .text(envelope::TIMESTAMP_HEADER, &signature.timestamp)
        .text(envelope::VERSION_HEADER, signature.version);
    if let Some(tenant) = tenant {
        headers = headers.text("X-Tenant-ID", tenant);
    }
    headers
}

/// The route of a message published straight to the world's work queue.
pub fn work_route<'a>(world: &'a World, tenant: &'a str) -> Route<'a> {
    Route {
        tenant,
        exchange: "",
        routing_key: &world.queue,
    }
}

/// Publishes to `exchange` / `routing_key` on `channel` without waiting for a confirm.
pub async fn publish(
    channel: &Channel,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    headers: &Headers,
) {
    channel
        .basic_publish(
            exchange.into(),
            routing_key.into(),
            lapin::options::BasicPublishOptions::default(),
            body,
            lapin::BasicProperties::default()
                .with_delivery_mode(2)
                .with_headers(headers.table()),
        )
        .await
        .expect("publish");
}

pub use crate::harness::http_get;

/// The sum of a Prometheus counter's samples whose labels contain `label` (`""`: all).
pub fn metric_sum(metrics: &str, name: &str, label: &str) -> f64 {
    metrics
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|line| line.contains(label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Messages ready in `queue` (those delivered and not yet acknowledged are not counted).
pub async fn queue_depth(channel: &Channel, queue: &str) -> u32 {
    channel
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("passive declare")
        .message_count()
}

/// The source table's row count and a checksum of its rows, plus the list of its tables.
pub async fn source_fingerprint(world: &World) -> (i64, String, String) {
    let pool = sqlx::PgPool::connect(&format!(
        "postgres://postgres@127.0.0.1:5432/{}",
        world.source_db
    ))
    .await
    .expect("connect source");
    let (rows, checksum): (i64, String) = sqlx::query_as(
        "SELECT count(*), md5(coalesce(string_agg(p::text, '|' ORDER BY id), '')) FROM payments p",
    )
    .fetch_one(&pool)
    .await
    .expect("checksum");
    let tables: String = sqlx::query_scalar(
        "SELECT coalesce(string_agg(relname, ',' ORDER BY relname), '') FROM pg_class \
         WHERE relnamespace = 'public'::regnamespace",
    )
    .fetch_one(&pool)
    .await
    .expect("tables");
    pool.close().await;
    (rows, checksum, tables)
}

/// Removes the flood's work queue if the test panics before `World::cleanup`, from the broker
/// the flood used: `HOSTILE_AMQP_URI` may name another broker than the one the world's own `Drop`
/// cleans, and a failed flood would leave tens of thousands of messages in a durable queue.
pub struct PanicCleanup {
    amqp: String,
    queue: String,
}

impl PanicCleanup {
    pub fn new(world: &World, amqp: &str) -> PanicCleanup {
        PanicCleanup {
            amqp: amqp.to_owned(),
            queue: world.queue.clone(),
        }
    }
}

impl Drop for PanicCleanup {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let (amqp, queue) = (self.amqp.clone(), self.queue.clone());
        testkit::cleanup::run_detached(move || async move {
            if let Ok(connection) =
                lapin::Connection::connect(&amqp, lapin::ConnectionProperties::default()).await
            {
                if let Ok(channel) = connection.create_channel().await {
                    let _ = channel
                        .queue_delete(queue.as_str().into(), Default::default())
                        .await;
                }
                let _ = connection.close(200, "OK".into()).await;
            }
        });
    }
}
