//! Relay throughput beside a bare `lapin` publisher, on the real local PostgreSQL and RabbitMQ.
//!
//! (a) Relay: `RELAY_BENCH_EVENTS` (default 20,000) terminal events recorded through
//!     `Store::record_terminal` are drained by `Repairer::repair_once` with batches of
//!     `RELAY_BENCH_BATCH` (default 500): `claim_unpublished` → `relay` (sign, publish the batch
//!     pipelined, await its confirms) → `mark_published`, batch after batch, until the outbox is
//!     empty, with the repairer's default number of batches in flight (3;
//!     `RELAY_BENCH_IN_FLIGHT`). Every row ends published.
//! (b) Bare lapin: the same messages (same bodies, same properties and headers, signed before
//!     the clock starts) published with `mandatory` on one confirm channel, a batch of the same
//!     size at a time: publish all of the batch, then await all its confirms.
//!
//! Both publish to the same durable topic exchange, routed to one durable queue that is purged
//! after every run (untimed). `RELAY_BENCH_ROUNDS` (default 5) rounds alternate which side goes
//! first; medians are reported, and the ratio of each round's back-to-back pair. CPU seconds of
//! this process, PostgreSQL and RabbitMQ are read from `/proc` around each run. Then one drain is
//! timed step by step (sequentially) to show where the relay's time goes.
//! `RELAY_BENCH_FILLFACTOR=<n>` sets the outbox table's fillfactor first (an experiment on the
//! schema; the migrations leave 100).
//!
//! Run: `cargo bench -p repairer --bench relay_vs_lapin`.

#[allow(dead_code)]
#[path = "../tests/it/support.rs"]
mod support;

use std::time::{Duration, Instant};

use contract::envelope::{
    sign_with_job_id, Route, SIGNATURE_HEADER, TIMESTAMP_HEADER, VERSION_HEADER,
};
use contract::event::OutboundEvent;
use futures_util::future::join_all;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueuePurgeOptions};
use lapin::types::{AMQPValue, ByteArray, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Confirmation, Connection, ConnectionProperties};
use repairer::Repairer;
use tokio_util::sync::CancellationToken;

use support::{Broker, TestDb};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
}

