//! `jobs` and `job_writes`: jobs the Manager stand-in creates, moved through this Worker's
//! writes, and read back as the Manager's `GET` reads them.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use contract::Redacted;
use mongodb::bson::{doc, spec::BinarySubtype, spec::ElementType, Bson, Document};
use mongostate::job_writes::{self, Outcome, Terminal, Written};
use mongostate::jobs::{self, ManagerStatus, Marker};
use mongostate::{Error, Store};
use testkit::manager::{GetError, Manager, NewJob, MARKER_KEYS};
use testkit::mongo::MongoDb;
use uuid::Uuid;

const BODY: &str = r#"{"jobId":"j","status":"completed"}"#;

/// A private database with the Manager's job indexes, and the Worker's view of it.
struct World {
    db: MongoDb,
    manager: Manager,
    store: Store,
}

impl World {
    async fn new() -> World {
        let db = MongoDb::create().await;
        let manager = Manager::new(db.db());
        manager.ensure_indexes().await;
        let store = Store::new(db.client.clone(), &db.name);
        World { db, manager, store }
    }

    async fn create(&self, job: &NewJob) -> Uuid {
        self.manager
            .create_job(job)
            .await
            .expect("the Manager creates the job")
    }

    async fn stored(&self, id: Uuid) -> Document {
        self.manager.stored(id).await.expect("the job is stored")
    }
}

fn request(metadata: Document) -> NewJob {
    NewJob {
        mapped_fields: doc! {"orders": {"public.orders": ["id", "total"]}},
        filters: doc! {},
        metadata,
    }
}

fn completed<'a>(
    body: &'a str,
    expect: Option<ManagerStatus>,
    worker: &'a Document,
) -> Terminal<'a> {
    Terminal {
        outcome: Outcome::Completed {
            result_path: "results/j.json".to_owned(),
            result_hmac: "ab12".to_owned(),
        },
        completed_at: Utc::now(),
        event_payload: body,
        expect,
        worker,
    }
}

/// Each field's BSON type, by name (the server decides the order of fields a `$set` adds).
fn types(document: &Document) -> BTreeMap<String, ElementType> {
    document
        .iter()
        .map(|(key, value)| (key.clone(), value.element_type()))
        .collect()
}

fn expected(fields: &[(&str, ElementType)]) -> BTreeMap<String, ElementType> {
    fields.iter().map(|(k, t)| ((*k).to_owned(), *t)).collect()
}

#[tokio::test]
async fn a_job_moves_to_processing_then_completed_and_reads_back_as_go_reads_it() {
    let world = World::new().await;
    let job = request(doc! {"source": "crm"});
    let id = world.create(&job).await;

    let read = jobs::read(&world.store, id).await.expect("read");
    assert_eq!(read.status, ManagerStatus::Pending);
    assert_eq!(read.dedup_active, Some(true));
    assert_eq!(read.mapped_fields, job.mapped_fields);
    assert_eq!(read.metadata, doc! {"source": "crm"});
    assert_eq!(read.marker, Marker::None);
    assert!(read.fetcher_worker.is_none() && read.completed_at.is_none());
    assert_eq!(read.request_hash.as_deref().map(str::len), Some(64));

    let lease = doc! {"lease_owner": "worker-1"};
    let started = job_writes::start_processing(&world.store, id, &lease).await;
    assert_eq!(started.expect("processing"), Written::Done);
    let got = world
        .manager
        .get_job(id)
        .await
        .expect("GET after processing");
    assert_eq!(got.status, "processing");
    assert_eq!(got.stored.get("dedup_active"), Some(&Bson::Boolean(true)));
    assert!(!got.stored.contains_key("completed_at"), "{:?}", got.stored);

    let worker = doc! {"lease_owner": Bson::Null, "executions": 1};
    let terminal = completed(BODY, Some(ManagerStatus::Processing), &worker);
    let ended = job_writes::record_terminal(&world.store, id, &terminal).await;
    assert_eq!(ended.expect("completed"), Written::Done);

    let got = world
        .manager
        .get_job(id)
        .await
        .expect("GET after completion");
    assert_eq!(got.status, "completed");
    assert_eq!(
        got.metadata,
        Some(doc! {"source": "crm"}),
        "markers are hidden"
    );
    assert_eq!(got.result_path.as_deref(), Some("results/j.json"));
    assert_eq!(got.result_hmac.as_deref(), Some("ab12"));
    assert!(got.completed_at.is_some());
    let stored = &got.stored;
    let Some(Bson::Binary(raw_id)) = stored.get("_id") else {
        panic!("_id is not binary: {stored:?}")
    };
    assert_eq!(raw_id.subtype, BinarySubtype::Generic);
    assert_eq!(
        types(stored),
        expected(&[
            ("_id", ElementType::Binary),
            ("metadata", ElementType::EmbeddedDocument),
            ("mapped_fields", ElementType::EmbeddedDocument),
            ("status", ElementType::String),
            ("dedup_active", ElementType::Boolean),
            ("request_hash", ElementType::String),
            ("created_at", ElementType::DateTime),
            ("fetcher_worker", ElementType::EmbeddedDocument),
            ("completed_at", ElementType::DateTime),
            ("result_path", ElementType::String),
            ("result_hmac", ElementType::String),
        ])
    );
    assert_eq!(stored.get_bool("dedup_active"), Ok(false));
    assert_eq!(
        stored.get_document("fetcher_worker").expect("ours"),
        &doc! {"lease_owner": Bson::Null, "executions": 1}
    );
    let metadata = stored.get_document("metadata").expect("metadata");
    assert_eq!(
        types(metadata),
        expected(&[
            ("source", ElementType::String),
            ("terminalEventPending", ElementType::Boolean),
            ("terminalEventStatus", ElementType::String),
            ("terminalEventPayload", ElementType::String),
        ])
    );
    assert_eq!(metadata.get_bool("terminalEventPending"), Ok(true));
    assert_eq!(metadata.get_str("terminalEventStatus"), Ok("completed"));
    assert_eq!(metadata.get_str("terminalEventPayload"), Ok(BODY));
    let read = jobs::read(&world.store, id).await.expect("read");
    assert_eq!(read.event_to_repair().expect("marked").payload, BODY);

    assert!(job_writes::clear_marker(&world.store, id)
        .await
        .expect("clear"));
    let metadata = world.stored(id).await.get_document("metadata").cloned();
    assert_eq!(metadata, Ok(doc! {"source": "crm"}));
    assert_eq!(
        jobs::read(&world.store, id).await.expect("read").marker,
        Marker::None
    );

    world.db.drop().await;
}

