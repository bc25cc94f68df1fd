//! Shared helpers of the repairer's integration tests: a fresh migrated database per test on the
//! real local PostgreSQL, a per-test exchange and queues on the real local RabbitMQ, recorded
//! terminal events, and checks of what a consumer receives.
//!
//! Servers: `TEST_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`) and
//! `TEST_AMQP_URI` (default `amqp://guest:guest@127.0.0.1:5672/%2f`). A server that cannot be
//! reached fails the test with a message saying so: tests never skip a missing dependency.
//!
//! Every test creates its own database (`fetcher_test_<uuid>`), exchange and queues
//! (`repairer-test.<kind>.<uuid>`) and removes them at its end; a test that panics first removes
//! them from `Drop`, on a thread of its own.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use contract::envelope::{verify, HeaderValue, Route, SignatureHeaders, VerifyPolicy};
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, StoredResult, TerminalStatus};
use contract::Redacted;
use crypto::HmacKey;
use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicCancelOptions, BasicConsumeOptions, ExchangeDeclareOptions, ExchangeDeleteOptions,
    QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{Channel, Connection, ConnectionProperties, Consumer, ExchangeKind};
use outbox::{Recorded, Store, TerminalOutcome, TerminalRecord};
use publisher::{AmqpUri, Publisher, PublisherConfig};
use repairer::RepairerConfig;
use serde_json::{Map, Value};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection as _, PgConnection, PgPool, Row};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------------------------

/// The server used when `TEST_DATABASE_URL` is unset.
const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// How long to keep trying a server that refuses connections (it may be starting).
const CONNECT_PATIENCE: Duration = Duration::from_secs(5);

/// A database created for one test and brought to the Worker's schema. Call [`TestDb::drop`] at
/// the end of the test; a test that panics first never gets there, and then `Drop` removes the
/// database on a thread of its own.
pub struct TestDb {
    pub name: String,
    /// A store on the database (a pool of at most 8 connections).
    pub store: Store,
    options: PgConnectOptions,
    admin: PgConnectOptions,
    extra: Vec<Store>,
    dropped: bool,
}

impl TestDb {
    pub async fn migrated() -> TestDb {
        let url =
            std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned());
        let admin = PgConnectOptions::from_str(&url)
            .unwrap_or_else(|e| panic!("TEST_DATABASE_URL is not a PostgreSQL URL: {e}"))
            .disable_statement_logging();
        let name = format!("fetcher_test_{}", Uuid::new_v4().simple());
        let server = connect_admin(&admin).await;
        sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\""))
            .execute(&server)
            .await
            .unwrap_or_else(|e| panic!("cannot create test database {name}: {e}"));
        server.close().await;

        let options = admin.clone().database(&name);
        let db = TestDb {
            store: Store::new(pool(&options, 8).await),
            name,
            options,
            admin,
            extra: Vec::new(),
            dropped: false,
        };
        schema::migrate(db.pool())
            .await
            .unwrap_or_else(|e| panic!("migrating {} failed: {e}", db.name));
        db
    }

    pub fn pool(&self) -> &PgPool {
        self.store.pool()
    }

    /// Another store on the same database with a pool of its own (another Worker process).
    pub async fn another_store(&mut self, connections: u32) -> Store {
        let store = Store::new(pool(&self.options, connections).await);
        self.extra.push(store.clone());
        store
    }

    /// Closes the pools and drops the database, ending any connection still open on it.
    pub async fn drop(mut self) {
        for store in &self.extra {
            store.pool().close().await;
        }
        self.store.pool().close().await;
        let server = connect_admin(&self.admin).await;
        sqlx::raw_sql(&drop_statement(&self.name))
            .execute(&server)
            .await
            .unwrap_or_else(|e| panic!("cannot drop test database {}: {e}", self.name));
        server.close().await;
        self.dropped = true;
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        // The test panicked before `drop(...).await`. This may run inside the test's runtime,
        // which cannot be blocked on, so the cleanup gets a thread and a runtime of its own.
        // Best effort: a failure here must not turn one panic into an abort.
        let admin = self.admin.clone();
        let statement = drop_statement(&self.name);
        let cleanup = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if let Ok(mut conn) = PgConnection::connect_with(&admin).await {
                    let _ = sqlx::raw_sql(&statement).execute(&mut conn).await;
                    let _ = conn.close().await;
                }
            });
        });
        let _ = cleanup.join();
    }
}

