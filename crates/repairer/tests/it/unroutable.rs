//! Publishes that do not land (no queue bound, exchange deleted) leave the rows unpublished with
//! their error and a backoff; once the events can be routed and are due, they are published.

use std::time::Duration;

use chrono::{DateTime, Utc};
use repairer::relay::MIN_RETRY_DELAY;
use repairer::{Repairer, RepairerConfig};
use tokio_util::sync::CancellationToken;

use crate::support::{self, OutboxRow};

const EVENTS: usize = 12;

/// Asserts every row is unpublished, unleased, with an error containing `error`, and due again
/// only after a backoff taken between `before` and `after` (database clock).
fn assert_backed_off(rows: &[OutboxRow], error: &str, before: DateTime<Utc>, after: DateTime<Utc>) {
    // Leased once by the repairer after the record's own lease: attempts 2, whose backoff
    // ceiling is 2 s; never under MIN_RETRY_DELAY.
    let floor = chrono::Duration::from_std(MIN_RETRY_DELAY).expect("floor");
    let ceiling = chrono::Duration::from_std(outbox::backoff::ceiling(2)).expect("ceiling");
    for row in rows {
        assert!(row.published_at.is_none(), "{row:?}");
        assert_eq!(row.leased_by, None, "{row:?}");
        assert_eq!(row.lease_until, None, "{row:?}");
        assert_eq!(row.attempts, 2, "{row:?}");
        let last_error = row.last_error.as_deref().unwrap_or_default();
        assert!(last_error.contains(error), "{row:?}");
        assert!(row.next_attempt_at >= before + floor, "{row:?}");
        assert!(row.next_attempt_at <= after + ceiling, "{row:?}");
        assert!(row.next_attempt_at > after, "in the future: {row:?}");
    }
}

