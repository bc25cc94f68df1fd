//! A fresh, migrated database per test on the real local PostgreSQL (`testkit`'s `TestDb` with
//! the store under test on it), and job/event builders.
//!
//! The server is `TEST_DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/postgres`
//! (what `scripts/services.sh postgres` provides). A server that cannot be reached fails the
//! test with a message saying so: tests never skip a missing dependency.

use std::time::Duration;

use std::collections::BTreeMap;

use chrono::Utc;
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, StoredResult, TerminalStatus};
use contract::lifecycle::Step;
use contract::message::MappedFields;
use contract::Redacted;
use outbox::{
    Claim, ClaimRequest, ControlRequest, JobSpec, Recorded, Store, TerminalOutcome, TerminalRecord,
};
use serde_json::{Map, Value};
use sqlx::PgPool;
use uuid::Uuid;

/// `STREAMING_CLOUDEVENTS_SOURCE` of the test events.
pub const SOURCE: &str = "//lerian/fetcher/test";

/// A lease no test outlives.
pub const LONG: Duration = Duration::from_secs(3600);

/// A database created for one test, named `fetcher_test_<uuid>` and brought to the Worker's
/// schema. Call [`TestDb::drop`] at the end of the test; a test that panics first never gets
/// there, and then `Drop` removes the database on a thread of its own.
pub struct TestDb {
    /// The store under test (a pool of at most 5 connections).
    pub store: Store,
    db: testkit::pg::TestDb,
}

impl TestDb {
    pub async fn migrated() -> TestDb {
        let db = testkit::pg::TestDb::migrated().await;
        TestDb {
            store: Store::new(db.pool.clone()),
            db,
        }
    }

    pub fn pool(&self) -> &PgPool {
        self.store.pool()
    }

    /// Another store on the same database, with a pool of `connections`: concurrent callers
    /// that really run at the same time.
    pub async fn store_with(&self, connections: u32) -> Store {
        Store::new(self.db.pool_with(connections).await)
    }

    /// Closes the pools and drops the database, ending any connection still open on it.
    pub async fn drop(self) {
        self.db.drop().await;
    }
}

/// `{"source": "payments"}`.
pub fn metadata() -> Map<String, Value> {
    let mut metadata = Map::new();
    metadata.insert("source".into(), Value::String("payments".into()));
    metadata
}

/// A claim of `job_id` by `owner` for `lease`, single-tenant, with [`metadata`].
pub fn claim_request<'a>(
    job_id: Uuid,
    owner: &'a str,
    lease: Duration,
    metadata: &'a Map<String, Value>,
) -> ClaimRequest<'a> {
    ClaimRequest {
        job_id,
        tenant: None,
        request_id: Some("req-1"),
        metadata,
        spec: None,
        message_sha256: None,
        timeout_seconds: None,
        owner,
        lease,
        traceparent: None,
    }
}

/// Claims a new job for `owner`, asserting it is acquired.
pub async fn claimed(store: &Store, owner: &str) -> Uuid {
    let job_id = Uuid::new_v4();
    let metadata = metadata();
    let claim = store
        .claim(&claim_request(job_id, owner, LONG, &metadata))
        .await
        .expect("claim");
    assert_eq!(
        claim,
        Claim::Acquired {
            attempt: 1,
            running_for: Duration::ZERO
        }
    );
    job_id
}

/// A job's `mappedFields`: each of `datasources` reading each of `tables` (their `id`).
pub fn mapped(datasources: &[&str], tables: &[&str]) -> MappedFields {
    datasources
        .iter()
        .map(|name| {
            let tables = tables
                .iter()
                .map(|table| ((*table).to_owned(), vec!["id".to_owned()]))
                .collect::<BTreeMap<_, _>>();
            ((*name).to_owned(), tables)
        })
        .collect()
}

/// Claims `job_id` for `owner` (for [`LONG`]) with its spec: `mapped`, no filters.
pub async fn claim_with_spec(
    store: &Store,
    job_id: Uuid,
    owner: &str,
    mapped: &MappedFields,
) -> Claim {
    let metadata = metadata();
    let filters = Default::default();
    let request = ClaimRequest {
        spec: Some(JobSpec {
            mapped_fields: mapped,
            filters: &filters,
        }),
        ..claim_request(job_id, owner, LONG, &metadata)
    };
    store.claim(&request).await.expect("claim")
}

