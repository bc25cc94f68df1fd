//! `ManagerStore`'s cancels and deletes (the control API in the Manager mode): each transition
//! as the lifecycle machine answers it, the job document as the Manager's `GET` reads it, and
//! the events in this Worker's own outbox.

use std::time::Duration;

use contract::lifecycle::{Event, JobStatus, Refusal, Step, Then};
use mongodb::bson::doc;
use mongostate::ManagerStore;
use outbox::{Claim, Controlled, EndCancel, Lease, Recorded};
use serde_json::Map;
use uuid::Uuid;

use crate::manager_world::*;

async fn control(store: &ManagerStore, job_id: Uuid, step: Step) -> Controlled {
    store
        .control(&control_request(job_id, step))
        .await
        .expect("the control request is recorded")
}

/// The events recorded for the job in this Worker's own outbox, in order, by `ce-eventtype`.
async fn worker_events(world: &World, job_id: Uuid) -> Vec<String> {
    let mut cursor = world
        .store
        .store()
        .worker_rows()
        .find(doc! {"job_id": testkit::manager::id_bson(job_id)})
        .sort(doc! {"id": 1})
        .await
        .expect("find rows");
    let mut found = Vec::new();
    while cursor.advance().await.expect("next row") {
        let row = cursor.deserialize_current().expect("row");
        found.push(row.get_str("ce_id").expect("ce_id").to_owned());
    }
    found
}

fn ce_id(event: &str, job_id: Uuid) -> String {
    format!("fetcher.job.{event}.{job_id}")
}

fn done(controlled: Controlled) -> (contract::lifecycle::Transition, usize) {
    match controlled {
        Controlled::Done {
            transition, events, ..
        } => (transition, events.len()),
        Controlled::Refused(refusal) => panic!("refused: {refusal}"),
    }
}

/// The Manager's `GET` of a canceled job: `failed`, inactive, ended, its error saying canceled.
async fn manager_sees_canceled(world: &World, id: Uuid) {
    let job = world
        .manager
        .get_job(id)
        .await
        .expect("the Manager reads it");
    assert_eq!(job.status, "failed");
    assert_eq!(job.stored.get_bool("dedup_active"), Ok(false));
    assert!(job.completed_at.is_some());
    let error = job
        .metadata
        .as_ref()
        .and_then(|m| m.get_str("error").ok())
        .expect("metadata.error is a string");
    assert!(error.contains("canceled"), "{error}");
    assert!(
        error.contains("OPS_1") && error.contains("wrong period"),
        "{error}"
    );
    no_markers(&job.stored);
}

#[tokio::test]
async fn a_cancel_of_a_pending_job_ends_it_canceled_and_the_manager_reads_it_failed() {
    let world = World::new().await;
    let id = world
        .manager
        .create_job(&request_of_its_own())
        .await
        .expect("the Manager creates the job");

    let (transition, events) = done(control(&world.store, id, Step::Cancel { force: false }).await);

    assert_eq!(transition.to.status, JobStatus::Canceled);
    assert_eq!(
        transition.events,
        [Event::CancellationInProgress, Event::Canceled]
    );
    assert_eq!(events, 2, "both events leased to the API's publisher");
    assert_eq!(
        worker_events(&world, id).await,
        [ce_id("cancellation_in_progress", id), ce_id("canceled", id)]
    );
    manager_sees_canceled(&world, id).await;
    let row = world
        .store
        .job(id)
        .await
        .unwrap()
        .expect("the API reads it");
    assert_eq!(row.status, "canceled");
    assert_eq!(row.comment.as_deref(), Some("wrong period"));
    assert_eq!(row.reason_code.as_deref(), Some("OPS_1"));
    assert_eq!(row.error_message, None);
    assert!(
        !row.metadata.contains_key("error"),
        "the job's metadata is the request's"
    );

    // Its message, when it comes, is not run; a second cancel is accepted and emits nothing.
    let claim = world.claim(id, "owner-a", LEASE).await;
    assert!(
        matches!(
            claim,
            Claim::Terminal {
                status: JobStatus::Canceled,
                event_published: true
            }
        ),
        "{claim:?}"
    );
    let (again, events) = done(control(&world.store, id, Step::Cancel { force: true }).await);
    assert_eq!((again.to.status, events), (JobStatus::Canceled, 0));
    // The same request again: the Manager's unique `request_hash` index lets it in.
    world
        .manager
        .create_job(&request_of_its_own_again(&world, id).await)
        .await
        .expect("a new job with the same hash");
    world.db.drop().await;
}

