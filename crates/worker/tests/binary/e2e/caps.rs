//! Concurrency caps on the real binary (`DATASOURCE_<NAME>_MAX_CONCURRENT`): three replicas and
//! ten jobs on one PostgreSQL datasource capped at 2. The source database never runs more than 2
//! of their statements at once (`pg_stat_activity`, sampled every 20 ms by the test), all ten
//! complete, and the replicas counted waits.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::harness::{metric_sum, World};

/// A view each read of which takes 0.4 s: the jobs' statements overlap unless held apart.
const CAPPED_VIEW: &str = "CREATE VIEW capped AS SELECT id FROM payments, pg_sleep(0.4)";

/// The source's active statements that read `capped`, the test's own excepted.
async fn capped_statements(pool: &sqlx::PgPool, database: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = $1 AND state = 'active' AND query ILIKE '%capped%'
           AND pid <> pg_backend_pid()",
    )
    .bind(database)
    .fetch_one(pool)
    .await
    .expect("pg_stat_activity")
}

#[tokio::test]
async fn three_replicas_never_run_more_reads_of_a_capped_datasource_than_its_cap() {
    let world = World::new().await;
    let source = sqlx::PgPool::connect(world.source_url())
        .await
        .expect("source");
    sqlx::query(CAPPED_VIEW)
        .execute(&source)
        .await
        .expect("view");
    source.close().await;
    let capped = || vec![("DATASOURCE_SRC_MAX_CONCURRENT".to_owned(), "2".to_owned())];
    let workers = [
        world.start_worker_with(capped()).await,
        world.start_worker_with(capped()).await,
        world.start_worker_with(capped()).await,
    ];

    // The sampler: the most statements on `capped` seen at once, until told to stop.
    let most = Arc::new(AtomicI64::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = tokio::spawn({
        let (most, stop) = (most.clone(), stop.clone());
        let (state, database) = (world.state.clone(), world.source_db.clone());
        async move {
            let mut ticks = tokio::time::interval(Duration::from_millis(20));
            while !stop.is_cancelled() {
                ticks.tick().await;
                let running = capped_statements(&state, &database).await;
                most.fetch_max(running, Ordering::Relaxed);
            }
        }
    });

    let mut events = world.listen().await;
    let jobs: Vec<Uuid> = (0..10).map(|_| Uuid::now_v7()).collect();
    for job_id in &jobs {
        world
            .submit(
                &world.job_body(*job_id, "src", "capped", &["id"]),
                None,
                &[],
            )
            .await;
    }
    for job_id in &jobs {
        let event = events.event_for(*job_id, Duration::from_secs(60)).await;
        assert_eq!(
            event.delivery.routing_key.as_str(),
            "job.completed",
            "{job_id}: {}",
            event.body()
        );
    }
    stop.cancel();
    sampler.await.expect("sampler");

    let most = most.load(Ordering::Relaxed);
    assert!(
        most <= 2,
        "the source ran {most} of the jobs' statements at once"
    );
    assert!(most >= 1, "the sampler saw the jobs' statements");
    let metrics: Vec<String> = workers
        .iter()
        .map(|worker| worker.get("/metrics").expect("metrics").1)
        .collect();
    let label = "datasource=\"src\"";
    let waits: f64 = metrics
        .iter()
        .map(|m| metric_sum(m, "fetcher_datasource_slot_waits_total", label))
        .sum();
    assert!(waits >= 1.0, "ten jobs on two slots waited: {waits}");
    let in_use: f64 = metrics
        .iter()
        .map(|m| metric_sum(m, "fetcher_datasource_slots_in_use", label))
        .sum();
    assert_eq!(in_use, 0.0, "every slot was given back");
    let taken: f64 = metrics
        .iter()
        .map(|m| metric_sum(m, "fetcher_datasource_slot_wait_seconds_count", label))
        .sum();
    assert!(taken >= 10.0, "each job took a slot: {taken}");
    // Every slot is freed by its run (on a task of its own, right after the read), not left to
    // lapse: JOB_LEASE_SEC is 3 s, so a row left behind would outlive this wait.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let held: i64 = sqlx::query_scalar("SELECT count(*) FROM datasource_slots")
            .fetch_one(&world.state)
            .await
            .expect("slots");
        if held == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{held} slots were never freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(workers);
    world.cleanup().await;
}
