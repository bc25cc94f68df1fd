//! A transaction or a publish cut at a chosen point, one job at a time: the Worker reaches the
//! state database and RabbitMQ through fault proxies armed with a one-shot [`Trap`]. Whatever
//! the cut, the job ends `completed` once, with exactly one job-level outbox row, an event that verifies
//! (the same ce-id and bytes each time it arrives) and the object its HMAC names; nothing else is
//! stored. A cancel sent while the run commits ends the job once, one way or the other. These
//! run in `make test`; the soak (`soak_under_faults`) cuts at random instead.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::harness::{self, Event, WorkerProcess, World};
use crate::harness::{FaultProxy, Trap};

/// Which dependency the trap sits in front of.
#[derive(Clone, Copy, Debug)]
enum Dependency {
    StateDatabase,
    Broker,
}

/// A job's end on its normal path: one statement writes its state, its executions and its
/// events' outbox rows together (sent as text on a connection's first use of it).
const TERMINAL_STATE: &[u8] = b"result_path = $8";

/// The locked-row terminal transaction (`outbox::record_terminal_locked`, taken when the MQTT
/// mirror is on or executions are still open): its first statement, the job's row read under
/// its lock (as text on the connection's first use of it), then its `COMMIT`.
const LOCKED_VERDICT: &[u8] = b"now() AS expired";
const COMMIT: &[u8] = b"COMMIT";

/// The published marks of several jobs' rows in one statement (`Store::mark_published_by`,
/// sent as text on each connection's first use of it).
const BATCHED_MARK: &[u8] = b"unnest($1::bigint[], $2::text[])";

/// The Worker's settings that send a job's end through the locked-row transaction: the MQTT
/// mirror on (its copies are written in that transaction).
const MIRROR_ON: &[(&str, &str)] = &[("MQTT_URL", "mqtt://127.0.0.1:1883")];

/// A World with one Worker whose state database and broker connections go through proxies.
struct Setup {
    world: World,
    pg: FaultProxy,
    amqp: FaultProxy,
    s3: FaultProxy,
    worker: WorkerProcess,
    /// The Worker's control API (its state database is reached through `pg` too).
    api: harness::ControlClient,
}

impl Setup {
    async fn start() -> Setup {
        Setup::start_with(&[]).await
    }

    /// With `overrides` of the Worker's environment.
    async fn start_with(overrides: &[(&str, &str)]) -> Setup {
        let setup = Setup::spawn_with(overrides, |_| {}).await;
        setup.worker.wait_ready(Duration::from_secs(60)).await;
        setup
    }

    /// Starts the Worker without waiting for it to be ready; `faults` arms the proxies first.
    async fn spawn_with(
        overrides: &[(&str, &str)],
        faults: impl FnOnce([&FaultProxy; 3]),
    ) -> Setup {
        let world = World::new().await;
        let pg = FaultProxy::start(addr(5432)).await;
        let amqp = FaultProxy::start(addr(5672)).await;
        let s3 = FaultProxy::start(addr(9000)).await;
        let port = harness::free_port();
        let mut env = world.env(port);
        env.insert(
            "DATABASE_URL".into(),
            format!(
                // In clear, so the trap can see the statements.
                "postgres://postgres@127.0.0.1:{}/{}?sslmode=disable",
                pg.port(),
                world.state_db
            ),
        );
        env.insert("RABBITMQ_HOST".into(), "127.0.0.1".into());
        env.insert("RABBITMQ_PORT_AMQP".into(), amqp.port().to_string());
        env.insert(
            "OBJECT_STORAGE_ENDPOINT".into(),
            format!("http://127.0.0.1:{}", s3.port()),
        );
        env.insert("LOG_LEVEL".into(), "debug".into());
        for (name, value) in overrides {
            env.insert((*name).into(), (*value).into());
        }
        faults([&pg, &amqp, &s3]);
        let api = harness::ControlClient {
            port: env["API_PORT"].parse().expect("API_PORT"),
            keys: world.keys.clone(),
        };
        let worker = WorkerProcess::spawn(env, port);
        Setup {
            world,
            pg,
            amqp,
            s3,
            worker,
            api,
        }
    }

