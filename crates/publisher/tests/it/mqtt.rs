//! The MQTT publisher against the real Mosquitto: a publish counts when its PUBACK came, and the
//! messages arrive at a subscriber no one here wrote.

use std::time::Duration;

use publisher::mqtt::{MqttConfig, MqttError, MqttMessage, MqttPublisher, MqttUrl};
use testkit::mqtt::{mqtt_url, unique_prefix, PrivateBroker, Subscriber};

fn config(url: &str) -> MqttConfig {
    let mut config = MqttConfig::new(
        MqttUrl::parse(url).expect("url"),
        format!("publisher-test-{}", uuid::Uuid::new_v4().simple()),
    );
    config.ack_timeout = Duration::from_secs(10);
    config
}

/// Waits until the publisher's connection was accepted.
async fn connected(publisher: &MqttPublisher) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !publisher.is_connected() {
        assert!(tokio::time::Instant::now() < deadline, "never connected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_pipelined_batch_is_acknowledged_message_by_message_and_arrives() {
    let prefix = unique_prefix();
    let subscriber = Subscriber::start(&mqtt_url(), &format!("{prefix}/#"));
    let publisher = MqttPublisher::start(&config(&mqtt_url())).expect("start");
    connected(&publisher).await;
    // More than the 100 in flight at once: the rest wait for room, none is lost.
    let topics: Vec<String> = (0..250).map(|i| format!("{prefix}/events/{i}")).collect();
    let payloads: Vec<String> = (0..250).map(|i| format!("{{\"n\":{i}}}")).collect();
    let messages: Vec<MqttMessage<'_>> = topics
        .iter()
        .zip(&payloads)
        .map(|(topic, payload)| MqttMessage {
            routing_key: "job.completed",
            topic,
            payload: payload.as_bytes(),
        })
        .collect();
    let outcomes = publisher.publish_batch(&messages).await;
    assert_eq!(outcomes.len(), 250);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let received = subscriber
        .wait_for(Duration::from_secs(30), |r| r.len() >= 250)
        .await;
    let mut got: Vec<(String, String)> =
        received.into_iter().map(|r| (r.topic, r.payload)).collect();
    got.sort();
    let mut want: Vec<(String, String)> = topics.into_iter().zip(payloads).collect();
    want.sort();
    assert_eq!(got, want);
    publisher.close().await;
}

#[tokio::test]
async fn without_a_broker_a_publish_fails_at_once_and_after_it_returns_one_succeeds() {
    let mut broker = PrivateBroker::start();
    let publisher = MqttPublisher::start(&config(&broker.url())).expect("start");
    connected(&publisher).await;
    broker.stop();
    // The connection's loss is noticed when the socket closes.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while publisher.is_connected() {
        assert!(tokio::time::Instant::now() < deadline, "loss never noticed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let message = MqttMessage {
        routing_key: "job.failed",
        topic: "fetcher-test/away",
        payload: b"{}",
    };
    let started = tokio::time::Instant::now();
    let outcome = publisher.publish_batch(&[message]).await;
    assert!(
        matches!(outcome[0], Err(MqttError::NotConnected)),
        "{outcome:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "failed without waiting for a PUBACK that cannot come"
    );
    broker.resume();
    connected(&publisher).await;
    let outcome = publisher.publish_batch(&[message]).await;
    assert!(outcome[0].is_ok(), "{outcome:?}");
    publisher.close().await;
}

#[tokio::test]
async fn a_topic_with_a_wildcard_is_refused_not_sent() {
    let publisher = MqttPublisher::start(&config(&mqtt_url())).expect("start");
    connected(&publisher).await;
    let outcome = publisher
        .publish_batch(&[MqttMessage {
            routing_key: "job.completed",
            topic: "fetcher-test/+/bad",
            payload: b"{}",
        }])
        .await;
    assert!(
        matches!(outcome[0], Err(MqttError::Message(_))),
        "{outcome:?}"
    );
    publisher.close().await;
}

#[tokio::test]
async fn an_idle_connection_is_kept_alive_by_the_drivers_own_pings() {
    // The driver takes keep-alive over from the event loop once connected; Mosquitto closes a
    // connection that sends nothing for 1.5 keep-alive intervals.
    let mut config = config(&mqtt_url());
    config.keep_alive = Duration::from_secs(1);
    let publisher = MqttPublisher::start(&config).expect("start");
    connected(&publisher).await;
    // Ten intervals idle (Mosquitto 2.0 enforces keep-alive on a timer of its own, within a few
    // seconds of 1.5 intervals), watched closely: a dropped connection is down for at least
    // the first reconnect delay (100 ms). Without the pings this fails in about 4 s.
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < until {
        assert!(
            publisher.is_connected(),
            "the broker dropped the idle connection"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let prefix = unique_prefix();
    let topic = format!("{prefix}/events/idle");
    let outcome = publisher
        .publish_batch(&[MqttMessage {
            routing_key: "job.completed",
            topic: &topic,
            payload: b"{}",
        }])
        .await;
    assert!(outcome[0].is_ok(), "{outcome:?}");
    publisher.close().await;
}
