//! Unroutable publishes are failures, and a missing exchange breaks one call, not the publisher.

use std::time::Duration;

use publisher::PublishError;

use crate::support::{self, Broker};

#[tokio::test]
async fn an_unroutable_publish_is_reported_as_returned() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = support::publisher(&exchange);
    publisher.declare_exchange().await.expect("declare");

    let event = support::completed_event(Some("acme"), None);
    let error = publisher
        .publish(&event)
        .await
        .expect_err("no queue is bound");
    match &error {
        PublishError::Returned {
            reply_code,
            reply_text,
        } => {
            assert_eq!(*reply_code, 312);
            assert_eq!(reply_text, "NO_ROUTE");
        }
        other => panic!("expected Returned, got {other:?}"),
    }
    assert!(error.is_retriable());

    // The channel survives a return: once a queue is bound, the same publisher delivers.
    let queue = broker.bound_queue(&exchange, "job.*").await;
    publisher.publish(&event).await.expect("routed now");
    let received = broker.receive(&queue, 1, Duration::from_secs(10)).await;
    assert_eq!(received[0].data, event.body);

    broker.delete_queue(&queue).await;
    broker.delete_exchange(&exchange).await;
    publisher.close().await;
    broker.close().await;
}

#[tokio::test]
async fn a_batch_mixing_routed_and_unroutable_events_reports_each() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = support::publisher(&exchange);
    publisher.declare_exchange().await.expect("declare");
    let queue = broker.bound_queue(&exchange, "job.failed").await;

    let events: Vec<_> = (0..200)
        .map(|i| {
            if i % 4 == 0 {
                support::completed_event(None, None)
            } else {
                support::failed_event(None)
            }
        })
        .collect();
    let results = publisher.publish_batch(&events).await;
    for (event, result) in events.iter().zip(&results) {
        if event.routing_key() == "job.completed" {
            assert!(
                matches!(result, Err(PublishError::Returned { .. })),
                "{result:?}"
            );
        } else {
            assert!(result.is_ok(), "{result:?}");
        }
    }
    assert_eq!(broker.depth(&queue).await, 150);

    broker.delete_queue(&queue).await;
    broker.delete_exchange(&exchange).await;
    publisher.close().await;
    broker.close().await;
}

#[tokio::test]
async fn a_missing_exchange_fails_the_publish_and_the_publisher_recovers() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = support::publisher(&exchange);

    // Never declared: the broker closes the channel (404) and the confirm fails.
    let event = support::failed_event(Some("acme"));
    let error = publisher.publish(&event).await.expect_err("no exchange");
    assert!(matches!(error, PublishError::Channel(_)), "{error:?}");
    assert!(error.is_retriable());
    // The second try still fails the same way, on a fresh channel.
    let error = publisher
        .publish(&event)
        .await
        .expect_err("still no exchange");
    assert!(matches!(error, PublishError::Channel(_)), "{error:?}");

    broker.declare_exchange(&exchange).await;
    let queue = broker.bound_queue(&exchange, "job.*").await;
    publisher.publish(&event).await.expect("recovered");
    let received = broker.receive(&queue, 1, Duration::from_secs(10)).await;
    assert_eq!(received[0].data, event.body);

    // Deleted under a live publisher: fails, then recovers once it exists again.
    broker.delete_queue(&queue).await;
    broker.delete_exchange(&exchange).await;
    let error = publisher
        .publish(&event)
        .await
        .expect_err("exchange deleted");
    assert!(matches!(error, PublishError::Channel(_)), "{error:?}");
    publisher.declare_exchange().await.expect("declare again");
    let queue = broker.bound_queue(&exchange, "job.*").await;
    publisher.publish(&event).await.expect("recovered again");

    broker.delete_queue(&queue).await;
    broker.delete_exchange(&exchange).await;
    publisher.close().await;
    broker.close().await;
}

#[tokio::test]
async fn an_unreachable_broker_is_a_retriable_connect_error() {
    let mut config = publisher::PublisherConfig::new(
        publisher::AmqpUri::new("amqp://guest:guest@127.0.0.1:1/%2f"),
        "fetcher.job.events",
    );
    config.connect_timeout = Duration::from_secs(2);
    let publisher = publisher::Publisher::new(config, support::key()).expect("config");
    let error = publisher
        .publish(&support::failed_event(None))
        .await
        .expect_err("nothing listens on port 1");
    assert!(
        matches!(
            error,
            PublishError::Connect(_) | PublishError::ConnectTimeout(_)
        ),
        "{error:?}"
    );
    assert!(error.is_retriable());
    assert!(!publisher.is_connected());
    let printed = format!("{error} {error:?} {publisher:?}");
    assert!(!printed.contains("guest:guest"), "{printed}");
}

#[test]
fn a_bad_uri_is_a_config_error_that_does_not_echo_it() {
    let config = publisher::PublisherConfig::new(
        publisher::AmqpUri::new("not a uri with s3cr3t"),
        "fetcher.job.events",
    );
    let error = publisher::Publisher::new(config, support::key()).expect_err("bad uri");
    assert!(matches!(error, PublishError::Config(_)));
    assert!(!error.is_retriable());
    assert!(!format!("{error} {error:?}").contains("s3cr3t"));
}

#[test]
fn an_empty_exchange_is_a_config_error() {
    let config = publisher::PublisherConfig::new(publisher::AmqpUri::new(support::amqp_uri()), "");
    let error = publisher::Publisher::new(config, support::key()).expect_err("empty exchange");
    assert!(matches!(error, PublishError::Config(_)));
}