    fn proxy(&self, dependency: Dependency) -> &FaultProxy {
        match dependency {
            Dependency::StateDatabase => &self.pg,
            Dependency::Broker => &self.amqp,
        }
    }
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Arms `trap` in front of `dependency`, runs one job and checks its one outcome; returns how
/// many times its event arrived.
async fn one_job_through(dependency: Dependency, trap: impl FnOnce(&World) -> Trap) -> usize {
    one_job_through_with(&[], dependency, trap).await
}

/// [`one_job_through`] with `overrides` of the Worker's environment.
async fn one_job_through_with(
    overrides: &[(&str, &str)],
    dependency: Dependency,
    trap: impl FnOnce(&World) -> Trap,
) -> usize {
    let (arrivals, fired) = one_job_cut(overrides, dependency, trap).await;
    assert_eq!(fired, 1, "the trap fired {fired} times");
    arrivals
}

/// Arms `trap` in front of `dependency`, runs one job and checks its one outcome; how many
/// times its event arrived, and how many times the trap fired.
async fn one_job_cut(
    overrides: &[(&str, &str)],
    dependency: Dependency,
    trap: impl FnOnce(&World) -> Trap,
) -> (usize, u64) {
    let setup = Setup::start_with(overrides).await;
    let world = &setup.world;
    let mut listener = world.listen().await;
    let proxy = setup.proxy(dependency);
    proxy.set_trap(trap(world));

    let job_id = Uuid::now_v7();
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["id", "amount"]),
            Some("acme"),
            &[],
        )
        .await;
    let first = listener.event_for(job_id, Duration::from_secs(60)).await;

    // Every event published for the job by now (the repairer's pass included) has arrived once
    // the outbox row is marked published; wait for that, then a little for a late duplicate.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let published: Option<bool> = sqlx::query_scalar(
            "SELECT bool_and(published_at IS NOT NULL) FROM outbox WHERE job_id = $1",
        )
        .bind(job_id)
        .fetch_one(&world.state)
        .await
        .expect("outbox rows");
        if published == Some(true) {
            break;
        }
        if Instant::now() >= deadline {
            let rows: Vec<(
                String,
                Option<chrono::DateTime<chrono::Utc>>,
                Option<String>,
            )> = sqlx::query_as(
                "SELECT ce_id, published_at, leased_by FROM outbox WHERE job_id = $1 ORDER BY id",
            )
            .bind(job_id)
            .fetch_all(&world.state)
            .await
            .expect("outbox rows");
            panic!(
                "an event was never marked published ({rows:?}); worker output:\n{}",
                setup.worker.output()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut events = vec![first];
    events.extend(
        listener
            .drain(Duration::from_secs(3))
            .await
            .into_iter()
            .filter(|e| e.text("ce-subject") == job_id.to_string()),
    );
    check_outcome(world, job_id, &events, &setup.worker).await;
    let fired = proxy.trap_fired();
    assert!(
        fired > 0,
        "the trap never fired; worker output:\n{}",
        setup.worker.output()
    );

    let arrivals = events.len();
    drop(setup.worker);
    setup.world.cleanup().await;
    (arrivals, fired)
}

/// One terminal outcome: `completed`, one job-level AMQP outbox row, every arrival the same
/// signed event, and the bucket holds exactly the object the event's HMAC names.
async fn check_outcome(world: &World, job_id: Uuid, events: &[Event], worker: &WorkerProcess) {
    let output = || worker.output();
    let status = world.job_status(job_id).await;
    assert_eq!(status.as_deref(), Some("completed"), "{}", output());
    let rows: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM outbox
         WHERE job_id = $1 AND sink = 'amqp' AND ce_id NOT LIKE 'fetcher.job.execution.%'",
    )
    .bind(job_id)
    .fetch_one(&world.state)
    .await
    .expect("count outbox rows");
    assert_eq!(rows, 1, "one job-level outbox row per terminal job");

    let ce_ids: BTreeSet<String> = events.iter().map(|e| e.text("ce-id")).collect();
    assert_eq!(
        ce_ids,
        BTreeSet::from([format!("fetcher.job.completed.{job_id}")])
    );
    for event in events {
        assert_eq!(event.delivery.data, events[0].delivery.data, "frozen bytes");
        event
            .verify(&world.keys)
            .expect("every arrival verifies with the external key");
    }

    let body = events[0].body();
    let path = body["result"]["path"].as_str().expect("result path");
    let plaintext = world
        .open_object(path)
        .await
        .unwrap_or_else(|e| panic!("the completed job's object: {e}\n{}", output()));
    assert_eq!(
        world.keys.external_hmac().sign_hex(&plaintext),
        body["result"]["hmac"].as_str().expect("hmac")
    );
    assert_eq!(world.object_keys().await, vec![path.to_owned()]);
}