async fn bench() {
    let events = env_usize("RELAY_BENCH_EVENTS", 20_000);
    let batch = env_usize("RELAY_BENCH_BATCH", 500);
    let rounds = env_usize("RELAY_BENCH_ROUNDS", 5);

    let db = TestDb::migrated().await;
    let broker = Broker::connect().await;
    let exchange = support::unique("bench-exchange");
    broker.declare_exchange(&exchange).await;
    let queue = broker.bound_queue(&exchange, "job.*").await;

    let recording = Instant::now();
    let recorded = support::record_many(&db.store, events, 8, support::mixed, Duration::ZERO).await;
    let recording = recording.elapsed();
    let outbound: Vec<OutboundEvent> = recorded.into_iter().map(|r| r.event).collect();
    let body_bytes: usize = outbound.iter().map(|e| e.body.len()).sum();
    println!(
        "relay_vs_lapin: {events} events ({} B mean body), batches of {batch}, {rounds} rounds, \
         alternating order (recorded through record_terminal in {recording:.2?}, untimed)",
        body_bytes / events.max(1)
    );

    // An experiment for the schema, not what the migrations create: with free room on its
    // pages, the claim's update (columns no index covers) can be a heap-only (HOT) update.
    if let Some(fillfactor) = std::env::var("RELAY_BENCH_FILLFACTOR")
        .ok()
        .and_then(|v| v.parse::<u8>().ok())
    {
        for statement in [
            format!("ALTER TABLE outbox SET (fillfactor = {fillfactor})"),
            "VACUUM FULL outbox".to_owned(),
        ] {
            sqlx::raw_sql(&statement)
                .execute(db.pool())
                .await
                .expect("fillfactor");
        }
        println!(
            "experiment: outbox fillfactor {fillfactor} (the migrations leave the default, 100)"
        );
    }

    let publisher = support::publisher(&exchange);
    let mut config = support::config("bench-relay", batch as i64);
    config.lease = Duration::from_secs(600);
    config.batches_in_flight = env_usize("RELAY_BENCH_IN_FLIGHT", config.batches_in_flight);
    println!(
        "relay: Repairer::repair_once, {} batches in flight",
        config.batches_in_flight
    );
    let repairer = Repairer::new(db.store.clone(), publisher.clone(), config);
    let bare = Bare::connect().await;

    // Warm-up of both sides (connections, channels, statement caches): one batch each.
    reset_outbox(&db, Some(batch)).await;
    let warm = repairer
        .repair_once(&CancellationToken::new())
        .await
        .expect("warm-up pass");
    assert_eq!(warm.relayed.published, batch.min(events) as u64);
    bare.publish_all(&outbound[..batch.min(events)], batch, &exchange)
        .await;
    purge(&broker, &queue).await;

    let mut relay_rates = Vec::new();
    let mut bare_rates = Vec::new();
    for round in 0..rounds {
        let relay_first = round % 2 == 0;
        for side in 0..2 {
            if (side == 0) == relay_first {
                reset_outbox(&db, None).await;
                let cpu = Cpu::now();
                let started = Instant::now();
                let pass = repairer
                    .repair_once(&CancellationToken::new())
                    .await
                    .expect("relay pass");
                let elapsed = started.elapsed();
                let cpu = Cpu::now().since(cpu);
                assert_eq!(pass.relayed.published, events as u64, "{pass:?}");
                assert_eq!(support::unpublished_count(db.pool()).await, 0);
                let depth = purge(&broker, &queue).await;
                assert_eq!(depth, events as u32, "every relayed event routed");
                let rate = events as f64 / elapsed.as_secs_f64();
                println!(
                    "round {round}: relay       {elapsed:>10.2?}  {rate:>9.0} events/s  ({cpu})"
                );
                relay_rates.push(rate);
            } else {
                // Signed before the clock starts: the bare side measures publishing only.
                let messages = Bare::messages(&outbound, &exchange);
                let cpu = Cpu::now();
                let started = Instant::now();
                bare.publish_prepared(messages, batch, &exchange).await;
                let elapsed = started.elapsed();
                let cpu = Cpu::now().since(cpu);
                let depth = purge(&broker, &queue).await;
                assert_eq!(depth, events as u32, "every bare event routed");
                let rate = events as f64 / elapsed.as_secs_f64();
                println!(
                    "round {round}: bare lapin  {elapsed:>10.2?}  {rate:>9.0} events/s  ({cpu})"
                );
                bare_rates.push(rate);
            }
        }
    }
    breakdown(
        &db, &publisher, &outbound, batch, &exchange, &broker, &queue,
    )
    .await;

    // Each round's two runs are back to back: their ratio is the least disturbed by other load
    // on the machine.
    let mut paired: Vec<f64> = relay_rates
        .iter()
        .zip(&bare_rates)
        .map(|(relay, bare)| relay / bare)
        .collect();
    let paired_text: Vec<String> = paired.iter().map(|r| format!("{r:.3}")).collect();
    println!("per-round ratio relay/bare: {}", paired_text.join(", "));
    let paired_median = median(&mut paired);
    let relay = median(&mut relay_rates);
    let bare_rate = median(&mut bare_rates);
    println!("relay (claim → sign → publish → confirm → mark) median {relay:>9.0} events/s");
    println!("bare lapin (precomputed, confirms per batch)   median {bare_rate:>9.0} events/s");
    println!(
        "ratio relay/bare: {:.3} of the medians, {paired_median:.3} median of the rounds \
         (goal: at least 0.8)",
        relay / bare_rate
    );

    bare.close().await;
    publisher.close().await;
    broker.close().await;
    db.drop().await;
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Makes rows unpublished again, as recorded (all of them, or the first `only`), and vacuums so
/// that every run starts from the same table state.
async fn reset_outbox(db: &TestDb, only: Option<usize>) {
    let limit = only.map_or(i64::MAX, |n| n as i64);
    sqlx::query("UPDATE outbox SET published_at = now(), leased_by = NULL, lease_until = NULL")
        .execute(db.pool())
        .await
        .expect("mark all published");
    sqlx::query(
        "UPDATE outbox SET published_at = NULL, attempts = 1, leased_by = NULL,
                           lease_until = NULL, next_attempt_at = created_at, last_error = NULL
         WHERE id IN (SELECT id FROM outbox ORDER BY id LIMIT $1)",
    )
    .bind(limit)
    .execute(db.pool())
    .await
    .expect("reset outbox");
    sqlx::raw_sql("VACUUM ANALYZE outbox")
        .execute(db.pool())
        .await
        .expect("vacuum");
}

/// Empties the queue, returning how many messages it held.
async fn purge(broker: &Broker, queue: &str) -> u32 {
    broker
        .channel
        .queue_purge(queue.into(), QueuePurgeOptions::default())
        .await
        .expect("purge")
}

/// The bare publisher: one connection, one confirm channel.
struct Bare {
    connection: Connection,
    channel: lapin::Channel,
}

/// A message ready to publish.
struct Prepared<'a> {
    routing_key: &'static str,
    body: &'a [u8],
    properties: BasicProperties,
}

