//! Terminal states and their outbox rows: one transaction, one event per status, frozen bytes.

use std::time::Duration;

use contract::event::{OutboundEvent, TerminalStatus};
use outbox::{OutboxError, Recorded, TerminalOutcome, TerminalRecord};
use sqlx::Row;
use uuid::Uuid;

use crate::support::{claimed, completed, failed, record, terminal, TestDb, LONG};

#[tokio::test]
async fn completing_a_job_writes_its_state_and_a_leased_outbox_row() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let (outcome, event) = completed(job_id);
    let recorded = record(
        &db.store,
        job_id,
        Some("worker-a"),
        (outcome.clone(), event.clone()),
        "publisher-a",
        LONG,
    )
    .await;
    let Recorded::Inserted { outbox_id, .. } = recorded else {
        panic!("not recorded: {recorded:?}");
    };

    let job = db.store.job(job_id).await.expect("read").expect("job row");
    let TerminalOutcome::Completed { result } = outcome else {
        unreachable!()
    };
    assert_eq!(terminal(&job.status), TerminalStatus::Completed);
    assert_eq!(job.result_path.as_deref(), Some(result.path.as_str()));
    assert_eq!(job.result_hmac.as_deref(), Some(result.hmac.as_str()));
    assert_eq!(job.result_size_bytes, Some(184_320));
    assert_eq!(job.result_row_count, Some(1204));
    assert!(job.error_message.is_none());
    assert!(job.finished_at.is_some());
    assert!(job.lease_expires_at.is_none());

    let row = sqlx::query(
        "SELECT ce_id, job_id, leased_by, lease_until > now() AS leased, attempts,
                published_at IS NULL AS unpublished
         FROM outbox WHERE id = $1",
    )
    .bind(outbox_id.serial().unwrap())
    .fetch_one(db.pool())
    .await
    .expect("outbox row");
    assert_eq!(row.get::<String, _>("ce_id"), event.ce_id());
    assert_eq!(row.get::<Uuid, _>("job_id"), job_id);
    assert_eq!(row.get::<String, _>("leased_by"), "publisher-a");
    assert!(row.get::<bool, _>("leased"));
    assert_eq!(row.get::<i32, _>("attempts"), 1);
    assert!(row.get::<bool, _>("unpublished"));
    db.drop().await;
}

#[tokio::test]
async fn a_failed_outbox_insert_rolls_the_job_state_back() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let (outcome, event) = completed(job_id);
    // Another job's row already holds this event's ce-id.
    let other = claimed(&db.store, "worker-b").await;
    sqlx::query(
        "INSERT INTO outbox (ce_id, job_id, body, attributes) VALUES ($1, $2, '\\x00', $3)",
    )
    .bind(event.ce_id())
    .bind(other)
    .bind(sqlx::types::Json(&event.attributes))
    .execute(db.pool())
    .await
    .expect("conflicting row");
    let before = db.store.job(job_id).await.expect("read").expect("job row");

    let recorded = record(
        &db.store,
        job_id,
        Some("worker-a"),
        (outcome, event.clone()),
        "worker-a",
        LONG,
    )
    .await;
    assert_eq!(
        recorded,
        Recorded::DuplicateEvent {
            ce_id: event.ce_id().to_owned()
        }
    );
    let after = db.store.job(job_id).await.expect("read").expect("job row");
    assert_eq!(after, before, "the job state was rolled back");
    assert_eq!(after.status, "processing");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(db.pool())
        .await
        .expect("count");
    assert_eq!(rows, 1);
    db.drop().await;
}

#[tokio::test]
async fn a_failure_that_was_never_claimed_is_rolled_back_whole() {
    let db = TestDb::migrated().await;
    let job_id = Uuid::new_v4();
    let (outcome, event) = failed(job_id, "invalid job message");
    let holder = claimed(&db.store, "worker-b").await;
    sqlx::query(
        "INSERT INTO outbox (ce_id, job_id, body, attributes) VALUES ($1, $2, '\\x00', $3)",
    )
    .bind(event.ce_id())
    .bind(holder)
    .bind(sqlx::types::Json(&event.attributes))
    .execute(db.pool())
    .await
    .expect("conflicting row");
    let recorded = record(&db.store, job_id, None, (outcome, event), "w", LONG).await;
    assert!(matches!(recorded, Recorded::DuplicateEvent { .. }));
    assert!(
        db.store.job(job_id).await.expect("read").is_none(),
        "the job row created for the failure is gone too"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_job_ends_once_with_one_event() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let first = record(
        &db.store,
        job_id,
        Some("worker-a"),
        failed(job_id, "query failed"),
        "worker-a",
        LONG,
    )
    .await;
    assert!(matches!(first, Recorded::Inserted { .. }), "{first:?}");
    for (owner, outcome) in [
        (Some("worker-a"), failed(job_id, "again")),
        (Some("worker-a"), completed(job_id)),
        (None, failed(job_id, "again")),
    ] {
        let again = record(&db.store, job_id, owner, outcome, "worker-a", LONG).await;
        assert_eq!(
            again,
            Recorded::AlreadyTerminal {
                status: contract::lifecycle::JobStatus::Failed
            }
        );
    }
    let ce_ids: Vec<String> = sqlx::query_scalar("SELECT ce_id FROM outbox WHERE job_id = $1")
        .bind(job_id)
        .fetch_all(db.pool())
        .await
        .expect("rows");
    assert_eq!(ce_ids, vec![format!("fetcher.job.failed.{job_id}")]);
    let job = db.store.job(job_id).await.expect("read").expect("job row");
    assert_eq!(job.error_message.as_deref(), Some("query failed"));
    db.drop().await;
}

#[tokio::test]
async fn the_ce_id_is_unique_in_the_schema() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let (_, event) = failed(job_id, "x");
    let insert =
        "INSERT INTO outbox (ce_id, job_id, body, attributes) VALUES ($1, $2, '\\x00', $3)";
    for expect_ok in [true, false] {
        let result = sqlx::query(insert)
            .bind(event.ce_id())
            .bind(job_id)
            .bind(sqlx::types::Json(&event.attributes))
            .execute(db.pool())
            .await;
        assert_eq!(result.is_ok(), expect_ok, "{result:?}");
    }
    db.drop().await;
}