#[tokio::test]
async fn a_terminal_transaction_cut_before_its_outbox_insert_is_redone() {
    // The connection dies before the one terminal statement reaches PostgreSQL: nothing is
    // written, the Worker records the end again.
    let arrivals =
        one_job_through(Dependency::StateDatabase, |_| Trap::before(TERMINAL_STATE)).await;
    assert_eq!(arrivals, 1);
}

#[tokio::test]
async fn a_commit_whose_answer_is_lost_keeps_the_object_and_publishes_once() {
    // PostgreSQL commits the one statement; the Worker cannot know. The job is completed and
    // must keep its object.
    let arrivals = one_job_through(Dependency::StateDatabase, |_| {
        Trap::reply_lost(TERMINAL_STATE)
    })
    .await;
    assert_eq!(arrivals, 1);
}

#[tokio::test]
async fn a_locked_terminal_transaction_cut_before_its_commit_is_redone() {
    // The connection dies before the locked transaction's COMMIT reaches PostgreSQL: the
    // server rolls it back, and the Worker, which cannot know, finds nothing recorded and
    // records the end again.
    let arrivals = one_job_through_with(MIRROR_ON, Dependency::StateDatabase, |_| {
        Trap::before(COMMIT).after(LOCKED_VERDICT)
    })
    .await;
    assert_eq!(arrivals, 1);
}

#[tokio::test]
async fn a_locked_terminal_commit_whose_answer_is_lost_keeps_the_object_and_publishes_once() {
    // PostgreSQL commits the locked transaction (the end, its event and its mirror copies);
    // its answer never comes back. The Worker finds its event recorded, keeps the object and
    // publishes the event once.
    let arrivals = one_job_through_with(MIRROR_ON, Dependency::StateDatabase, |_| {
        Trap::reply_lost(COMMIT).after(LOCKED_VERDICT)
    })
    .await;
    assert_eq!(arrivals, 1);
}

#[tokio::test]
async fn a_published_mark_cut_twice_is_left_and_the_event_republished() {
    // The job's event is confirmed, and its batched mark (`repairer::Marks`) is cut before it
    // reaches PostgreSQL, then its one retry too: the row stays leased until its lease ends,
    // and the repair pass publishes the event again (at least once) and marks it.
    let (arrivals, fired) = one_job_cut(&[], Dependency::StateDatabase, |_| {
        Trap::before(BATCHED_MARK).times(2)
    })
    .await;
    assert_eq!((arrivals, fired), (2, 2));
}

#[tokio::test]
async fn a_publish_cut_before_the_broker_gets_it_is_republished() {
    // The exchange's name is on the wire only in `basic.publish` once the Worker is ready.
    let arrivals = one_job_through(Dependency::Broker, |world| {
        Trap::before(world.exchange.as_bytes())
    })
    .await;
    assert_eq!(arrivals, 1);
}

#[tokio::test]
async fn a_publish_whose_confirm_is_lost_arrives_again_unchanged() {
    // The broker routes the event; its confirm never comes back, so the event is published
    // again (at least once: same ce-id, same bytes). It may arrive once if the broker dropped
    // the unconfirmed publish with the connection.
    let arrivals = one_job_through(Dependency::Broker, |world| {
        Trap::reply_lost(world.exchange.as_bytes())
    })
    .await;
    assert!((1..=2).contains(&arrivals), "{arrivals} arrivals");
}

