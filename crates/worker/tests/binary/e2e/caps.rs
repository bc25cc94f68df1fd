//! Concurrency caps on the real binary (`DATASOURCE_<NAME>_MAX_CONCURRENT`): three replicas and
//! ten jobs on one PostgreSQL datasource capped at 2. The source database never runs more than 2
//! of their statements at once (`pg_stat_activity`, sampled every 20 ms by the test), all ten
//! complete, and the replicas counted waits.

use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::harness::{Overlap, Signing, World};

#[tokio::test]
async fn three_replicas_never_run_more_reads_of_a_capped_datasource_than_its_cap() {
    let world = World::new().await;
    world.create_capped_view().await;
    let capped = || vec![("DATASOURCE_SRC_MAX_CONCURRENT".to_owned(), "2".to_owned())];
    let workers = [
        world.start_worker_with(capped()).await,
        world.start_worker_with(capped()).await,
        world.start_worker_with(capped()).await,
    ];

    // The sampler: the most statements on `capped` seen at once, until told to stop.
    let overlap = Overlap::start(&world);

    let mut events = world.listen().await;
    let jobs: Vec<Uuid> = (0..10).map(|_| Uuid::now_v7()).collect();
    for job_id in &jobs {
        world.submit_job(*job_id, "src", "capped", &["id"]).await;
    }
    events.all_completed(&jobs, Duration::from_secs(60)).await;
    let most = overlap.stop().await;
    println!("caps: at most {most} statements on the capped view at once");
    assert!(
        most <= 2,
        "the source ran {most} of the jobs' statements at once"
    );
    assert!(most >= 1, "the sampler saw the jobs' statements");
    let sum = |name| -> f64 {
        workers
            .iter()
            .map(|worker| worker.metric(name, "datasource=\"src\""))
            .sum()
    };
    let waits = sum("fetcher_datasource_slot_waits_total");
    println!("caps: {waits} waits counted over the three replicas");
    assert!(waits >= 1.0, "ten jobs on two slots waited: {waits}");
    let in_use = sum("fetcher_datasource_slots_in_use");
    assert_eq!(in_use, 0.0, "every slot was given back");
    let taken = sum("fetcher_datasource_slot_wait_seconds_count");
    assert!(taken >= 10.0, "each job took a slot: {taken}");
    // Every slot is freed by its run (on a task of its own, right after the read), not left to
    // lapse: JOB_LEASE_SEC is 3 s, so a row left behind would outlive this wait.
    wait_for("every slot freed", Duration::from_secs(2), async || {
        slots_held(&world).await == 0
    })
    .await;
    drop(workers);
    world.cleanup().await;
}

/// The rows of `datasource_slots`: slots held (or left behind).
async fn slots_held(world: &World) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM datasource_slots")
        .fetch_one(&world.state)
        .await
        .expect("slots")
}

/// Polls `check` every 50 ms until it holds, failing after `within`.
async fn wait_for(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_job_waiting_for_a_slot_stays_queued_and_ends_by_its_cancel_or_its_timeout() {
    let world = World::new().await;
    let capped = vec![("DATASOURCE_SRC_MAX_CONCURRENT".to_owned(), "1".to_owned())];
    let (worker, api) = world.start_worker_with_api(capped).await;
    let mut events = world.listen().await;

    // The one slot, held by a 6-second read.
    let holder = Uuid::now_v7();
    world.submit_job(holder, "src", "slow", &["id"]).await;
    wait_for(
        "the holder's statement",
        Duration::from_secs(20),
        async || world.slow_queries().await == 1,
    )
    .await;

    // A job that waits: processing, its execution QUEUED, the wait counted.
    let waiting = Uuid::now_v7();
    world.submit_job(waiting, "src", "payments", &["id"]).await;
    wait_for("the wait counted", Duration::from_secs(20), async || {
        worker.metric("fetcher_datasource_slot_waits_total", "datasource=\"src\"") >= 1.0
    })
    .await;
    assert_eq!(
        world.job_status(waiting).await.as_deref(),
        Some("processing")
    );
    assert_eq!(
        world.executions(waiting).await,
        [("src".to_owned(), "QUEUED".to_owned())]
    );

    // A job whose time runs out while it waits fails as any timeout does.
    let hurried = Uuid::now_v7();
    let body = serde_json::json!({
        "jobId": hurried,
        "mappedFields": {"src": {"payments": ["id"]}},
        "metadata": {"source": "e2e"},
        "timeoutSeconds": 1,
    });
    world.submit(body.to_string().as_bytes(), None, &[]).await;
    let failed = events.event_for(hurried, Duration::from_secs(20)).await;
    assert_eq!(failed.delivery.routing_key.as_str(), "job.failed");
    let error = failed.body()["metadata"]["error"].to_string();
    assert!(error.contains("timed out"), "{}", failed.body());

    // A graceful cancel ends the waiting job at once, its execution CANCELED, nothing read.
    let (status, document) = api.send("POST", waiting, "/cancel", None, b"{}", Signing::Valid);
    assert_eq!(status, 202, "{document}");
    let first = events.event_for(waiting, Duration::from_secs(10)).await;
    assert_eq!(
        first.delivery.routing_key.as_str(),
        "job.cancellation_in_progress"
    );
    let second = events.event_for(waiting, Duration::from_secs(10)).await;
    assert_eq!(second.delivery.routing_key.as_str(), "job.canceled");
    assert_eq!(
        world.executions(waiting).await,
        [("src".to_owned(), "CANCELED".to_owned())]
    );
    assert_eq!(world.slow_queries().await, 1, "the holder still reads");

    // The holder ends; its slot is freed, and the slots are all free.
    let completed = events.event_for(holder, Duration::from_secs(20)).await;
    assert_eq!(completed.delivery.routing_key.as_str(), "job.completed");
    wait_for("every slot freed", Duration::from_secs(2), async || {
        slots_held(&world).await == 0
    })
    .await;
    drop(worker);
    world.cleanup().await;
}
