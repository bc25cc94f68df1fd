//! A large batch is pipelined, confirmed, and delivered whole.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use lapin::types::ShortString;

use crate::support::{self, Broker};

#[tokio::test]
async fn a_batch_of_a_thousand_events_is_confirmed_and_all_arrive() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = support::publisher(&exchange);
    publisher.declare_exchange().await.expect("declare");
    let queue = broker.bound_queue(&exchange, "job.*").await;

    let events: Vec<_> = (0..1000)
        .map(|i| {
            if i % 2 == 0 {
                support::completed_event(Some("acme"), None)
            } else {
                support::failed_event(Some("acme"))
            }
        })
        .collect();
    let started = Instant::now();
    let results = publisher.publish_batch(&events).await;
    let elapsed = started.elapsed();
    assert_eq!(results.len(), events.len());
    for (i, result) in results.iter().enumerate() {
        assert!(result.is_ok(), "event {i}: {result:?}");
    }
    eprintln!("1000 events confirmed in {elapsed:?}");

    // Confirmed means enqueued: the queue holds them all now.
    assert_eq!(broker.depth(&queue).await, 1000);
    let received = broker.receive(&queue, 1000, Duration::from_secs(30)).await;
    let ids: HashSet<&str> = received
        .iter()
        .filter_map(|d| d.properties.message_id().as_ref().map(ShortString::as_str))
        .collect();
    let expected: HashSet<&str> = events.iter().map(|e| e.ce_id()).collect();
    assert_eq!(ids, expected);

    broker.delete_queue(&queue).await;
    broker.delete_exchange(&exchange).await;
    publisher.close().await;
    broker.close().await;
}

#[tokio::test]
async fn an_empty_batch_does_nothing() {
    let publisher = support::publisher(&support::unique("exchange"));
    assert!(publisher.publish_batch(&[]).await.is_empty());
    assert!(!publisher.is_connected(), "nothing to send, no connection");
}

#[tokio::test]
async fn concurrent_batches_each_get_their_own_outcomes() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = support::publisher(&exchange);
    publisher.declare_exchange().await.expect("declare");
    // Only job.completed is routed: every job.failed event must come back as returned, to
    // exactly the call that published it, even with many calls in flight at once.
    let queue = broker.bound_queue(&exchange, "job.completed").await;

    let batches: Vec<Vec<_>> = (0..8)
        .map(|_| {
            (0..50)
                .map(|i| {
                    if i % 3 == 0 {
                        support::failed_event(None)
                    } else {
                        support::completed_event(None, None)
                    }
                })
                .collect()
        })
        .collect();
    let outcomes =
        futures_util::future::join_all(batches.iter().map(|b| publisher.publish_batch(b))).await;
    let mut routed = 0;
    for (batch, results) in batches.iter().zip(&outcomes) {
        for (event, result) in batch.iter().zip(results) {
            match event.routing_key() {
                "job.completed" => {
                    assert!(result.is_ok(), "{result:?}");
                    routed += 1;
                }
                _ => assert!(
                    matches!(result, Err(publisher::PublishError::Returned { .. })),
                    "{result:?}"
                ),
            }
        }
    }
    assert_eq!(broker.depth(&queue).await, routed);

    broker.delete_queue(&queue).await;
    broker.delete_exchange(&exchange).await;
    publisher.close().await;
    broker.close().await;
}