/// Waits until the latest backoff of the unpublished rows has ended (database clock).
async fn wait_until_due(pool: &sqlx::PgPool) {
    let latest: Option<DateTime<Utc>> =
        sqlx::query_scalar("SELECT max(next_attempt_at) FROM outbox WHERE published_at IS NULL")
            .fetch_one(pool)
            .await
            .expect("latest backoff");
    if let Some(latest) = latest {
        let now = support::db_now(pool).await;
        if let Ok(wait) = (latest - now).to_std() {
            tokio::time::sleep(wait + Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn returned_events_are_backed_off_and_published_once_a_queue_is_bound() {
    let (db, broker, exchange, publisher) = support::start().await;

    let recorded = support::record_many(&db.store, EVENTS, 2, support::mixed, Duration::ZERO).await;
    let repairer = Repairer::new(
        db.store.clone(),
        publisher.clone(),
        support::config("repairer-unroutable", 5),
    );
    let stop = CancellationToken::new();

    // No queue is bound: the broker confirms and returns every event. The broker is fine, so the
    // pass goes through all three batches.
    let before = support::db_now(db.pool()).await;
    let pass = repairer.repair_once(&stop).await.expect("pass");
    let after = support::db_now(db.pool()).await;
    assert_eq!(pass.leased, EVENTS as u64, "{pass:?}");
    assert_eq!(pass.relayed.published, 0, "{pass:?}");
    assert_eq!(pass.relayed.failed, EVENTS as u64, "{pass:?}");
    assert_eq!(pass.relayed.rejected, EVENTS as u64, "{pass:?}");
    let rows = support::outbox_rows(db.pool()).await;
    assert_backed_off(&rows, "returned the message as unroutable", before, after);

    // Backed off: a pass right away leases none of them.
    let pass = repairer.repair_once(&stop).await.expect("pass");
    assert_eq!(pass.leased, 0, "{pass:?}");

    // Routable now, and due once the backoff ends: all published, each once.
    let queue = broker.bound_queue(&exchange, "job.*").await;
    wait_until_due(db.pool()).await;
    let pass = repairer.repair_once(&stop).await.expect("pass");
    assert_eq!(pass.relayed.published, EVENTS as u64, "{pass:?}");
    let received = broker
        .receive(&queue, EVENTS, Duration::from_secs(10))
        .await;
    support::assert_all_delivered_as_recorded(&received, &recorded, &exchange);
    assert_eq!(support::duplicates(&received).0, 0);
    let rows = support::outbox_rows(db.pool()).await;
    assert!(rows.iter().all(|r| r.published_at.is_some()), "{rows:?}");
    assert!(rows.iter().all(|r| r.attempts == 3), "{rows:?}");

    support::finish(publisher, broker, db).await;
}

#[tokio::test]
async fn events_for_a_deleted_exchange_are_backed_off_and_published_once_it_is_back() {
    let (db, broker, exchange, publisher) = support::start().await;
    // The publisher has published before: its channel is open when the exchange disappears.
    let queue = broker.bound_queue(&exchange, "job.*").await;
    let first = support::record(&db.store, 0, support::mixed(0), Duration::ZERO).await;
    let repairer = Repairer::new(
        db.store.clone(),
        publisher.clone(),
        RepairerConfig {
            batches_in_flight: 2,
            ..support::config("repairer-no-exchange", 5)
        },
    );
    let stop = CancellationToken::new();
    let pass = repairer.repair_once(&stop).await.expect("pass");
    assert_eq!(pass.relayed.published, 1, "{pass:?}");
    broker.receive(&queue, 1, Duration::from_secs(10)).await;

    broker.delete_exchange(&exchange).await;
    let recorded = support::record_many(&db.store, EVENTS, 2, support::mixed, Duration::ZERO).await;

    // The broker closes the channel (404 NOT_FOUND): a failure of the broker side, so the pass
    // stops instead of failing the whole backlog. Each of its two loops (batches in flight)
    // stops at its first failed batch: two batches of 5 are tried and backed off.
    let before = support::db_now(db.pool()).await;
    let pass = repairer.repair_once(&stop).await.expect("pass");
    let after = support::db_now(db.pool()).await;
    println!("exchange deleted: {pass:?}");
    const TRIED: usize = 10;
    assert_eq!(pass.leased, TRIED as u64, "{pass:?}");
    assert_eq!(pass.relayed.published, 0, "{pass:?}");
    assert_eq!(pass.relayed.failed, TRIED as u64, "{pass:?}");
    assert_eq!(pass.relayed.rejected, 0, "{pass:?}");
    let rows = support::outbox_rows(db.pool()).await;
    let failed: Vec<_> = rows
        .iter()
        .filter(|r| r.last_error.is_some())
        .cloned()
        .collect();
    assert_eq!(failed.len(), TRIED, "{rows:?}");
    assert_backed_off(&failed, "AMQP channel failed", before, after);
    let untouched = rows
        .iter()
        .filter(|r| r.id != first.outbox_id && r.last_error.is_none());
    assert!(untouched
        .inspect(|r| assert_eq!(r.attempts, 1, "{r:?}"))
        .all(|r| r.published_at.is_none()));

    // The exchange is back (declared again by the Worker at startup, here by the test) and the
    // queue bound again: the next passes, once the failed rows are due, publish everything.
    publisher
        .declare_exchange()
        .await
        .expect("declare exchange");
    broker.bind(&queue, &exchange, "job.*").await;
    let pass = repairer.repair_once(&stop).await.expect("pass");
    assert_eq!(pass.relayed.published, (EVENTS - TRIED) as u64, "{pass:?}");
    wait_until_due(db.pool()).await;
    let pass = repairer.repair_once(&stop).await.expect("pass");
    assert_eq!(pass.relayed.published, TRIED as u64, "{pass:?}");
    assert_eq!(support::unpublished_count(db.pool()).await, 0);
    let received = broker
        .receive(&queue, EVENTS, Duration::from_secs(10))
        .await;
    assert_eq!(support::duplicates(&received).0, 0);
    support::assert_all_delivered_as_recorded(&received, &recorded, &exchange);
    assert_eq!(broker.depth(&queue).await, 0);

    support::finish(publisher, broker, db).await;
}

#[tokio::test]
async fn an_execution_event_nobody_binds_is_not_retried_but_a_job_event_is() {
    use contract::lifecycle::ExecutionStatus;
    use outbox::{ClaimRequest, ExecutionEvents, ExecutionReport, JobSpec};

    let (db, broker, _exchange, publisher) = support::start().await;
    // A job-level event, and an execution's (lifecycle §4) recorded as a run records it.
    support::record_many(&db.store, 1, 1, support::mixed, Duration::ZERO).await;
    let job_id = uuid::Uuid::new_v4();
    let mapped: contract::message::MappedFields = [(
        "ledger".to_owned(),
        [("t".to_owned(), vec!["id".to_owned()])].into(),
    )]
    .into();
    let filters = Default::default();
    let metadata = serde_json::Map::new();
    let claim = ClaimRequest {
        job_id,
        tenant: None,
        request_id: None,
        metadata: &metadata,
        spec: Some(JobSpec {
            mapped_fields: &mapped,
            filters: &filters,
        }),
        message_sha256: None,
        timeout_seconds: None,
        owner: "run-1",
        lease: Duration::from_secs(60),
        traceparent: None,
    };
    db.store.claim(&claim).await.expect("claim");
    let ended = ExecutionReport {
        datasource: "ledger".into(),
        status: ExecutionStatus::Succeeded,
        row_count: 3,
        started_at: Some(Utc::now()),
        ended_at: Some(Utc::now()),
        error: None,
        attempts: 1,
        last_error: None,
    };
    let events = ExecutionEvents {
        tenant: None,
        request_id: None,
        source: "//test",
        publisher: "run-1",
        lease: Duration::ZERO,
        traceparent: None,
    };
    let recorded = db
        .store
        .record_executions(job_id, "run-1", &[ended], &events)
        .await
        .expect("executions");
    assert_eq!(recorded.len(), 1);

    // Nothing is bound: the broker returns both. The execution's event has no subscriber to
    // lose it and is not retried; the job's is kept, backed off, until a queue takes it.
    let repairer = Repairer::new(
        db.store.clone(),
        publisher.clone(),
        support::config("repairer-executions", 5),
    );
    let pass = repairer
        .repair_once(&CancellationToken::new())
        .await
        .expect("pass");
    assert_eq!(pass.leased, 2, "{pass:?}");
    let rows = support::outbox_rows(db.pool()).await;
    let execution = rows
        .iter()
        .find(|r| r.ce_id.starts_with("fetcher.job.execution."))
        .expect("the execution's row");
    assert!(execution.published_at.is_some(), "{execution:?}");
    let job = rows
        .iter()
        .find(|r| !r.ce_id.starts_with("fetcher.job.execution."))
        .expect("the job's row");
    assert!(
        job.published_at.is_none(),
        "kept for a queue to take it: {job:?}"
    );
    assert!(job
        .last_error
        .as_deref()
        .unwrap_or_default()
        .contains("unroutable"));
    support::finish(publisher, broker, db).await;
}
