//! The control API of the real binary (lifecycle §3): a force-cancel stops a running query on
//! the source server and ends the job `canceled` with both events; a completed job is deleted
//! in two phases, its object gone; every request not signed for its job, method and tenant is
//! refused and changes nothing.

use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::harness::sources::{MariaDb, SourceDb};
use crate::harness::{Signing, World};

#[tokio::test]
async fn a_force_cancel_stops_the_running_query_and_ends_the_job_canceled() {
    let world = World::new().await;
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    world.submit_job(job_id, "src", "slow", &["id"]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while world.slow_queries().await == 0 {
        assert!(Instant::now() < deadline, "the query never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, document) = api.send(
        "POST",
        job_id,
        "/cancel",
        None,
        br#"{"force":true,"comment":"runaway","reasonCode":"OPS_1"}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202, "{document}");
    assert_eq!(document["id"], job_id.to_string());
    assert!(
        ["cancellation_in_progress", "canceled"].contains(&document["status"].as_str().unwrap()),
        "{document}"
    );
    let asked = Instant::now();
    let first = events.event_for(job_id, Duration::from_secs(30)).await;
    first.verify(&world.keys).expect("signature");
    assert_eq!(
        first.delivery.routing_key.as_str(),
        "job.cancellation_in_progress"
    );
    let second = events.event_for(job_id, Duration::from_secs(30)).await;
    second.verify(&world.keys).expect("signature");
    assert_eq!(second.delivery.routing_key.as_str(), "job.canceled");
    let body = second.body();
    assert_eq!(body["status"], "canceled");
    assert_eq!(body["forceCanceled"], true);
    assert_eq!(body["reasonCode"], "OPS_1");
    assert_eq!(body["metadata"]["source"], "e2e");
    // The statement was stopped on the source server, well before its 6 s.
    while world.slow_queries().await > 0 {
        assert!(
            asked.elapsed() < Duration::from_secs(4),
            "the query still runs on the source server"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(status, 200);
    assert_eq!(document["status"], "canceled");
    assert_eq!(document["forceCanceled"], true);
    assert_eq!(document["comment"], "runaway");
    assert_eq!(document["executions"][0]["datasource"], "src", "{document}");
    assert_eq!(
        document["executions"][0]["status"], "CANCELED",
        "{document}"
    );
    assert!(world.object_keys().await.is_empty(), "nothing stored");
    // Why it ended is where a person looks first: the log line of its end, at WARN.
    let id = job_id.to_string();
    worker
        .wait_for_lines(
            "the WARN line of the canceled job",
            1,
            Duration::from_secs(10),
            |line| {
                line.contains("\"level\":\"WARN\"")
                    && line.contains(&id)
                    && line.contains("\"status\":\"canceled\"")
                    && line.contains(
                        "\"reason\":\"force-canceled through the control API (reasonCode OPS_1): runaway\"",
                    )
            },
        )
        .await;
    // One terminal event: no job.completed or job.failed follows.
    let later = events.drain(Duration::from_secs(3)).await;
    assert!(
        later.is_empty(),
        "{:?}",
        later
            .iter()
            .map(|e| e.delivery.routing_key.to_string())
            .collect::<Vec<_>>()
    );
    let metrics = worker.get("/metrics").expect("metrics").1;
    let sum = |name, label| crate::harness::metric_sum(&metrics, name, label);
    assert_eq!(
        sum("fetcher_job_cancels_total", "requested"),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        sum("fetcher_job_cancels_total", "\"canceled\""),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        sum("fetcher_job_cancel_latency_seconds_count", ""),
        1.0,
        "{metrics}"
    );
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_completed_job_is_deleted_in_two_phases_and_its_object_is_gone() {
    let world = World::new().await;
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    world.submit_job(job_id, "src", "payments", &["id"]).await;
    let completed = events.event_for(job_id, Duration::from_secs(40)).await;
    assert_eq!(completed.delivery.routing_key.as_str(), "job.completed");
    assert_eq!(world.object_keys().await.len(), 1);

    // A completed job cannot be canceled: 409, nothing changes.
    let (status, answer) = api.send("POST", job_id, "/cancel", None, b"", Signing::Valid);
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["code"], "invalid_state_transition");

    let (status, document) = api.send(
        "DELETE",
        job_id,
        "",
        None,
        br#"{"comment":"retention"}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202, "{document}");
    assert_eq!(document["status"], "deleted");
    let deleting = events.event_for(job_id, Duration::from_secs(30)).await;
    assert_eq!(
        deleting.delivery.routing_key.as_str(),
        "job.deletion_in_progress"
    );
    let deleted = events.event_for(job_id, Duration::from_secs(30)).await;
    assert_eq!(deleted.delivery.routing_key.as_str(), "job.deleted");
    deleted.verify(&world.keys).expect("signature");
    assert_eq!(deleted.body()["resultDeleted"], true);
    assert!(world.object_keys().await.is_empty(), "the object is gone");
    // Deleted again: accepted, nothing emitted.
    let (status, _) = api.send("DELETE", job_id, "", None, b"", Signing::Valid);
    assert_eq!(status, 202);
    assert!(events.drain(Duration::from_secs(2)).await.is_empty());
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn requests_not_signed_for_their_job_method_and_tenant_change_nothing() {
    let world = World::new().await;
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    world.submit_job(job_id, "src", "payments", &["id"]).await;
    events.event_for(job_id, Duration::from_secs(40)).await;

    for (signing, code) in [
        (Signing::Unsigned, "signature_missing"),
        (Signing::OtherMethod, "signature_mismatch"),
        (Signing::Stale, "signature_stale"),
    ] {
        let (status, answer) = api.send("DELETE", job_id, "", None, b"", signing);
        assert_eq!(status, 401, "{signing:?}: {answer}");
        assert_eq!(answer["code"], code);
    }
    // Signed, but for a tenant the job is not: as unknown.
    let (status, _) = api.send("DELETE", job_id, "", Some("other"), b"", Signing::Valid);
    assert_eq!(status, 404);
    let (status, _) = api.send("GET", Uuid::now_v7(), "", None, b"", Signing::Valid);
    assert_eq!(status, 404);
    let (status, answer) = api.send(
        "POST",
        job_id,
        "/cancel",
        None,
        br#"{"reasonCode":"not upper"}"#,
        Signing::Valid,
    );
    assert_eq!(status, 400);
    assert!(answer["error"].as_str().unwrap().contains("reasonCode"));
    let big = vec![b' '; 17 << 10];
    let (status, _) = api.send("DELETE", job_id, "", None, &big, Signing::Valid);
    assert_eq!(status, 413);

    assert_eq!(world.job_status(job_id).await.as_deref(), Some("completed"));
    assert_eq!(world.object_keys().await.len(), 1, "nothing was deleted");
    assert!(
        events.drain(Duration::from_secs(2)).await.is_empty(),
        "nothing published"
    );
    let metrics = worker.get("/metrics").expect("metrics").1;
    assert!(
        crate::harness::metric_sum(
            &metrics,
            "fetcher_api_requests_rejected_total",
            "signature_stale"
        ) >= 1.0,
        "{metrics}"
    );
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_force_cancel_reaches_a_long_leased_run_through_its_announcement() {
    let world = World::new().await;
    // The heartbeat ticks every 20 s: only the announcement can stop the query within 2 s.
    let (worker, api) = world
        .start_worker_with_api(vec![("JOB_LEASE_SEC".into(), "60".into())])
        .await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    world.submit_job(job_id, "src", "slow", &["id"]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while world.slow_queries().await == 0 {
        assert!(Instant::now() < deadline, "the query never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked = Instant::now();
    let (status, _) = api.send(
        "POST",
        job_id,
        "/cancel",
        None,
        br#"{"force":true}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202);
    while world.slow_queries().await > 0 {
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "the query still runs 2 s after the cancel"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut keys = Vec::new();
    while keys.len() < 2 {
        let event = events.event_for(job_id, Duration::from_secs(10)).await;
        keys.push(event.delivery.routing_key.to_string());
    }
    assert_eq!(keys, ["job.cancellation_in_progress", "job.canceled"]);
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "canceled within 3 s"
    );
    drop(worker);
    world.cleanup().await;
}

/// Statements reading `source`'s `slow` view, as the process list shows them.
async fn running(source: &MariaDb) -> i64 {
    sqlx::query_scalar(
        // The engine names tables with their schema, so the session may have no database.
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST
         WHERE COMMAND IN ('Query', 'Execute') AND INFO LIKE CONCAT('%', ?, '%slow%')
           AND ID <> CONNECTION_ID()",
    )
    .bind(&source.name)
    .fetch_one(&source.pool)
    .await
    .expect("the process list")
}

#[tokio::test]
async fn a_force_cancel_stops_a_running_query_on_mariadb_too() {
    let world = World::new().await;
    let source = MariaDb::create().await;
    source
        .exec("CREATE VIEW slow AS SELECT SLEEP(6) AS id")
        .await;
    let (worker, api) = world.start_worker_with_api(source.datasource("mdb")).await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    world.submit_job(job_id, "mdb", "slow", &["id"]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while running(&source).await == 0 {
        assert!(Instant::now() < deadline, "the query never ran on MariaDB");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked = Instant::now();
    let (status, _) = api.send(
        "POST",
        job_id,
        "/cancel",
        None,
        br#"{"force":true}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202);
    while running(&source).await > 0 {
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "the query still runs on MariaDB 2 s after the cancel"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut keys = Vec::new();
    while keys.len() < 2 {
        let event = events.event_for(job_id, Duration::from_secs(10)).await;
        event.verify(&world.keys).expect("signature");
        keys.push(event.delivery.routing_key.to_string());
    }
    assert_eq!(keys, ["job.cancellation_in_progress", "job.canceled"]);
    assert!(world.object_keys().await.is_empty());
    let (_, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(document["status"], "canceled", "{document}");
    assert_eq!(
        document["executions"][0]["status"], "CANCELED",
        "{document}"
    );
    drop(worker);
    source.drop().await;
    world.cleanup().await;
}

#[tokio::test]
async fn a_cancel_of_a_queued_job_ends_it_unrun_when_a_worker_takes_its_message() {
    let world = World::new().await;
    // This Worker serves the API but consumes another queue: the job's message stays queued,
    // as when every Worker of its queue is stopped.
    let elsewhere = format!("{}.elsewhere", world.queue);
    world.broker.track_queue(&elsewhere);
    let (api_worker, api) = world
        .start_worker_with_api(vec![(
            "RABBITMQ_FETCHER_WORK_QUEUE".into(),
            elsewhere.clone(),
        )])
        .await;
    // The job's queue exists (a Worker of it declared it), and none of its Workers runs.
    drop(world.start_worker().await);
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    world.submit_job(job_id, "src", "slow", &["id"]).await;
    let (status, document) = api.send(
        "POST",
        job_id,
        "/cancel",
        None,
        br#"{"comment":"not needed"}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202, "{document}");
    assert_eq!(document["status"], "pending", "{document}");
    assert_eq!(document["cancelRequested"], true, "{document}");

    // A Worker of the job's queue starts: it takes the message and ends the job unrun.
    let worker = world.start_worker().await;
    let first = events.event_for(job_id, Duration::from_secs(30)).await;
    first.verify(&world.keys).expect("signature");
    assert_eq!(
        first.delivery.routing_key.as_str(),
        "job.cancellation_in_progress"
    );
    let second = events.event_for(job_id, Duration::from_secs(30)).await;
    second.verify(&world.keys).expect("signature");
    assert_eq!(second.delivery.routing_key.as_str(), "job.canceled");
    for event in [&first, &second] {
        let body = event.body();
        assert_eq!(body["metadata"]["source"], "e2e", "the message's metadata");
        assert_eq!(body["metadata"]["correlationId"], world.id.as_str());
        assert_eq!(body["comment"], "not needed");
    }
    let (attempts, started): (i32, Option<chrono::DateTime<chrono::Utc>>) =
        sqlx::query_as("SELECT attempts, started_at FROM jobs WHERE job_id = $1")
            .bind(job_id)
            .fetch_one(&world.state)
            .await
            .expect("job row");
    assert_eq!((attempts, started), (0, None), "the job never ran");
    assert_eq!(world.slow_queries().await, 0);
    assert_eq!(
        world.executions(job_id).await,
        [("src".to_owned(), "CANCELED".to_owned())]
    );
    assert!(world.object_keys().await.is_empty());
    // The Worker that ended it says so at WARN, with the cancel's comment as its reason.
    let id = job_id.to_string();
    worker
        .wait_for_lines(
            "the WARN line of the job canceled unrun",
            1,
            Duration::from_secs(10),
            |line| {
                line.contains("\"level\":\"WARN\"")
                    && line.contains(&id)
                    && line.contains("\"reason\":\"canceled through the control API: not needed\"")
            },
        )
        .await;
    drop(worker);
    drop(api_worker);
    world.cleanup().await;
}
