//! Concurrency caps in the Manager mode: two replicas keep their slots in the Manager's MongoDB
//! (`fetcher_worker_slots`), and six jobs on a datasource capped at 2 never run more than 2 of
//! their statements at once on the source (`pg_stat_activity`, sampled every 20 ms); all
//! complete, and the replicas counted waits.

use std::time::Duration;

use mongodb::bson::doc;

use super::manager::ManagerWorld;
use crate::harness::Overlap;

#[tokio::test]
async fn two_manager_mode_replicas_never_run_more_reads_of_a_capped_datasource_than_its_cap() {
    let m = ManagerWorld::new().await;
    m.world.create_capped_view().await;
    let mut workers = Vec::new();
    for _ in 0..2 {
        let capped = [("DATASOURCE_SRC_MAX_CONCURRENT", "2")];
        workers.push(m.start_worker_with(&capped).await);
    }

    let overlap = Overlap::start(&m.world);

    let mut events = m.world.listen().await;
    let mut jobs = Vec::new();
    for n in 0..6 {
        // A request of its own each (the Manager's unique request hash).
        let (job_id, _) = m.create_on("src", "capped", &["id"], doc! {"n": n}).await;
        m.world.submit_job(job_id, "src", "capped", &["id"]).await;
        jobs.push(job_id);
    }
    events.all_completed(&jobs, Duration::from_secs(60)).await;
    let most = overlap.stop().await;
    println!("manager caps: at most {most} statements on the capped view at once");
    assert!(
        (1..=2).contains(&most),
        "the source ran {most} of them at once"
    );
    let waits: f64 = workers
        .iter()
        .map(|worker| worker.metric("fetcher_datasource_slot_waits_total", "datasource=\"src\""))
        .sum();
    println!("manager caps: {waits} waits counted over the two replicas");
    assert!(waits >= 1.0, "six jobs on two slots waited: {waits}");
    drop(workers);
    m.cleanup().await;
}
