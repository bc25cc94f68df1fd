//! Concurrency caps in the Manager mode: two replicas keep their slots in the Manager's MongoDB
//! (`fetcher_worker_slots`), and six jobs on a datasource capped at 2 never run more than 2 of
//! their statements at once on the source (`pg_stat_activity`, sampled every 20 ms); all
//! complete, and the replicas counted waits.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mongodb::bson::{doc, Document};
use testkit::manager::NewJob;

use super::manager::ManagerWorld;
use crate::harness::{metric_sum, WorkerProcess};

#[tokio::test]
async fn two_manager_mode_replicas_never_run_more_reads_of_a_capped_datasource_than_its_cap() {
    let m = ManagerWorld::new().await;
    let source = sqlx::PgPool::connect(m.world.source_url())
        .await
        .expect("source");
    sqlx::query("CREATE VIEW capped AS SELECT id FROM payments, pg_sleep(0.4)")
        .execute(&source)
        .await
        .expect("view");
    source.close().await;
    let mut workers = Vec::new();
    for _ in 0..2 {
        let port = crate::harness::free_port();
        let mut env = m.env(port);
        env.insert("DATASOURCE_SRC_MAX_CONCURRENT".into(), "2".into());
        let worker = WorkerProcess::spawn(env, port);
        worker.wait_ready(Duration::from_secs(60)).await;
        workers.push(worker);
    }

    let most = Arc::new(AtomicI64::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = tokio::spawn({
        let (most, stop) = (most.clone(), stop.clone());
        let (state, database) = (m.world.state.clone(), m.world.source_db.clone());
        async move {
            let mut ticks = tokio::time::interval(Duration::from_millis(20));
            while !stop.is_cancelled() {
                ticks.tick().await;
                let running: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity
                     WHERE datname = $1 AND state = 'active' AND query ILIKE '%capped%'
                       AND pid <> pg_backend_pid()",
                )
                .bind(&database)
                .fetch_one(&state)
                .await
                .expect("pg_stat_activity");
                most.fetch_max(running, Ordering::Relaxed);
            }
        }
    });

    let mut events = m.world.listen().await;
    let mut jobs = Vec::new();
    for n in 0..6 {
        // A request of its own each (the Manager's unique request hash).
        let job = NewJob {
            mapped_fields: doc! {"src": {"capped": ["id"]}},
            filters: Document::new(),
            metadata: doc! {"source": "e2e", "correlationId": &m.world.id, "n": n},
        };
        let job_id = m.manager.create_job(&job).await.expect("create the job");
        m.world
            .submit(
                &m.world.job_body(job_id, "src", "capped", &["id"]),
                None,
                &[],
            )
            .await;
        jobs.push(job_id);
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
    println!("manager caps: at most {most} statements on the capped view at once");
    assert!(
        (1..=2).contains(&most),
        "the source ran {most} of them at once"
    );
    let label = "datasource=\"src\"";
    let waits: f64 = workers
        .iter()
        .map(|worker| {
            let metrics = worker.get("/metrics").expect("metrics").1;
            metric_sum(&metrics, "fetcher_datasource_slot_waits_total", label)
        })
        .sum();
    println!("manager caps: {waits} waits counted over the two replicas");
    assert!(waits >= 1.0, "six jobs on two slots waited: {waits}");
    drop(workers);
    m.cleanup().await;
}
