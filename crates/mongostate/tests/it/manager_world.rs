//! What the `ManagerStore` tests share: a private database with the Manager's job indexes, the
//! store on it, and the job core's claims, records and events.

use std::time::Duration;

use chrono::Utc;
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, StoredResult};
use contract::lifecycle::Step;
use contract::Redacted;
use mongodb::bson::{doc, Document};
use mongodb::Client;
use mongostate::{ManagerConfig, ManagerStore, Store};
use outbox::{
    Claim, ClaimRequest, ControlRequest, Recorded, RowId, TerminalOutcome, TerminalRecord,
};
use serde_json::{Map, Value};
use testkit::manager::{Manager, NewJob, MARKER_KEYS};
use testkit::mongo::MongoDb;
use uuid::Uuid;

pub const SOURCE: &str = "//lerian/fetcher";
pub const LEASE: Duration = Duration::from_secs(60);

pub struct World {
    pub db: MongoDb,
    pub manager: Manager,
    pub store: ManagerStore,
}

impl World {
    pub async fn new() -> World {
        let db = MongoDb::create().await;
        let manager = Manager::new(db.db());
        manager.ensure_indexes().await;
        let store = manager_store(&db.client, &db.name);
        World { db, manager, store }
    }

    /// A new job of a request of its own (the Manager's unique `request_hash` index refuses
    /// two active jobs of one request).
    pub async fn job(&self) -> Uuid {
        let table = format!("public.orders_{}", Uuid::new_v4().simple());
        let job = NewJob {
            mapped_fields: doc! {"orders": {table: ["id", "total"]}},
            ..request()
        };
        self.manager
            .create_job(&job)
            .await
            .expect("the Manager creates the job")
    }

    pub async fn claim(&self, id: Uuid, owner: &str, lease: Duration) -> Claim {
        self.store
            .claim(&claim_request(id, owner, lease))
            .await
            .expect("claim")
    }

    pub async fn record(
        &self,
        id: Uuid,
        owner: Option<&str>,
        outcome: TerminalOutcome,
    ) -> Recorded {
        let event = event(id, &outcome);
        self.record_event(id, owner, outcome, &event).await
    }

    pub async fn record_event(
        &self,
        id: Uuid,
        owner: Option<&str>,
        outcome: TerminalOutcome,
        event: &OutboundEvent,
    ) -> Recorded {
        self.store
            .record_terminal(&terminal_record(id, owner, outcome, event))
            .await
            .expect("record")
    }

    pub async fn row(&self, id: RowId) -> Document {
        let RowId::Uuid(id) = id else {
            panic!("a Manager row has a UUID id")
        };
        self.store
            .store()
            .outbox_rows()
            .find_one(doc! {"id": id.hyphenated().to_string()})
            .await
            .expect("find the row")
            .expect("the row is committed")
    }
}

/// The store of the database `name` on `client`, as the Worker configures it.
pub fn manager_store(client: &Client, name: &str) -> ManagerStore {
    ManagerStore::new(
        Store::new(client.clone(), name),
        ManagerConfig {
            exchange: "fetcher.job.events".to_owned(),
            source: SOURCE.to_owned(),
        },
    )
}

/// The job core's claim of `id` for `owner`: no metadata, a message digest, request `req-1`.
pub fn claim_request(id: Uuid, owner: &str, lease: Duration) -> ClaimRequest<'_> {
    ClaimRequest {
        job_id: id,
        tenant: None,
        request_id: Some("req-1"),
        metadata: empty(),
        spec: None,
        message_sha256: Some(&[7; 32]),
        timeout_seconds: None,
        owner,
        lease,
        traceparent: None,
    }
}

/// The job core's end of `id` with `outcome` and its `event`, by `owner` (or no one), leased
/// to `publisher-1`: no metadata, no executions to close.
pub fn terminal_record<'a>(
    id: Uuid,
    owner: Option<&'a str>,
    outcome: TerminalOutcome,
    event: &'a OutboundEvent,
) -> TerminalRecord<'a> {
    TerminalRecord {
        job_id: id,
        owner,
        tenant: None,
        outcome,
        event,
        publisher: "publisher-1",
        lease: LEASE,
        leaves_object: false,
        metadata: empty(),
        executions: &[],
        close: None,
    }
}

/// The control API's request to take `step` on `job_id` (with a comment and a reason code).
pub fn control_request(job_id: Uuid, step: Step) -> ControlRequest<'static> {
    ControlRequest {
        job_id,
        tenant: None,
        step,
        comment: Some("wrong period"),
        reason_code: Some("OPS_1"),
        source: SOURCE,
        request_id: Some("req-api"),
        publisher: "api-1",
        lease: LEASE,
    }
}

/// No metadata, borrowed for as long as a request needs.
pub fn empty() -> &'static Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(Map::new)
}

pub fn request() -> NewJob {
    NewJob {
        mapped_fields: doc! {"orders": {"public.orders": ["id", "total"]}},
        filters: doc! {},
        metadata: doc! {"source": "tests"},
    }
}

pub fn completed() -> TerminalOutcome {
    TerminalOutcome::Completed {
        result: StoredResult {
            path: "results/job.json.enc".to_owned(),
            size_bytes: 42,
            row_count: 2,
            hmac: "ab".repeat(32),
        },
    }
}

pub fn failed(error: &str) -> TerminalOutcome {
    TerminalOutcome::Failed {
        error: Redacted::new(error),
    }
}

/// The event the job core builds for `outcome`.
pub fn event(id: Uuid, outcome: &TerminalOutcome) -> OutboundEvent {
    let attributes = CloudEventAttributes::new(outcome.status(), id, SOURCE, None, Utc::now());
    let body_outcome = match outcome {
        TerminalOutcome::Completed { result } => Outcome::Completed {
            result,
            execution_time_ms: 5,
            completed_at: Utc::now(),
        },
        TerminalOutcome::Failed { error } => Outcome::Failed { error },
    };
    let mut metadata = Map::new();
    metadata.insert("source".to_owned(), "tests".into());
    OutboundEvent::new(
        id,
        &metadata,
        &body_outcome,
        attributes,
        Some("req-1".to_owned()),
    )
    .expect("the event")
}

pub fn no_markers(stored: &Document) {
    let metadata = stored.get_document("metadata").expect("metadata stays");
    for key in MARKER_KEYS {
        assert!(!metadata.contains_key(key), "{key} left in {metadata:?}");
    }
}
