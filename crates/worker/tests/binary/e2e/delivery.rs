//! Delivery guarantees: a job delivered twice runs once; a Worker killed mid-extraction does not
//! leave its job `processing`, even when the message comes back after the signature's freshness
//! window; a run whose claim is taken over does not write the job's object; a job's published
//! events are marked by the batcher, as its metrics count.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use uuid::Uuid;

use crate::harness::{self, WorkerProcess, World};

#[tokio::test]
async fn the_same_job_delivered_twice_runs_once() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut events = world.listen().await;

    let job_id = Uuid::now_v7();
    let body = world.job_body(job_id, "src", "slow", &["id"]);
    world.submit(&body, None, &[]).await;
    world.submit(&body, None, &[]).await;
    let first = events.event_for(job_id, Duration::from_secs(60)).await;
    assert_eq!(first.delivery.routing_key.as_str(), "job.completed");
    let more = events.drain(Duration::from_secs(8)).await;
    assert!(
        more.is_empty(),
        "{} more events for a job delivered twice",
        more.len()
    );
    let attempts: i32 = sqlx::query_scalar("SELECT attempts FROM jobs WHERE job_id = $1")
        .bind(job_id)
        .fetch_one(&world.state)
        .await
        .expect("job");
    assert_eq!(attempts, 1, "the job was extracted more than once");
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_job_whose_worker_is_killed_is_finished_by_another() {
    let world = World::new().await;
    let mut workers = vec![world.start_worker().await, world.start_worker().await];
    let mut events = world.listen().await;

    let job_id = Uuid::now_v7();
    world.submit_job(job_id, "src", "slow", &["id"]).await;
    world
        .wait_status(job_id, "processing", Duration::from_secs(20))
        .await;
    // Kill the Worker that claimed the job (its log names the job); the other must finish it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let holder = loop {
        if let Some(i) = workers
            .iter()
            .position(|w| w.output().contains(&job_id.to_string()))
        {
            break i;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no Worker logged the job"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut victim = workers.remove(holder);
    victim.signal("KILL");
    victim.wait_exit(Duration::from_secs(10)).await;
    let killed_at = std::time::Instant::now();

    let event = events.event_for(job_id, Duration::from_secs(120)).await;
    assert!(killed_at.elapsed() < Duration::from_secs(120));
    assert!(
        ["job.completed", "job.failed"].contains(&event.delivery.routing_key.as_str()),
        "unexpected {}",
        event.delivery.routing_key
    );
    event.verify(&world.keys).expect("signature");
    let status = world.job_status(job_id).await;
    assert!(
        matches!(status.as_deref(), Some("completed" | "failed")),
        "{status:?}"
    );
    assert!(
        workers[0].output().contains(&job_id.to_string()),
        "the survivor did not take the job over"
    );
    drop(workers);
    world.cleanup().await;
}

#[tokio::test]
async fn a_run_whose_claim_is_taken_over_while_extracting_stores_nothing() {
    let world = World::new().await;
    // A lease far longer than the test: the heartbeat would not notice the takeover in time.
    let port = harness::free_port();
    let mut env = world.env(port);
    env.insert("JOB_LEASE_SEC".into(), "300".into());
    let worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;

    let job_id = Uuid::now_v7();
    world.submit_job(job_id, "src", "slow", &["id"]).await;
    // While the 6-s query runs, another owner takes the job over.
    world
        .wait_status(job_id, "processing", Duration::from_secs(20))
        .await;
    let taken = sqlx::query(
        "UPDATE jobs SET owner = 'another-worker/run', lease_expires_at = now() + interval '300 s'
         WHERE job_id = $1 AND status = 'processing'",
    )
    .bind(job_id)
    .execute(&world.state)
    .await
    .expect("take the job over");
    assert_eq!(taken.rows_affected(), 1);

    let deadline = Instant::now() + Duration::from_secs(30);
    while !worker
        .output()
        .contains("claim was taken over during extraction")
    {
        assert!(
            Instant::now() < deadline,
            "the run did not notice; worker output:\n{}",
            worker.output()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        world.object_keys().await.is_empty(),
        "the run stored its object"
    );
    let owner: Option<String> = sqlx::query_scalar("SELECT owner FROM jobs WHERE job_id = $1")
        .bind(job_id)
        .fetch_one(&world.state)
        .await
        .expect("job row");
    assert_eq!(owner.as_deref(), Some("another-worker/run"));
    assert_eq!(
        world.job_status(job_id).await.as_deref(),
        Some("processing")
    );
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_job_retried_after_the_freshness_window_is_finished_not_dead_lettered() {
    const WINDOW_SECS: i64 = 3;
    let world = World::new().await;
    let spawn = || {
        let port = harness::free_port();
        let mut env = world.env(port);
        env.insert(
            "RABBITMQ_SIGNATURE_MAX_AGE_SEC".into(),
            WINDOW_SECS.to_string(),
        );
        WorkerProcess::spawn(env, port)
    };
    let mut first = spawn();
    first.wait_ready(Duration::from_secs(60)).await;
    let mut events = world.listen().await;
    let dlq = format!("fetcher.test.dlq.{}", world.id);
    let mut dead = world.tap(&dlq, "fetcher.dlx", "fetcher.dlq.key").await;

    let job_id = Uuid::now_v7();
    let body = world.job_body(job_id, "src", "slow", &["id"]);
    let signed_at = chrono::Utc::now().timestamp();
    world.submit_signed_at(&body, None, &[], signed_at).await;
    world
        .wait_status(job_id, "processing", Duration::from_secs(20))
        .await;
    // The first attempt dies mid-extraction; its message comes back to the next Worker only
    // once the signature is older than the window.
    first.signal("KILL");
    first.wait_exit(Duration::from_secs(10)).await;
    while chrono::Utc::now().timestamp() - signed_at <= WINDOW_SECS {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let second = spawn();
    second.wait_ready(Duration::from_secs(60)).await;

    let event = events.event_for(job_id, Duration::from_secs(120)).await;
    assert_eq!(
        event.delivery.routing_key.as_str(),
        "job.completed",
        "{}",
        second.output()
    );
    event.verify(&world.keys).expect("signature");
    let attempts: i32 = sqlx::query_scalar("SELECT attempts FROM jobs WHERE job_id = $1")
        .bind(job_id)
        .fetch_one(&world.state)
        .await
        .expect("job");
    assert_eq!(attempts, 2, "the retry ran the job once more");

    // Freshness still guards everything else: an old signature on another body for the same
    // job, or on a job never accepted, is dead-lettered.
    let an_hour_ago = chrono::Utc::now().timestamp() - 3600;
    let other_body = world.job_body(job_id, "src", "payments", &["id"]);
    let never_accepted = world.job_body(Uuid::now_v7(), "src", "payments", &["id"]);
    for stale in [&other_body, &never_accepted] {
        world.submit_signed_at(stale, None, &[], an_hour_ago).await;
        let refused = loop {
            let delivery = tokio::time::timeout(Duration::from_secs(30), dead.next())
                .await
                .expect("the stale message was dead-lettered")
                .expect("dead-letter tap")
                .expect("delivery");
            if delivery.data == *stale {
                break delivery;
            }
        };
        assert_eq!(refused.data, *stale);
    }
    assert!(
        second.output().contains("signature_stale"),
        "{}",
        second.output()
    );
    assert!(events.drain(Duration::from_secs(2)).await.is_empty());
    drop(second);
    world.cleanup().await;
}

/// A job's confirmed events are marked published by the batcher, and `/metrics` says so: a
/// flush that succeeded, its rows `marked`, none `left` to the repairer, nothing waiting.
#[tokio::test]
async fn a_jobs_published_events_are_marked_and_the_metrics_count_them() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut events = world.listen().await;
    world.completed_small_job(&mut events).await;

    // The metric is counted after the statement's commit: waited for, with the rows.
    let counts = "SELECT count(*), count(*) FILTER (WHERE published_at IS NULL) FROM outbox";
    let deadline = Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let (rows, unmarked): (i64, i64) = sqlx::query_as(counts)
            .fetch_one(&world.state)
            .await
            .expect("outbox");
        let metrics = worker.get("/metrics").expect("metrics").1;
        let marked = harness::metric_sum(
            &metrics,
            "fetcher_outbox_mark_rows_total",
            "outcome=\"marked\"",
        );
        if rows > 0 && unmarked == 0 && marked == rows as f64 {
            break metrics;
        }
        assert!(
            Instant::now() < deadline,
            "{unmarked} of {rows} events unmarked, {marked} counted marked"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let sum = |name: &str, label: &str| harness::metric_sum(&metrics, name, label);
    assert!(sum("fetcher_outbox_mark_flushes_total", "outcome=\"ok\"") >= 1.0);
    assert_eq!(
        sum("fetcher_outbox_mark_flushes_total", "outcome=\"error\""),
        0.0
    );
    assert_eq!(
        sum("fetcher_outbox_mark_rows_total", "outcome=\"left\""),
        0.0
    );
    assert_eq!(sum("fetcher_outbox_marks_waiting", ""), 0.0);
    drop(worker);
    world.cleanup().await;
}
