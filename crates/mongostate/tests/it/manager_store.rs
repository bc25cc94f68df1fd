//! `ManagerStore`: the job core's state port on jobs the Manager stand-in creates, read back as
//! the Manager's `GET` reads them, with the outbox rows a Go relay would publish.

use std::time::Duration;

use chrono::Utc;
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, StoredResult};
use contract::lifecycle::JobStatus;
use contract::Redacted;
use mongodb::bson::{doc, spec::BinarySubtype, Bson, Document};
use mongostate::outbox::{OutboxRow, RowStatus};
use mongostate::{outbox_event, ManagerConfig, ManagerStore, Store};
use outbox::{Claim, ClaimRequest, Lease, Recorded, RowId, TerminalOutcome, TerminalRecord};
use serde_json::Map;
use testkit::manager::{Manager, NewJob, MARKER_KEYS};
use testkit::mongo::MongoDb;
use uuid::Uuid;

const SOURCE: &str = "//lerian/fetcher";
const LEASE: Duration = Duration::from_secs(60);

struct World {
    db: MongoDb,
    manager: Manager,
    store: ManagerStore,
}

impl World {
    async fn new() -> World {
        let db = MongoDb::create().await;
        let manager = Manager::new(db.db());
        manager.ensure_indexes().await;
        let store = ManagerStore::new(
            Store::new(db.client.clone(), &db.name),
            ManagerConfig {
                exchange: "fetcher.job.events".to_owned(),
                source: SOURCE.to_owned(),
            },
        );
        World { db, manager, store }
    }