#[tokio::test]
async fn an_owner_that_lost_the_claim_writes_nothing() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let before = db.store.job(job_id).await.expect("read").expect("job row");
    let recorded = record(
        &db.store,
        job_id,
        Some("worker-b"),
        completed(job_id),
        "worker-b",
        LONG,
    )
    .await;
    assert_eq!(recorded, Recorded::LostClaim);
    let never_claimed = Uuid::new_v4();
    let recorded = record(
        &db.store,
        never_claimed,
        Some("worker-b"),
        completed(never_claimed),
        "worker-b",
        LONG,
    )
    .await;
    assert_eq!(recorded, Recorded::LostClaim);
    assert_eq!(
        db.store.job(job_id).await.expect("read").expect("job row"),
        before
    );
    assert!(db.store.job(never_claimed).await.expect("read").is_none());
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(db.pool())
        .await
        .expect("count");
    assert_eq!(rows, 0);
    db.drop().await;
}

#[tokio::test]
async fn a_failure_before_any_claim_creates_the_failed_job() {
    let db = TestDb::migrated().await;
    let job_id = Uuid::new_v4();
    let (outcome, event) = failed(job_id, "dial tcp 10.1.2.3:5432: connection refused");
    let recorded = db
        .store
        .record_terminal(&TerminalRecord {
            job_id,
            owner: None,
            tenant: Some("acme"),
            outcome,
            event: &event,
            metadata: &Default::default(),
            leaves_object: false,
            publisher: "worker-a",
            lease: LONG,
            executions: &[],
            close: Some(outbox::Close::CANCELED),
        })
        .await
        .expect("record");
    assert!(
        matches!(recorded, Recorded::Inserted { .. }),
        "{recorded:?}"
    );
    let job = db.store.job(job_id).await.expect("read").expect("job row");
    assert_eq!(job.status, "failed");
    assert_eq!(job.tenant_id.as_deref(), Some("acme"));
    assert_eq!(job.request_id.as_deref(), Some("req-1"));
    let stored = job.error_message.expect("error stored");
    assert_eq!(stored, "dial tcp [redacted] connection refused");
    assert_eq!(job.attempts, 0);
    assert!(job.metadata.is_empty());
    db.drop().await;
}

#[tokio::test]
async fn body_bytes_and_attributes_round_trip_exactly() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let (outcome, mut event) = completed(job_id);
    // The body is JSON, but the column is bytes: whatever was frozen comes back, byte for byte.
    event
        .body
        .extend_from_slice(b" \x00\xff\xfe\x80 \\u2028 \xe2\x80\xa8 caf\xc3\xa9");
    let recorded = record(
        &db.store,
        job_id,
        Some("worker-a"),
        (outcome, event.clone()),
        "worker-a",
        Duration::ZERO,
    )
    .await;
    let Recorded::Inserted { outbox_id, .. } = recorded else {
        panic!("not recorded: {recorded:?}");
    };
    let pending = db
        .store
        .claim_for_job(job_id, "worker-b", LONG)
        .await
        .expect("claim for job");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, outbox_id);
    assert_eq!(pending[0].job_id, job_id);
    assert_eq!(pending[0].event, event);
    assert_eq!(pending[0].event.body, event.body);
    db.drop().await;
}

#[tokio::test]
async fn an_event_of_another_job_or_status_is_refused() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let (outcome, _) = completed(job_id);
    let (_, failed_event) = failed(job_id, "x");
    let other = Uuid::new_v4();
    let (_, other_event) = completed(other);
    let attempts: [(&OutboundEvent, &str); 2] = [
        (&failed_event, "completed outcome with a failed event"),
        (&other_event, "for job"),
    ];
    for (event, says) in attempts {
        let error = db
            .store
            .record_terminal(&TerminalRecord {
                job_id,
                owner: Some("worker-a"),
                tenant: None,
                outcome: outcome.clone(),
                event,
                metadata: &Default::default(),
                leaves_object: false,
                publisher: "worker-a",
                lease: LONG,
                executions: &[],
                close: Some(outbox::Close::CANCELED),
            })
            .await
            .expect_err("refused");
        assert!(
            matches!(error, OutboxError::InvalidArgument { .. }),
            "{error:?}"
        );
        assert!(!error.is_retriable());
        assert!(error.to_string().contains(says), "{error}");
    }
    db.drop().await;
}