async fn pool(options: &PgConnectOptions, connections: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options.clone())
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the test database: {e}"))
}

fn drop_statement(name: &str) -> String {
    format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")
}

/// One connection to the administrative database, retrying for a few seconds, or a failed test
/// with a message that says what to start.
async fn connect_admin(admin: &PgConnectOptions) -> PgPool {
    let started = Instant::now();
    loop {
        let attempt = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(admin.clone())
            .await;
        match attempt {
            Ok(server) => return server,
            Err(_) if started.elapsed() < CONNECT_PATIENCE => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(error) => panic!(
                "PostgreSQL for the integration tests is not reachable at {}:{} ({error}). \
                 Start it with `scripts/services.sh postgres`, or set TEST_DATABASE_URL.",
                admin.get_host(),
                admin.get_port(),
            ),
        }
    }
}

/// One outbox row as stored.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    pub id: i64,
    pub ce_id: String,
    pub body: Vec<u8>,
    pub attempts: i32,
    pub published_at: Option<DateTime<Utc>>,
    pub next_attempt_at: DateTime<Utc>,
    pub leased_by: Option<String>,
    pub lease_until: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// Every outbox row, by id.
pub async fn outbox_rows(pool: &PgPool) -> Vec<OutboxRow> {
    sqlx::query(
        "SELECT id, ce_id, body, attempts, published_at, next_attempt_at, leased_by,
                lease_until, last_error
         FROM outbox ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .expect("read outbox")
    .iter()
    .map(|row| OutboxRow {
        id: row.get("id"),
        ce_id: row.get("ce_id"),
        body: row.get("body"),
        attempts: row.get("attempts"),
        published_at: row.get("published_at"),
        next_attempt_at: row.get("next_attempt_at"),
        leased_by: row.get("leased_by"),
        lease_until: row.get("lease_until"),
        last_error: row.get("last_error"),
    })
    .collect()
}

/// How many outbox rows are not published.
pub async fn unpublished_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL")
        .fetch_one(pool)
        .await
        .expect("count unpublished")
}

/// The database's clock (every lease and backoff is computed with it).
pub async fn db_now(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT now()")
        .fetch_one(pool)
        .await
        .expect("now()")
}

/// Moves every outbox row's creation `by` into the past.
pub async fn age_outbox(pool: &PgPool, by: Duration) {
    sqlx::query("UPDATE outbox SET created_at = created_at - make_interval(secs => $1)")
        .bind(by.as_secs_f64())
        .execute(pool)
        .await
        .expect("age outbox");
}

/// Makes every unpublished row due now (ends its backoff).
pub async fn make_due(pool: &PgPool) {
    sqlx::query("UPDATE outbox SET next_attempt_at = now() WHERE published_at IS NULL")
        .execute(pool)
        .await
        .expect("make due");
}

/// Waits, polling the database, until `pending` rows are unpublished; panics after `within`.
/// Returns how long it took.
pub async fn wait_unpublished(pool: &PgPool, pending: i64, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let left = unpublished_count(pool).await;
        if left == pending {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{left} rows still unpublished after {within:?} (waiting for {pending})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Recorded events
// ---------------------------------------------------------------------------------------------

/// `STREAMING_CLOUDEVENTS_SOURCE` of the test events.
pub const SOURCE: &str = "//lerian/fetcher/repairer-test";

/// The publisher name the events are recorded for (the Worker that would publish them first).
pub const RECORDER: &str = "worker-that-recorded";

/// One terminal event recorded through `Store::record_terminal`.
#[derive(Debug, Clone)]
pub struct RecordedEvent {
    pub outbox_id: i64,
    pub job_id: Uuid,
    pub event: OutboundEvent,
}

/// What to record.
#[derive(Debug, Clone, Copy)]
pub struct Spec<'a> {
    pub status: TerminalStatus,
    pub tenant: Option<&'a str>,
    pub request_id: Option<&'a str>,
}

/// The `i`th of a varied mix: completed and failed, with tenants and without, with a request id
/// and without.
pub fn mixed(i: usize) -> Spec<'static> {
    Spec {
        status: if i.is_multiple_of(2) {
            TerminalStatus::Completed
        } else {
            TerminalStatus::Failed
        },
        tenant: match i % 3 {
            0 => None,
            1 => Some("acme"),
            _ => Some("globex-tenant-7"),
        },
        request_id: match i % 5 {
            0 => None,
            1 => Some(""),
            _ => Some("req-9c1e"),
        },
    }
}

