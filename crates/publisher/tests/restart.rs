//! Broker restart: publishes fail while RabbitMQ is stopped and succeed again once it is back,
//! on the same `Publisher`, which reconnects by itself.
//!
//! **This test stops the shared local broker** (`rabbitmqctl stop_app`, then `start_app`) for a
//! few seconds. It is its own test binary so that it never runs concurrently with this crate's
//! other tests; tests of other crates that use RabbitMQ at the same moment can still be hit. It
//! drives the local node with `rabbitmqctl`, so `TEST_AMQP_URI` must point at that node.

#[allow(dead_code)]
#[path = "it/support.rs"]
mod support;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use publisher::PublishError;
use testkit::amqp::{rabbitmqctl, RestartGuard};
use testkit::metrics::{counter, take, with_recorder};

use support::Broker;

fn wait_for_port(open: bool, within: Duration) {
    let addr: SocketAddr = "127.0.0.1:5672".parse().expect("address");
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let is_open = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok();
        if is_open == open {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "port 5672 did not become {}",
        if open { "open" } else { "closed" }
    );
}

#[test]
fn publishes_fail_while_the_broker_is_down_and_succeed_after_it_restarts() {
    with_recorder(|snapshotter| async move {
        restart_scenario().await;
        let snapshot = take(&snapshotter);
        assert_eq!(
            counter(&snapshot, publisher::metrics::PUBLISHED, &[]),
            2,
            "only the publishes before the stop and after the start count"
        );
        assert!(counter(&snapshot, publisher::metrics::PUBLISH_FAILED, &[]) >= 2);
    });
}

async fn restart_scenario() {
    let mut broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = support::publisher(&exchange);
    publisher.declare_exchange().await.expect("declare");
    let queue = broker.bound_queue(&exchange, "job.*").await;
    publisher
        .publish(&support::completed_event(Some("acme"), None))
        .await
        .expect("published before the stop");
    assert!(publisher.is_connected());
    broker.disconnect().await;

    // Down: keep this window short, other test binaries may be using the broker.
    let guard = RestartGuard { armed: true };
    rabbitmqctl(&["stop_app"]);
    wait_for_port(false, Duration::from_secs(30));
    for _ in 0..2 {
        let error = publisher
            .publish(&support::failed_event(Some("acme")))
            .await
            .expect_err("the broker is down");
        eprintln!("while down: {error:?}");
        assert!(error.is_retriable(), "{error:?}");
        assert!(
            matches!(
                error,
                PublishError::Channel(_)
                    | PublishError::Connect(_)
                    | PublishError::ConnectTimeout(_)
                    | PublishError::ConfirmTimeout(_)
            ),
            "{error:?}"
        );
    }
    assert!(!publisher.is_connected());
    rabbitmqctl(&["start_app"]);
    drop(guard);
    wait_for_port(true, Duration::from_secs(60));

    // Up again: the same publisher reconnects on its next call. The port can open a moment
    // before the vhost accepts connections, hence a few tries (the caller's job in production).
    let event = support::completed_event(Some("acme"), None);
    let mut last = None;
    for attempt in 1..=20 {
        match publisher.publish(&event).await {
            Ok(()) => {
                eprintln!("published again on attempt {attempt}");
                last = None;
                break;
            }
            Err(error) => {
                last = Some(error);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    if let Some(error) = last {
        panic!("no publish succeeded after the restart: {error:?}");
    }
    assert!(publisher.is_connected());

    // Both confirmed events were persistent in a durable queue: both survived or arrived.
    broker.reconnect().await;
    assert_eq!(broker.depth(&queue).await, 2);
    broker.delete_queue(&queue).await;
    broker.delete_exchange(&exchange).await;
    publisher.close().await;
    broker.close().await;
}
