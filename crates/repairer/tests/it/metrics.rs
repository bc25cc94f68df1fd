//! The counters and gauges of the relay, the publisher and the repairer, moved by real publishes.
//!
//! `metrics::with_local_recorder` installs the recorder for the current thread only, so each test
//! runs its async body on a current-thread runtime inside it: every task (the relay, the
//! publisher's calls, the repairer loop) records on that thread. lapin's I/O thread records
//! nothing.

use std::time::Duration;

use outbox::{PendingEvent, OLDEST_UNPUBLISHED_AGE_SECONDS, PENDING_EVENTS};
use publisher::metrics::{PUBLISHED, PUBLISH_FAILED, RETURNED};
use repairer::metrics::{REPAIR_PASSES, REPUBLISHED};
use repairer::Repairer;
use testkit::metrics::{counter, gauge, take, with_recorder};
use tokio_util::sync::CancellationToken;

use crate::support::{self, Broker, TestDb};

const COMPLETED: (&str, &str) = ("routing_key", "job.completed");
const FAILED: (&str, &str) = ("routing_key", "job.failed");

#[test]
fn published_failed_returned_republished_and_the_outbox_gauges() {
    with_recorder(|snapshotter| async move {
        let (db, broker, exchange, publisher) = support::start().await;
        // Only completed events route for now.
        let queue = broker.bound_queue(&exchange, "job.completed").await;
        let completed = |i| support::Spec {
            status: contract::event::TerminalStatus::Completed,
            ..support::mixed(i)
        };
        let failed = |i| support::Spec {
            status: contract::event::TerminalStatus::Failed,
            ..support::mixed(i)
        };

        // 1. The Worker's own publish right after recording (attempt 1): published, not
        //    republished.
        let mut first = Vec::new();
        for i in 0..2 {
            let recorded =
                support::record(&db.store, i, completed(i), Duration::from_secs(60)).await;
            first.push(PendingEvent {
                sink: outbox::Sink::Amqp,
                topic: None,
                id: outbox::RowId::Serial(recorded.outbox_id),
                job_id: recorded.job_id,
                event: recorded.event,
                attempts: 1,
                created_at: chrono::Utc::now(),
            });
        }
        let relayed = repairer::relay(
            &db.store,
            &publisher.clone().into(),
            support::RECORDER,
            &first,
        )
        .await
        .expect("relay");
        assert_eq!(relayed.published, 2, "{relayed:?}");
        let s = take(&snapshotter);
        assert_eq!(counter(&s, PUBLISHED, &[COMPLETED]), 2);
        assert_eq!(counter(&s, REPUBLISHED, &[]), 0);
        assert_eq!(counter(&s, PUBLISH_FAILED, &[]), 0);

        // 2. A repair pass over 3 completed and 2 failed events left unpublished 90 s ago: the
        //    completed ones are republished, the failed ones returned.
        for i in 2..5 {
            support::record(&db.store, i, completed(i), Duration::ZERO).await;
        }
        for i in 5..7 {
            support::record(&db.store, i, failed(i), Duration::ZERO).await;
        }
        support::age_outbox(db.pool(), Duration::from_secs(90)).await;
        let repairer = Repairer::new(
            db.store.clone(),
            publisher.clone(),
            support::config("repairer-metrics", 25),
        );
        let stop = CancellationToken::new();
        let pass = repairer.repair_once(&stop).await.expect("pass");
        assert_eq!(pass.relayed.published, 3, "{pass:?}");
        assert_eq!(pass.relayed.failed, 2, "{pass:?}");
        let s = take(&snapshotter);
        assert_eq!(counter(&s, PUBLISHED, &[COMPLETED]), 3);
        assert_eq!(counter(&s, PUBLISHED, &[FAILED]), 0);
        assert_eq!(counter(&s, REPUBLISHED, &[COMPLETED]), 3);
        assert_eq!(counter(&s, REPUBLISHED, &[FAILED]), 0);
        assert_eq!(
            counter(&s, PUBLISH_FAILED, &[FAILED, ("reason", "returned")]),
            2
        );
        assert_eq!(counter(&s, PUBLISH_FAILED, &[]), 2);
        assert_eq!(counter(&s, RETURNED, &[FAILED]), 2);
        assert_eq!(counter(&s, RETURNED, &[]), 2);
        // The gauges describe the outbox after the pass: the 2 returned events wait, the
        // oldest for 90 s (plus the test's own time).
        assert_eq!(gauge(&s, PENDING_EVENTS), 2.0);
        let oldest = gauge(&s, OLDEST_UNPUBLISHED_AGE_SECONDS);
        assert!((90.0..150.0).contains(&oldest), "{oldest}");
        assert_eq!(gauge(&s, outbox::FAILING_EVENTS), 2.0);

        // 3. Failed events routable too, and due: republished; the outbox is empty.
        broker.bind(&queue, &exchange, "job.failed").await;
        support::make_due(db.pool()).await;
        let pass = repairer.repair_once(&stop).await.expect("pass");
        assert_eq!(pass.relayed.published, 2, "{pass:?}");
        let s = take(&snapshotter);
        assert_eq!(counter(&s, PUBLISHED, &[FAILED]), 2);
        assert_eq!(counter(&s, PUBLISHED, &[COMPLETED]), 0);
        assert_eq!(counter(&s, REPUBLISHED, &[FAILED]), 2);
        assert_eq!(counter(&s, PUBLISH_FAILED, &[]), 0);
        assert_eq!(gauge(&s, PENDING_EVENTS), 0.0);
        assert_eq!(gauge(&s, OLDEST_UNPUBLISHED_AGE_SECONDS), 0.0);

        assert_eq!(broker.depth(&queue).await, 7);
        support::finish(publisher, broker, db).await;
    });
}

#[test]
fn repair_passes_are_counted_by_outcome() {
    with_recorder(|snapshotter| async move {
        let mut db = TestDb::migrated().await;
        let exchange = support::unique("exchange");
        let broker = Broker::connect().await;
        broker.declare_exchange(&exchange).await;
        let publisher = support::publisher(&exchange);

        // A healthy repairer: every pass ok.
        let mut config = support::config("repairer-passes", 25);
        config.interval = Duration::from_millis(50);
        let healthy = Repairer::new(db.store.clone(), publisher.clone(), config.clone());
        let stop = CancellationToken::new();
        let stopper = stop.clone();
        tokio::join!(healthy.run(stop), async move {
            tokio::time::sleep(Duration::from_millis(280)).await;
            stopper.cancel();
        });
        let s = take(&snapshotter);
        let ok = counter(&s, REPAIR_PASSES, &[("outcome", "ok")]);
        assert!((2..=7).contains(&ok), "{ok} passes in 280 ms at 50 ms");
        assert_eq!(counter(&s, REPAIR_PASSES, &[("outcome", "error")]), 0);

        // A repairer whose state database is gone: every pass fails, is counted, and the loop
        // goes on.
        let gone = db.another_store(1).await;
        gone.pool().close().await;
        let broken = Repairer::new(gone, publisher.clone(), config);
        let stop = CancellationToken::new();
        let stopper = stop.clone();
        tokio::join!(broken.run(stop), async move {
            tokio::time::sleep(Duration::from_millis(180)).await;
            stopper.cancel();
        });
        let s = take(&snapshotter);
        let errors = counter(&s, REPAIR_PASSES, &[("outcome", "error")]);
        assert!(errors >= 2, "{errors}");
        assert_eq!(counter(&s, REPAIR_PASSES, &[("outcome", "ok")]), 0);

        support::finish(publisher, broker, db).await;
    });
}
