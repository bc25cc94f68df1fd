//! End to end: terminal events recorded through `Store::record_terminal` reach a consumer of the
//! events exchange through a running `Repairer`, exactly as contract §8 publishes them.

use std::time::Duration;

use repairer::Repairer;
use tokio_util::sync::CancellationToken;

use crate::support;

const EVENTS: usize = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_events_reach_the_consumer_signed_with_every_header_and_the_frozen_body() {
    let (db, broker, exchange, publisher) = support::start().await;
    let queue = broker.bound_queue(&exchange, "job.*").await;
    let mut consumer = broker.consume(&queue).await;

    // Completed and failed, three tenants (one of them none), with and without a request id;
    // recorded for a Worker whose lease on them is already over.
    let recorded = support::record_many(&db.store, EVENTS, 4, support::mixed, Duration::ZERO).await;
    let expected = support::by_ce_id(&recorded);
    assert_eq!(expected.len(), EVENTS);
    assert!(recorded.iter().any(|r| r.event.tenant() == "single-tenant"));
    assert!(recorded.iter().any(|r| r.event.tenant() == "acme"));

    // Batches of 7: the pass drains the backlog over several batches.
    let repairer = Repairer::new(
        db.store.clone(),
        publisher.clone(),
        support::config("repairer-e2e", 7),
    );
    let stop = CancellationToken::new();
    let running = {
        let stop = stop.clone();
        tokio::spawn(async move {
            repairer.run(stop).await;
        })
    };

    // Every event once, nothing more (one repairer, leases longer than any publish).
    let deliveries = support::collect(
        &mut consumer,
        EVENTS,
        Duration::from_secs(30),
        Duration::from_millis(500),
    )
    .await;
    let (repeated, seen) = support::duplicates(&deliveries);
    println!(
        "end to end: {} deliveries, {} distinct ce-ids, {repeated} duplicates",
        deliveries.len(),
        seen.len()
    );
    assert_eq!(repeated, 0);
    assert_eq!(seen.len(), EVENTS);
    support::assert_all_delivered_as_recorded(&deliveries, &recorded, &exchange);

    // Every row ends published, its lease cleared, its body still the bytes that were sent.
    support::wait_unpublished(db.pool(), 0, Duration::from_secs(10)).await;
    stop.cancel();
    running.await.expect("repairer task");
    let rows = support::outbox_rows(db.pool()).await;
    assert_eq!(rows.len(), EVENTS);
    for row in &rows {
        assert!(row.published_at.is_some(), "{row:?}");
        assert_eq!(row.leased_by, None, "{row:?}");
        assert_eq!(row.lease_until, None, "{row:?}");
        assert_eq!(row.last_error, None, "{row:?}");
        assert_eq!(
            row.attempts, 2,
            "recorded (1), then leased once by the repairer"
        );
        assert_eq!(row.body, expected[&row.ce_id].event.body, "{}", row.ce_id);
    }

    broker.cancel(&consumer).await;
    support::finish(publisher, broker, db).await;
}

#[tokio::test]
async fn young_rows_and_rows_leased_to_their_recorder_are_left_alone() {
    let (db, broker, exchange, publisher) = support::start().await;
    let queue = broker.bound_queue(&exchange, "job.*").await;

    // One row still leased to the Worker that recorded it, one young (inside the grace), one
    // old and free: only the last is the repairer's.
    let leased = support::record(&db.store, 0, support::mixed(0), Duration::from_secs(60)).await;
    let free = support::record(&db.store, 1, support::mixed(1), Duration::ZERO).await;
    support::age_outbox(db.pool(), Duration::from_secs(30)).await;
    let young = support::record(&db.store, 2, support::mixed(2), Duration::ZERO).await;

    let mut config = support::config("repairer-grace", 25);
    config.grace = Duration::from_secs(10);
    let repairer = Repairer::new(db.store.clone(), publisher.clone(), config);
    let report = repairer
        .repair_once(&CancellationToken::new())
        .await
        .expect("pass");
    assert_eq!(report.leased, 1, "{report:?}");
    assert_eq!(report.relayed.published, 1, "{report:?}");

    let received = broker.receive(&queue, 1, Duration::from_secs(10)).await;
    assert_eq!(support::ce_id(&received[0]), free.event.ce_id());
    let rows = support::outbox_rows(db.pool()).await;
    for row in rows {
        let published = row.published_at.is_some();
        if row.id == free.outbox_id {
            assert!(published);
        } else {
            assert!(!published, "{row:?}");
            assert!(row.id == leased.outbox_id || row.id == young.outbox_id);
        }
    }
    assert_eq!(broker.depth(&queue).await, 0);

    support::finish(publisher, broker, db).await;
}
