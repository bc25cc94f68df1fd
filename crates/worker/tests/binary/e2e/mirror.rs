//! The MQTT mirror of the real binary (lifecycle §5): a client no one here wrote
//! (`mosquitto_sub`) receives, for a completed, a failed, a canceled and a deleted job, exactly
//! the topics of §5, with payloads whose members, types and values match the job's state row.
//! Either broker's outage delays its own events and never the other's.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::Row;
use testkit::mqtt::{mqtt_url, unique_prefix, Received, Subscriber};
use uuid::Uuid;

use crate::harness::{FaultProxy, Signing, World};

/// The mirror's topic of `job_id`'s `operation`, job-level or an execution's.
fn topic(prefix: &str, kind: &str, job_id: Uuid, operation: &str) -> String {
    format!("{prefix}/events/{kind}/{job_id}/{operation}")
}

/// Whether the raw payload's members are `expected`, in that order (a parsed `Value` sorts them).
fn assert_members(payload: &Value, expected: &[&str]) {
    let raw = payload["raw"].as_str().expect("raw text");
    let object = payload.as_object().expect("object");
    assert_eq!(object.len() - 1, expected.len(), "members: {raw}");
    let mut last = 0;
    for name in expected {
        let at = raw
            .find(&format!("\"{name}\":"))
            .unwrap_or_else(|| panic!("no {name} in {raw}"));
        assert!(at >= last, "{name} out of the page's order in {raw}");
        last = at;
    }
}

/// What the mirror published, deduplicated by `eventId` (delivery is at least once), by topic;
/// each payload with its text under `raw`.
fn by_topic(received: &[Received]) -> BTreeMap<String, Value> {
    let mut seen = BTreeSet::new();
    let mut topics = BTreeMap::new();
    for message in received {
        let mut payload: Value = serde_json::from_str(&message.payload)
            .unwrap_or_else(|_| panic!("not JSON on {}: {}", message.topic, message.payload));
        payload["raw"] = Value::String(message.payload.clone());
        let id = payload["eventId"].as_str().expect("eventId").to_owned();
        if seen.insert(id) {
            let earlier = topics.insert(message.topic.clone(), payload);
            assert!(earlier.is_none(), "two events on {}", message.topic);
        }
    }
    topics
}

fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

/// Checks a job-level payload against the job's state row.
async fn check_job_payload(
    world: &World,
    payload: &Value,
    job_id: Uuid,
    datasource: &str,
    ce_operation: &str,
) {
    let row = sqlx::query("SELECT created_at, updated_at, finished_at FROM jobs WHERE job_id = $1")
        .bind(job_id)
        .fetch_one(&world.state)
        .await
        .expect("job row");
    let created: DateTime<Utc> = row.get("created_at");
    let updated: DateTime<Utc> = row.get("updated_at");
    let finished: Option<DateTime<Utc>> = row.get("finished_at");
    let ce_id = format!("fetcher.job.{ce_operation}.{job_id}");
    let completed = ce_operation == "completed" || ce_operation == "failed";
    let mut expected = vec![
        "eventType",
        "eventId",
        "timestamp",
        "operation",
        "jobId",
        "status",
        "targetSelection",
        "targets",
        "description",
    ];
    if completed {
        expected.extend([
            "completedAt",
            "createdAt",
            "lastUpdatedAt",
            "jobProcessDetails",
        ]);
    } else {
        expected.extend(["createdAt", "lastUpdatedAt"]);
        if payload.get("comment").is_some() {
            expected.push("comment");
        }
    }
    assert_members(payload, &expected);
    assert_eq!(payload["eventType"], "JOB");
    assert_eq!(
        payload["eventId"],
        Uuid::new_v5(&Uuid::NAMESPACE_URL, ce_id.as_bytes()).to_string()
    );
    assert_eq!(payload["jobId"], job_id.to_string());
    assert_eq!(payload["targetSelection"], "SNAPSHOT");
    assert_eq!(
        payload["targets"],
        serde_json::json!([format!("fetcher:single-tenant:datasource/{datasource}")])
    );
    assert_eq!(payload["description"], "e2e");
    let timestamp = payload["timestamp"]
        .as_i64()
        .expect("timestamp: whole seconds");
    assert!(timestamp >= created.timestamp() && timestamp <= updated.timestamp() + 1);
    assert_eq!(payload["createdAt"].as_i64(), Some(millis(created)));
    let last = payload["lastUpdatedAt"]
        .as_i64()
        .expect("lastUpdatedAt: ms");
    assert!(
        last >= millis(created) && last <= millis(updated),
        "{payload}"
    );
    if completed {
        assert_eq!(payload["operation"], "completed");
        assert_eq!(payload["status"], "COMPLETED");
        assert_eq!(
            payload["completedAt"].as_i64(),
            finished.map(millis),
            "the state row's finished_at"
        );
        let statuses = world.executions(job_id).await;
        let count = |status: &str| statuses.iter().filter(|(_, s)| s == status).count();
        let details = &payload["jobProcessDetails"];
        assert_eq!(details["numberOfSucceededThings"], count("SUCCEEDED"));
        assert_eq!(
            details["numberOfFailedThings"],
            count("FAILED") + count("TIMED_OUT")
        );
        assert_eq!(details["numberOfCanceledThings"], count("CANCELED"));
        assert_eq!(details["numberOfRejectedThings"], count("REJECTED"));
        assert_eq!(details["numberOfRemovedThings"], count("REMOVED"));
    } else {
        assert_eq!(payload["operation"], ce_operation);
        assert_eq!(payload["status"], ce_operation.to_ascii_uppercase());
    }
}

