//! Delivery guarantees: a job delivered twice runs once; a Worker killed mid-extraction does not
//! leave its job `processing`.

use std::time::Duration;

use uuid::Uuid;

use crate::harness::World;

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
    world
        .submit(&world.job_body(job_id, "src", "slow", &["id"]), None, &[])
        .await;
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
