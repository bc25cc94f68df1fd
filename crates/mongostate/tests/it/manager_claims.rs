//! `ManagerStore`'s claims on jobs the Manager stand-in creates: who runs a job, its lease, and
//! the jobs it never takes.

use std::time::Duration;

use mongodb::bson::doc;
use outbox::{Claim, ClaimRequest, Lease, Recorded};
use serde_json::Map;
use uuid::Uuid;

use crate::manager_world::*;

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
            traceparent: None,
        })
        .await;

    assert_eq!(claim.expect("an answer"), Claim::Unknown);
    assert_eq!(
        world.record(id, None, failed("x")).await,
        Recorded::LostClaim
    );
    assert!(world.manager.stored(id).await.is_none());
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