#[tokio::test]
async fn a_cancel_sent_while_the_run_commits_ends_it_once_and_leaves_no_orphan() {
    // The run's terminal transaction is cut after its object was stored; the force-cancel is
    // sent right then, while the run finds out whether it committed and tries again. Exactly
    // one of `completed` and `canceled` wins; the loser leaves no event and no object.
    let setup = Setup::start().await;
    let world = &setup.world;
    let mut listener = world.listen().await;
    setup.pg.set_trap(Trap::before(TERMINAL_STATE));
    let job_id = Uuid::now_v7();
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["id", "amount"]),
            None,
            &[],
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while setup.pg.trap_fired() == 0 {
        assert!(Instant::now() < deadline, "{}", setup.worker.output());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (status, answer) = setup.api.send(
        "POST",
        job_id,
        "/cancel",
        None,
        br#"{"force":true}"#,
        harness::Signing::Valid,
    );
    assert!([202, 409].contains(&status), "{status} {answer}");
    eprintln!(
        "the cancel was answered {status}: {} won",
        if status == 202 {
            "the cancel"
        } else {
            "the run"
        }
    );
    // The job's one terminal event, then nothing else of it for a while.
    let mut terminal = Vec::new();
    let mut events = vec![listener.event_for(job_id, Duration::from_secs(60)).await];
    events.extend(
        listener
            .drain(Duration::from_secs(6))
            .await
            .into_iter()
            .filter(|e| e.text("ce-subject") == job_id.to_string()),
    );
    for event in &events {
        event.verify(&world.keys).expect("signature");
        let key = event.delivery.routing_key.to_string();
        if ["job.completed", "job.canceled", "job.failed"].contains(&key.as_str())
            && !terminal.contains(&key)
        {
            terminal.push(key);
        }
    }
    let final_status = world.job_status(job_id).await.unwrap_or_default();
    let keys = world.object_keys().await;
    if status == 202 {
        assert_eq!(terminal, ["job.canceled"], "{}", setup.worker.output());
        assert_eq!(final_status, "canceled");
        assert!(keys.is_empty(), "the losing run's object is gone: {keys:?}");
    } else {
        assert_eq!(answer["code"], "invalid_state_transition");
        assert_eq!(terminal, ["job.completed"], "{}", setup.worker.output());
        assert_eq!(final_status, "completed");
        assert_eq!(keys, vec![format!("external-data/{job_id}.json")]);
    }
    drop(setup.worker);
    setup.world.cleanup().await;
}

#[tokio::test]
async fn a_delete_during_an_s3_outage_stays_in_progress_until_s3_returns() {
    let setup = Setup::start().await;
    let world = &setup.world;
    let mut listener = world.listen().await;
    let job_id = world.completed_small_job(&mut listener).await;
    let key = format!("external-data/{job_id}.json");
    // S3 goes away (the Worker's kept-alive connections too).
    setup.s3.set_refuse(true);
    setup.s3.reset_all();
    let (status, document) =
        setup
            .api
            .send("DELETE", job_id, "", None, b"", harness::Signing::Valid);
    assert_eq!(status, 202, "{document}");
    assert_eq!(document["status"], "deletion_in_progress", "{document}");
    let deleting = listener.event_for(job_id, Duration::from_secs(30)).await;
    assert_eq!(
        deleting.delivery.routing_key.as_str(),
        "job.deletion_in_progress"
    );
    // The repair pass tries again and fails again while S3 is away: the job stays deleting,
    // its object stays, and `deleted` is not recorded.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = setup.worker.get("/metrics").expect("metrics").1;
        if harness::metric_sum(&metrics, "fetcher_job_deletes_total", "\"retried\"") >= 2.0 {
            break;
        }
        assert!(Instant::now() < deadline, "never retried: {metrics}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        world.job_status(job_id).await.as_deref(),
        Some("deletion_in_progress")
    );
    assert_eq!(world.object_keys().await, vec![key]);
    setup.s3.heal();
    let deleted = listener.event_for(job_id, Duration::from_secs(60)).await;
    assert_eq!(deleted.delivery.routing_key.as_str(), "job.deleted");
    deleted.verify(&world.keys).expect("signature");
    assert_eq!(deleted.body()["resultDeleted"], true);
    assert_eq!(world.job_status(job_id).await.as_deref(), Some("deleted"));
    assert!(world.object_keys().await.is_empty(), "the object is gone");
    drop(setup.worker);
    setup.world.cleanup().await;
}