/// The metadata of the test jobs.
pub fn metadata(i: usize) -> Map<String, Value> {
    let mut metadata = Map::new();
    metadata.insert("source".into(), Value::String("payments".into()));
    metadata.insert("correlationId".into(), Value::String(format!("run-{i}")));
    metadata
}

/// The outcome and frozen event of a new job.
pub fn outcome(job_id: Uuid, i: usize, spec: Spec<'_>) -> (TerminalOutcome, OutboundEvent) {
    let attributes =
        CloudEventAttributes::new(spec.status, job_id, SOURCE, spec.tenant, Utc::now());
    let request_id = spec.request_id.map(str::to_owned);
    match spec.status {
        TerminalStatus::Completed => {
            let result = StoredResult {
                path: format!("external-data/{job_id}.json"),
                size_bytes: 184_320 + i as u64,
                row_count: 1204,
                hmac: "9f1c".repeat(16),
            };
            let outcome = Outcome::Completed {
                result: &result,
                execution_time_ms: 8421,
                completed_at: Utc::now(),
            };
            let event = OutboundEvent::new(job_id, &metadata(i), &outcome, attributes, request_id)
                .expect("event body");
            (TerminalOutcome::Completed { result }, event)
        }
        TerminalStatus::Failed => {
            let error = Redacted::new("failed to connect to datasource: dial tcp 10.1.2.3:5432");
            let outcome = Outcome::Failed { error: &error };
            let event = OutboundEvent::new(job_id, &metadata(i), &outcome, attributes, request_id)
                .expect("event body");
            (TerminalOutcome::Failed { error }, event)
        }
    }
}

/// Records a terminal event of a job never claimed (`owner: None`, so the job row is created),
/// leased to [`RECORDER`] for `lease` (zero: free for the repairer at once).
pub async fn record(store: &Store, i: usize, spec: Spec<'_>, lease: Duration) -> RecordedEvent {
    let job_id = Uuid::new_v4();
    let (outcome, event) = outcome(job_id, i, spec);
    let recorded = store
        .record_terminal(&TerminalRecord {
            job_id,
            owner: None,
            tenant: spec.tenant,
            outcome,
            event: &event,
            publisher: RECORDER,
            lease,
        })
        .await
        .expect("record terminal");
    match recorded {
        Recorded::Inserted { outbox_id } => RecordedEvent {
            outbox_id,
            job_id,
            event,
        },
        other => panic!("not recorded: {other:?}"),
    }
}

/// Records `n` events, `spec(i)` each, `concurrency` at a time; ordered by outbox id.
pub async fn record_many(
    store: &Store,
    n: usize,
    concurrency: usize,
    spec: fn(usize) -> Spec<'static>,
    lease: Duration,
) -> Vec<RecordedEvent> {
    let recorded = futures_util::stream::iter(0..n)
        .map(|i| record(store, i, spec(i), lease))
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await;
    let mut recorded = recorded;
    recorded.sort_by_key(|r| r.outbox_id);
    recorded
}

/// Recorded events by ce-id.
pub fn by_ce_id(recorded: &[RecordedEvent]) -> HashMap<String, &RecordedEvent> {
    recorded
        .iter()
        .map(|r| (r.event.ce_id().to_owned(), r))
        .collect()
}

/// A repairer configuration for tests: no grace, a short interval, leases no test outlives.
pub fn config(owner: &str, batch: i64) -> RepairerConfig {
    let mut config = RepairerConfig::new(owner);
    config.interval = Duration::from_millis(200);
    config.batch = batch;
    config.grace = Duration::ZERO;
    config.lease = Duration::from_secs(60);
    config
}

// ---------------------------------------------------------------------------------------------
// RabbitMQ
// ---------------------------------------------------------------------------------------------

