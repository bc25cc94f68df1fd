//! A broker outage delays events and loses none (contract §8): while RabbitMQ is stopped, a
//! running `Repairer` marks nothing published; once it is back, every recorded event is
//! published within about one repair interval, and reaches the queue. Meanwhile the MQTT
//! mirror's rows of the same events, relayed on their own (lifecycle §5), all reach a
//! `mosquitto_sub` on the local Mosquitto during the outage: a dead AMQP broker does not hold
//! them back.
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

use std::collections::HashSet;
use std::sync::Arc;

use publisher::mqtt::{MqttConfig, MqttPublisher, MqttUrl};
use repairer::Repairer;
use testkit::amqp::{rabbitmqctl, RestartGuard};
use testkit::mqtt::{mqtt_url, unique_prefix, Subscriber};
use tokio_util::sync::CancellationToken;

use support::{Broker, TestDb};

const EVENTS: usize = 1_000;
const INTERVAL: Duration = Duration::from_secs(2);
/// How long the database is watched while the broker is down.
const DOWN_FOR: Duration = Duration::from_secs(5);

fn port_open() -> bool {
    let addr: SocketAddr = "127.0.0.1:5672".parse().expect("address");
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

async fn wait_for_port(open: bool, within: Duration) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if port_open() == open {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "port 5672 did not become {}",
        if open { "open" } else { "closed" }
    );
}

async fn published_count(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM outbox WHERE published_at IS NOT NULL AND sink = 'amqp'",
    )
    .fetch_one(pool)
    .await
    .expect("count published")
}

