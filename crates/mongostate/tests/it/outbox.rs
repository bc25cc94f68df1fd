//! `outbox` and `outbox_claim`: rows this Worker writes read as lib-streaming reads them, and
//! rows written as lib-streaming writes them claimed and settled as its relay does.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{Duration, Utc};
use contract::event::TerminalStatus;
use mongodb::bson::{doc, oid::ObjectId, spec::ElementType, Bson, DateTime, Document};
use mongostate::outbox::{self, Emit, OutboxRow, RowStatus, SINGLE_TENANT};
use mongostate::outbox_claim::{self, Candidates, ClaimWindows};
use mongostate::Store;
use testkit::manager;
use testkit::mongo::MongoDb;
use uuid::Uuid;

const BODY: &str = r#"{"jobId":"01890a5d-ac96-774b-bcce-b302099a8057","status":"completed"}"#;

struct World {
    db: MongoDb,
    store: Store,
}

impl World {
    async fn new() -> World {
        let db = MongoDb::create().await;
        let store = Store::new(db.client.clone(), &db.name);
        World { db, store }
    }

    async fn row(&self, id: &str) -> Document {
        self.store
            .outbox_rows()
            .find_one(doc! {"id": id})
            .await
            .expect("find")
            .expect("the row")
    }
}

fn emit(job_id: Uuid) -> Emit<'static> {
    Emit {
        tenant: SINGLE_TENANT,
        job_id,
        status: TerminalStatus::Completed,
        body: BODY,
        exchange: "fetcher.job.events",
        source: "//lerian/fetcher",
        at: Utc::now(),
    }
}

/// A row exactly as lib-streaming v1.6.2's `Create` writes one for a Go Worker's `job.failed`.
fn lib_streaming_row(job_id: Uuid, body: &str) -> (String, Document) {
    let at = "2026-12-05T08:00:00.123456789Z";
    manager::lib_streaming_row(job_id, body, "fetcher.job.events", at, "//lerian/fetcher")
}

#[tokio::test]
async fn a_row_this_worker_writes_has_lib_streamings_fields_and_bson_types() {
    let world = World::new().await;
    let job = Uuid::now_v7();
    let id = outbox::insert(&world.store, &emit(job))
        .await
        .expect("insert");
    let again = outbox::insert(&world.store, &emit(job))
        .await
        .expect("insert");
    assert_ne!(id, again, "a fresh id per emit");
    assert_eq!(id.get_version_num(), 7);

    let stored = world.row(&id.to_string()).await;
    let types: BTreeMap<&str, ElementType> = stored
        .iter()
        .map(|(k, v)| (k.as_str(), v.element_type()))
        .collect();
    let expected = BTreeMap::from([
        ("_id", ElementType::ObjectId),
        ("id", ElementType::String),
        ("event_type", ElementType::String),
        ("aggregate_id", ElementType::String),
        ("payload", ElementType::String),
        ("status", ElementType::String),
        ("attempts", ElementType::Int32),
        ("created_at", ElementType::DateTime),
        ("updated_at", ElementType::DateTime),
        ("tenant_id", ElementType::String),
    ]);
    assert_eq!(types, expected);
    assert_eq!(
        stored.get_str("id"),
        Ok(id.hyphenated().to_string().as_str())
    );
    assert_eq!(stored.get_str("event_type"), Ok("lerian.streaming.publish"));
    assert_eq!(
        stored.get_str("aggregate_id"),
        Ok("ad9466d1-c6f9-5be3-98e4-bfc3b1341269")
    );
    assert_eq!(stored.get_str("status"), Ok("PENDING"));
    assert_eq!(stored.get_i32("attempts"), Ok(0));
    assert_eq!(stored.get_str("tenant_id"), Ok("single-tenant"));
    assert_eq!(stored.get("created_at"), stored.get("updated_at"));

    let payload: serde_json::Value =
        serde_json::from_str(stored.get_str("payload").unwrap()).expect("JSON");
    assert_eq!(payload["version"], 1);
    assert_eq!(payload["route_key"], "job.completed.rabbitmq");
    assert_eq!(payload["destination"]["name"], "fetcher.job.events");
    assert_eq!(payload["destination"]["address"], "job.completed");
    assert_eq!(
        payload["event"]["EventID"],
        format!("fetcher.job.completed.{job}")
    );
    assert_eq!(payload["event"]["TenantID"], "single-tenant");

    let row = OutboxRow::from_document(&stored).expect("lib-streaming's reader");
    let envelope = row.envelope().expect("a publishable envelope");
    assert_eq!(
        envelope.body, BODY,
        "the AMQP body is the event body byte for byte"
    );
    assert_eq!(envelope.tenant, "single-tenant");

    world.db.drop().await;
}

