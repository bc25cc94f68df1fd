//! A burst of small jobs at once, counted on the state database's wire as [`super::round_trips`]
//! counts one: the jobs' published marks are batched (`repairer::Marks`), so the burst makes
//! fewer mark statements than it has jobs.

use std::time::Duration;

use futures_util::future::join_all;
use uuid::Uuid;
use worker::job::Disposition;

use super::round_trips::{counted_wire, handle, published, report, resolve, run_job};
use crate::harness::World;

/// Jobs handed to the core at once (as with `RABBITMQ_NUMBERS_OF_WORKERS=16`).
const BURST: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_jobs_shares_its_published_marks() {
    let world = World::new().await;
    let env = world.env(0);
    let pg = resolve(&env["DATASOURCE_SRC_HOST"], &env["DATASOURCE_SRC_PORT"]).await;
    let (state, wired) = counted_wire(&world, pg, Vec::new()).await;
    let _events = world.listen_to("job.#").await;
    // A first job warms the pools.
    run_job(&world, &wired.core, "src", "payments").await;

    let before = state.tally();
    let jobs: Vec<Uuid> = (0..BURST).map(|_| Uuid::new_v4()).collect();
    let dispositions = join_all(
        jobs.iter()
            .map(|&job_id| handle(&world, &wired.core, job_id, "src", "payments")),
    )
    .await;
    assert!(
        dispositions.iter().all(|d| *d == Disposition::Ack),
        "{dispositions:?}"
    );
    for &job_id in &jobs {
        published(&world, job_id).await;
    }
    let burst = state.tally().since(&before);
    wired.marks.close(Duration::from_secs(5)).await;
    wired.publisher.close().await;
    wired.store.close().await;
    world.cleanup().await;

    let marks = burst
        .statements
        .iter()
        .filter(|sql| sql.contains("SET published_at = now()"))
        .count();
    report("state database, burst", &burst);
    println!(
        "{BURST} jobs: {} statements on the state database ({:.2} a job), {marks} of them marks",
        burst.statements.len(),
        burst.statements.len() as f64 / BURST as f64,
    );
    assert!(
        marks < BURST,
        "{BURST} jobs made {marks} mark statements: their marks were not shared"
    );
}
