//! `ManagerStore` beyond claims and ends: the server's transactions, the indexes, objects left,
//! and the executions with their events.

use std::time::Duration;

use chrono::Utc;
use mongodb::bson::doc;
use outbox::{Recorded, TerminalRecord};
use serde_json::Map;
use testkit::manager::NewJob;
use uuid::Uuid;

use crate::manager_world::*;

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
        traceparent: None,
    };
    let report = |status, ended| ExecutionReport {
        datasource: "orders".to_owned(),
        status,
        row_count: 3,
        started_at: Some(Utc::now()),
        ended_at: ended,
        error: None,
        // Read on its second attempt (`JOB_RETRY_ATTEMPTS`): its event says so.
        attempts: 2,
        last_error: Some("connection reset".to_owned()),
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
    let body: serde_json::Value = serde_json::from_slice(&ended[0].event.body).unwrap();
    assert_eq!(body["statusDetails"]["attempts"], 2, "{body}");
    assert_eq!(
        body["statusDetails"]["lastError"], "connection reset",
        "{body}"
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
            attempts: 1,
            last_error: None,
        },
        ExecutionReport {
            datasource: "users".to_owned(),
            status: ExecutionStatus::InProgress,
            row_count: 5,
            started_at: Some(Utc::now()),
            ended_at: None,
            error: None,
            attempts: 1,
            last_error: None,
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
