//! Job claims: atomicity, takeover of expired leases, terminal jobs, heartbeats.

use std::sync::Arc;
use std::time::Duration;

use contract::lifecycle::JobStatus;
use outbox::{Claim, ClaimRequest, Recorded, WORKER_LOST};
use serde_json::json;
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::support::{claim_request, claimed, completed, failed, metadata, record, TestDb, LONG};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_claims_of_one_job_acquire_it_once() {
    let db = TestDb::migrated().await;
    let store = db.store_with(20).await;
    let job_id = Uuid::new_v4();
    let barrier = Arc::new(Barrier::new(20));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..20 {
        let store = store.clone();
        let barrier = barrier.clone();
        tasks.spawn(async move {
            let owner = format!("worker-{i}");
            let metadata = metadata();
            barrier.wait().await;
            store
                .claim(&claim_request(job_id, &owner, LONG, &metadata))
                .await
                .expect("claim")
        });
    }
    let claims = tasks.join_all().await;
    let acquired = claims
        .iter()
        .filter(|c| matches!(c, Claim::Acquired { attempt: 1, .. }))
        .count();
    let busy = claims
        .iter()
        .filter(|c| matches!(c, Claim::Busy { .. }))
        .count();
    assert_eq!((acquired, busy), (1, 19), "{claims:?}");
    let job = db.store.job(job_id).await.expect("read").expect("job row");
    assert_eq!(job.status, "processing");
    assert_eq!(job.attempts, 1);
    store.pool().close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_new_job_is_stored_with_its_message() {
    let db = TestDb::migrated().await;
    let job_id = Uuid::new_v4();
    let metadata = metadata();
    let mapped = [(
        "ledger".to_owned(),
        [(
            "accounts".to_owned(),
            vec!["id".to_owned(), "name".to_owned()],
        )]
        .into(),
    )]
    .into();
    let filters = Default::default();
    let spec = json!({"mappedFields": {"ledger": {"accounts": ["id", "name"]}}, "filters": {}});
    let request = ClaimRequest {
        tenant: Some("acme"),
        spec: Some(outbox::JobSpec {
            mapped_fields: &mapped,
            filters: &filters,
        }),
        ..claim_request(job_id, "worker-a", LONG, &metadata)
    };
    assert_eq!(
        db.store.claim(&request).await.expect("claim"),
        Claim::Acquired {
            attempt: 1,
            running_for: Duration::ZERO
        }
    );
    let job = db.store.job(job_id).await.expect("read").expect("job row");
    assert_eq!(job.status, "processing");
    assert_eq!(job.tenant_id.as_deref(), Some("acme"));
    assert_eq!(job.request_id.as_deref(), Some("req-1"));
    assert_eq!(job.metadata, metadata);
    assert_eq!(job.spec, Some(spec));
    assert_eq!(job.owner.as_deref(), Some("worker-a"));
    assert!(job.lease_expires_at.expect("lease") > job.started_at.expect("started"));
    assert!(job.finished_at.is_none());
    assert!(db.store.job(Uuid::new_v4()).await.expect("read").is_none());
    db.drop().await;
}

#[tokio::test]
async fn a_live_lease_is_busy_even_for_its_own_owner() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let metadata = metadata();
    for owner in ["worker-b", "worker-a"] {
        let claim = db
            .store
            .claim(&claim_request(job_id, owner, LONG, &metadata))
            .await
            .expect("claim");
        assert!(matches!(claim, Claim::Busy { .. }), "{owner}: {claim:?}");
    }
    db.drop().await;
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_and_the_old_owner_loses_the_job() {
    let db = TestDb::migrated().await;
    let job_id = Uuid::new_v4();
    let metadata = metadata();
    let short = Duration::from_millis(200);
    let first = db
        .store
        .claim(&claim_request(job_id, "worker-a", short, &metadata))
        .await
        .expect("claim");
    assert_eq!(
        first,
        Claim::Acquired {
            attempt: 1,
            running_for: Duration::ZERO
        }
    );
    tokio::time::sleep(Duration::from_millis(400)).await;

    let second = db
        .store
        .claim(&claim_request(job_id, "worker-b", LONG, &metadata))
        .await
        .expect("claim");
    let Claim::Acquired {
        attempt: 2,
        running_for,
    } = second
    else {
        panic!("{second:?}");
    };
    // A takeover keeps the first start: the job's timeout counts from there.
    assert!(running_for >= Duration::from_millis(400), "{running_for:?}");
    assert_eq!(
        db.store
            .renew_lease(job_id, "worker-a", LONG)
            .await
            .expect("renew"),
        outbox::Lease::Lost
    );
    let recorded = record(
        &db.store,
        job_id,
        Some("worker-a"),
        completed(job_id),
        "worker-a",
        LONG,
    )
    .await;
    assert_eq!(recorded, Recorded::LostClaim);
    let job = db.store.job(job_id).await.expect("read").expect("job row");
    assert_eq!(
        (job.status.as_str(), job.owner.as_deref()),
        ("processing", Some("worker-b"))
    );
    db.drop().await;
}

#[tokio::test]
async fn a_released_claim_is_taken_at_once_and_only_its_owner_releases_it() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let metadata = metadata();
    assert!(!db.store.release(job_id, "worker-b").await.expect("release"));
    let busy = db
        .store
        .claim(&claim_request(job_id, "worker-b", LONG, &metadata))
        .await
        .expect("claim");
    assert!(matches!(busy, Claim::Busy { .. }), "{busy:?}");

    assert!(db.store.release(job_id, "worker-a").await.expect("release"));
    let taken = db
        .store
        .claim(&claim_request(job_id, "worker-b", LONG, &metadata))
        .await
        .expect("claim");
    assert!(
        matches!(taken, Claim::Acquired { attempt: 2, .. }),
        "{taken:?}"
    );
    // The old owner lost it: it can neither renew nor release it again.
    assert_eq!(
        db.store
            .renew_lease(job_id, "worker-a", LONG)
            .await
            .expect("renew"),
        outbox::Lease::Lost
    );
    assert!(!db.store.release(job_id, "worker-a").await.expect("release"));
    // A terminal job is not released.
    let recorded = record(
        &db.store,
        job_id,
        Some("worker-b"),
        completed(job_id),
        "worker-b",
        LONG,
    )
    .await;
    assert!(
        matches!(recorded, Recorded::Inserted { .. }),
        "{recorded:?}"
    );
    assert!(!db.store.release(job_id, "worker-b").await.expect("release"));
    db.drop().await;
}

