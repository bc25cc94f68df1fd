//! Retries are visible: a job message the Worker gives back to the queue counts in
//! `fetcher_messages_requeued_total` with the reason that sent it back, and its redelivery in
//! `fetcher_messages_redelivered_total`. The Worker reaches its state database through a fault proxy:
//! one lookup of the `connections` table is cut (`connection_store`), then PostgreSQL goes away
//! altogether while a job waits to be claimed (`state_database`); each job then ends once. And
//! a run whose channel to RabbitMQ is cut while it extracts cannot acknowledge its message: the
//! broker gives it back (`broker`), and its redelivery finds the job done.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::harness::{metric_sum, FaultProxy, Trap, WorkerProcess, World};

const REQUEUED: &str = "fetcher_messages_requeued_total";
const REDELIVERED: &str = "fetcher_messages_redelivered_total";
const REASONS: [&str; 5] = [
    "state_database",
    "connection_store",
    "shutdown",
    "broker",
    "internal",
];

/// The `connections` table's lookup of one name (sent as text on a connection's first use).
const CONNECTION_LOOKUP: &[u8] = b"FROM connections WHERE name";

/// The Worker's counters: requeues by reason, then redeliveries.
fn counters(worker: &WorkerProcess) -> (Vec<(&'static str, f64)>, f64) {
    let (status, metrics) = worker.get("/metrics").expect("/metrics");
    assert_eq!(status, 200);
    let requeued = REASONS
        .iter()
        .map(|reason| {
            let label = format!("reason=\"{reason}\"");
            assert!(
                metrics.contains(&format!("{REQUEUED}{{{label}}}")),
                "{REQUEUED}{{{label}}} is not exported:\n{metrics}"
            );
            (*reason, metric_sum(&metrics, REQUEUED, &label))
        })
        .collect();
    (requeued, metric_sum(&metrics, REDELIVERED, ""))
}

fn requeued(counters: &(Vec<(&'static str, f64)>, f64), reason: &str) -> f64 {
    counters
        .0
        .iter()
        .find(|(name, _)| *name == reason)
        .map_or(0.0, |(_, value)| *value)
}

/// The job messages the Worker handles right now (`fetcher_consumers_active`).
fn active(worker: &WorkerProcess) -> f64 {
    let metrics = worker.get("/metrics").expect("/metrics").1;
    metric_sum(&metrics, "fetcher_consumers_active", "")
}

/// Polls the counters until `done` holds for them.
async fn wait_counters(
    worker: &WorkerProcess,
    what: &str,
    within: Duration,
    done: impl Fn(&(Vec<(&'static str, f64)>, f64)) -> bool,
) -> (Vec<(&'static str, f64)>, f64) {
    let deadline = Instant::now() + within;
    loop {
        let now = counters(worker);
        if done(&now) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the counters stayed at {now:?}; worker output:\n{}",
            worker.output()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_job_given_back_to_the_queue_counts_its_reason_and_its_redelivery() {
    let world = World::new().await;
    let pg = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], 5432))).await;
    let worker = world
        .start_worker_with(vec![(
            "DATABASE_URL".into(),
            // In clear, so the trap can see the statements.
            format!(
                "postgres://postgres@127.0.0.1:{}/{}?sslmode=disable",
                pg.port(),
                world.state_db
            ),
        )])
        .await;
    let mut events = world.listen().await;
    let start = counters(&worker);
    assert!(
        start.0.iter().all(|(_, value)| *value == 0.0) && start.1 == 0.0,
        "every requeue reason and the redeliveries start at 0: {start:?}"
    );

    // A stored connection's lookup is cut: the connection store is unavailable for the job, so
    // its message goes back; on its redelivery the lookup answers (no such connection), and
    // the job fails once.
    pg.set_trap(Trap::before(CONNECTION_LOOKUP));
    let unknown = Uuid::now_v7();
    world
        .submit_job(unknown, "stored", "payments", &["id"])
        .await;
    let event = events.event_for(unknown, Duration::from_secs(60)).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.failed");
    assert_eq!(pg.trap_fired(), 1, "the lookup was never cut");
    let after_store = counters(&worker);
    assert_eq!(
        requeued(&after_store, "connection_store"),
        1.0,
        "{after_store:?}"
    );
    assert_eq!(after_store.1, 1.0, "one redelivery: {after_store:?}");
    for reason in ["state_database", "shutdown", "broker", "internal"] {
        assert_eq!(requeued(&after_store, reason), 0.0, "{after_store:?}");
    }

    // PostgreSQL goes away: the claim cannot be made, the message goes back again and again
    // (each time counted, each redelivery too) until PostgreSQL answers; then the job completes.
    pg.set_refuse(true);
    pg.reset_all();
    let waiting = Uuid::now_v7();
    world
        .submit_job(waiting, "src", "payments", &["id", "amount"])
        .await;
    let down = wait_counters(
        &worker,
        "a requeue for the state database and its redelivery",
        Duration::from_secs(90),
        |now| requeued(now, "state_database") >= 1.0 && now.1 >= 2.0,
    )
    .await;
    println!("while PostgreSQL was away: {down:?}");
    assert_eq!(requeued(&down, "connection_store"), 1.0, "{down:?}");
    pg.heal();
    let event = events.event_for(waiting, Duration::from_secs(90)).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.completed");
    let end = counters(&worker);
    println!("at the end: {end:?}");
    assert!(requeued(&end, "state_database") >= 1.0, "{end:?}");
    // Every requeue came back once as a redelivery.
    let requeues: f64 = end.0.iter().map(|(_, value)| value).sum();
    assert_eq!(end.1, requeues, "{end:?}");
    for reason in ["shutdown", "broker", "internal"] {
        assert_eq!(requeued(&end, reason), 0.0, "{end:?}");
    }
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_delivery_whose_channel_is_gone_counts_as_a_broker_requeue_and_its_redelivery_acks() {
    let world = World::new().await;
    let amqp = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], 5672))).await;
    let worker = world
        .start_worker_with(vec![
            ("RABBITMQ_HOST".into(), "127.0.0.1".into()),
            ("RABBITMQ_PORT_AMQP".into(), amqp.port().to_string()),
        ])
        .await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    let body = serde_json::json!({
        "jobId": job_id,
        "mappedFields": {"src": {"slow": ["id"]}},
        "metadata": {"source": "e2e"},
    });
    world.submit(body.to_string().as_bytes(), None, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while world.slow_queries().await == 0 {
        assert!(Instant::now() < deadline, "the slow query never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The consumer's connection (and the publisher's) is cut while the job extracts: the broker
    // puts the unacknowledged message back and the Worker, reconnected, receives it again while
    // the first run still holds the claim.
    amqp.reset_all();
    let event = events.event_for(job_id, Duration::from_secs(60)).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.completed");
    // The redelivery waits for the first run's claim, finds the job done and is acknowledged:
    // no delivery is being handled any more.
    let end = wait_counters(
        &worker,
        "the broker requeue and the settled redelivery",
        Duration::from_secs(60),
        |now| requeued(now, "broker") >= 1.0 && now.1 >= 1.0 && active(&worker) == 0.0,
    )
    .await;
    println!("after the cut: {end:?}");
    assert_eq!(requeued(&end, "broker"), 1.0, "{end:?}");
    assert_eq!(end.1, 1.0, "one redelivery: {end:?}");
    for reason in ["state_database", "connection_store", "shutdown", "internal"] {
        assert_eq!(requeued(&end, reason), 0.0, "{end:?}");
    }
    drop(worker);
    world.cleanup().await;
}
