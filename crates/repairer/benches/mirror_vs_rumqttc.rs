//! The MQTT mirror's relay beside a bare `rumqttc` publisher, and the AMQP relay of the same
//! events, in one run on the real local PostgreSQL, RabbitMQ and Mosquitto (issue 14).
//!
//! `MIRROR_BENCH_EVENTS` (default 10,000) events are recorded through `Store::record_terminal`
//! with the mirror on: an AMQP row and an MQTT row each (untimed). Then, per round:
//! (a) AMQP: the AMQP `Repairer::repair_once` drains the AMQP rows (events/s);
//! (b) MQTT: the mirror's `Repairer::repair_once` drains the MQTT rows: `claim_unpublished`,
//!     `MqttPublisher::publish_batch` (QoS 1, 100 in flight, each counted on its PUBACK),
//!     `mark_published`, batches of `MIRROR_BENCH_BATCH` (default 500), 3 in flight;
//! (c) bare rumqttc: the same topics and payloads (read before the clock starts) published at
//!     QoS 1 by one `AsyncClient` with the same in-flight limit, timed until the last PUBACK.
//! `MIRROR_BENCH_ROUNDS` (default 3) rounds alternate (b) and (c); medians are reported and the
//! ratio of (b) to (c), whose goal is at least 0.8.
//!
//! Run: `cargo bench -p repairer --bench mirror_vs_rumqttc`.

#[allow(dead_code)]
#[path = "../tests/it/support.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox::Sink;
use publisher::mqtt::{MqttConfig, MqttPublisher, MqttUrl};
use repairer::Repairer;
use rumqttc::{AsyncClient, Event, MqttOptions, Outgoing, Packet, QoS};
use tokio_util::sync::CancellationToken;

use support::{Broker, TestDb};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
}

/// Marks every row of `sink` unpublished again (untimed).
async fn reset(db: &TestDb, sink: Sink) {
    sqlx::query(
        "UPDATE outbox SET published_at = NULL, attempts = 1, leased_by = NULL,
                           lease_until = NULL, next_attempt_at = created_at, last_error = NULL
         WHERE sink = $1",
    )
    .bind(sink.as_str())
    .execute(db.pool())
    .await
    .expect("reset");
    sqlx::raw_sql("VACUUM ANALYZE outbox")
        .execute(db.pool())
        .await
        .expect("vacuum");
}

async fn drain(repairer: &Repairer, events: usize) -> f64 {
    let started = Instant::now();
    let pass = repairer
        .repair_once(&CancellationToken::new())
        .await
        .expect("pass");
    let took = started.elapsed();
    assert_eq!(pass.relayed.published, events as u64, "every row published");
    events as f64 / took.as_secs_f64()
}