async fn tried_count(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbox WHERE last_error IS NOT NULL AND sink = 'amqp'")
        .fetch_one(pool)
        .await
        .expect("count tried")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_delays_events_and_loses_none() {
    let db = TestDb::migrated().await;
    let mut broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    broker.declare_exchange(&exchange).await;
    let queue = broker.bound_queue(&exchange, "job.*").await;
    // The publisher is connected when the broker goes away.
    let publisher = support::publisher(&exchange);
    publisher
        .declare_exchange()
        .await
        .expect("declare exchange");
    assert!(publisher.is_connected());
    broker.disconnect().await;

    // Down. Declared after `broker`, so on a panic it restarts the broker before the broker's
    // own cleanup runs.
    let mut guard = RestartGuard { armed: true };
    rabbitmqctl(&["stop_app"]);
    wait_for_port(false, Duration::from_secs(30)).await;
    let stopped = Instant::now();

    let prefix = unique_prefix();
    let subscriber = Subscriber::start(&mqtt_url(), &format!("{prefix}/events/#"));
    let mirrored = db.store.clone().mirrored(&prefix);
    let recorded = support::record_many(&mirrored, EVENTS, 8, support::mixed, Duration::ZERO).await;
    let expected = support::by_ce_id(&recorded);
    let mut config = support::config("repairer-outage", 25);
    config.interval = INTERVAL;
    let repairer = Repairer::new(db.store.clone(), publisher.clone(), config);
    let stop = CancellationToken::new();
    let running = {
        let stop = stop.clone();
        tokio::spawn(async move { repairer.run(stop).await })
    };

    let mqtt = Arc::new(
        MqttPublisher::start(&MqttConfig::new(
            MqttUrl::parse(&mqtt_url()).expect("url"),
            format!("repairer-outage-{}", uuid::Uuid::new_v4().simple()),
        ))
        .expect("mqtt publisher"),
    );
    let mut mirror_config = support::config("repairer-outage-mirror", 100);
    mirror_config.interval = INTERVAL;
    mirror_config.grace = Duration::ZERO;
    mirror_config.poll = Some(Duration::from_millis(200));
    let mirror = Repairer::new(db.store.clone(), mqtt.clone(), mirror_config);
    let mirroring = {
        let stop = stop.clone();
        tokio::spawn(async move { mirror.run(stop).await })
    };

    // Nothing is marked published while the broker is down, though the repairer keeps trying;
    // the mirror's messages all arrive meanwhile.
    let watch = Instant::now();
    let mut mirrored_in = None;
    while watch.elapsed() < DOWN_FOR || mirrored_in.is_none() {
        assert_eq!(published_count(db.pool()).await, 0, "published while down");
        if mirrored_in.is_none() {
            let ids: HashSet<String> = subscriber
                .received()
                .iter()
                .filter_map(|m| serde_json::from_str::<serde_json::Value>(&m.payload).ok())
                .filter_map(|p| p["eventId"].as_str().map(str::to_owned))
                .collect();
            if ids.len() == EVENTS {
                mirrored_in = Some(stopped.elapsed());
            }
        }
        assert!(
            watch.elapsed() < Duration::from_secs(60),
            "the mirror's messages did not all arrive while RabbitMQ was down"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!port_open(), "RabbitMQ stayed down throughout");
    println!(
        "RabbitMQ down: all {EVENTS} MQTT messages arrived {:.1?} after it stopped",
        mirrored_in.unwrap_or_default()
    );
    let tried = tried_count(db.pool()).await;
    println!(
        "broker down {:.1?}: 0 of {EVENTS} published, {tried} rows tried and backed off",
        stopped.elapsed()
    );
    assert!(tried > 0, "the repairer tried while the broker was down");
    assert!(
        tried < EVENTS as i64,
        "a pass stops at the first batches the broker could not take"
    );
    assert!(!publisher.is_connected());

    // Back up: every row is published within one repair interval plus the drain.
    let starting = Instant::now();
    rabbitmqctl(&["start_app"]);
    guard.armed = false;
    let start_app_took = starting.elapsed();
    wait_for_port(true, Duration::from_secs(60)).await;
    let port_after = starting.elapsed();
    let drained = support::wait_unpublished(db.pool(), 0, Duration::from_secs(60)).await;
    let all_published = starting.elapsed();
    let first_published: Option<f64> = sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM max(published_at) - min(published_at))::float8 FROM outbox \
         WHERE sink = 'amqp'",
    )
    .fetch_one(db.pool())
    .await
    .expect("publish span");
    println!(
        "broker back: start_app took {start_app_took:.2?}, port open {port_after:.2?} after it \
         was invoked; all {EVENTS} rows published {drained:.2?} after the port opened \
         ({all_published:.2?} after start_app was invoked); first to last publish {:.2} s \
         (repair interval {INTERVAL:?})",
        first_published.unwrap_or_default()
    );
    // One interval until the next pass, then the drain (1,000 rows: under a second even in a
    // debug build). One more interval is allowed for a pass that happened to try while the
    // broker was still starting (its connect refused, the pass stops at its first batch).
    // Rows the outage passes backed off are due again by then: each was tried once (attempt 2,
    // backoff at most 2 s), since each loop of a pass stops at its first failed batch and the
    // untouched rows are due first.
    let bound = INTERVAL * 2 + Duration::from_secs(3);
    assert!(
        drained <= bound,
        "all rows published {drained:?} after the restart (bound {bound:?})"
    );
    stop.cancel();
    running.await.expect("repairer task");
    mirroring.await.expect("mirror task");
    mqtt.close().await;

    // The queue holds every event, at least once.
    broker.reconnect().await;
    let depth = broker.depth(&queue).await as usize;
    let deliveries = broker.receive(&queue, depth, Duration::from_secs(60)).await;
    let (duplicates, seen) = support::duplicates(&deliveries);
    println!(
        "queue: {} deliveries, {} distinct ce-ids, {duplicates} duplicates",
        deliveries.len(),
        seen.len()
    );
    for ce_id in expected.keys() {
        assert!(seen.contains_key(ce_id), "{ce_id} was lost");
    }
    assert_eq!(seen.len(), EVENTS);
    for delivery in deliveries.iter().step_by(50) {
        let recorded = expected[&support::ce_id(delivery)];
        support::assert_delivered_as_recorded(delivery, &recorded.event, &exchange);
    }

    support::finish(publisher, broker, db).await;
}
