//! The published, failed and returned counters move with real publishes.

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::CompositeKey;

use crate::support::{self, Broker};

fn counter(snapshot: &[(CompositeKey, DebugValue)], name: &str, labels: &[(&str, &str)]) -> u64 {
    snapshot
        .iter()
        .filter(|(key, _)| key.key().name() == name)
        .filter(|(key, _)| {
            labels.iter().all(|(k, v)| {
                key.key()
                    .labels()
                    .any(|label| label.key() == *k && label.value() == *v)
            })
        })
        .map(|(_, value)| match value {
            DebugValue::Counter(n) => *n,
            other => panic!("{name} is not a counter: {other:?}"),
        })
        .sum()
}

#[test]
fn published_failed_and_returned_counters_move() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // The recorder is thread-local, so the publishes run on a current-thread runtime inside it.
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
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
        });
    });

    let snapshot: Vec<(CompositeKey, DebugValue)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| (key, value))
        .collect();
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
}
