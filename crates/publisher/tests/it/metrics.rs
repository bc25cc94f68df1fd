//! The published, failed and returned counters move with real publishes.

use testkit::metrics::{counter, take, with_recorder};

use crate::support::{self, Broker};

#[test]
fn published_failed_and_returned_counters_move() {
    // The recorder is thread-local, so the publishes run on a current-thread runtime inside it.
    with_recorder(|snapshotter| async move {
        let broker = Broker::connect().await;
        let exchange = support::unique("exchange");
        let publisher = support::publisher(&exchange);
        publisher.declare_exchange().await.expect("declare");
        let queue = broker.bound_queue(&exchange, "job.completed").await;

        let events = vec![
            support::completed_event(None, None),
            support::completed_event(None, None),
            support::failed_event(None),
        ];
        let results = publisher.publish_batch(&events).await;
        assert!(results[0].is_ok() && results[1].is_ok(), "{results:?}");
        assert!(results[2].is_err(), "{results:?}");

        broker.delete_queue(&queue).await;
        broker.delete_exchange(&exchange).await;
        publisher.close().await;
        broker.close().await;

        let snapshot = take(&snapshotter);
        assert_eq!(
            counter(
                &snapshot,
                publisher::metrics::PUBLISHED,
                &[("routing_key", "job.completed")]
            ),
            2
        );
        assert_eq!(
            counter(
                &snapshot,
                publisher::metrics::RETURNED,
                &[("routing_key", "job.failed")]
            ),
            1
        );
        assert_eq!(
            counter(
                &snapshot,
                publisher::metrics::PUBLISH_FAILED,
                &[("routing_key", "job.failed"), ("reason", "returned")]
            ),
            1
        );
        assert_eq!(counter(&snapshot, publisher::metrics::PUBLISHED, &[]), 2);
    });
}
