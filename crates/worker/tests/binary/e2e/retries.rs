//! Retries of what is transient, on the real binary (`JOB_RETRY_ATTEMPTS`): a datasource behind
//! a proxy that resets its first two connections is read on its third attempt and the job
//! completes, its execution showing `attempts` 3 in the document and its event; without retries
//! the same job fails at once; a missing table fails at once whatever the setting.

use std::time::Duration;

use serde_json::Value;
use uuid::Uuid;

use crate::harness::{ControlClient, FaultProxy, Listener, Signing, WorkerProcess, World};

/// The world's source database as the datasource `flaky`, reached through `proxy`.
fn flaky(world: &World, proxy: &FaultProxy) -> Vec<(String, String)> {
    world
        .source_aliases(&["flaky"])
        .into_iter()
        .map(|(name, value)| match name.as_str() {
            "DATASOURCE_FLAKY_HOST" => (name, "127.0.0.1".to_owned()),
            "DATASOURCE_FLAKY_PORT" => (name, proxy.port().to_string()),
            _ => (name, value),
        })
        .collect()
}

/// A proxy to the world's source database.
async fn proxy_to_source(world: &World) -> FaultProxy {
    let options: sqlx::postgres::PgConnectOptions = world.source_url().parse().expect("source URL");
    let target = tokio::net::lookup_host((options.get_host(), options.get_port()))
        .await
        .expect("source address")
        .next()
        .expect("an address");
    FaultProxy::start(target).await
}

