//! Shared helpers of the repairer's integration tests: a fresh migrated database per test on the
//! real local PostgreSQL and a per-test exchange and queues on the real local RabbitMQ (both from
//! `testkit`), recorded terminal events, and checks of what a consumer receives.
//!
//! Servers: `TEST_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`) and
//! `TEST_AMQP_URI` (default `amqp://guest:guest@127.0.0.1:5672/%2f`). A server that cannot be
//! reached fails the test with a message saying so: tests never skip a missing dependency.
//!
//! Every test creates its own database (`fetcher_test_<uuid>`), exchange
//! (`repairer-test.exchange.<uuid>`) and queues (`<exchange>.queue.<uuid>`) and removes them at
//! its end; a test that panics first removes them from `Drop`, on a thread of its own.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use contract::envelope::{verify, HeaderValue, Route, SignatureHeaders, VerifyPolicy};
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, StoredResult, TerminalStatus};
use contract::Redacted;
use crypto::HmacKey;
use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::types::ShortString;
use outbox::{Claim, ClaimRequest, Recorded, Store, TerminalOutcome, TerminalRecord};
use publisher::{AmqpUri, Publisher, PublisherConfig};
use repairer::RepairerConfig;
use serde_json::{Map, Value};
use sqlx::{PgPool, Row};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------------------------

/// A database created for one test and brought to the Worker's schema, with a store on it.
/// Call [`TestDb::drop`] at the end of the test; a test that panics first never gets there, and
/// then `Drop` removes the database on a thread of its own.
pub struct TestDb {
    /// A store on the database (a pool of at most 8 connections).
    pub store: Store,
    db: testkit::pg::TestDb,
}

impl TestDb {
    pub async fn migrated() -> TestDb {
        let db = testkit::pg::TestDb::migrated_with(8).await;
        let store = Store::new(db.pool.clone());
        TestDb { store, db }
    }

    pub fn pool(&self) -> &PgPool {
        self.store.pool()
    }

    /// Another store on the same database with a pool of its own (another Worker process).
    pub async fn another_store(&mut self, connections: u32) -> Store {
        Store::new(self.db.pool_with(connections).await)
    }

    /// Closes the pools and drops the database, ending any connection still open on it.
    pub async fn drop(self) {
        self.db.drop().await;
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

/// Claims a new job for [`RECORDER`], as a Worker does before it runs one: only the claim's
/// holder may record a run's outcome (the lifecycle machine ends no unclaimed job `completed`).
pub async fn claim(store: &Store, job_id: Uuid, tenant: Option<&str>) {
    let metadata = Map::new();
    let claim = store
        .claim(&ClaimRequest {
            job_id,
            tenant,
            request_id: None,
            metadata: &metadata,
            spec: None,
            message_sha256: None,
            timeout_seconds: None,
            owner: RECORDER,
            lease: Duration::from_secs(600),
            traceparent: None,
        })
        .await
        .expect("claim");
    assert!(matches!(claim, Claim::Acquired { .. }), "{claim:?}");
}

/// Records a terminal event of a job claimed by [`RECORDER`], its outbox row leased to it for
/// `lease` (zero: free for the repairer at once).
pub async fn record(store: &Store, i: usize, spec: Spec<'_>, lease: Duration) -> RecordedEvent {
    let job_id = Uuid::new_v4();
    let (outcome, event) = outcome(job_id, i, spec);
    claim(store, job_id, spec.tenant).await;
    let recorded = store
        .record_terminal(&TerminalRecord {
            job_id,
            owner: Some(RECORDER),
            tenant: spec.tenant,
            outcome,
            event: &event,
            metadata: &Default::default(),
            leaves_object: false,
            publisher: RECORDER,
            lease,
            executions: &[],
            close: Some(outbox::Close::CANCELED),
        })
        .await
        .expect("record terminal");
    match recorded {
        Recorded::Inserted { outbox_id, .. } => RecordedEvent {
            outbox_id: outbox_id.serial().expect("a PostgreSQL row"),
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

/// What a relay test starts from: its database, a test-side broker connection, the name of a
/// fresh exchange, and a publisher for it that declared it (the broker deletes it at the end).
pub async fn start() -> (TestDb, Broker, String, Arc<Publisher>) {
    let db = TestDb::migrated().await;
    let broker = Broker::connect().await;
    let exchange = unique("exchange");
    let publisher = publisher(&exchange);
    publisher
        .declare_exchange()
        .await
        .expect("declare exchange");
    broker.track_exchange(&exchange);
    (db, broker, exchange, publisher)
}

/// Ends what [`start`] began: closes the publisher, deletes what the test created on the broker
/// and drops the database.
pub async fn finish(publisher: Arc<Publisher>, broker: Broker, db: TestDb) {
    publisher.close().await;
    broker.close().await;
    db.drop().await;
}

// ---------------------------------------------------------------------------------------------
// RabbitMQ
// ---------------------------------------------------------------------------------------------

// Not every binary that includes this module (tests, bench) uses every re-export.
#[allow(unused_imports)]
pub use testkit::amqp::{amqp_uri, byte_array, collect, long_string, Broker};

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

/// A unique name for this test's exchange or queue: `repairer-test.<kind>.<uuid>`.
pub fn unique(kind: &str) -> String {
    testkit::amqp::unique("repairer-test", kind)
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

/// Asserts that every delivery is one of `recorded`, delivered on `exchange` exactly as it was
/// recorded ([`assert_delivered_as_recorded`]).
pub fn assert_all_delivered_as_recorded(
    deliveries: &[Delivery],
    recorded: &[RecordedEvent],
    exchange: &str,
) {
    let expected = by_ce_id(recorded);
    for delivery in deliveries {
        let ce_id = ce_id(delivery);
        let recorded = expected
            .get(&ce_id)
            .unwrap_or_else(|| panic!("an event that was not recorded: {ce_id}"));
        assert_delivered_as_recorded(delivery, &recorded.event, exchange);
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
        ("ce-type", attributes.status.ce_type(false)),
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
        |payload, hex| key().verify_hex_parts(payload, hex),
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
        |payload, hex| other.verify_hex_parts(payload, hex),
    )
    .is_err());
}