impl Bare {
    async fn connect() -> Bare {
        let connection = Connection::connect(&support::amqp_uri(), ConnectionProperties::default())
            .await
            .expect("bare connection");
        let channel = connection.create_channel().await.expect("bare channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        Bare {
            connection,
            channel,
        }
    }

    /// The messages the publisher would send: same properties, same headers, signed now.
    fn messages<'a>(events: &'a [OutboundEvent], exchange: &str) -> Vec<Prepared<'a>> {
        let key = support::key();
        let now = chrono::Utc::now().timestamp();
        events
            .iter()
            .map(|event| {
                let route = Route {
                    tenant: event.tenant(),
                    exchange,
                    routing_key: event.routing_key(),
                };
                let job_id = event.attributes.subject.as_str();
                let signature =
                    sign_with_job_id(now, &route, job_id, &event.body, |p| key.sign_hex(p));
                let mut headers = FieldTable::default();
                for (name, value) in event.attributes.headers() {
                    headers.insert(
                        ShortString::from(name),
                        AMQPValue::ByteArray(ByteArray::from(value.as_bytes())),
                    );
                }
                let text = |v: &str| AMQPValue::LongString(LongString::from(v));
                headers.insert("X-Tenant-ID".into(), text(event.tenant()));
                headers.insert("X-Request-Id".into(), text(publisher::request_id(event)));
                headers.insert(SIGNATURE_HEADER.into(), text(&signature.signature));
                headers.insert(TIMESTAMP_HEADER.into(), text(&signature.timestamp));
                headers.insert(VERSION_HEADER.into(), text(signature.version));
                let properties = BasicProperties::default()
                    .with_delivery_mode(2)
                    .with_content_type("application/json".into())
                    .with_message_id(event.ce_id().into())
                    .with_timestamp(now as u64)
                    .with_headers(headers);
                Prepared {
                    routing_key: event.routing_key(),
                    body: &event.body,
                    properties,
                }
            })
            .collect()
    }

    async fn publish_all(&self, events: &[OutboundEvent], batch: usize, exchange: &str) {
        let messages = Bare::messages(events, exchange);
        self.publish_prepared(messages, batch, exchange).await;
    }

    /// Publishes a batch (all of it), then awaits all its confirms; batch after batch.
    async fn publish_prepared(&self, messages: Vec<Prepared<'_>>, batch: usize, exchange: &str) {
        let exchange = ShortString::from(exchange);
        let options = BasicPublishOptions {
            mandatory: true,
            immediate: false,
        };
        let mut messages = messages.into_iter().peekable();
        while messages.peek().is_some() {
            let chunk: Vec<Prepared<'_>> = messages.by_ref().take(batch).collect();
            let sends = chunk.into_iter().map(|message| {
                self.channel.basic_publish(
                    exchange.clone(),
                    ShortString::from(message.routing_key),
                    options,
                    message.body,
                    message.properties,
                )
            });
            let pending = join_all(sends).await;
            let confirms = pending
                .into_iter()
                .map(|sent| async move { sent.expect("publish").await.expect("confirm") });
            for confirmation in join_all(confirms).await {
                match confirmation {
                    Confirmation::Ack(None) => {}
                    other => panic!("not a clean ack: {other:?}"),
                }
            }
        }
    }

    async fn close(self) {
        let _ = self.channel.close(200, "OK".into()).await;
        let _ = self.connection.close(200, "OK".into()).await;
    }
}