#[tokio::test]
async fn mosquitto_sub_receives_every_lifecycle_event_with_payloads_matching_the_state_rows() {
    let world = World::new().await;
    let prefix = unique_prefix();
    let subscriber = Subscriber::start(&mqtt_url(), &format!("{prefix}/events/#"));
    let (worker, api) = world
        .start_worker_with_api(vec![
            ("MQTT_URL".into(), mqtt_url()),
            ("MQTT_TOPIC_PREFIX".into(), prefix.clone()),
        ])
        .await;
    // The AMQP events need a queue bound, or the broker returns them and the jobs' messages wait.
    let _amqp = world.listen().await;
    let (status, ready) = worker.get("/readyz").expect("readyz");
    assert_eq!(status, 200, "{ready}");
    assert!(ready.contains("mqtt"), "the mirror's check: {ready}");

    let [completed, failed, canceled, deleted] = [(); 4].map(|_| Uuid::now_v7());
    for job in [completed, deleted] {
        world.submit_job(job, "src", "payments", &["id"]).await;
    }
    // `down` refuses connections: its execution fails, and the job.
    world.submit_job(failed, "down", "payments", &["id"]).await;
    for job in [completed, deleted] {
        world
            .wait_status(job, "completed", Duration::from_secs(40))
            .await;
    }
    world
        .wait_status(failed, "failed", Duration::from_secs(40))
        .await;
    // Submitted last: its 6 s statement is still running when the cancel comes.
    world.submit_job(canceled, "src", "slow", &["id"]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while world.slow_queries().await == 0 {
        assert!(
            Instant::now() < deadline,
            "the slow query never ran (the job is {:?})",
            world.job_status(canceled).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, answer) = api.send(
        "POST",
        canceled,
        "/cancel",
        None,
        br#"{"force":true,"comment":"runaway"}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202, "{answer}");
    world
        .wait_status(canceled, "canceled", Duration::from_secs(30))
        .await;
    let (status, answer) = api.send(
        "DELETE",
        deleted,
        "",
        None,
        br#"{"comment":"retention"}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202, "{answer}");
    world
        .wait_status(deleted, "deleted", Duration::from_secs(30))
        .await;

    let job = |id, op| topic(&prefix, "job", id, op);
    let execution = |id, op| topic(&prefix, "jobExecution", id, op);
    let expected: BTreeSet<String> = [
        job(completed, "completed"),
        execution(completed, "succeeded"),
        job(failed, "completed"),
        execution(failed, "failed"),
        job(canceled, "cancellation_in_progress"),
        execution(canceled, "canceled"),
        job(canceled, "canceled"),
        job(deleted, "completed"),
        execution(deleted, "succeeded"),
        job(deleted, "deletion_in_progress"),
        execution(deleted, "deleted"),
        job(deleted, "deleted"),
    ]
    .into_iter()
    .collect();
    let received = subscriber
        .wait_for(Duration::from_secs(60), |r| {
            by_topic(r).keys().cloned().collect::<BTreeSet<_>>() == expected
        })
        .await;
    let topics = by_topic(&received);
    assert_eq!(
        topics.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "exactly the topics of lifecycle §5"
    );

    check_job_payload(
        &world,
        &topics[&job(completed, "completed")],
        completed,
        "src",
        "completed",
    )
    .await;
    check_job_payload(
        &world,
        &topics[&job(failed, "completed")],
        failed,
        "down",
        "failed",
    )
    .await;
    for op in ["cancellation_in_progress", "canceled"] {
        check_job_payload(&world, &topics[&job(canceled, op)], canceled, "src", op).await;
    }
    assert_eq!(topics[&job(canceled, "canceled")]["comment"], "runaway");
    for op in ["deletion_in_progress", "deleted"] {
        let payload = &topics[&job(deleted, op)];
        assert_eq!(payload["status"], op.to_ascii_uppercase());
        assert_eq!(payload["comment"], "retention");
        assert!(payload.get("jobProcessDetails").is_none());
    }

    // Executions: thing, status and string-valued details as their rows say.
    let succeeded = &topics[&execution(completed, "succeeded")];
    assert_members(
        succeeded,
        &[
            "eventType",
            "eventId",
            "timestamp",
            "operation",
            "jobId",
            "thingArn",
            "status",
            "statusDetails",
        ],
    );
    assert_eq!(succeeded["eventType"], "JOB_EXECUTION");
    assert_eq!(
        succeeded["thingArn"],
        "fetcher:single-tenant:datasource/src"
    );
    assert_eq!(succeeded["status"], "SUCCEEDED");
    assert_eq!(
        succeeded["statusDetails"]["rowCount"], "3",
        "a string, as IoT's"
    );
    assert_eq!(
        succeeded["eventId"],
        Uuid::new_v5(
            &Uuid::NAMESPACE_URL,
            format!("fetcher.job.execution.succeeded.{completed}.src").as_bytes()
        )
        .to_string()
    );
    let failure = &topics[&execution(failed, "failed")];
    assert_eq!(failure["status"], "FAILED");
    let error = failure["statusDetails"]["error"]
        .as_str()
        .expect("error text");
    let row_error: Option<String> =
        sqlx::query_scalar("SELECT error FROM job_executions WHERE job_id = $1")
            .bind(failed)
            .fetch_one(&world.state)
            .await
            .expect("execution row");
    assert_eq!(Some(error.to_owned()), row_error);
    assert_eq!(
        topics[&execution(canceled, "canceled")]["status"],
        "CANCELED"
    );

    drop(worker);
    world.cleanup().await;
}

/// The jobs run while Mosquitto is down.
const DURING_OUTAGE: usize = 200;
/// The jobs run before, the same load, for the AMQP latency the outage is compared with.
const BEFORE_OUTAGE: usize = DURING_OUTAGE;
/// How long Mosquitto stays down at least.
const OUTAGE: Duration = Duration::from_secs(20);

/// Submits `jobs` and returns each one's AMQP latency (submitted to `job.completed` received),
/// sorted.
async fn run_jobs(
    world: &World,
    events: &mut crate::harness::Listener,
    jobs: &[Uuid],
) -> Vec<Duration> {
    let mut submitted = BTreeMap::new();
    for job in jobs {
        world.submit_job(*job, "src", "payments", &["id"]).await;
        submitted.insert(job.to_string(), Instant::now());
    }
    let mut latencies =
        arrivals(events, "job.completed", submitted, Duration::from_secs(240)).await;
    latencies.sort();
    latencies
}

/// Waits until an event with `routing_key` came for every subject of `since`; returns how long
/// after its instant each one came.
async fn arrivals(
    events: &mut crate::harness::Listener,
    routing_key: &str,
    mut since: BTreeMap<String, Instant>,
    within: Duration,
) -> Vec<Duration> {
    let mut waited = Vec::with_capacity(since.len());
    let deadline = Instant::now() + within;
    while !since.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = events
            .next(left)
            .await
            .unwrap_or_else(|| panic!("{} jobs' {routing_key} never came", since.len()));
        if event.delivery.routing_key.as_str() != routing_key {
            continue;
        }
        if let Some(at) = since.remove(&event.text("ce-subject")) {
            waited.push(at.elapsed());
        }
    }
    waited
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// The distinct `eventId`s a subscriber received.
fn event_ids(subscriber: &Subscriber) -> BTreeSet<String> {
    subscriber
        .received()
        .iter()
        .filter_map(|m| serde_json::from_str::<Value>(&m.payload).ok())
        .filter_map(|p| p["eventId"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_mosquitto_outage_delays_the_mirror_loses_nothing_and_never_holds_back_amqp_events() {
    let world = World::new().await;
    let mut broker = testkit::mqtt::PrivateBroker::start();
    let prefix = unique_prefix();
    let subscriber = Subscriber::persistent(&broker.url(), &format!("{prefix}/events/#"));
    let (worker, _api) = world
        .start_worker_with_api(vec![
            ("MQTT_URL".into(), broker.url()),
            ("MQTT_TOPIC_PREFIX".into(), prefix.clone()),
        ])
        .await;
    let mut events = world.listen().await;

    let before: Vec<Uuid> = (0..BEFORE_OUTAGE).map(|_| Uuid::now_v7()).collect();
    let baseline = run_jobs(&world, &mut events, &before).await;

    broker.stop();
    let stopped = Instant::now();
    let during: Vec<Uuid> = (0..DURING_OUTAGE).map(|_| Uuid::now_v7()).collect();
    let outage = run_jobs(&world, &mut events, &during).await;
    let amqp_done = stopped.elapsed();
    // Every AMQP event of the outage's jobs came while the MQTT broker was still down.
    let (status, ready) = worker.get("/readyz").expect("readyz");
    assert_eq!(
        status, 503,
        "the mirror's check fails while its broker is away: {ready}"
    );
    assert!(ready.contains("mqtt"), "{ready}");
    if let Some(rest) = OUTAGE.checked_sub(stopped.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    let down_for = stopped.elapsed();
    broker.resume();

    // Two events per job: its execution's and its own, each at least once.
    let all = 2 * (BEFORE_OUTAGE + DURING_OUTAGE);
    let deadline = Instant::now() + Duration::from_secs(180);
    while event_ids(&subscriber).len() < all {
        assert!(
            Instant::now() < deadline,
            "{} of {all} MQTT events arrived after the broker returned",
            event_ids(&subscriber).len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mirrored = stopped.elapsed() - down_for;
    let expected: BTreeSet<String> = before
        .iter()
        .chain(&during)
        .flat_map(|job| {
            [
                format!("fetcher.job.completed.{job}"),
                format!("fetcher.job.execution.succeeded.{job}.src"),
            ]
        })
        .map(|ce_id| Uuid::new_v5(&Uuid::NAMESPACE_URL, ce_id.as_bytes()).to_string())
        .collect();
    assert_eq!(
        event_ids(&subscriber),
        expected,
        "one eventId per event, none missing"
    );
    let unpublished: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL")
            .fetch_one(&world.state)
            .await
            .expect("outbox");
    println!(
        "AMQP latency before the outage: p50 {:?} p95 {:?} ({BEFORE_OUTAGE} jobs); during it: \
         p50 {:?} p95 {:?} ({DURING_OUTAGE} jobs, all events in {amqp_done:.1?}); Mosquitto \
         down {down_for:.1?}; every MQTT event in {mirrored:.1?} after it returned; {} \
         deliveries for {all} events; {unpublished} rows left unpublished",
        percentile(&baseline, 50),
        percentile(&baseline, 95),
        percentile(&outage, 50),
        percentile(&outage, 95),
        subscriber.received().len(),
    );
    drop(worker);
    world.cleanup().await;
}

/// The jobs deleted while RabbitMQ is away.
const DELETED_IN_OUTAGE: usize = 30;

/// The reverse of the Mosquitto outage: the Worker reaches RabbitMQ through a proxy that then
/// refuses it. Jobs deleted through the control API meanwhile have their MQTT events delivered
/// during the outage; their AMQP events wait in the outbox and all arrive once RabbitMQ is back.
#[tokio::test]
async fn a_rabbitmq_outage_delays_amqp_events_and_never_holds_back_the_mirror() {
    let world = World::new().await;
    let amqp = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], 5672))).await;
    let prefix = unique_prefix();
    let subscriber = Subscriber::start(&mqtt_url(), &format!("{prefix}/events/#"));
    let (worker, api) = world
        .start_worker_with_api(vec![
            ("MQTT_URL".into(), mqtt_url()),
            ("MQTT_TOPIC_PREFIX".into(), prefix.clone()),
            ("RABBITMQ_HOST".into(), "127.0.0.1".into()),
            ("RABBITMQ_PORT_AMQP".into(), amqp.port().to_string()),
        ])
        .await;
    let mut events = world.listen().await;
    let jobs: Vec<Uuid> = (0..DELETED_IN_OUTAGE).map(|_| Uuid::now_v7()).collect();
    run_jobs(&world, &mut events, &jobs).await;

    // RabbitMQ goes away for the Worker: its connections reset, new ones refused.
    amqp.set_refuse(true);
    amqp.reset_all();
    let cut = Instant::now();
    for job in &jobs {
        let (status, answer) = api.send(
            "DELETE",
            *job,
            "",
            None,
            br#"{"comment":"outage"}"#,
            Signing::Valid,
        );
        assert_eq!(status, 202, "{answer}");
    }
    let wanted: BTreeSet<String> = jobs
        .iter()
        .flat_map(|job| {
            [
                topic(&prefix, "job", *job, "deletion_in_progress"),
                topic(&prefix, "jobExecution", *job, "deleted"),
                topic(&prefix, "job", *job, "deleted"),
            ]
        })
        .collect();
    let arrived = |received: &[Received]| {
        let topics: BTreeSet<String> = received.iter().map(|r| r.topic.clone()).collect();
        wanted.is_subset(&topics)
    };
    let received = subscriber.wait_for(Duration::from_secs(60), arrived).await;
    assert!(
        arrived(&received),
        "every deletion's MQTT events arrive while RabbitMQ is away"
    );
    let mirrored = cut.elapsed();
    // Still away: none of the deletions' AMQP events got out.
    let waiting: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM outbox WHERE sink = 'amqp' AND published_at IS NULL
         AND (ce_id LIKE 'fetcher.job.deleted.%' OR ce_id LIKE 'fetcher.job.execution.deleted.%')",
    )
    .fetch_one(&world.state)
    .await
    .expect("outbox");
    assert_eq!(
        waiting,
        2 * DELETED_IN_OUTAGE as i64,
        "job.deleted and the execution's"
    );
    // And the Worker tried them: a failed publish is on record before RabbitMQ returns.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let failed: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM outbox WHERE sink = 'amqp' AND published_at IS NULL
             AND last_error IS NOT NULL",
        )
        .fetch_one(&world.state)
        .await
        .expect("outbox");
        if failed > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no AMQP publish was tried");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let down_for = cut.elapsed();

    amqp.heal();
    let healed = Instant::now();
    let deleted = jobs.iter().map(|job| (job.to_string(), healed)).collect();
    arrivals(
        &mut events,
        "job.deleted",
        deleted,
        Duration::from_secs(120),
    )
    .await;
    println!(
        "RabbitMQ away {down_for:.1?}: every MQTT event of {DELETED_IN_OUTAGE} deletions in \
         {mirrored:.1?} after the cut; their AMQP events {:.1?} after it returned",
        cut.elapsed() - down_for
    );
    drop(worker);
    world.cleanup().await;
}