pub const DEFAULT_AMQP_URI: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// `TEST_AMQP_URI`, or the local broker.
pub fn amqp_uri() -> String {
    std::env::var("TEST_AMQP_URI").unwrap_or_else(|_| DEFAULT_AMQP_URI.to_owned())
}

/// The external HMAC key of the tests (events are signed with it).
pub fn key() -> HmacKey {
    HmacKey::from_bytes([0x5a; 32])
}

/// A publisher for `exchange` on the test broker, with short timeouts.
pub fn publisher(exchange: &str) -> Arc<Publisher> {
    let mut config = PublisherConfig::new(AmqpUri::new(amqp_uri()), exchange);
    config.confirm_timeout = Duration::from_secs(5);
    config.connect_timeout = Duration::from_secs(2);
    Arc::new(Publisher::new(config, key()).expect("publisher config"))
}

/// A unique name for this test's exchange or queue.
pub fn unique(kind: &str) -> String {
    format!("repairer-test.{kind}.{}", Uuid::new_v4().simple())
}

/// What a test created on the broker, deleted by [`Broker::close`] (or by `Drop` after a panic).
#[derive(Default)]
struct Created {
    exchanges: Vec<String>,
    queues: Vec<String>,
}

/// A test-side connection for declaring, binding, consuming and cleaning up.
pub struct Broker {
    pub connection: Connection,
    pub channel: Channel,
    created: Mutex<Created>,
    closed: bool,
}

impl Broker {
    /// Connects to the test broker; a broker that cannot be reached fails the test loudly.
    pub async fn connect() -> Broker {
        let (connection, channel) = open().await;
        Broker {
            connection,
            channel,
            created: Mutex::new(Created::default()),
            closed: false,
        }
    }

    /// Closes the connection but keeps what the test created (before stopping the broker).
    #[allow(dead_code)] // Used by `tests/broker_outage.rs`.
    pub async fn disconnect(&self) {
        let _ = self.connection.close(200, "OK".into()).await;
    }

    /// Opens a new connection, for a broker that was restarted.
    #[allow(dead_code)] // Used by `tests/broker_outage.rs`.
    pub async fn reconnect(&mut self) {
        let (connection, channel) = open().await;
        self.connection = connection;
        self.channel = channel;
    }

