//! The MQTT mirror's relay beside a bare `rumqttc` publisher, and the AMQP relay of the same
//! events, in one run on the real local PostgreSQL, RabbitMQ and Mosquitto (issue 14).
//!
//! `MIRROR_BENCH_EVENTS` (default 10,000) events are recorded through `Store::record_terminal`
//! with the mirror on: an AMQP row and an MQTT row each (untimed). Then, per round:
//! (a) AMQP: the AMQP `Repairer::repair_once` drains the AMQP rows (events/s);
//! (b) MQTT: the mirror's `Repairer::repair_once` drains the MQTT rows: `take_mirror_batch`
//!     (row locks in an open transaction), `MqttPublisher::publish_batch` (QoS 1, 100 in
//!     flight, each counted on its PUBACK), the delivered rows deleted in the batch's
//!     transaction; batches of `MIRROR_BENCH_BATCH` (default 500), `MIRROR_BENCH_LOOPS`
//!     (default 3) at once;
//! (c) bare rumqttc: the same topics and payloads (read before the clock starts) published at
//!     QoS 1 by one `AsyncClient` with the same in-flight limit, timed until the last PUBACK
//!     (`BARE_PERSISTENT=1`: on a persistent session, as the mirror's);
//! (d) `MqttPublisher` alone: the same messages through `publish_batch`, batches as in (b), no
//!     database: what the publisher costs apart from the outbox.
//! `MIRROR_BENCH_ROUNDS` (default 3) rounds alternate (b) and (c); medians are reported and the
//! ratio of (b) to (c), whose goal is at least 0.8. Each round also prints how many cores the
//! whole machine kept busy during (b) and (c), and the run ends with the CPU time per event of
//! PostgreSQL, Mosquitto and this process during (b) and during (c).
//!
//! Run: `cargo bench -p repairer --bench mirror_vs_rumqttc`.

#[allow(dead_code)]
#[path = "../tests/it/support.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use publisher::mqtt::{MqttConfig, MqttMessage, MqttPublisher, MqttUrl};
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

/// Marks every AMQP row unpublished again (untimed).
async fn reset_amqp(db: &TestDb) {
    sqlx::query(
        "UPDATE outbox SET published_at = NULL, attempts = 1, leased_by = NULL,
                           lease_until = NULL, next_attempt_at = created_at, last_error = NULL
         WHERE sink = 'amqp'",
    )
    .execute(db.pool())
    .await
    .expect("reset");
    vacuum(db).await;
}

/// Puts the MQTT rows back as they were recorded (the relay deletes a published one), from the
/// copy `bench_mqtt_rows` (untimed).
async fn reset_mqtt(db: &TestDb) {
    sqlx::raw_sql(
        "DELETE FROM outbox WHERE sink = 'mqtt';
         INSERT INTO outbox SELECT * FROM bench_mqtt_rows;",
    )
    .execute(db.pool())
    .await
    .expect("reset");
    vacuum(db).await;
}

async fn vacuum(db: &TestDb) {
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
        .set_clean_session(std::env::var("BARE_PERSISTENT").is_err())
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

/// The mirror's publisher alone (no database): every message through `publish_batch`, in
/// batches of `batch`, 3 at once as the relay runs them; events/s until the last PUBACK.
async fn publisher_only(
    publisher: &MqttPublisher,
    messages: &[(String, Vec<u8>)],
    batch: usize,
) -> f64 {
    let all: Vec<MqttMessage<'_>> = messages
        .iter()
        .map(|(topic, payload)| MqttMessage {
            routing_key: "job.completed",
            topic,
            payload,
        })
        .collect();
    let started = Instant::now();
    let chunks: Vec<&[MqttMessage<'_>]> = all.chunks(batch).collect();
    for group in chunks.chunks(3) {
        let sent =
            futures_util::future::join_all(group.iter().map(|c| publisher.publish_batch(c))).await;
        assert!(sent.iter().flatten().all(|r| r.is_ok()), "every PUBACK");
    }
    messages.len() as f64 / started.elapsed().as_secs_f64()
}

/// The machine's CPU time so far, busy and total, in clock ticks (`/proc/stat`'s first line).
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: u64 = ticks.iter().sum();
    // idle and iowait
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// CPU time so far, in clock ticks, of: PostgreSQL's processes serving `database` (its backends
/// and the server's own: WAL writer, checkpointer, ...; not other databases' backends), the
/// Mosquitto processes, and this process (`/proc/<pid>/stat`'s utime and stime).
fn process_ticks(database: &str) -> [u64; 3] {
    let mut ticks = [0; 3];
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return ticks;
    };
    let own = std::process::id().to_string();
    for entry in dir.flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((head, tail)) = stat.rsplit_once(')') else {
            continue;
        };
        let comm = head.split_once('(').map_or("", |(_, c)| c);
        let fields: Vec<&str> = tail.split_whitespace().collect();
        // utime and stime: the stat's 14th and 15th fields, 12th and 13th after the `)`.
        let used: u64 = fields
            .get(11..13)
            .map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum());
        let slot = if pid == own {
            2
        } else if comm == "mosquitto" {
            1
        } else if comm == "postgres" {
            let args = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            // A client backend names its database and client address; others are the server's.
            if args.contains("127.0.0.1(") && !args.contains(database) {
                continue;
            }
            0
        } else {
            continue;
        };
        ticks[slot] += used;
    }
    ticks
}