/// Claims a new job of `mapped` for `owner`, asserting it is acquired.
pub async fn claimed_of(store: &Store, owner: &str, mapped: &MappedFields) -> Uuid {
    let job_id = Uuid::new_v4();
    let claim = claim_with_spec(store, job_id, owner, mapped).await;
    assert!(matches!(claim, Claim::Acquired { .. }), "{claim:?}");
    job_id
}

/// The control API's request to take `step` on `job_id`, as publisher `api`: no comment, reason
/// code or request id.
pub fn control_request(job_id: Uuid, step: Step) -> ControlRequest<'static> {
    ControlRequest {
        job_id,
        tenant: None,
        step,
        comment: None,
        reason_code: None,
        source: SOURCE,
        request_id: None,
        publisher: "api",
        lease: LONG,
    }
}

/// The outcome and the frozen event of a completed job.
pub fn completed(job_id: Uuid) -> (TerminalOutcome, OutboundEvent) {
    let result = StoredResult {
        path: format!("external-data/{job_id}.json"),
        size_bytes: 184_320,
        row_count: 1204,
        hmac: "9f1c".repeat(16),
    };
    let outcome = Outcome::Completed {
        result: &result,
        execution_time_ms: 8421,
        completed_at: Utc::now(),
    };
    let event = event(job_id, &outcome);
    (TerminalOutcome::Completed { result }, event)
}

/// The outcome and the frozen event of a failed job.
pub fn failed(job_id: Uuid, message: &str) -> (TerminalOutcome, OutboundEvent) {
    let error = Redacted::new(message);
    let event = event(job_id, &Outcome::Failed { error: &error });
    (TerminalOutcome::Failed { error }, event)
}

fn event(job_id: Uuid, outcome: &Outcome<'_>) -> OutboundEvent {
    let attributes = CloudEventAttributes::new(outcome.status(), job_id, SOURCE, None, Utc::now());
    OutboundEvent::new(
        job_id,
        &metadata(),
        outcome,
        attributes,
        Some("req-1".into()),
    )
    .expect("event body")
}

/// Records `outcome` for a job `owner` (or no one) holds, leasing the event to `publisher`.
pub async fn record(
    store: &Store,
    job_id: Uuid,
    owner: Option<&str>,
    (outcome, event): (TerminalOutcome, OutboundEvent),
    publisher: &str,
    lease: Duration,
) -> Recorded {
    store
        .record_terminal(&TerminalRecord {
            job_id,
            owner,
            tenant: None,
            outcome,
            event: &event,
            metadata: &Default::default(),
            leaves_object: false,
            publisher,
            lease,
            executions: &[],
            close: Some(outbox::Close::CANCELED),
        })
        .await
        .expect("record terminal")
}

/// `n` failed jobs never claimed, each with an unpublished event leased to `publisher` for
/// `lease`; their outbox ids, ascending.
pub async fn unpublished(store: &Store, n: usize, publisher: &str, lease: Duration) -> Vec<i64> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let job_id = Uuid::new_v4();
        let recorded = record(
            store,
            job_id,
            None,
            failed(job_id, "invalid job message"),
            publisher,
            lease,
        )
        .await;
        match recorded {
            Recorded::Inserted { outbox_id, .. } => ids.push(outbox_id.serial().unwrap()),
            other => panic!("not recorded: {other:?}"),
        }
    }
    ids
}

/// Moves every outbox row's creation `by` into the past (past the relay's grace).
pub async fn age_outbox(pool: &PgPool, by: Duration) {
    sqlx::query("UPDATE outbox SET created_at = created_at - $1")
        .bind(by)
        .execute(pool)
        .await
        .expect("age outbox");
}

/// Ends every outbox lease.
pub async fn expire_outbox_leases(pool: &PgPool) {
    sqlx::query("UPDATE outbox SET lease_until = now() - interval '1 second'")
        .execute(pool)
        .await
        .expect("expire leases");
}

/// The status of `status` as a `TerminalStatus`, for readability in asserts.
pub fn terminal(status: &str) -> TerminalStatus {
    status.parse().expect("terminal status")
}
