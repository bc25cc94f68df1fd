//! The caller's admission ([`engine::Admission`]) before each datasource's read, against the
//! real server: a datasource waits, unstarted, until admitted, holds its permit for exactly its
//! read, and a graceful stop or the job's timeout ends its wait.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine::{
    Admission, DatasourceEnd, EngineConfig, EngineError, Observer, Permit, TimeLimit, Watch,
};
use futures_util::future::BoxFuture;
use serde_json::json;
use support::harness::{engine_for, job};
use support::TestDb;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Admits `ledger` when the test adds a permit to its semaphore; counts the permits alive.
struct Gate {
    open: Arc<Semaphore>,
    alive: Arc<AtomicU32>,
}

struct Held(Arc<AtomicU32>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Admission for Gate {
    fn admit<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Permit> {
        Box::pin(async move {
            self.open.acquire().await.expect("open").forget();
            self.alive.fetch_add(1, Ordering::SeqCst);
            Box::new(Held(self.alive.clone())) as Permit
        })
    }
}

#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl Observer for Seen {
    fn started(&self, datasource: &str) {
        self.0.lock().unwrap().push(format!("started {datasource}"));
    }
    fn progress(&self, _: &str, _: u64) {}
    fn ended(&self, datasource: &str, end: &DatasourceEnd<'_>) {
        let status = end.status();
        self.0
            .lock()
            .unwrap()
            .push(format!("ended {datasource} {}", status.as_str()));
    }
}

fn seen(seen: &Seen) -> Vec<String> {
    seen.0.lock().unwrap().clone()
}

struct Setup {
    db: TestDb,
    gate: Arc<Gate>,
    seen: Arc<Seen>,
    graceful: CancellationToken,
}

async fn setup() -> Setup {
    let db = TestDb::create().await;
    sqlx::raw_sql("CREATE TABLE payments AS SELECT 1 AS id")
        .execute(&db.pool)
        .await
        .expect("fixture");
    Setup {
        db,
        gate: Arc::new(Gate {
            open: Arc::new(Semaphore::new(0)),
            alive: Arc::new(AtomicU32::new(0)),
        }),
        seen: Arc::new(Seen::default()),
        graceful: CancellationToken::new(),
    }
}

impl Setup {
    async fn extract(&self, timeout: Duration) -> Result<serde_json::Value, EngineError> {
        let engine = engine_for(&[("ledger", &self.db)], EngineConfig::default());
        let message = job(json!({"mappedFields": {"ledger": {"payments": ["id"]}}}));
        let watch = Watch {
            observer: self.seen.clone(),
            graceful: self.graceful.clone(),
            admission: self.gate.clone(),
        };
        let extraction = engine
            .extract_within(
                &message.mapped_fields,
                &message.filters,
                TimeLimit::fresh(timeout),
                watch,
            )
            .await?;
        Ok(serde_json::from_slice(&extraction.plaintext).expect("JSON"))
    }
}

#[tokio::test]
async fn a_datasource_waits_unstarted_until_admitted_and_holds_its_permit_for_its_read() {
    let setup = setup().await;
    let document = {
        let extraction = setup.extract(Duration::from_secs(30));
        tokio::pin!(extraction);
        // Not admitted: the extraction waits, its datasource not started.
        let waited = tokio::time::timeout(Duration::from_millis(300), &mut extraction).await;
        assert!(waited.is_err(), "it waits for its admission");
        assert!(seen(&setup.seen).is_empty(), "{:?}", seen(&setup.seen));

        setup.gate.open.add_permits(1);
        extraction.await.expect("read once admitted")
    };
    assert_eq!(document["ledger"]["payments"][0]["id"], 1);
    assert_eq!(
        seen(&setup.seen),
        ["started ledger", "ended ledger SUCCEEDED"]
    );
    assert_eq!(
        setup.gate.alive.load(Ordering::SeqCst),
        0,
        "the permit was dropped"
    );
    setup.db.drop().await;
}

#[tokio::test]
async fn a_graceful_stop_ends_a_waiting_datasource_unstarted() {
    let setup = setup().await;
    let graceful = setup.graceful.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        graceful.cancel();
    });
    let ended = setup.extract(Duration::from_secs(30)).await;
    assert!(matches!(ended, Err(EngineError::Canceled)), "{ended:?}");
    assert_eq!(seen(&setup.seen), ["ended ledger CANCELED"]);
    setup.db.drop().await;
}

#[tokio::test]
async fn the_wait_counts_toward_the_jobs_timeout() {
    let setup = setup().await;
    let ended = setup.extract(Duration::from_millis(500)).await;
    assert!(matches!(ended, Err(EngineError::Timeout(_))), "{ended:?}");
    assert!(seen(&setup.seen).is_empty(), "never started");
    setup.db.drop().await;
}
