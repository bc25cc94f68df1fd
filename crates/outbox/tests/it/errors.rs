//! Failures: an unreachable database is retriable and named without its address; a failed
//! write leaves nothing behind.

use std::time::Duration;

use outbox::{OutboxError, Store};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use uuid::Uuid;

use crate::support::{claim_request, claimed, completed, metadata, TestDb, LONG};
use outbox::TerminalRecord;

#[tokio::test]
async fn an_unreachable_database_is_retriable_and_not_named() {
    // Nothing listens on port 1.
    let options = PgConnectOptions::new()
        .host("127.0.0.1")
        .port(1)
        .username("fetcher")
        .password("s3cret-password")
        .database("state");
    let pool = PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy_with(options);
    let store = Store::new(pool);
    let metadata = metadata();
    let error = store
        .claim(&claim_request(Uuid::new_v4(), "worker-a", LONG, &metadata))
        .await
        .expect_err("no database");
    assert!(error.is_retriable(), "{error:?}");
    assert!(
        matches!(error, OutboxError::Unavailable { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.starts_with("claiming a job: "), "{text}");
    for secret in ["127.0.0.1", "s3cret-password", "fetcher"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}

#[tokio::test]
async fn an_error_in_the_outbox_insert_rolls_the_job_state_back() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    sqlx::raw_sql(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'outbox insert refused'; END $$;
         CREATE TRIGGER refuse BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION refuse();",
    )
    .execute(db.pool())
    .await
    .expect("trigger");
    let before = db.store.job(job_id).await.expect("read").expect("job row");

    let (outcome, event) = completed(job_id);
    let error = db
        .store
        .record_terminal(&TerminalRecord {
            job_id,
            owner: Some("worker-a"),
            tenant: None,
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
        .expect_err("refused");
    assert!(matches!(error, OutboxError::Database { .. }), "{error:?}");
    assert!(!error.is_retriable());
    assert!(
        error.to_string().contains("outbox insert refused"),
        "{error}"
    );
    assert_eq!(
        db.store.job(job_id).await.expect("read").expect("job row"),
        before,
        "the terminal state was rolled back with the outbox row"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_constraint_violation_is_not_retriable() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    // The schema requires a completed job to carry its result: break that rule by hand.
    sqlx::raw_sql(
        "CREATE FUNCTION strip() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN NEW.result_path := NULL; RETURN NEW; END $$;
         CREATE TRIGGER strip BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION strip();",
    )
    .execute(db.pool())
    .await
    .expect("trigger");
    let (outcome, event) = completed(job_id);
    let error = db
        .store
        .record_terminal(&TerminalRecord {
            job_id,
            owner: Some("worker-a"),
            tenant: None,
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
        .expect_err("refused");
    match &error {
        OutboxError::Constraint { constraint, .. } => {
            assert_eq!(constraint, "jobs_completed_has_result")
        }
        other => panic!("not a constraint error: {other:?}"),
    }
    assert!(!error.is_retriable());
    db.drop().await;
}