fn settings(attempts: &str) -> Vec<(String, String)> {
    [
        ("JOB_RETRY_ATTEMPTS", attempts),
        ("JOB_RETRY_BACKOFF_MS", "50"),
        ("JOB_RETRY_BACKOFF_MAX_MS", "200"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// A Worker (with its control API) reading the datasource `flaky` through a fault proxy with
/// `attempts` retries, and a listener on every job event.
async fn start_flaky(
    world: &World,
    attempts: &str,
) -> (FaultProxy, WorkerProcess, ControlClient, Listener) {
    let proxy = proxy_to_source(world).await;
    let mut extra = flaky(world, &proxy);
    extra.extend(settings(attempts));
    let (worker, api) = world.start_worker_with_api(extra).await;
    let events = world.listen_to("job.#").await;
    (proxy, worker, api, events)
}

/// Submits a job reading `table` on `connection`; its execution's event and its end, as
/// [`execution_and_end`] gives them.
async fn run_job(
    world: &World,
    events: &mut Listener,
    connection: &str,
    table: &str,
) -> (Uuid, Value, String) {
    let job_id = Uuid::now_v7();
    world.submit_job(job_id, connection, table, &["id"]).await;
    let (execution, end) = execution_and_end(events, world, job_id).await;
    (job_id, execution, end)
}

/// The sum of the Worker's `fetcher_datasource_retries_total` series whose labels contain `label`.
fn retries(worker: &WorkerProcess, label: &str) -> f64 {
    worker.metric("fetcher_datasource_retries_total", label)
}

/// The job's execution event, then its terminal event (verified), as they come.
async fn execution_and_end(events: &mut Listener, world: &World, job_id: Uuid) -> (Value, String) {
    let mut execution = None;
    loop {
        let event = events.event_for(job_id, Duration::from_secs(40)).await;
        event.verify(&world.keys).expect("signature");
        let key = event.delivery.routing_key.to_string();
        if key.starts_with("job.execution.") {
            execution = Some(event.body());
        } else if key == "job.completed" || key == "job.failed" {
            return (execution.expect("the execution's event came first"), key);
        }
    }
}

#[tokio::test]
async fn a_datasource_reset_twice_is_read_on_its_third_attempt_with_three_retries() {
    let world = World::new().await;
    let (proxy, worker, api, mut events) = start_flaky(&world, "3").await;
    proxy.refuse_next(2);
    let (job_id, execution, end) = run_job(&world, &mut events, "flaky", "payments").await;
    assert_eq!(end, "job.completed");
    assert_eq!(execution["status"], "SUCCEEDED", "{execution}");
    assert_eq!(execution["statusDetails"]["attempts"], 3, "{execution}");
    assert_eq!(proxy.killed(), 2, "two connections reset, the third served");

    let (status, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(status, 200, "{document}");
    let details = &document["executions"][0]["statusDetails"];
    assert_eq!(details["attempts"], 3, "{document}");
    let last = details["lastError"]
        .as_str()
        .expect("the last retried error");
    assert!(
        last.starts_with("failed to connect to datasource flaky: "),
        "{last}"
    );
    assert!(!last.contains("127.0.0.1"), "redacted: {last}");

    // The stored result holds the rows once, as without a fault.
    let path = document["resultPath"].as_str().expect("resultPath");
    let plaintext = world.open_object(path).await.expect("the result");
    let result: Value = serde_json::from_slice(&plaintext).expect("JSON");
    let rows = result["flaky"]["payments"].as_array().expect("rows");
    let source = sqlx::PgPool::connect(world.source_url())
        .await
        .expect("source");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM payments")
        .fetch_one(&source)
        .await
        .expect("count");
    source.close().await;
    assert_eq!(rows.len() as i64, count);

    assert_eq!(retries(&worker, "\"retried\""), 2.0);
    assert_eq!(retries(&worker, "\"recovered\""), 1.0);
    assert_eq!(retries(&worker, "\"exhausted\""), 0.0);
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn without_retries_a_reset_datasource_fails_the_job_at_once() {
    let world = World::new().await;
    let (proxy, worker, api, mut events) = start_flaky(&world, "0").await;
    proxy.refuse_next(2);
    let (job_id, execution, end) = run_job(&world, &mut events, "flaky", "payments").await;
    assert_eq!(end, "job.failed");
    assert_eq!(execution["status"], "FAILED", "{execution}");
    assert!(
        execution["statusDetails"].get("attempts").is_none(),
        "one attempt: {execution}"
    );
    assert_eq!(proxy.killed(), 1, "not tried again");
    let (_, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    let error = document["executions"][0]["statusDetails"]["error"]
        .as_str()
        .expect("its error");
    assert!(
        error.starts_with("failed to connect to datasource flaky: "),
        "{error}"
    );
    assert!(world.object_keys().await.is_empty(), "nothing stored");
    assert_eq!(retries(&worker, ""), 0.0);
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_missing_table_fails_at_once_whatever_the_retries() {
    let world = World::new().await;
    let (_proxy, worker, _api, mut events) = start_flaky(&world, "10").await;
    let (_, execution, end) = run_job(&world, &mut events, "flaky", "missing_table").await;
    assert_eq!(end, "job.failed");
    assert_eq!(execution["status"], "REJECTED", "{execution}");
    assert!(
        execution["statusDetails"].get("attempts").is_none(),
        "{execution}"
    );
    assert_eq!(retries(&worker, "\"retried\""), 0.0);
    drop(worker);
    world.cleanup().await;
}

/// A job message that comes back and runs again (its Worker was killed mid-job) counts where a
/// run's retries count: `deliveries` in its execution's `statusDetails`, in the execution's
/// event and the job's document, and `redelivered` in `fetcher_datasource_retries_total`.
#[tokio::test]
async fn a_job_run_again_after_its_worker_was_killed_counts_the_delivery() {
    let world = World::new().await;
    let mut victim = world.start_worker().await;
    let mut events = world.listen_to("job.#").await;
    let job_id = Uuid::now_v7();
    world.submit_job(job_id, "src", "slow", &["id"]).await;
    world
        .wait_status(job_id, "processing", Duration::from_secs(20))
        .await;
    victim.signal("KILL");
    victim.wait_exit(Duration::from_secs(10)).await;
    // The broker gives the unsettled message to the next Worker, which takes the job over once
    // the dead one's lease lapsed.
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let (execution, end) = execution_and_end(&mut events, &world, job_id).await;
    assert_eq!(end, "job.completed");
    assert_eq!(execution["status"], "SUCCEEDED", "{execution}");
    assert_eq!(execution["statusDetails"]["deliveries"], 2, "{execution}");
    assert!(
        execution["statusDetails"].get("attempts").is_none(),
        "read at its first attempt of that run: {execution}"
    );

    let (status, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(status, 200, "{document}");
    assert_eq!(document["attempts"], 2, "{document}");
    assert_eq!(
        document["executions"][0]["statusDetails"]["deliveries"], 2,
        "{document}"
    );
    assert_eq!(retries(&worker, "outcome=\"redelivered\""), 1.0);
    drop(worker);
    world.cleanup().await;
}

/// A job read once shows no `deliveries`: its details are as before.
#[tokio::test]
async fn a_job_run_once_shows_no_deliveries() {
    let world = World::new().await;
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let mut events = world.listen_to("job.#").await;
    let (job_id, execution, end) = run_job(&world, &mut events, "src", "payments").await;
    assert_eq!(end, "job.completed");
    assert!(execution.get("statusDetails").is_none(), "{execution}");
    let (_, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(
        document["executions"][0]["statusDetails"],
        serde_json::json!({})
    );
    assert_eq!(retries(&worker, "outcome=\"redelivered\""), 0.0);
    drop(worker);
    world.cleanup().await;
}