/// Publishes every message at QoS 1 with at most `in_flight` unacknowledged, until the last
/// PUBACK; events/s.
async fn bare(url: &MqttUrl, messages: &[(String, Vec<u8>)], in_flight: u16) -> f64 {
    let mut options = MqttOptions::new(
        format!("bench-bare-{}", uuid::Uuid::new_v4().simple()),
        &url.host,
        url.port,
    );
    options
        .set_inflight(in_flight)
        .set_request_channel_capacity(usize::from(in_flight) * 2);
    let (client, mut events) = AsyncClient::new(options, usize::from(in_flight) * 2);
    // Connected first, untimed.
    loop {
        if let Event::Incoming(Packet::ConnAck(_)) = events.poll().await.expect("connect") {
            break;
        }
    }
    let started = Instant::now();
    let feeder = {
        let client = client.clone();
        let messages = messages.to_vec();
        tokio::spawn(async move {
            for (topic, payload) in messages {
                client
                    .publish(topic, QoS::AtLeastOnce, false, payload)
                    .await
                    .expect("publish");
            }
        })
    };
    let mut acked = 0;
    while acked < messages.len() {
        match events.poll().await.expect("poll") {
            Event::Incoming(Packet::PubAck(_)) => acked += 1,
            Event::Outgoing(Outgoing::Publish(_)) | Event::Incoming(_) | Event::Outgoing(_) => {}
        }
    }
    let took = started.elapsed();
    feeder.await.expect("feeder");
    let _ = client.try_disconnect();
    messages.len() as f64 / took.as_secs_f64()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

async fn bench() {
    let events = env_usize("MIRROR_BENCH_EVENTS", 10_000);
    let batch = env_usize("MIRROR_BENCH_BATCH", 500);
    let rounds = env_usize("MIRROR_BENCH_ROUNDS", 3);
    let url = MqttUrl::parse(&testkit::mqtt::mqtt_url()).expect("TEST_MQTT_URL");

    let db = TestDb::migrated().await;
    let broker = Broker::connect().await;
    let exchange = support::unique("bench-exchange");
    broker.declare_exchange(&exchange).await;
    let queue = broker.bound_queue(&exchange, "job.*").await;
    let prefix = testkit::mqtt::unique_prefix();
    let mirrored = db.store.clone().mirrored(&prefix);
    support::record_many(&mirrored, events, 8, support::mixed, Duration::ZERO).await;
    let messages: Vec<(String, Vec<u8>)> =
        sqlx::query_as("SELECT topic, body FROM outbox WHERE sink = 'mqtt' ORDER BY id")
            .fetch_all(db.pool())
            .await
            .expect("mqtt rows");
    assert_eq!(messages.len(), events);
    let mean = messages.iter().map(|(_, p)| p.len()).sum::<usize>() / events.max(1);
    println!(
        "mirror_vs_rumqttc: {events} events ({mean} B mean MQTT payload), batches of {batch}, \
         {rounds} rounds, on {url}"
    );

    let amqp = Repairer::new(
        db.store.clone(),
        support::publisher(&exchange),
        support::config("bench-amqp", batch as i64),
    );
    let mut mqtt_config = MqttConfig::new(
        url.clone(),
        format!("bench-mirror-{}", uuid::Uuid::new_v4().simple()),
    );
    mqtt_config.ack_timeout = Duration::from_secs(60);
    let in_flight = mqtt_config.in_flight;
    let publisher = Arc::new(MqttPublisher::start(&mqtt_config).expect("mqtt"));
    while !publisher.is_connected() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut config = support::config("bench-mirror", batch as i64);
    config.lease = Duration::from_secs(600);
    let mirror = Repairer::new(db.store.clone(), publisher.clone(), config);

    let (mut amqp_rates, mut mirror_rates, mut bare_rates) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        reset(&db, Sink::Amqp).await;
        amqp_rates.push(drain(&amqp, events).await);
        broker
            .channel
            .queue_purge(
                queue.as_str().into(),
                lapin::options::QueuePurgeOptions::default(),
            )
            .await
            .expect("purge");
        for side in 0..2 {
            if (side == 0) == (round % 2 == 0) {
                reset(&db, Sink::Mqtt).await;
                mirror_rates.push(drain(&mirror, events).await);
            } else {
                bare_rates.push(bare(&url, &messages, in_flight).await);
            }
        }
        println!(
            "round {round}: AMQP relay {:.0}/s, MQTT relay {:.0}/s, bare rumqttc {:.0}/s",
            amqp_rates[round], mirror_rates[round], bare_rates[round]
        );
    }
    let (amqp, mirror, bare) = (
        median(&mut amqp_rates),
        median(&mut mirror_rates),
        median(&mut bare_rates),
    );
    println!(
        "median: AMQP relay {amqp:.0} events/s; MQTT relay {mirror:.0} events/s; bare rumqttc \
         {bare:.0} events/s; MQTT relay / bare = {:.2} (goal >= 0.8)",
        mirror / bare
    );
    publisher.close().await;
    db.drop().await;
}