    fn created(&self) -> std::sync::MutexGuard<'_, Created> {
        self.created.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Declares the topic exchange `exchange` (durable, as the publisher declares it) and
    /// deletes it at the end of the test.
    pub async fn declare_exchange(&self, exchange: &str) {
        self.channel
            .exchange_declare(
                exchange.into(),
                ExchangeKind::Topic,
                ExchangeDeclareOptions {
                    durable: true,
                    ..ExchangeDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("declare exchange");
        self.track_exchange(exchange);
    }

    /// Deletes `exchange` at the end of the test (one the publisher declared).
    pub fn track_exchange(&self, exchange: &str) {
        let mut created = self.created();
        if !created.exchanges.iter().any(|e| e == exchange) {
            created.exchanges.push(exchange.to_owned());
        }
    }

    /// Declares a durable queue bound to `exchange` with `pattern`. It also expires after 10 idle
    /// minutes, so even a test killed outright leaves nothing behind for long.
    pub async fn bound_queue(&self, exchange: &str, pattern: &str) -> String {
        let queue = unique("queue");
        let mut arguments = FieldTable::default();
        arguments.insert("x-expires".into(), AMQPValue::LongInt(600_000));
        self.channel
            .queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                arguments,
            )
            .await
            .expect("declare queue");
        self.created().queues.push(queue.clone());
        self.bind(&queue, exchange, pattern).await;
        queue
    }

    pub async fn bind(&self, queue: &str, exchange: &str, pattern: &str) {
        self.channel
            .queue_bind(
                queue.into(),
                exchange.into(),
                pattern.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind queue");
    }

    /// Starts consuming `queue` (auto-ack).
    pub async fn consume(&self, queue: &str) -> Consumer {
        self.channel
            .basic_consume(
                queue.into(),
                ShortString::from(format!("consumer-{}", Uuid::new_v4().simple())),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("consume")
    }

    /// Stops `consumer`.
    pub async fn cancel(&self, consumer: &Consumer) {
        self.channel
            .basic_cancel(consumer.tag(), BasicCancelOptions::default())
            .await
            .expect("cancel consumer");
    }

    /// Receives exactly `count` messages from `queue` (auto-ack), failing after `within`.
    pub async fn receive(&self, queue: &str, count: usize, within: Duration) -> Vec<Delivery> {
        let mut consumer = self.consume(queue).await;
        let received = collect(&mut consumer, count, within, Duration::ZERO).await;
        self.cancel(&consumer).await;
        received
    }

    /// How many messages wait in `queue`.
    pub async fn depth(&self, queue: &str) -> u32 {
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("passive declare")
            .message_count()
    }

    pub async fn delete_exchange(&self, exchange: &str) {
        self.channel
            .exchange_delete(exchange.into(), ExchangeDeleteOptions::default())
            .await
            .expect("delete exchange");
    }

    /// Deletes everything the test created, then closes the connection.
    pub async fn close(mut self) {
        let created = std::mem::take(&mut *self.created());
        for queue in &created.queues {
            self.channel
                .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
                .await
                .unwrap_or_else(|e| panic!("cannot delete queue {queue}: {e}"));
        }
        for exchange in &created.exchanges {
            self.delete_exchange(exchange).await;
        }
        let _ = self.connection.close(200, "OK".into()).await;
        self.closed = true;
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        // The test panicked first: clean up on a thread and a runtime of our own, best effort.
        let created = std::mem::take(&mut *self.created());
        let cleanup = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                // The broker may be down for a moment (a test that restarts it): retry a while,
                // or the exchange outlives the test (queues expire on their own).
                let mut connection = None;
                for _ in 0..30 {
                    let properties = ConnectionProperties::default();
                    match Connection::connect(&amqp_uri(), properties).await {
                        Ok(open) => {
                            connection = Some(open);
                            break;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                    }
                }
                let Some(connection) = connection else {
                    return;
                };
                if let Ok(channel) = connection.create_channel().await {
                    for queue in &created.queues {
                        let options = QueueDeleteOptions::default();
                        let _ = channel.queue_delete(queue.as_str().into(), options).await;
                    }
                    for exchange in &created.exchanges {
                        let options = ExchangeDeleteOptions::default();
                        let _ = channel
                            .exchange_delete(exchange.as_str().into(), options)
                            .await;
                    }
                }
                let _ = connection.close(200, "OK".into()).await;
            });
        });
        let _ = cleanup.join();
    }
}

async fn open() -> (Connection, Channel) {
    let connection = match Connection::connect(&amqp_uri(), ConnectionProperties::default()).await {
        Ok(connection) => connection,
        Err(error) => panic!(
            "RabbitMQ is unreachable ({error}). These tests need a real broker: start it, or \
             point TEST_AMQP_URI at one (default amqp://guest:***@127.0.0.1:5672/%2f)."
        ),
    };
    let channel = connection.create_channel().await.expect("test channel");
    (connection, channel)
}

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

/// The `ce-id` of a delivery.
pub fn ce_id(delivery: &Delivery) -> String {
    String::from_utf8(byte_array(delivery, "ce-id").to_vec()).expect("ce-id is UTF-8")
}

/// How many deliveries repeat a ce-id already received, and the distinct ce-ids.
pub fn duplicates(deliveries: &[Delivery]) -> (usize, HashMap<String, usize>) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for delivery in deliveries {
        *seen.entry(ce_id(delivery)).or_default() += 1;
    }
    let repeated = seen.values().map(|n| n - 1).sum();
    (repeated, seen)
}

/// A received header by exact name.
pub fn header<'a>(delivery: &'a Delivery, name: &str) -> &'a AMQPValue {
    delivery
        .properties
        .headers()
        .as_ref()
        .and_then(|headers| headers.inner().get(name))
        .unwrap_or_else(|| panic!("header {name:?} is missing"))
}

/// A received header that must be an AMQP long string.
pub fn long_string<'a>(delivery: &'a Delivery, name: &str) -> &'a [u8] {
    match header(delivery, name) {
        AMQPValue::LongString(value) => value.as_bytes(),
        other => panic!("header {name:?} must be a long string, got {other:?}"),
    }
}