#[tokio::test]
async fn a_job_that_fails_after_an_unanswered_commit_leaves_no_object() {
    // The first run stores its object, then the state database goes away inside the terminal
    // transaction: the run cannot tell whether it committed, so it keeps the object and the
    // message comes back. Meanwhile the source table is dropped, so the next run fails the job;
    // the object of the first run must not outlive the job.
    let setup = Setup::start().await;
    let world = &setup.world;
    let mut listener = world.listen().await;
    setup
        .pg
        .set_trap(Trap::before(TERMINAL_STATE).and_go_down());

    let job_id = Uuid::now_v7();
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["id", "amount"]),
            None,
            &[],
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while setup.pg.trap_fired() == 0 {
        assert!(Instant::now() < deadline, "{}", setup.worker.output());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stored = format!("external-data/{job_id}.json");
    assert_eq!(world.object_keys().await, vec![stored.clone()]);
    let source = sqlx::PgPool::connect(world.source_url())
        .await
        .expect("source database");
    sqlx::query("DROP TABLE payments CASCADE")
        .execute(&source)
        .await
        .expect("drop the source table");
    source.close().await;
    // Longer than the run's commit check (about 8 s): it gives up and keeps the object.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        world.object_keys().await,
        vec![stored],
        "kept while the outcome was unknown"
    );
    setup.pg.heal();

    let event = listener.event_for(job_id, Duration::from_secs(60)).await;
    assert_eq!(event.text("ce-type"), "studio.lerian.job.failed");
    event.verify(&world.keys).expect("the event verifies");
    assert_eq!(world.job_status(job_id).await.as_deref(), Some("failed"));
    // Either the next run failed it (the table is gone) or, the claim having lapsed long
    // before the database came back, the sweeper did (its Worker seemed lost): both end it
    // `failed`, and neither may leave the first run's object.
    let error = event.body()["metadata"]["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains("does not exist") || error.contains("lost"),
        "{error}\n{}",
        setup.worker.output()
    );
    assert_eq!(
        world.object_keys().await,
        Vec::<String>::new(),
        "the failed job's object must be gone; worker output:\n{}",
        setup.worker.output()
    );
    assert!(listener.drain(Duration::from_secs(2)).await.is_empty());
    drop(setup.worker);
    setup.world.cleanup().await;
}

/// The job's `attempts` (claims) and status.
async fn attempts_and_status(world: &World, job_id: Uuid) -> Option<(i32, String)> {
    sqlx::query_as("SELECT attempts, status FROM jobs WHERE job_id = $1")
        .bind(job_id)
        .fetch_optional(&world.state)
        .await
        .expect("job row")
}

/// Waits until the Worker's log says it is writing `job_id`'s result again (the outage hit the
/// write, not something before it).
async fn wait_for_store_retry(worker: &WorkerProcess, job_id: Uuid) {
    let job_id = job_id.to_string();
    worker
        .wait_for_lines("a retried write", 1, Duration::from_secs(60), |line| {
            line.contains("writing it again") && line.contains(&job_id)
        })
        .await;
}

#[tokio::test]
async fn a_job_whose_result_write_meets_an_s3_outage_writes_it_again_without_re_extracting() {
    // A retry window far longer than the outage, and a lease far longer than the test: only a
    // write tried again in the same run can complete the job with one claim.
    let setup = Setup::start_with(&[
        ("JOB_LEASE_SEC", "300"),
        ("OBJECT_STORAGE_RETRY_SEC", "300"),
    ])
    .await;
    let world = &setup.world;
    let mut listener = world.listen().await;
    setup.s3.set_refuse(true);
    setup.s3.reset_all();

    let job_id = Uuid::now_v7();
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["id", "amount"]),
            None,
            &[],
        )
        .await;
    wait_for_store_retry(&setup.worker, job_id).await;
    assert!(world.object_keys().await.is_empty());
    setup.s3.heal();

    let event = listener.event_for(job_id, Duration::from_secs(60)).await;
    let mut events = vec![event];
    events.extend(listener.drain(Duration::from_secs(2)).await);
    check_outcome(world, job_id, &events, &setup.worker).await;
    assert_eq!(
        attempts_and_status(world, job_id).await,
        Some((1, "completed".into())),
        "the job was extracted again; worker output:\n{}",
        setup.worker.output()
    );
    drop(setup.worker);
    setup.world.cleanup().await;
}