/// Microseconds of CPU per event of PostgreSQL, Mosquitto and this process between two
/// `process_ticks`.
fn per_event_us(before: [u64; 3], after: [u64; 3], events: usize) -> [f64; 3] {
    // A clock tick is 10 ms (`sysconf(_SC_CLK_TCK)` is 100 on Linux).
    let tick_us = 10_000.0;
    std::array::from_fn(|i| {
        after[i].saturating_sub(before[i]) as f64 * tick_us / events.max(1) as f64
    })
}

/// Cores busy (all processes: PostgreSQL, Mosquitto, the bench) between two `cpu_ticks`.
fn cores_busy(before: (u64, u64), after: (u64, u64)) -> f64 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    cores * (after.0 - before.0) as f64 / (after.1 - before.1).max(1) as f64
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
    sqlx::raw_sql("CREATE TABLE bench_mqtt_rows AS SELECT * FROM outbox WHERE sink = 'mqtt'")
        .execute(db.pool())
        .await
        .expect("copy of the MQTT rows");
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
    config.batches_in_flight = env_usize("MIRROR_BENCH_LOOPS", config.batches_in_flight);
    let mirror = Repairer::new(db.store.clone(), publisher.clone(), config);

    let (mut amqp_rates, mut mirror_rates, mut bare_rates) = (Vec::new(), Vec::new(), Vec::new());
    let (mut alone_rates, mut mirror_cores, mut bare_cores) = (Vec::new(), Vec::new(), Vec::new());
    let database: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(db.pool())
        .await
        .expect("database name");
    let (mut mirror_us, mut bare_us) = ([0.0; 3], [0.0; 3]);
    for round in 0..rounds {
        reset_amqp(&db).await;
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
                reset_mqtt(&db).await;
                let (before, processes) = (cpu_ticks(), process_ticks(&database));
                mirror_rates.push(drain(&mirror, events).await);
                mirror_cores.push(cores_busy(before, cpu_ticks()));
                let us = per_event_us(processes, process_ticks(&database), events);
                (0..3).for_each(|i| mirror_us[i] += us[i] / rounds as f64);
            } else {
                let (before, processes) = (cpu_ticks(), process_ticks(&database));
                bare_rates.push(bare(&url, &messages, in_flight).await);
                bare_cores.push(cores_busy(before, cpu_ticks()));
                let us = per_event_us(processes, process_ticks(&database), events);
                (0..3).for_each(|i| bare_us[i] += us[i] / rounds as f64);
                alone_rates.push(publisher_only(&publisher, &messages, batch).await);
            }
        }
        println!(
            "round {round}: AMQP relay {:.0}/s, MQTT relay {:.0}/s ({:.2} cores busy), bare \
             rumqttc {:.0}/s ({:.2} cores busy), MqttPublisher alone {:.0}/s",
            amqp_rates[round],
            mirror_rates[round],
            mirror_cores[round],
            bare_rates[round],
            bare_cores[round],
            alone_rates[round]
        );
    }
    let (amqp, mirror, bare) = (
        median(&mut amqp_rates),
        median(&mut mirror_rates),
        median(&mut bare_rates),
    );
    println!(
        "CPU per event (mean of rounds; PostgreSQL / Mosquitto / this process): MQTT relay \
         {:.1} / {:.1} / {:.1} µs, bare rumqttc {:.1} / {:.1} / {:.1} µs",
        mirror_us[0], mirror_us[1], mirror_us[2], bare_us[0], bare_us[1], bare_us[2]
    );
    println!(
        "median MqttPublisher alone (no database): {:.0} events/s",
        median(&mut alone_rates)
    );
    println!(
        "median: AMQP relay {amqp:.0} events/s; MQTT relay {mirror:.0} events/s; bare rumqttc \
         {bare:.0} events/s; MQTT relay / bare = {:.2} (goal >= 0.8)",
        mirror / bare
    );
    publisher.close().await;
    db.drop().await;
}