/// A received header that must be an AMQP byte array.
pub fn byte_array<'a>(delivery: &'a Delivery, name: &str) -> &'a [u8] {
    match header(delivery, name) {
        AMQPValue::ByteArray(value) => value.as_slice(),
        other => panic!("header {name:?} must be a byte array, got {other:?}"),
    }
}

/// Asserts that `delivery` is `expected` as contract §8 publishes it on `exchange`: routing key,
/// properties, every `ce-*` header as a byte array, `X-Tenant-ID` and `X-Request-Id`, a v1
/// signature that verifies under the external key, and the frozen body bytes.
pub fn assert_delivered_as_recorded(delivery: &Delivery, expected: &OutboundEvent, exchange: &str) {
    let ce_id = expected.ce_id();
    assert_eq!(delivery.exchange.as_str(), exchange, "{ce_id}");
    assert_eq!(
        delivery.routing_key.as_str(),
        expected.routing_key(),
        "{ce_id}"
    );
    assert_eq!(
        delivery.data, expected.body,
        "{ce_id}: the frozen body bytes"
    );

    let properties = &delivery.properties;
    assert_eq!(*properties.delivery_mode(), Some(2), "{ce_id}: persistent");
    assert_eq!(
        properties.content_type().as_ref().map(ShortString::as_str),
        Some("application/json"),
        "{ce_id}"
    );
    assert_eq!(
        properties.message_id().as_ref().map(ShortString::as_str),
        Some(ce_id),
        "{ce_id}"
    );

    // CloudEvents binary mode: every attribute, each an AMQP byte array.
    let attributes = &expected.attributes;
    let status = attributes.status.as_str();
    let tenant = attributes.tenant.as_str();
    let expected_ce = [
        ("ce-specversion", "1.0"),
        ("ce-id", ce_id),
        ("ce-source", SOURCE),
        ("ce-type", attributes.status.ce_type()),
        ("ce-time", attributes.time.as_str()),
        ("ce-subject", attributes.subject.as_str()),
        ("ce-resourcetype", "job"),
        ("ce-eventtype", status),
        ("ce-schemaversion", "1.0.0"),
        ("ce-datacontenttype", "application/json"),
        ("ce-tenantid", tenant),
    ];
    for (name, value) in expected_ce {
        assert_eq!(
            byte_array(delivery, name),
            value.as_bytes(),
            "{ce_id}: {name}"
        );
    }
    assert_eq!(
        ce_id,
        format!("fetcher.job.{status}.{}", attributes.subject)
    );
    assert_eq!(
        long_string(delivery, "X-Tenant-ID"),
        tenant.as_bytes(),
        "{ce_id}"
    );
    let request_id = match expected.request_id.as_deref() {
        Some(id) if !id.is_empty() => id,
        _ => ce_id,
    };
    assert_eq!(
        long_string(delivery, "X-Request-Id"),
        request_id.as_bytes(),
        "{ce_id}"
    );

    // Contract §3: signed with the external key over where the message was published.
    assert_eq!(long_string(delivery, "signature-version"), b"v1", "{ce_id}");
    let signature = long_string(delivery, "x-message-signature");
    assert_eq!(signature.len(), 64, "{ce_id}");
    assert!(
        signature
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)),
        "{ce_id}: lowercase hex"
    );
    let headers = SignatureHeaders {
        signature: Some(HeaderValue::Text(signature)),
        timestamp: Some(HeaderValue::Text(long_string(delivery, "t"))),
        version: Some(HeaderValue::Text(long_string(
            delivery,
            "signature-version",
        ))),
    };
    let route = Route {
        tenant,
        exchange,
        routing_key: delivery.routing_key.as_str(),
    };
    let now = Utc::now().timestamp();
    let verified = verify(
        &headers,
        &route,
        &delivery.data,
        &VerifyPolicy::default(),
        now,
        |payload, hex| key().verify_hex(payload, hex),
    );
    assert!(verified.is_ok(), "{ce_id}: signature: {verified:?}");
    // And not under another key.
    let other = HmacKey::from_bytes([0x11; 32]);
    assert!(verify(
        &headers,
        &route,
        &delivery.data,
        &VerifyPolicy::default(),
        now,
        |payload, hex| other.verify_hex(payload, hex),
    )
    .is_err());
}