#[tokio::test]
async fn a_job_whose_result_write_outlasts_the_retry_window_fails_once_and_stores_nothing() {
    let setup =
        Setup::start_with(&[("JOB_LEASE_SEC", "300"), ("OBJECT_STORAGE_RETRY_SEC", "2")]).await;
    let world = &setup.world;
    let mut listener = world.listen().await;
    setup.s3.set_refuse(true);
    setup.s3.reset_all();

    let job_id = Uuid::now_v7();
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["id", "amount"]),
            None,
            &[],
        )
        .await;
    let event = listener.event_for(job_id, Duration::from_secs(120)).await;
    assert_eq!(
        event.delivery.routing_key.as_str(),
        "job.failed",
        "{}",
        setup.worker.output()
    );
    event.verify(&world.keys).expect("signature");
    let error = event.body()["metadata"]["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains("storage write did not complete"),
        "the failed event says {error:?}"
    );
    assert_eq!(
        attempts_and_status(world, job_id).await,
        Some((1, "failed".into())),
        "the job went back to the source database; worker output:\n{}",
        setup.worker.output()
    );
    setup.s3.heal();
    assert!(world.object_keys().await.is_empty());
    assert!(listener.drain(Duration::from_secs(2)).await.is_empty());
    drop(setup.worker);
    setup.world.cleanup().await;
}

/// Waits until the Worker has logged `times` failed probes of `dep` while starting.
async fn wait_for_probes(worker: &WorkerProcess, dep: &str, times: usize) {
    let dep_field = format!("\"dep\":\"{dep}\"");
    worker
        .wait_for_lines(
            &format!("failed probes of {dep}"),
            times,
            Duration::from_secs(90),
            |line| line.contains("waiting for it before consuming") && line.contains(&dep_field),
        )
        .await;
}

/// `/readyz` answers 503 with `dep` down, and `/health` 200, while the Worker waits for `dep`.
async fn assert_waiting_for(worker: &mut WorkerProcess, dep: &str) {
    wait_for_probes(worker, dep, 2).await;
    assert!(
        !worker.has_exited(),
        "the Worker exited:\n{}",
        worker.output()
    );
    let (status, health) = worker.get("/health").expect("/health answers");
    assert_eq!(status, 200, "{health}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = worker.get("/readyz").expect("/readyz answers");
        let body: serde_json::Value = serde_json::from_str(&body).expect("readyz JSON");
        if status == 503 && body["checks"][dep]["status"] == "down" {
            assert_eq!(body["status"], "unhealthy");
            assert!(body["checks"][dep]["error"].is_string(), "{body}");
            return;
        }
        assert!(Instant::now() < deadline, "/readyz said {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_worker_started_before_its_dependencies_waits_for_each_and_then_consumes() {
    let mut setup = Setup::spawn_with(&[], |proxies| {
        for proxy in proxies {
            proxy.set_refuse(true);
        }
    })
    .await;
    assert_waiting_for(&mut setup.worker, "postgres").await;
    setup.pg.heal();
    assert_waiting_for(&mut setup.worker, "rabbitmq").await;
    setup.amqp.heal();
    assert_waiting_for(&mut setup.worker, "s3").await;
    setup.s3.heal();
    setup.worker.wait_ready(Duration::from_secs(60)).await;

    let world = &setup.world;
    let mut listener = world.listen().await;
    let job_id = Uuid::now_v7();
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["id", "amount"]),
            None,
            &[],
        )
        .await;
    let event = listener.event_for(job_id, Duration::from_secs(60)).await;
    check_outcome(world, job_id, &[event], &setup.worker).await;
    drop(setup.worker);
    setup.world.cleanup().await;
}