#[tokio::test]
async fn a_recorded_event_is_found_with_its_lease_holder() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let ce_id = format!("fetcher.job.completed.{job_id}");
    assert_eq!(
        db.store.recorded_event(&ce_id).await.expect("look up"),
        None
    );
    let recorded = record(
        &db.store,
        job_id,
        Some("worker-a"),
        completed(job_id),
        "publisher-a",
        LONG,
    )
    .await;
    let Recorded::Inserted { outbox_id, .. } = recorded else {
        panic!("{recorded:?}");
    };
    assert_eq!(
        db.store.recorded_event(&ce_id).await.expect("look up"),
        Some(outbox::RecordedEvent {
            outbox_id,
            leased_by: Some("publisher-a".to_owned())
        })
    );
    let other = format!("fetcher.job.failed.{job_id}");
    assert_eq!(
        db.store.recorded_event(&other).await.expect("look up"),
        None
    );
    db.drop().await;
}

#[tokio::test]
async fn renewing_keeps_the_lease_alive() {
    let db = TestDb::migrated().await;
    let job_id = Uuid::new_v4();
    let metadata = metadata();
    let short = Duration::from_millis(300);
    db.store
        .claim(&claim_request(job_id, "worker-a", short, &metadata))
        .await
        .expect("claim");
    assert_eq!(
        db.store
            .renew_lease(job_id, "worker-a", LONG)
            .await
            .expect("renew"),
        outbox::Lease::Held
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let claim = db
        .store
        .claim(&claim_request(job_id, "worker-b", LONG, &metadata))
        .await
        .expect("claim");
    assert!(matches!(claim, Claim::Busy { .. }), "{claim:?}");
    db.drop().await;
}

#[tokio::test]
async fn a_pending_job_is_acquired_and_keeps_its_stored_message() {
    let db = TestDb::migrated().await;
    let job_id = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO jobs (job_id, tenant_id, metadata) VALUES ($1, 'acme', '{\"source\":\"x\"}')",
    )
    .bind(job_id)
    .execute(db.pool())
    .await
    .expect("pending job");
    let metadata = metadata();
    let request = ClaimRequest {
        tenant: Some("acme"),
        ..claim_request(job_id, "worker-a", LONG, &metadata)
    };
    let claim = db.store.claim(&request).await.expect("claim");
    assert_eq!(
        claim,
        Claim::Acquired {
            attempt: 1,
            running_for: Duration::ZERO
        }
    );
    let job = db.store.job(job_id).await.expect("read").expect("job row");
    assert_eq!(job.tenant_id.as_deref(), Some("acme"));
    assert_eq!(job.metadata.get("source"), Some(&json!("x")));
    assert_eq!(job.request_id.as_deref(), Some("req-1"), "a gap is filled");
    db.drop().await;
}