    /// A new job of a request of its own (the Manager's unique `request_hash` index refuses
    /// two active jobs of one request).
    async fn job(&self) -> Uuid {
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

    async fn claim(&self, id: Uuid, owner: &str, lease: Duration) -> Claim {
        let metadata = Map::new();
        self.store
            .claim(&ClaimRequest {
                job_id: id,
                tenant: None,
                request_id: Some("req-1"),
                metadata: &metadata,
                spec: None,
                message_sha256: Some(&[7; 32]),
                timeout_seconds: None,
                owner,
                lease,
            })
            .await
            .expect("claim")
    }

    async fn record(&self, id: Uuid, owner: Option<&str>, outcome: TerminalOutcome) -> Recorded {
        let event = event(id, &outcome);
        self.record_event(id, owner, outcome, &event).await
    }

    async fn record_event(
        &self,
        id: Uuid,
        owner: Option<&str>,
        outcome: TerminalOutcome,
        event: &OutboundEvent,
    ) -> Recorded {
        self.store
            .record_terminal(&TerminalRecord {
                job_id: id,
                owner,
                tenant: None,
                outcome,
                event,
                publisher: "publisher-1",
                lease: LEASE,
                leaves_object: false,
                metadata: &Map::new(),
                executions: &[],
                close: None,
            })
            .await
            .expect("record")
    }

    async fn row(&self, id: RowId) -> Document {
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

fn request() -> NewJob {
    NewJob {
        mapped_fields: doc! {"orders": {"public.orders": ["id", "total"]}},
        filters: doc! {},
        metadata: doc! {"source": "tests"},
    }
}

fn completed() -> TerminalOutcome {
    TerminalOutcome::Completed {
        result: StoredResult {
            path: "results/job.json.enc".to_owned(),
            size_bytes: 42,
            row_count: 2,
            hmac: "ab".repeat(32),
        },
    }
}

fn failed(error: &str) -> TerminalOutcome {
    TerminalOutcome::Failed {
        error: Redacted::new(error),
    }
}

/// The event the job core builds for `outcome`.
fn event(id: Uuid, outcome: &TerminalOutcome) -> OutboundEvent {
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

fn no_markers(stored: &Document) {
    let metadata = stored.get_document("metadata").expect("metadata stays");
    for key in MARKER_KEYS {
        assert!(!metadata.contains_key(key), "{key} left in {metadata:?}");
    }
}

#[tokio::test]
async fn a_claim_moves_the_managers_job_to_processing_with_dedup_active() {
    let world = World::new().await;
    let id = world.job().await;

    let claim = world.claim(id, "owner-a", LEASE).await;

    assert!(
        matches!(claim, Claim::Acquired { attempt: 1, .. }),
        "{claim:?}"
    );
    let job = world
        .manager
        .get_job(id)
        .await
        .expect("the Manager reads it");
    assert_eq!(job.status, "processing");
    assert_eq!(job.stored.get_bool("dedup_active"), Ok(true));
    assert!(!job.stored.contains_key("completed_at"));
    let worker = job
        .stored
        .get_document("fetcher_worker")
        .expect("the Worker's fields");
    assert_eq!(worker.get_str("owner"), Ok("owner-a"));
    assert_eq!(worker.get_str("state"), Ok("processing"));
    assert_eq!(
        world.store.accepted_message_digest(id, None).await.unwrap(),
        Some([7; 32])
    );
    world.db.drop().await;
}

#[tokio::test]
async fn a_completed_record_leaves_the_document_as_the_manager_reads_it_and_its_row_committed() {
    let world = World::new().await;
    let id = world
        .manager
        .create_job(&request())
        .await
        .expect("the Manager creates the job");
    world.claim(id, "owner-a", LEASE).await;
    let outcome = completed();
    let sent = event(id, &outcome);

    let recorded = world
        .record_event(id, Some("owner-a"), outcome, &sent)
        .await;

    let Recorded::Inserted {
        outbox_id,
        executions,
    } = recorded
    else {
        panic!("not recorded: {recorded:?}")
    };
    assert!(executions.is_empty());
    let job = world
        .manager
        .get_job(id)
        .await
        .expect("the Manager reads it");
    assert_eq!(job.status, "completed");
    let Some(Bson::Binary(raw_id)) = job.stored.get("_id") else {
        panic!("_id")
    };
    assert_eq!(raw_id.subtype, BinarySubtype::Generic);
    assert_eq!(job.result_path.as_deref(), Some("results/job.json.enc"));
    assert_eq!(job.result_hmac.as_deref(), Some("ab".repeat(32).as_str()));
    assert!(job.completed_at.is_some());
    assert_eq!(job.stored.get_bool("dedup_active"), Ok(false));
    assert_eq!(job.metadata, Some(doc! {"source": "tests"}));
    no_markers(&job.stored);

    // The row as lib-streaming reads it, leased to its publisher, and the event it carries is
    // the one the PostgreSQL mode would publish.
    let row =
        OutboxRow::from_document(&world.row(outbox_id).await).expect("lib-streaming reads it");
    assert_eq!(row.status, RowStatus::Processing);
    assert_eq!(row.claim_token.as_deref(), Some("publisher-1"));
    let relayed = outbox_event::pending_event(&row, sent.request_id.clone()).expect("relayable");
    assert_eq!(relayed.event, sent);
    assert_eq!(relayed.id, outbox_id);

    let found = world
        .store
        .recorded_event(sent.ce_id())
        .await
        .unwrap()
        .expect("committed");
    assert_eq!(found.outbox_id, outbox_id);
    assert_eq!(found.leased_by.as_deref(), Some("publisher-1"));

    // The same request again: the Manager's unique `request_hash` index lets it in.
    world
        .manager
        .create_job(&request())
        .await
        .expect("a new job with the same hash");
    world.db.drop().await;
}

#[tokio::test]
async fn a_failed_record_writes_the_redacted_error_as_a_string() {
    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;

    let recorded = world
        .record(
            id,
            Some("owner-a"),
            failed("connect to postgres://u:s3cret@db:5432 refused"),
        )
        .await;

    assert!(
        matches!(recorded, Recorded::Inserted { .. }),
        "{recorded:?}"
    );
    let job = world
        .manager
        .get_job(id)
        .await
        .expect("the Manager reads it");
    assert_eq!(job.status, "failed");
    let error = job
        .stored
        .get_document("metadata")
        .unwrap()
        .get_str("error")
        .unwrap();
    assert!(!error.contains("s3cret"), "{error}");
    assert_eq!(job.stored.get_bool("dedup_active"), Ok(false));
    assert!(job.result_path.is_none());
    no_markers(&job.stored);
    world.db.drop().await;
}

#[tokio::test]
async fn a_delivery_of_an_ended_job_is_terminal_and_not_run_again() {
    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;
    let Recorded::Inserted { outbox_id, .. } = world.record(id, Some("owner-a"), completed()).await
    else {
        panic!("not recorded")
    };

    let again = world.claim(id, "owner-b", LEASE).await;
    assert_eq!(
        again,
        Claim::Terminal {
            status: JobStatus::Completed,
            event_published: false
        }
    );
    let twice = world.record(id, Some("owner-a"), completed()).await;
    assert_eq!(
        twice,
        Recorded::AlreadyTerminal {
            status: JobStatus::Completed
        }
    );

    let RowId::Uuid(row_id) = outbox_id else {
        panic!("uuid")
    };
    world
        .store
        .store()
        .outbox_rows()
        .update_one(
            doc! {"id": row_id.hyphenated().to_string()},
            doc! {"$set": {"status": "PUBLISHED"}},
        )
        .await
        .unwrap();
    let published = world.claim(id, "owner-b", LEASE).await;
    assert_eq!(
        published,
        Claim::Terminal {
            status: JobStatus::Completed,
            event_published: true
        }
    );
    world.db.drop().await;
}

#[tokio::test]
async fn of_two_owners_racing_one_claim_one_wins() {
    let world = World::new().await;
    for _ in 0..5 {
        let id = world.job().await;
        let (a, b) = tokio::join!(
            world.claim(id, "owner-a", LEASE),
            world.claim(id, "owner-b", LEASE)
        );
        let won = [&a, &b]
            .iter()
            .filter(|c| matches!(c, Claim::Acquired { .. }))
            .count();
        assert_eq!(won, 1, "{a:?} {b:?}");
        assert!(
            [&a, &b].iter().any(|c| matches!(c, Claim::Busy { .. })),
            "{a:?} {b:?}"
        );
    }
    world.db.drop().await;
}

#[tokio::test]
async fn a_lease_is_renewed_by_its_owner_only_and_a_release_frees_the_job() {
    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;

    assert_eq!(
        world.store.renew_lease(id, "owner-a", LEASE).await.unwrap(),
        Lease::Held
    );
    assert_eq!(
        world.store.renew_lease(id, "owner-b", LEASE).await.unwrap(),
        Lease::Lost
    );
    assert!(matches!(
        world.claim(id, "owner-b", LEASE).await,
        Claim::Busy { .. }
    ));

    assert!(world.store.release(id, "owner-a").await.unwrap());
    let taken = world.claim(id, "owner-b", LEASE).await;
    assert!(
        matches!(taken, Claim::Acquired { attempt: 2, .. }),
        "{taken:?}"
    );
    assert_eq!(
        world.store.renew_lease(id, "owner-a", LEASE).await.unwrap(),
        Lease::Lost
    );
    let late = world.record(id, Some("owner-a"), completed()).await;
    assert_eq!(late, Recorded::LostClaim);
    world.db.drop().await;
}

#[tokio::test]
async fn a_lapsed_lease_is_listed_expired_and_failing_it_without_a_claim_ends_the_job() {
    let world = World::new().await;
    let id = world.job().await;
    let live = world.job().await;
    world.claim(id, "owner-a", Duration::ZERO).await;
    world.claim(live, "owner-b", LEASE).await;

    let expired = world.store.expired_jobs(Duration::ZERO, 10).await.unwrap();

    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0].job_id, id);
    assert_eq!(expired[0].owner.as_deref(), Some("owner-a"));
    assert_eq!(expired[0].request_id.as_deref(), Some("req-1"));
    assert_eq!(expired[0].metadata.get("source"), Some(&"tests".into()));
    let lost = world.record(id, None, failed(outbox::WORKER_LOST)).await;
    assert!(matches!(lost, Recorded::Inserted { .. }), "{lost:?}");
    let refused = world.record(live, None, failed(outbox::WORKER_LOST)).await;
    assert_eq!(refused, Recorded::LostClaim);
    assert_eq!(world.manager.get_job(id).await.unwrap().status, "failed");
    world.db.drop().await;
}

#[tokio::test]
async fn a_job_without_a_document_is_never_inserted() {
    let world = World::new().await;
    let id = Uuid::now_v7();
    let metadata = Map::new();

    let claim = world
        .store
        .claim(&ClaimRequest {
            job_id: id,
            tenant: None,
            request_id: None,
            metadata: &metadata,
            spec: None,
            message_sha256: None,
            timeout_seconds: None,
            owner: "owner-a",
            lease: LEASE,
        })
        .await;

    let error = claim.expect_err("no job to claim");
    assert!(!error.is_retriable(), "{error}");
    assert_eq!(
        world.record(id, None, failed("x")).await,
        Recorded::LostClaim
    );
    assert!(world.manager.stored(id).await.is_none());
    world.db.drop().await;
}

#[tokio::test]
async fn a_go_workers_marker_is_republished_by_a_redelivery_with_its_ce_id() {
    let world = World::new().await;
    let id = world.job().await;
    let payload = format!(r#"{{"jobId":"{id}","status":"completed"}}"#);
    world
        .manager
        .crashed_go_worker(id, "completed", "completed", &payload)
        .await;

    let claim = world.claim(id, "owner-a", LEASE).await;
    assert_eq!(
        claim,
        Claim::Terminal {
            status: JobStatus::Completed,
            event_published: false
        }
    );
    let leased = world
        .store
        .lease_unpublished(id, "owner-a", LEASE)
        .await
        .unwrap();

    assert_eq!(leased.len(), 1, "{leased:?}");
    let event = &leased[0].event;
    assert_eq!(event.ce_id(), format!("fetcher.job.completed.{id}"));
    assert_eq!(event.body, payload.as_bytes());
    assert_eq!(event.attributes.source, SOURCE);
    no_markers(&world.manager.stored(id).await.unwrap());
    let row = OutboxRow::from_document(&world.row(leased[0].id).await).unwrap();
    assert_eq!(row.claim_token.as_deref(), Some("owner-a"));
    // Held by owner-a: nobody else leases it meanwhile.
    assert!(world
        .store
        .lease_unpublished(id, "owner-b", LEASE)
        .await
        .unwrap()
        .is_empty());
    world.db.drop().await;
}

#[tokio::test]
async fn the_server_honours_multi_document_transactions() {
    let world = World::new().await;
    let store = world.store.store();
    let client = store.client();
    let mut session = client.start_session().await.unwrap();

    session.start_transaction().await.unwrap();
    store
        .jobs()
        .insert_one(doc! {"_id": 1})
        .session(&mut session)
        .await
        .unwrap();
    store
        .outbox_rows()
        .insert_one(doc! {"id": "1"})
        .session(&mut session)
        .await
        .unwrap();
    assert_eq!(
        store.jobs().count_documents(doc! {}).await.unwrap(),
        0,
        "isolated"
    );
    session.abort_transaction().await.unwrap();
    assert_eq!(store.jobs().count_documents(doc! {}).await.unwrap(), 0);
    assert_eq!(
        store.outbox_rows().count_documents(doc! {}).await.unwrap(),
        0
    );

    session.start_transaction().await.unwrap();
    store
        .jobs()
        .insert_one(doc! {"_id": 2})
        .session(&mut session)
        .await
        .unwrap();
    store
        .outbox_rows()
        .insert_one(doc! {"id": "2"})
        .session(&mut session)
        .await
        .unwrap();
    session.commit_transaction().await.unwrap();
    assert_eq!(store.jobs().count_documents(doc! {}).await.unwrap(), 1);
    assert_eq!(
        store.outbox_rows().count_documents(doc! {}).await.unwrap(),
        1
    );
    world.db.drop().await;
}

#[tokio::test]
async fn an_event_never_recorded_is_not_found() {
    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;

    let ce_id = contract::event::ce_id(contract::event::TerminalStatus::Completed, id);
    assert_eq!(world.store.recorded_event(&ce_id).await.unwrap(), None);
    assert_eq!(
        world.store.recorded_event("not a ce-id").await.unwrap(),
        None
    );
    world.db.drop().await;
}

#[tokio::test]
async fn an_object_left_is_listed_until_it_is_discarded() {
    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;
    world.record(id, Some("owner-a"), failed("boom")).await;

    world.store.mark_object_left(id).await.unwrap();
    let left = world.store.objects_left(Duration::ZERO, 10).await.unwrap();
    assert_eq!(left, vec![(id, None)]);

    world.store.object_discarded(id).await.unwrap();
    assert!(world
        .store
        .objects_left(Duration::ZERO, 10)
        .await
        .unwrap()
        .is_empty());
    assert!(world
        .store
        .deletions_in_progress(Duration::ZERO, 10)
        .await
        .unwrap()
        .is_empty());
    world.db.drop().await;
}

#[tokio::test]
async fn executions_are_kept_on_the_job_only_while_its_owner_holds_it() {
    use contract::lifecycle::ExecutionStatus;
    use outbox::{ExecutionEvents, ExecutionReport};

    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;
    let events = ExecutionEvents {
        tenant: None,
        request_id: None,
        source: SOURCE,
        publisher: "owner-a",
        lease: LEASE,
    };
    let report = |status, ended| ExecutionReport {
        datasource: "orders".to_owned(),
        status,
        row_count: 3,
        started_at: Some(Utc::now()),
        ended_at: ended,
        error: None,
    };

    let written = world
        .store
        .record_executions(
            id,
            "owner-a",
            &[report(ExecutionStatus::InProgress, None)],
            &events,
        )
        .await
        .unwrap();
    assert!(written.is_empty(), "no event before an execution ends");
    let ended = world
        .store
        .record_executions(
            id,
            "owner-a",
            &[report(ExecutionStatus::Succeeded, Some(Utc::now()))],
            &events,
        )
        .await
        .unwrap();
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0].event.routing_key(), "job.execution.succeeded");
    assert_eq!(
        ended[0].event.ce_id(),
        format!("fetcher.job.execution.succeeded.{id}.orders")
    );
    let own = world
        .store
        .store()
        .worker_rows()
        .find_one(doc! {"ce_id": ended[0].event.ce_id()})
        .await
        .unwrap()
        .expect("in this Worker's own outbox");
    assert_eq!(own.get_str("leased_by"), Ok("owner-a"));
    assert_eq!(
        world
            .store
            .store()
            .outbox_rows()
            .count_documents(doc! {})
            .await
            .unwrap(),
        0,
        "never in lib-streaming's outbox"
    );
    world
        .store
        .record_executions(
            id,
            "owner-b",
            &[report(ExecutionStatus::Failed, Some(Utc::now()))],
            &events,
        )
        .await
        .unwrap();

    let stored = world.manager.stored(id).await.unwrap();
    let executions = stored
        .get_document("fetcher_worker")
        .unwrap()
        .get_array("executions")
        .unwrap();
    assert_eq!(executions.len(), 1);
    let orders = executions[0].as_document().unwrap();
    assert_eq!(
        orders.get_str("status"),
        Ok(ExecutionStatus::Succeeded.as_str())
    );
    world
        .manager
        .get_job(id)
        .await
        .expect("the Manager still reads it");
    world.db.drop().await;
}

#[tokio::test]
async fn the_indexes_are_upstreams_and_creating_them_twice_changes_nothing() {
    let world = World::new().await;

    world
        .store
        .check_transactions()
        .await
        .expect("a replica set runs transactions");
    world.store.ensure_indexes().await.expect("created");
    world.store.ensure_indexes().await.expect("already there");

    let mut names = world
        .store
        .store()
        .outbox_rows()
        .list_index_names()
        .await
        .unwrap();
    names.sort();
    assert_eq!(
        names,
        [
            "_id_",
            "outbox_claim_token_lookup",
            "outbox_id_scope_unique",
            "outbox_pending_by_type_claim",
            "outbox_pending_claim",
            "outbox_state_updated_scan",
            "outbox_status_tenant",
        ]
    );
    let mut listed = world
        .store
        .store()
        .outbox_rows()
        .list_indexes()
        .await
        .unwrap();
    while listed.advance().await.unwrap() {
        let index = listed.deserialize_current().unwrap();
        let options = index.options.unwrap_or_default();
        let name = options.name.clone().unwrap_or_default();
        assert_eq!(
            options.unique == Some(true),
            name == "outbox_id_scope_unique",
            "{name}"
        );
        assert_eq!(
            options.sparse == Some(true),
            name == "outbox_claim_token_lookup",
            "{name}"
        );
        if name == "outbox_pending_claim" {
            assert_eq!(
                index.keys,
                doc! {"tenant_id": 1, "status": 1, "created_at": 1, "id": 1}
            );
        }
    }
    let job_indexes = world.store.store().jobs().list_index_names().await.unwrap();
    for name in [
        "fetcher_worker_lease",
        "fetcher_worker_object_left",
        "uniq_job_hash_active",
    ] {
        assert!(
            job_indexes.iter().any(|n| n == name),
            "{name} in {job_indexes:?}"
        );
    }
    // A row of the same id and tenant twice is refused, as lib-commons' unique index refuses it.
    let row = doc! {"id": "x", "tenant_id": "single-tenant"};
    world
        .store
        .store()
        .outbox_rows()
        .insert_one(row.clone())
        .await
        .unwrap();
    assert!(world
        .store
        .store()
        .outbox_rows()
        .insert_one(row)
        .await
        .is_err());
    world.db.drop().await;
}

#[tokio::test]
async fn a_terminal_record_closes_the_open_executions_with_their_events() {
    use contract::lifecycle::ExecutionStatus;
    use outbox::{Close, ExecutionReport};

    let world = World::new().await;
    let table = format!("public.t_{}", Uuid::new_v4().simple());
    let job = NewJob {
        mapped_fields: doc! {"orders": {&table: ["id"]}, "users": {&table: ["id"]}},
        ..request()
    };
    let id = world.manager.create_job(&job).await.unwrap();
    world.claim(id, "owner-a", LEASE).await;
    let outcome = failed("orders failed");
    let event = event(id, &outcome);
    let reports = [
        ExecutionReport {
            datasource: "orders".to_owned(),
            status: ExecutionStatus::Failed,
            row_count: 0,
            started_at: Some(Utc::now()),
            ended_at: Some(Utc::now()),
            error: Some("orders failed".to_owned()),
        },
        ExecutionReport {
            datasource: "users".to_owned(),
            status: ExecutionStatus::InProgress,
            row_count: 5,
            started_at: Some(Utc::now()),
            ended_at: None,
            error: None,
        },
    ];

    let recorded = world
        .store
        .record_terminal(&TerminalRecord {
            job_id: id,
            owner: Some("owner-a"),
            tenant: None,
            outcome,
            event: &event,
            publisher: "publisher-1",
            lease: LEASE,
            leaves_object: false,
            metadata: &Map::new(),
            executions: &reports,
            close: Some(Close::CANCELED),
        })
        .await
        .unwrap();

    let Recorded::Inserted { executions, .. } = recorded else {
        panic!("{recorded:?}")
    };
    let keys: Vec<_> = executions
        .iter()
        .map(|e| e.event.ce_id().to_owned())
        .collect();
    assert_eq!(
        keys,
        [
            format!("fetcher.job.execution.failed.{id}.orders"),
            format!("fetcher.job.execution.canceled.{id}.users"),
        ]
    );
    // Held by their publisher: a redelivery leases none of them meanwhile.
    assert!(world
        .store
        .lease_unpublished(id, "owner-b", LEASE)
        .await
        .unwrap()
        .is_empty());
    world.db.drop().await;
}

#[tokio::test]
async fn a_job_a_go_worker_is_processing_is_busy_and_never_taken_over() {
    let world = World::new().await;
    let id = world.job().await;
    // The Go Worker's move to processing (§1.4 step 3): no lease of this Worker's.
    world
        .manager
        .jobs()
        .update_one(
            doc! {"_id": testkit::manager::id_bson(id)},
            doc! {"$set": {"status": "processing", "dedup_active": true}, "$unset": {"completed_at": ""}},
        )
        .await
        .unwrap();

    let claim = world.claim(id, "owner-a", LEASE).await;

    assert!(matches!(claim, Claim::Busy { .. }), "{claim:?}");
    assert!(world
        .store
        .expired_jobs(Duration::ZERO, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        world.record(id, None, failed("x")).await,
        Recorded::LostClaim
    );
    assert_eq!(
        world.manager.get_job(id).await.unwrap().status,
        "processing"
    );
    world.db.drop().await;
}