/// Where the relay's time goes: the same drain done step by step, each step timed.
async fn breakdown(
    db: &TestDb,
    publisher: &publisher::Publisher,
    outbound: &[OutboundEvent],
    batch: usize,
    exchange: &str,
    broker: &Broker,
    queue: &str,
) {
    reset_outbox(db, None).await;
    let owner = "bench-breakdown";
    let (mut claim, mut clone, mut publish, mut mark) = (
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
    );
    let started = Instant::now();
    loop {
        let t = Instant::now();
        let leased = db
            .store
            .claim_unpublished(
                owner,
                Duration::ZERO,
                Duration::from_secs(600),
                batch as i64,
            )
            .await
            .expect("claim");
        claim += t.elapsed();
        if leased.is_empty() {
            break;
        }
        let t = Instant::now();
        let events: Vec<OutboundEvent> = leased.iter().map(|p| p.event.clone()).collect();
        clone += t.elapsed();
        let t = Instant::now();
        let results = publisher.publish_batch(&events).await;
        publish += t.elapsed();
        assert!(results.iter().all(Result::is_ok));
        let ids: Vec<i64> = leased.iter().filter_map(|p| p.id.serial()).collect();
        let t = Instant::now();
        db.store.mark_published(&ids, owner).await.expect("mark");
        mark += t.elapsed();
    }
    let total = started.elapsed();
    purge(broker, queue).await;
    let t = Instant::now();
    let prepared = Bare::messages(outbound, exchange);
    let signing = t.elapsed();
    drop(prepared);
    let t = Instant::now();
    for event in outbound {
        std::hint::black_box(contract::envelope::signed_job_id(&event.body));
    }
    let job_id_parse = t.elapsed();
    println!(
        "breakdown of one relay drain ({total:.2?}): claim {claim:.2?}, clone {clone:.2?}, \
         publish_batch (sign + send + confirm) {publish:.2?}, mark {mark:.2?}; \
         signing + headers alone {signing:.2?} (parsing the jobId out of every body instead: {job_id_parse:.2?})"
    );
}

/// CPU seconds used so far by this process, by PostgreSQL's processes and by RabbitMQ's
/// (`beam.smp`), from `/proc` (Linux; zero elsewhere). Processes that ended meanwhile (a
/// PostgreSQL backend closed between two readings) are not counted.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    this: f64,
    postgres: f64,
    rabbitmq: f64,
}

impl Cpu {
    fn now() -> Cpu {
        let mut cpu = Cpu::default();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return cpu;
        };
        let own = std::process::id().to_string();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ...`: comm may hold spaces; fields count from after its ')'.
            let Some((head, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let comm = head.split_once('(').map_or("", |(_, c)| c);
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // utime and stime are fields 14 and 15 of stat(5), 12 and 13 after the ')'.
            let ticks = |i: usize| {
                fields
                    .get(i)
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            let seconds = (ticks(11) + ticks(12)) / 100.0;
            if pid == own {
                cpu.this += seconds;
            } else if comm == "postgres" {
                cpu.postgres += seconds;
            } else if comm == "beam.smp" {
                cpu.rabbitmq += seconds;
            }
        }
        cpu
    }

    fn since(self, before: Cpu) -> Cpu {
        Cpu {
            this: self.this - before.this,
            postgres: self.postgres - before.postgres,
            rabbitmq: self.rabbitmq - before.rabbitmq,
        }
    }
}

impl std::fmt::Display for Cpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cpu: bench {:.2} s, postgres {:.2} s, rabbitmq {:.2} s",
            self.this, self.postgres, self.rabbitmq
        )
    }
}
