//! A fresh, migrated database per test on the real local PostgreSQL, and job/event builders.
//!
//! The server is `TEST_DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/postgres`
//! (what `scripts/services.sh postgres` provides). A server that cannot be reached fails the
//! test with a message saying so: tests never skip a missing dependency.

use std::str::FromStr;
use std::time::{Duration, Instant};

use chrono::Utc;
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, StoredResult, TerminalStatus};
use contract::Redacted;
use outbox::{Claim, ClaimRequest, Recorded, Store, TerminalOutcome, TerminalRecord};
use serde_json::{Map, Value};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};
use uuid::Uuid;

/// The server used when `TEST_DATABASE_URL` is unset.
const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// How long to keep trying a server that refuses connections (it may be starting).
const CONNECT_PATIENCE: Duration = Duration::from_secs(5);

/// `STREAMING_CLOUDEVENTS_SOURCE` of the test events.
pub const SOURCE: &str = "//lerian/fetcher/test";

/// A lease no test outlives.
pub const LONG: Duration = Duration::from_secs(3600);

/// A database created for one test, named `fetcher_test_<uuid>` and brought to the Worker's
/// schema. Call [`TestDb::drop`] at the end of the test; a test that panics first never gets
/// there, and then `Drop` removes the database on a thread of its own.
pub struct TestDb {
    pub name: String,
    /// The store under test (a pool of at most 5 connections).
    pub store: Store,
    options: PgConnectOptions,
    admin: PgConnectOptions,
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
            store: Store::new(pool(&options, 5).await),
            name,
            options,
            admin,
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

    /// Another store on the same database, with a pool of `connections`: concurrent callers
    /// that really run at the same time.
    pub async fn store_with(&self, connections: u32) -> Store {
        Store::new(pool(&self.options, connections).await)
    }

    /// Closes the pool and drops the database, ending any connection still open on it.
    pub async fn drop(mut self) {
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
        owner,
        lease,
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
    assert_eq!(claim, Claim::Acquired { attempt: 1 });
    job_id
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
            publisher,
            lease,
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
            Recorded::Inserted { outbox_id } => ids.push(outbox_id),
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