#[tokio::test]
async fn a_terminal_job_reports_whether_its_event_was_published() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let Recorded::Inserted { outbox_id, .. } = record(
        &db.store,
        job_id,
        Some("worker-a"),
        completed(job_id),
        "worker-a",
        LONG,
    )
    .await
    else {
        panic!("not recorded");
    };
    let metadata = metadata();
    let again = claim_request(job_id, "worker-b", LONG, &metadata);
    assert_eq!(
        db.store.claim(&again).await.expect("claim"),
        Claim::Terminal {
            status: JobStatus::Completed,
            event_published: false
        }
    );
    assert_eq!(
        db.store
            .mark_published(&[outbox_id.serial().unwrap()], "worker-a")
            .await
            .expect("mark"),
        1
    );
    assert_eq!(
        db.store.claim(&again).await.expect("claim"),
        Claim::Terminal {
            status: JobStatus::Completed,
            event_published: true
        }
    );
    let job = db.store.job(job_id).await.expect("read").expect("job row");
    assert_eq!(job.attempts, 1, "a terminal job is never claimed again");
    db.drop().await;
}

#[tokio::test]
async fn lost_workers_jobs_are_listed_and_failed_unless_taken_over() {
    let db = TestDb::migrated().await;
    let metadata = metadata();
    let lost = Uuid::new_v4();
    let retaken = Uuid::new_v4();
    let live = claimed(&db.store, "worker-live").await;
    for job_id in [lost, retaken] {
        db.store
            .claim(&claim_request(
                job_id,
                "worker-gone",
                Duration::from_millis(100),
                &metadata,
            ))
            .await
            .expect("claim");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    let expired = db
        .store
        .expired_jobs(Duration::from_millis(100), 10)
        .await
        .expect("expired");
    let mut ids: Vec<Uuid> = expired.iter().map(|j| j.job_id).collect();
    ids.sort();
    let mut expected = vec![lost, retaken];
    expected.sort();
    assert_eq!(ids, expected, "the live job is not listed: {live}");
    assert!(expired
        .iter()
        .all(|j| j.owner.as_deref() == Some("worker-gone") && j.metadata == metadata));
    assert!(db
        .store
        .expired_jobs(Duration::from_secs(60), 10)
        .await
        .expect("expired")
        .is_empty());

    // A redelivery takes one over before the Worker fails them.
    db.store
        .claim(&claim_request(retaken, "worker-new", LONG, &metadata))
        .await
        .expect("claim");
    for job_id in [lost, retaken, live] {
        let recorded = record(
            &db.store,
            job_id,
            None,
            failed(job_id, WORKER_LOST),
            "sweeper",
            LONG,
        )
        .await;
        let expected = if job_id == lost {
            "inserted"
        } else {
            "lost claim"
        };
        let got = match recorded {
            Recorded::Inserted { .. } => "inserted",
            Recorded::LostClaim => "lost claim",
            _ => "other",
        };
        assert_eq!(got, expected, "{job_id}");
    }
    let job = db.store.job(lost).await.expect("read").expect("job row");
    assert_eq!(job.status, "failed");
    assert_eq!(job.error_message.as_deref(), Some(WORKER_LOST));
    db.drop().await;
}

#[tokio::test]
async fn a_job_is_never_claimed_for_another_tenant() {
    let db = TestDb::migrated().await;
    let metadata = metadata();
    let job_id = Uuid::new_v4();
    let of = |tenant| ClaimRequest {
        tenant,
        ..claim_request(job_id, "worker-a", Duration::from_millis(1), &metadata)
    };
    assert_eq!(
        db.store.claim(&of(Some("acme"))).await.expect("claim"),
        Claim::Acquired {
            attempt: 1,
            running_for: Duration::ZERO
        }
    );
    tokio::time::sleep(Duration::from_millis(5)).await;
    // The lease lapsed, so a takeover would be allowed: not for another tenant, nor for none.
    for tenant in [Some("globex"), None] {
        let claim = db.store.claim(&of(tenant)).await.expect("claim");
        assert_eq!(claim, Claim::OtherTenant, "{tenant:?}");
    }
    let job = db.store.job(job_id).await.expect("read").expect("job row");
    assert_eq!(job.tenant_id.as_deref(), Some("acme"));
    assert_eq!(job.attempts, 1);
    let taken = db.store.claim(&of(Some("acme"))).await.expect("claim");
    assert!(
        matches!(taken, Claim::Acquired { attempt: 2, .. }),
        "{taken:?}"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_job_is_never_failed_without_a_claim_for_another_tenant() {
    let db = TestDb::migrated().await;
    let metadata = metadata();
    let job_id = Uuid::new_v4();
    let request = ClaimRequest {
        tenant: Some("acme"),
        ..claim_request(job_id, "worker-a", Duration::from_millis(1), &metadata)
    };
    db.store.claim(&request).await.expect("claim");
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (outcome, event) = failed(job_id, "invalid job message");
    let recorded = db
        .store
        .record_terminal(&outbox::TerminalRecord {
            job_id,
            owner: None,
            tenant: Some("globex"),
            outcome,
            event: &event,
            metadata: &Default::default(),
            leaves_object: false,
            publisher: "worker-b",
            lease: LONG,
            executions: &[],
            close: Some(outbox::Close::CANCELED),
        })
        .await
        .expect("record");
    assert_eq!(recorded, Recorded::OtherTenant);
    let job = db.store.job(job_id).await.expect("read").expect("job row");
    assert_eq!(job.status, "processing");
    db.drop().await;
}

#[tokio::test]
async fn the_first_accepted_message_digest_is_kept_for_its_tenant_only() {
    let db = TestDb::migrated().await;
    let metadata = metadata();
    let job_id = Uuid::new_v4();
    let (first, second) = ([1u8; 32], [2u8; 32]);
    let of = |digest| ClaimRequest {
        tenant: Some("acme"),
        message_sha256: Some(digest),
        ..claim_request(job_id, "worker-a", Duration::from_millis(1), &metadata)
    };
    assert_eq!(
        db.store
            .accepted_message_digest(job_id, Some("acme"))
            .await
            .expect("read"),
        None,
        "a job never claimed has no accepted message"
    );
    db.store.claim(&of(&first)).await.expect("claim");
    tokio::time::sleep(Duration::from_millis(5)).await;
    // A takeover from another message keeps the digest of the first acceptance.
    let taken = db.store.claim(&of(&second)).await.expect("claim");
    assert!(
        matches!(taken, Claim::Acquired { attempt: 2, .. }),
        "{taken:?}"
    );
    assert_eq!(
        db.store
            .accepted_message_digest(job_id, Some("acme"))
            .await
            .expect("read"),
        Some(first)
    );
    for tenant in [Some("globex"), None] {
        assert_eq!(
            db.store
                .accepted_message_digest(job_id, tenant)
                .await
                .expect("read"),
            None,
            "{tenant:?}"
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_jobs_timeout_is_kept_from_its_first_acceptance() {
    let db = TestDb::migrated().await;
    let job_id = Uuid::new_v4();
    let metadata = metadata();
    let of = |owner, timeout_seconds| ClaimRequest {
        timeout_seconds,
        ..claim_request(job_id, owner, Duration::from_millis(100), &metadata)
    };
    db.store
        .claim(&of("worker-a", Some(30)))
        .await
        .expect("claim");
    tokio::time::sleep(Duration::from_millis(200)).await;
    db.store
        .claim(&of("worker-b", Some(5)))
        .await
        .expect("takeover");
    let stored: Option<i32> =
        sqlx::query_scalar("SELECT timeout_seconds FROM jobs WHERE job_id = $1")
            .bind(job_id)
            .fetch_one(db.pool())
            .await
            .expect("read");
    assert_eq!(stored, Some(30));
    let refused = db
        .store
        .claim(&ClaimRequest {
            timeout_seconds: Some(86_401),
            ..claim_request(Uuid::new_v4(), "worker-c", LONG, &metadata)
        })
        .await
        .expect_err("over a day");
    assert!(!refused.is_retriable(), "{refused}");
    db.drop().await;
}
