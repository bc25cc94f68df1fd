//! The Manager mode's MQTT mirror relay (`repairer::ManagerMirror`) against the MongoDB test
//! server (secantusdb, replica set) and the local Mosquitto: a job's recorded end reaches its
//! MQTT topic, its mirror row is deleted once delivered, and lib-streaming's collection holds
//! only the AMQP row.

use std::sync::Arc;
use std::time::Duration;

use mongodb::bson::doc;
use mongostate::{ManagerConfig, ManagerStore, Store};
use publisher::mqtt::{MqttConfig, MqttPublisher, MqttUrl};
use repairer::{ManagerMirror, ManagerMirrorConfig};
use testkit::manager::Manager;
use testkit::mongo::MongoDb;
use testkit::mqtt::{mqtt_url, unique_prefix, PrivateBroker, Subscriber};
use tokio_util::sync::CancellationToken;

use crate::manager_rows::{job, record_failure};
use crate::support::SOURCE;

const WITHIN: Duration = Duration::from_secs(20);

/// A Manager job, claimed and ended `failed` by a store with the mirror on under `prefix`:
/// one mirror row waits.
async fn recorded_end(prefix: &str) -> (MongoDb, ManagerStore, uuid::Uuid) {
    let db = MongoDb::create().await;
    let manager = Manager::new(db.db());
    manager.ensure_indexes().await;
    let store = ManagerStore::new(
        Store::new(db.client.clone(), &db.name),
        ManagerConfig {
            exchange: "fetcher.job.events".to_owned(),
            source: SOURCE.to_owned(),
        },
    )
    .mirrored(prefix);
    store.ensure_indexes().await.expect("indexes");
    let id = manager
        .create_job(&job())
        .await
        .expect("the Manager creates the job");
    record_failure(&store, id, Some("req-1")).await;
    (db, store, id)
}

fn publisher(url: &str) -> Arc<MqttPublisher> {
    let mut config = MqttConfig::new(
        MqttUrl::parse(url).expect("url"),
        format!("mirror-test-{}", uuid::Uuid::new_v4().simple()),
    );
    config.ack_timeout = Duration::from_secs(10);
    Arc::new(MqttPublisher::start(&config).expect("start"))
}

#[tokio::test]
async fn a_recorded_end_reaches_its_mqtt_topic_and_its_mirror_row_is_deleted() {
    let prefix = unique_prefix();
    let (db, store, id) = recorded_end(&prefix).await;
    let subscriber = Subscriber::start(&mqtt_url(), &format!("{prefix}/#"));
    let mqtt = publisher(&mqtt_url());
    let relay = ManagerMirror::new(
        store.clone(),
        mqtt.clone(),
        ManagerMirrorConfig::new("mirror-a"),
    );
    let stop = CancellationToken::new();
    let running = tokio::spawn({
        let stop = stop.clone();
        async move { relay.run(stop).await }
    });

    let topic = format!("{prefix}/events/job/{}/", id.as_hyphenated());
    let received = subscriber
        .wait_for(WITHIN, |r| r.iter().any(|m| m.topic.starts_with(&topic)))
        .await;

    let message = received
        .iter()
        .find(|m| m.topic.starts_with(&topic))
        .unwrap_or_else(|| panic!("no message under {topic}: {received:?}"));
    let payload: serde_json::Value =
        serde_json::from_str(&message.payload).expect("a JSON payload");
    assert_eq!(payload["description"], "tests", "{payload}");
    // Delivered: the row is deleted (waited for: the relay deletes it after the broker's ack).
    let rows = store.store().mirror_rows();
    let deadline = tokio::time::Instant::now() + WITHIN;
    while rows.count_documents(doc! {}).await.expect("count") > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the mirror row is never deleted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        received
            .iter()
            .filter(|m| m.topic.starts_with(&topic))
            .count(),
        1
    );
    // lib-streaming's collection: the AMQP row alone.
    assert_eq!(
        store
            .store()
            .outbox_rows()
            .count_documents(doc! {})
            .await
            .expect("count"),
        1
    );
    stop.cancel();
    running.await.expect("the relay stops");
    mqtt.close().await;
    db.drop().await;
}

#[tokio::test]
async fn while_the_broker_is_away_the_rows_wait_and_are_delivered_once_it_returns() {
    let prefix = unique_prefix();
    let (db, store, id) = recorded_end(&prefix).await;
    let mut broker = PrivateBroker::start();
    let mqtt = publisher(&broker.url());
    let deadline = tokio::time::Instant::now() + WITHIN;
    while !mqtt.is_connected() {
        assert!(tokio::time::Instant::now() < deadline, "never connected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    broker.stop();
    while mqtt.is_connected() {
        assert!(tokio::time::Instant::now() < deadline, "loss never noticed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let relay = ManagerMirror::new(
        store.clone(),
        mqtt.clone(),
        ManagerMirrorConfig::new("mirror-a"),
    );
    let stop = CancellationToken::new();

    let away = relay.relay_once(&stop).await.expect("a pass");

    // Nothing taken while the publisher knows the broker is away: no attempt counted.
    assert_eq!(away.taken, 0, "{away:?}");
    let rows = store.store().mirror_rows();
    let waiting = rows
        .find_one(doc! {})
        .await
        .expect("find")
        .expect("the row waits");
    assert_eq!(waiting.get_i32("attempts"), Ok(0));

    broker.resume();
    let subscriber = Subscriber::start(&broker.url(), &format!("{prefix}/#"));
    while !mqtt.is_connected() {
        assert!(tokio::time::Instant::now() < deadline, "never reconnected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let back = relay.relay_once(&stop).await.expect("a pass");

    assert_eq!((back.taken, back.relayed.published), (1, 1), "{back:?}");
    assert_eq!(rows.count_documents(doc! {}).await.expect("count"), 0);
    let topic = format!("{prefix}/events/job/{}/", id.as_hyphenated());
    let received = subscriber
        .wait_for(WITHIN, |r| r.iter().any(|m| m.topic.starts_with(&topic)))
        .await;
    assert!(
        received.iter().any(|m| m.topic.starts_with(&topic)),
        "{received:?}"
    );
    mqtt.close().await;
    db.drop().await;
}