#[tokio::test]
async fn a_request_for_an_unknown_or_another_tenants_job_or_an_ended_one_changes_nothing() {
    let world = World::new().await;
    let unknown = Uuid::now_v7();
    assert_eq!(
        control(&world.store, unknown, Step::Cancel { force: false }).await,
        Controlled::Refused(Refusal::Unknown),
        "the Manager creates every job: a cancel does not wait for one"
    );
    let id = world.job().await;
    let mut other = control_request(id, Step::Cancel { force: false });
    other.tenant = Some("tenant-b");
    assert_eq!(
        world.store.control(&other).await.unwrap(),
        Controlled::Refused(Refusal::Unknown)
    );
    assert_eq!(
        control(&world.store, id, Step::Delete { force: false }).await,
        Controlled::Refused(Refusal::InvalidTransition {
            from: JobStatus::Pending
        })
    );
    world.claim(id, "owner-a", LEASE).await;
    world.record(id, Some("owner-a"), completed()).await;
    assert_eq!(
        control(&world.store, id, Step::Cancel { force: false }).await,
        Controlled::Refused(Refusal::InvalidTransition {
            from: JobStatus::Completed
        })
    );
    assert_eq!(world.manager.get_job(id).await.unwrap().status, "completed");
    world.db.drop().await;
}

#[tokio::test]
async fn a_cancel_of_a_running_job_is_learned_by_its_lease_and_ended_by_its_run() {
    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;

    let (transition, events) = done(control(&world.store, id, Step::Cancel { force: true }).await);

    assert_eq!(transition.to.status, JobStatus::CancellationInProgress);
    assert_eq!(transition.then, Then::StopStatements { force: true });
    assert_eq!(events, 1);
    let job = world.manager.get_job(id).await.unwrap();
    assert_eq!(
        job.status, "processing",
        "the Manager's job runs on until it ends"
    );
    assert_eq!(job.stored.get_bool("dedup_active"), Ok(true));
    assert_eq!(
        world.store.renew_lease(id, "owner-a", LEASE).await.unwrap(),
        Lease::Canceling { force: true }
    );
    assert_eq!(
        world.store.renew_lease(id, "owner-b", LEASE).await.unwrap(),
        Lease::Lost
    );
    assert_eq!(
        world.store.job(id).await.unwrap().unwrap().status,
        "cancellation_in_progress"
    );

    let metadata = Map::new();
    let ended = world
        .store
        .end_cancel(&EndCancel {
            job_id: id,
            tenant: None,
            metadata: &metadata,
            request_id: None,
            source: SOURCE,
            publisher: "owner-a",
            lease: LEASE,
            owner: Some("owner-a"),
            executions: &[],
            traceparent: None,
        })
        .await
        .unwrap();

    let Controlled::Done {
        transition,
        canceled,
        ..
    } = ended
    else {
        panic!("{ended:?}")
    };
    assert_eq!(transition.to.status, JobStatus::Canceled);
    assert_eq!(transition.then, Then::DiscardObject);
    assert!(canceled.expect("the cancel it ended").force);
    manager_sees_canceled(&world, id).await;
    let executions = world.store.executions(id).await.unwrap();
    assert!(!executions.is_empty());
    assert!(
        executions.iter().all(|e| e.status == "CANCELED"),
        "{executions:?}"
    );
    assert_eq!(
        worker_events(&world, id).await.last(),
        Some(&ce_id("canceled", id))
    );
    world.db.drop().await;
}

#[tokio::test]
async fn a_cancel_whose_owner_died_is_listed_canceling_and_ended_without_it() {
    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", Duration::from_millis(1)).await;
    done(control(&world.store, id, Step::Cancel { force: false }).await);

    let expired = loop {
        let expired = world.store.expired_jobs(Duration::ZERO, 10).await.unwrap();
        if let Some(job) = expired.into_iter().find(|j| j.job_id == id) {
            break job;
        }
        tokio::task::yield_now().await;
    };
    assert!(expired.canceling);

    let metadata = Map::new();
    let ended = world
        .store
        .end_cancel(&EndCancel {
            job_id: id,
            tenant: None,
            metadata: &metadata,
            request_id: None,
            source: SOURCE,
            publisher: "sweeper",
            lease: LEASE,
            owner: None,
            executions: &[],
            traceparent: None,
        })
        .await
        .unwrap();
    assert_eq!(done(ended).0.to.status, JobStatus::Canceled);
    manager_sees_canceled(&world, id).await;
    world.db.drop().await;
}