#[tokio::test]
async fn the_managers_unique_hash_index_accepts_the_same_request_once_the_first_is_terminal() {
    let world = World::new().await;
    let job = request(doc! {"run": "nightly"});
    let first = world.create(&job).await;
    assert!(
        world.manager.create_job(&job).await.is_err(),
        "an active job blocks its request hash"
    );
    let none = doc! {};
    job_writes::start_processing(&world.store, first, &none)
        .await
        .expect("processing");
    assert!(
        world.manager.create_job(&job).await.is_err(),
        "processing is active too"
    );

    let terminal = completed(BODY, None, &none);
    job_writes::record_terminal(&world.store, first, &terminal)
        .await
        .expect("completed");
    let second = world
        .manager
        .create_job(&job)
        .await
        .expect("a new job with the same hash");
    assert_ne!(second, first);

    world.db.drop().await;
}

#[tokio::test]
async fn a_failed_job_keeps_the_requests_metadata_and_stores_the_redacted_error() {
    let world = World::new().await;
    let id = world
        .create(&request(doc! {"team": "finance", "nested": {"k": 1.5}}))
        .await;
    let none = doc! {};
    job_writes::start_processing(&world.store, id, &none)
        .await
        .expect("processing");
    let raw =
        "connect to postgres://reader:hunter2-sentinel@orders-db.internal:5432/orders refused";
    let terminal = Terminal {
        outcome: Outcome::Failed {
            error: Redacted::new(raw),
        },
        completed_at: Utc::now(),
        event_payload: r#"{"status":"failed"}"#,
        expect: Some(ManagerStatus::Processing),
        worker: &none,
    };
    let ended = job_writes::record_terminal(&world.store, id, &terminal).await;
    assert_eq!(ended.expect("failed"), Written::Done);

    let got = world.manager.get_job(id).await.expect("GET");
    assert_eq!(got.status, "failed");
    assert!(got.result_path.is_none() && got.result_hmac.is_none());
    let metadata = got.metadata.expect("metadata");
    assert_eq!(metadata.get_str("team"), Ok("finance"));
    assert_eq!(metadata.get_document("nested"), Ok(&doc! {"k": 1.5}));
    let error = metadata
        .get_str("error")
        .expect("metadata.error is a string");
    assert_eq!(error, Redacted::new(raw).as_str());
    assert!(!error.contains("hunter2-sentinel") && !error.contains("orders-db.internal"));
    assert_eq!(got.stored.get_bool("dedup_active"), Ok(false));
    assert_eq!(
        got.stored
            .get_document("metadata")
            .unwrap()
            .get_str("terminalEventStatus"),
        Ok("failed")
    );

    world.db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_move_to_processing_is_a_compare_and_set_on_pending() {
    let world = World::new().await;
    let id = world.create(&request(doc! {})).await;
    let none = doc! {};
    let (a, b) = tokio::join!(
        job_writes::start_processing(&world.store, id, &none),
        job_writes::start_processing(&world.store, id, &none),
    );
    let outcomes = [a.expect("first"), b.expect("second")];
    assert_eq!(
        outcomes.iter().filter(|w| **w == Written::Done).count(),
        1,
        "{outcomes:?}"
    );
    assert!(outcomes.contains(&Written::Refused {
        current: ManagerStatus::Processing
    }));

    let missing = Uuid::now_v7();
    let absent = job_writes::start_processing(&world.store, missing, &none).await;
    assert!(
        matches!(absent, Err(Error::JobNotFound(m)) if m == missing),
        "{absent:?}"
    );
    assert!(matches!(
        jobs::read(&world.store, missing).await,
        Err(Error::JobNotFound(_))
    ));

    world.db.drop().await;
}

#[tokio::test]
async fn a_terminal_write_expecting_processing_leaves_an_ended_job_alone() {
    let world = World::new().await;
    let id = world.create(&request(doc! {})).await;
    let none = doc! {};
    job_writes::start_processing(&world.store, id, &none)
        .await
        .expect("processing");
    let first = completed(BODY, Some(ManagerStatus::Processing), &none);
    job_writes::record_terminal(&world.store, id, &first)
        .await
        .expect("completed");

    let late = Terminal {
        outcome: Outcome::Failed {
            error: Redacted::new("late"),
        },
        completed_at: Utc::now(),
        event_payload: "{}",
        expect: Some(ManagerStatus::Processing),
        worker: &none,
    };
    let refused = job_writes::record_terminal(&world.store, id, &late).await;
    assert_eq!(
        refused.expect("answered"),
        Written::Refused {
            current: ManagerStatus::Completed
        }
    );
    assert_eq!(
        world.manager.get_job(id).await.expect("GET").status,
        "completed"
    );

    world.db.drop().await;
}

#[tokio::test]
async fn writes_go_would_misread_are_refused_before_anything_is_written() {
    let world = World::new().await;
    let id = world.create(&request(doc! {})).await;
    let none = doc! {};
    for key in ["a.b", "$set", ""] {
        let worker = doc! {key: 1};
        let refused = job_writes::start_processing(&world.store, id, &worker).await;
        assert!(
            matches!(refused, Err(Error::InvalidWrite { .. })),
            "{key:?}: {refused:?}"
        );
    }
    let not_json = completed("{not json", None, &none);
    let refused = job_writes::record_terminal(&world.store, id, &not_json).await;
    assert!(
        matches!(refused, Err(Error::InvalidWrite { .. })),
        "{refused:?}"
    );
    assert_eq!(
        world.manager.get_job(id).await.expect("GET").status,
        "pending"
    );

    world.db.drop().await;
}

#[tokio::test]
async fn a_status_go_refuses_makes_the_job_unreadable_here_too() {
    let world = World::new().await;
    let id = world.create(&request(doc! {})).await;
    world
        .manager
        .jobs()
        .update_one(
            doc! {"_id": testkit::manager::id_bson(id)},
            doc! {"$set": {"status": "canceled"}},
        )
        .await
        .expect("corrupt the status");
    assert!(matches!(
        world.manager.get_job(id).await,
        Err(GetError::Internal(_))
    ));
    let read = jobs::read(&world.store, id).await;
    assert!(
        matches!(read, Err(Error::UndecodableJob { .. })),
        "{read:?}"
    );
    let none = doc! {};
    let started = job_writes::start_processing(&world.store, id, &none).await;
    assert!(
        matches!(started, Err(Error::UndecodableJob { .. })),
        "{started:?}"
    );

    world.db.drop().await;
}

#[tokio::test]
async fn the_repairer_scan_finds_the_marked_terminal_jobs_a_crashed_go_worker_left() {
    let world = World::new().await;
    let crashed = world.create(&request(doc! {"n": 1})).await;
    let mismatched = world.create(&request(doc! {"n": 2})).await;
    let pending = world.create(&request(doc! {"n": 3})).await;
    let go_body = r#"{"jobId":"go","status":"completed"}"#;
    world
        .manager
        .crashed_go_worker(crashed, "completed", "completed", go_body)
        .await;
    world
        .manager
        .crashed_go_worker(mismatched, "failed", "completed", go_body)
        .await;

    let found = jobs::marked_terminal(&world.store, jobs::REPAIR_BATCH)
        .await
        .expect("scan");
    let found: Vec<_> = found.into_iter().map(|job| job.expect("decodes")).collect();
    let ids: BTreeSet<Uuid> = found.iter().map(|job| job.id).collect();
    assert_eq!(ids, BTreeSet::from([crashed, mismatched]), "not {pending}");
    for job in &found {
        let repair = job.event_to_repair();
        if job.id == crashed {
            assert_eq!(repair.expect("re-emittable").payload, go_body);
        } else {
            assert!(
                repair.is_err(),
                "a marker for another status stays: {repair:?}"
            );
        }
    }

    assert!(job_writes::clear_marker(&world.store, crashed)
        .await
        .expect("clear"));
    let stored = world.stored(crashed).await;
    let metadata = stored.get_document("metadata").expect("metadata");
    assert!(
        MARKER_KEYS.iter().all(|key| !metadata.contains_key(key)),
        "{metadata:?}"
    );
    assert_eq!(metadata.get_i32("n"), Ok(1));
    let left = jobs::marked_terminal(&world.store, jobs::REPAIR_BATCH)
        .await
        .expect("scan");
    assert_eq!(left.len(), 1);

    world.db.drop().await;
}
