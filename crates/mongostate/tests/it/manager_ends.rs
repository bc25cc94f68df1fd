//! `ManagerStore`'s terminal records: the job document as the Manager's `GET` reads it, the
//! outbox row a Go relay would publish, and the event a redelivery republishes.

use contract::lifecycle::JobStatus;
use mongodb::bson::{doc, spec::BinarySubtype, Bson};
use mongostate::outbox::{OutboxRow, RowStatus};
use mongostate::outbox_event;
use outbox::{Claim, Recorded, RowId};

use crate::manager_world::*;

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