#[tokio::test]
async fn a_row_lib_streaming_wrote_is_claimed_published_and_not_claimed_again() {
    let world = World::new().await;
    let job = Uuid::now_v7();
    let body = r#"{"jobId":"go","metadata":{"error":{"message":"x \u003c y"}}}"#;
    let (id, row) = lib_streaming_row(job, body);
    world
        .store
        .outbox_rows()
        .insert_one(row)
        .await
        .expect("insert");

    let claimed = outbox_claim::claim(
        &world.store,
        SINGLE_TENANT,
        Candidates::Pending,
        50,
        Utc::now(),
        &ClaimWindows::default(),
    )
    .await
    .expect("claim");
    assert_eq!(claimed.rows.len(), 1);
    let row = &claimed.rows[0];
    assert_eq!(row.id, id);
    assert_eq!(row.status, RowStatus::Processing);
    assert!(row.claim_token.is_some());
    let envelope = row.envelope().expect("envelope");
    assert_eq!(envelope.body, body);
    assert_eq!(envelope.event_id, format!("fetcher.job.failed.{job}"));
    assert_eq!(
        (envelope.exchange.as_str(), envelope.routing_key.as_str()),
        ("fetcher.job.events", "job.failed")
    );

    let again = outbox_claim::claim(
        &world.store,
        SINGLE_TENANT,
        Candidates::Pending,
        50,
        Utc::now(),
        &ClaimWindows::default(),
    )
    .await
    .expect("claim");
    assert!(again.rows.is_empty(), "a processing row is not pending");

    assert!(outbox_claim::mark_published(&world.store, row, Utc::now())
        .await
        .expect("mark"));
    let stored = world.row(&id).await;
    assert_eq!(stored.get_str("status"), Ok("PUBLISHED"));
    assert!(matches!(
        stored.get("published_at"),
        Some(Bson::DateTime(_))
    ));
    assert!(!stored.contains_key("claim_token"));
    assert!(
        !outbox_claim::mark_published(&world.store, row, Utc::now())
            .await
            .expect("mark"),
        "a second mark is a conflict"
    );

    world.db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_claims_give_each_row_to_one_claimer() {
    let world = World::new().await;
    let mut ids = BTreeSet::new();
    for _ in 0..20 {
        let (id, row) = lib_streaming_row(Uuid::now_v7(), "{}");
        world
            .store
            .outbox_rows()
            .insert_one(row)
            .await
            .expect("insert");
        ids.insert(id);
    }
    let windows = ClaimWindows::default();
    let claim = || {
        outbox_claim::claim(
            &world.store,
            SINGLE_TENANT,
            Candidates::Pending,
            50,
            Utc::now(),
            &windows,
        )
    };
    let (a, b) = tokio::join!(claim(), claim());
    let (a, b) = (a.expect("claim a"), b.expect("claim b"));
    let a: BTreeSet<String> = a.rows.into_iter().map(|r| r.id).collect();
    let b: BTreeSet<String> = b.rows.into_iter().map(|r| r.id).collect();
    assert!(
        a.is_disjoint(&b),
        "a row given to both: {:?}",
        a.intersection(&b).collect::<Vec<_>>()
    );
    assert_eq!(a.union(&b).cloned().collect::<BTreeSet<_>>(), ids);

    world.db.drop().await;
}

#[tokio::test]
async fn a_failed_publish_is_retried_after_the_window_then_invalid_at_ten_attempts() {
    let world = World::new().await;
    let id = outbox::insert(&world.store, &emit(Uuid::now_v7()))
        .await
        .expect("insert")
        .to_string();
    let windows = ClaimWindows::default();
    let claim =
        |which, now| outbox_claim::claim(&world.store, SINGLE_TENANT, which, 50, now, &windows);

    let claimed = claim(Candidates::Pending, Utc::now()).await.expect("claim");
    let error = "publish to amqp://guest:guest-sentinel@broker.internal:5672 failed";
    let settled =
        outbox_claim::mark_failed(&world.store, &claimed.rows[0], error, Utc::now()).await;
    assert_eq!(settled.expect("mark"), Some(RowStatus::Failed));
    let stored = world.row(&id).await;
    assert_eq!(stored.get_i32("attempts"), Ok(1));
    let last_error = stored.get_str("last_error").expect("last_error");
    assert!(!last_error.contains("guest-sentinel"), "{last_error}");
    assert!(!stored.contains_key("claim_token"));

    let early = claim(Candidates::Failed, Utc::now()).await.expect("claim");
    assert!(early.rows.is_empty(), "inside the retry window");
    let later = claim(Candidates::Failed, Utc::now() + Duration::minutes(6))
        .await
        .expect("claim");
    assert_eq!(later.rows.len(), 1);

    world
        .store
        .outbox_rows()
        .update_one(doc! {"id": &id}, doc! {"$set": {"attempts": 9_i32}})
        .await
        .expect("age the row");
    let settled =
        outbox_claim::mark_failed(&world.store, &later.rows[0], "again", Utc::now()).await;
    assert_eq!(settled.expect("mark"), Some(RowStatus::Invalid));
    let stored = world.row(&id).await;
    assert_eq!(
        (stored.get_str("status"), stored.get_i32("attempts")),
        (Ok("INVALID"), Ok(10))
    );

    world.db.drop().await;
}

#[tokio::test]
async fn a_stuck_row_is_taken_over_and_invalid_once_its_attempts_are_spent() {
    let world = World::new().await;
    let stale = DateTime::from_millis((Utc::now() - Duration::minutes(11)).timestamp_millis());
    let (taken, mut row) = lib_streaming_row(Uuid::now_v7(), "{}");
    row.insert("status", "PROCESSING");
    row.insert("updated_at", stale);
    row.insert("claim_token", Uuid::new_v4().to_string());
    let (spent, mut last) = lib_streaming_row(Uuid::now_v7(), "{}");
    last.insert("status", "PROCESSING");
    last.insert("updated_at", stale);
    last.insert("attempts", 9_i32);
    let fresh_id = ObjectId::new();
    let (fresh, mut busy) = lib_streaming_row(Uuid::now_v7(), "{}");
    busy.insert("_id", fresh_id);
    busy.insert("status", "PROCESSING");
    world
        .store
        .outbox_rows()
        .insert_many([row, last, busy])
        .await
        .expect("insert");

    let claimed = outbox_claim::claim(
        &world.store,
        SINGLE_TENANT,
        Candidates::Stuck,
        50,
        Utc::now(),
        &ClaimWindows::default(),
    )
    .await
    .expect("claim");
    assert_eq!(claimed.invalidated, 1);
    assert_eq!(
        claimed
            .rows
            .iter()
            .map(|r| r.id.as_str())
            .collect::<Vec<_>>(),
        [taken.as_str()]
    );
    assert_eq!(claimed.rows[0].attempts, 1);
    assert_eq!(world.row(&spent).await.get_str("status"), Ok("INVALID"));
    assert_eq!(world.row(&fresh).await.get_str("status"), Ok("PROCESSING"));

    let bad =
        outbox_claim::mark_invalid(&world.store, &claimed.rows[0], "no such target", Utc::now())
            .await
            .expect("mark");
    assert!(bad);
    assert_eq!(world.row(&taken).await.get_str("status"), Ok("INVALID"));

    world.db.drop().await;
}

#[tokio::test]
async fn a_row_with_a_wrong_type_fails_as_lib_streamings_reader_fails() {
    let (_, mut row) = lib_streaming_row(Uuid::now_v7(), "{}");
    row.insert(
        "payload",
        Bson::Binary(mongodb::bson::Binary {
            subtype: mongodb::bson::spec::BinarySubtype::Generic,
            bytes: b"{}".to_vec(),
        }),
    );
    assert!(OutboxRow::from_document(&row).is_err());
    let (_, mut row) = lib_streaming_row(Uuid::now_v7(), "{}");
    row.insert("status", "DONE");
    assert!(OutboxRow::from_document(&row).is_err());
    let (_, mut row) = lib_streaming_row(Uuid::now_v7(), "{}");
    row.remove("updated_at");
    assert!(OutboxRow::from_document(&row).is_err());
}
