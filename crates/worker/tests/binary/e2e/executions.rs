//! A job's executions on the real binary (lifecycle §1, §3, §4): one per datasource, each
//! ending with its `job.execution.*` event; a graceful cancel ends the waiting ones at once and
//! lets the running statements finish (a forced one sent meanwhile stops them); a missing table
//! rejects its datasource; a deleted connection's execution is `REMOVED`; a running one shows
//! its rows so far.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::harness::{Listener, Signing, World};

const FIVE: [&str; 5] = ["s1", "s2", "s3", "s4", "s5"];

/// A job reading `slow` from each of `datasources`.
fn slow_job(world: &World, job_id: Uuid, datasources: &[&str]) -> Vec<u8> {
    let mapped: serde_json::Map<String, serde_json::Value> = datasources
        .iter()
        .map(|name| ((*name).to_owned(), serde_json::json!({"slow": ["id"]})))
        .collect();
    serde_json::json!({
        "jobId": job_id,
        "mappedFields": mapped,
        "metadata": {"source": "e2e", "correlationId": world.id},
    })
    .to_string()
    .into_bytes()
}

async fn wait_for(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The routing keys (and datasource, for executions) of the job's events until `last` came.
async fn events_until(
    events: &mut Listener,
    world: &World,
    job_id: Uuid,
    last: &str,
) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    loop {
        let event = events.event_for(job_id, Duration::from_secs(40)).await;
        event.verify(&world.keys).expect("signature");
        let key = event.delivery.routing_key.to_string();
        let name = match event.body().get("datasource").and_then(|d| d.as_str()) {
            Some(datasource) => format!("{key} {datasource}"),
            None => key.clone(),
        };
        assert!(seen.insert(name.clone()), "{name} twice");
        if key == last {
            return seen;
        }
    }
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// A Worker running a five-datasource slow job, gracefully canceled once four statements run:
/// the fifth, still queued, is `CANCELED` within 2 s.
struct Canceling {
    world: World,
    worker: crate::harness::WorkerProcess,
    api: crate::harness::ControlClient,
    events: Listener,
    job_id: Uuid,
}

async fn gracefully_canceled_five() -> Canceling {
    let world = World::new().await;
    let (worker, api) = world
        .start_worker_with_api(world.source_aliases(&FIVE))
        .await;
    let events = world.listen_to("job.#").await;
    let job_id = Uuid::now_v7();
    world
        .submit(&slow_job(&world, job_id, &FIVE), None, &[])
        .await;
    // Four at once (ENGINE_MAX_PARALLEL_DATASOURCES), the fifth waits its turn.
    wait_for(
        "four running statements",
        Duration::from_secs(20),
        async || world.slow_queries().await == 4,
    )
    .await;
    let (status, document) = api.send("POST", job_id, "/cancel", None, b"{}", Signing::Valid);
    assert_eq!(status, 202, "{document}");
    wait_for(
        "the queued execution's cancel",
        Duration::from_secs(2),
        async || world.executions(job_id).await.last().map(|e| e.1.as_str()) == Some("CANCELED"),
    )
    .await;
    Canceling {
        world,
        worker,
        api,
        events,
        job_id,
    }
}

#[tokio::test]
async fn a_graceful_cancel_ends_the_queued_datasource_at_once_and_lets_the_running_ones_finish() {
    let Canceling {
        world,
        worker,
        api,
        mut events,
        job_id,
    } = gracefully_canceled_five().await;
    assert_eq!(
        world.slow_queries().await,
        4,
        "a graceful cancel leaves the running statements alone"
    );
    let seen = events_until(&mut events, &world, job_id, "job.canceled").await;
    assert_eq!(
        seen,
        set(&[
            "job.cancellation_in_progress",
            "job.execution.canceled s5",
            "job.execution.succeeded s1",
            "job.execution.succeeded s2",
            "job.execution.succeeded s3",
            "job.execution.succeeded s4",
            "job.canceled",
        ])
    );
    let (_, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(document["status"], "canceled");
    assert_eq!(document["forceCanceled"], false);
    let details = &document["jobProcessDetails"];
    assert_eq!(details["numberOfSucceededThings"], 4, "{document}");
    assert_eq!(details["numberOfCanceledThings"], 1, "{document}");
    assert!(world.object_keys().await.is_empty(), "nothing stored");
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_forced_cancel_after_a_graceful_one_stops_the_running_statements() {
    let Canceling {
        world,
        worker,
        api,
        mut events,
        job_id,
    } = gracefully_canceled_five().await;
    let (status, document) = api.send(
        "POST",
        job_id,
        "/cancel",
        None,
        br#"{"force":true}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202, "{document}");
    wait_for("the statements' end", Duration::from_secs(2), async || {
        world.slow_queries().await == 0
    })
    .await;
    let seen = events_until(&mut events, &world, job_id, "job.canceled").await;
    assert!(seen.contains("job.execution.canceled s5"), "{seen:?}");
    assert!(
        !seen.iter().any(|e| e.contains("succeeded")),
        "the forced cancel stopped them: {seen:?}"
    );
    assert_eq!(
        world.executions(job_id).await,
        FIVE.iter()
            .map(|name| ((*name).to_owned(), "CANCELED".to_owned()))
            .collect::<Vec<_>>()
    );
    let (_, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(document["status"], "canceled");
    assert_eq!(document["forceCanceled"], true);
    assert!(world.object_keys().await.is_empty(), "nothing stored");
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_missing_table_rejects_its_datasource_and_the_others_end_with_their_events() {
    let world = World::new().await;
    let (worker, api) = world
        .start_worker_with_api(world.source_aliases(&["s1", "s2", "s3"]))
        .await;
    let mut events = world.listen_to("job.#").await;
    let job_id = Uuid::now_v7();
    let body = serde_json::json!({
        "jobId": job_id,
        "mappedFields": {
            "s1": {"payments": ["id"]},
            "s2": {"no_such_table": ["id"]},
            "s3": {"slow": ["id"]},
        },
        "metadata": {"source": "e2e"},
    });
    world.submit(body.to_string().as_bytes(), None, &[]).await;
    let seen = events_until(&mut events, &world, job_id, "job.failed").await;
    assert!(seen.contains("job.execution.rejected s2"), "{seen:?}");
    assert!(seen.contains("job.execution.canceled s3"), "{seen:?}");
    assert!(
        seen.contains("job.execution.succeeded s1") || seen.contains("job.execution.canceled s1"),
        "{seen:?}"
    );
    assert_eq!(seen.len(), 4, "three executions and the job: {seen:?}");
    let (_, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(document["status"], "failed");
    let executions = document["executions"].as_array().expect("executions");
    let rejected = executions
        .iter()
        .find(|e| e["datasource"] == "s2")
        .expect("s2");
    assert_eq!(rejected["status"], "REJECTED");
    assert!(
        rejected["statusDetails"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("no_such_table")),
        "{rejected}"
    );
    let details = &document["jobProcessDetails"];
    let count = |status: &str| executions.iter().filter(|e| e["status"] == status).count();
    assert_eq!(details["numberOfRejectedThings"], 1);
    assert_eq!(details["numberOfSucceededThings"], count("SUCCEEDED"));
    assert_eq!(details["numberOfCanceledThings"], count("CANCELED"));
    assert_eq!(count("SUCCEEDED") + count("CANCELED"), 2, "{document}");
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_deleted_connection_ends_its_execution_removed() {
    let world = World::new().await;
    // The Worker migrates the state database; the connection is read when the job runs.
    let worker = world.start_worker().await;
    sqlx::query(
        "INSERT INTO connections (name, type, host, port, database, username, ssl_mode, deleted_at)
         VALUES ('retired', 'POSTGRESQL', '127.0.0.1', 5432, 'gone', 'nobody', 'disable', now())",
    )
    .execute(&world.state)
    .await
    .expect("a deleted connection");
    let mut events = world.listen_to("job.#").await;
    let job_id = Uuid::now_v7();
    let body = serde_json::json!({
        "jobId": job_id,
        "mappedFields": {"retired": {"payments": ["id"]}},
        "metadata": {"source": "e2e"},
    });
    world.submit(body.to_string().as_bytes(), None, &[]).await;
    let removed = events.event_for(job_id, Duration::from_secs(30)).await;
    assert_eq!(
        removed.delivery.routing_key.as_str(),
        "job.execution.removed"
    );
    removed.verify(&world.keys).expect("signature");
    assert_eq!(removed.body()["status"], "REMOVED");
    let failed = events.event_for(job_id, Duration::from_secs(30)).await;
    assert_eq!(failed.delivery.routing_key.as_str(), "job.failed");
    // The job's error is an unknown connection's, as it always was.
    assert_eq!(
        failed.body()["metadata"]["error"]["message"],
        "connection not found for database: retired"
    );
    assert_eq!(
        world.executions(job_id).await,
        [("retired".to_owned(), "REMOVED".to_owned())]
    );
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_running_execution_shows_its_rows_so_far() {
    let world = World::new().await;
    // 4,000 rows that the server produces one by one, 2 ms apart at least (the sleep names the
    // row, so it runs for each).
    let source = sqlx::PgPool::connect(world.source_url())
        .await
        .expect("source database");
    sqlx::query(
        "CREATE VIEW trickle AS
         SELECT g AS id FROM generate_series(1, 4000) g,
                             LATERAL (SELECT pg_sleep(0.002 + g * 0.0)) s",
    )
    .execute(&source)
    .await
    .expect("trickle view");
    source.close().await;
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    world.submit_job(job_id, "src", "trickle", &["id"]).await;
    // While it runs, the job document shows the rows read so far, growing.
    let mut seen: Vec<u64> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < 2 {
        let (_, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
        let execution = &document["executions"][0];
        if execution["status"] == "IN_PROGRESS" {
            let rows = execution["rowCount"].as_u64().unwrap_or(0);
            if rows > 0 && seen.last().is_none_or(|last| rows > *last) {
                seen.push(rows);
            }
        }
        assert!(
            document["status"] != "completed" && Instant::now() < deadline,
            "the job ended (or 60 s passed) before two growing row counts were seen: {seen:?} {document}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let completed = events.event_for(job_id, Duration::from_secs(90)).await;
    assert_eq!(completed.delivery.routing_key.as_str(), "job.completed");
    assert_eq!(completed.body()["result"]["rowCount"], 4000);
    let (_, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(document["executions"][0]["status"], "SUCCEEDED");
    assert_eq!(document["executions"][0]["rowCount"], 4000);
    assert!(seen[0] < 4000, "{seen:?}");
    drop(worker);
    world.cleanup().await;
}