#[tokio::test]
async fn a_run_that_completes_while_its_cancel_is_in_progress_is_canceled_instead() {
    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;
    done(control(&world.store, id, Step::Cancel { force: false }).await);

    let recorded = world.record(id, Some("owner-a"), completed()).await;

    let Recorded::Canceled { transition, .. } = recorded else {
        panic!("{recorded:?}")
    };
    assert_eq!(transition.then, Then::DiscardObject);
    manager_sees_canceled(&world, id).await;
    let job = world.manager.get_job(id).await.unwrap();
    assert_eq!(job.result_path, None, "the cancel's end stores nothing");
    world.db.drop().await;
}

#[tokio::test]
async fn a_delete_of_a_completed_job_unsets_its_result_and_keeps_its_status_for_the_manager() {
    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;
    world.record(id, Some("owner-a"), completed()).await;

    let (transition, events) = done(control(&world.store, id, Step::Delete { force: false }).await);

    assert_eq!(transition.to.status, JobStatus::DeletionInProgress);
    assert_eq!(transition.then, Then::DeleteObject);
    assert_eq!(events, 1);
    assert_eq!(world.manager.get_job(id).await.unwrap().status, "completed");
    let listed = world
        .store
        .deletions_in_progress(Duration::ZERO, 10)
        .await
        .unwrap();
    assert_eq!(listed, [(id, None)], "the sweeper finds a deletion left");

    let deleted = world
        .store
        .object_deleted(id, true, SOURCE, "api-1", LEASE)
        .await
        .unwrap();

    let (transition, _) = done(deleted);
    assert_eq!(transition.to.status, JobStatus::Deleted);
    let job = world
        .manager
        .get_job(id)
        .await
        .expect("the Manager reads it");
    assert_eq!(job.status, "completed", "the Manager has no delete");
    assert_eq!((job.result_path, job.result_hmac), (None, None));
    assert_eq!(job.stored.get_bool("dedup_active"), Ok(false));
    let row = world.store.job(id).await.unwrap().unwrap();
    assert_eq!(row.status, "deleted");
    assert!(row.deleted_at.is_some());
    assert!(world.store.executions(id).await.unwrap().is_empty());
    let events = worker_events(&world, id).await;
    assert!(
        events.contains(&ce_id("deletion_in_progress", id)),
        "{events:?}"
    );
    assert!(events.contains(&ce_id("deleted", id)), "{events:?}");
    assert!(
        events.contains(&format!("fetcher.job.execution.deleted.{id}.orders")),
        "{events:?}"
    );
    assert!(world
        .store
        .deletions_in_progress(Duration::ZERO, 10)
        .await
        .unwrap()
        .is_empty());
    // A second delete of a deleted job is accepted and emits nothing.
    let (again, events) = done(control(&world.store, id, Step::Delete { force: false }).await);
    assert_eq!((again.to.status, events), (JobStatus::Deleted, 0));
    world.db.drop().await;
}

#[tokio::test]
async fn a_forced_delete_of_a_running_job_cancels_it_then_deletes_it() {
    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;

    let (transition, _) = done(control(&world.store, id, Step::Delete { force: true }).await);
    assert_eq!(transition.to.status, JobStatus::CancellationInProgress);
    let metadata = Map::new();
    let ended = world
        .store
        .end_cancel(&EndCancel {
            job_id: id,
            tenant: None,
            metadata: &metadata,
            request_id: None,
            source: SOURCE,
            publisher: "owner-a",
            lease: LEASE,
            owner: Some("owner-a"),
            executions: &[],
            traceparent: None,
        })
        .await
        .unwrap();
    let (transition, _) = done(ended);
    assert_eq!(transition.to.status, JobStatus::DeletionInProgress);
    assert_eq!(
        transition.events,
        [Event::Canceled, Event::DeletionInProgress]
    );
    manager_sees_canceled(&world, id).await;
    world.db.drop().await;
}

/// A request of its own (the Manager refuses two active jobs of one request).
fn request_of_its_own() -> testkit::manager::NewJob {
    let table = format!("public.orders_{}", Uuid::new_v4().simple());
    testkit::manager::NewJob {
        mapped_fields: doc! {"orders": {table: ["id", "total"]}},
        ..crate::manager_world::request()
    }
}

/// The request `id` was created from, read back from its document.
async fn request_of_its_own_again(world: &World, id: Uuid) -> testkit::manager::NewJob {
    let stored = world.manager.stored(id).await.expect("stored");
    testkit::manager::NewJob {
        mapped_fields: stored.get_document("mapped_fields").unwrap().clone(),
        ..crate::manager_world::request()
    }
}
