//! Retention through the real binary (issue 37 item 3): two replicas with
//! `RESULT_RETENTION_DAYS` and `JOB_RETENTION_DAYS`; completed jobs whose end the test moves
//! two days back are deleted through the lifecycle (`job.deletion_in_progress`, `job.deleted`
//! with comment `retention`, the object gone) by one replica only, and their tombstones, moved
//! back in turn, are pruned.

use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::harness::{metric_sum, World};

/// Moves the jobs' end and last change back by two days.
async fn two_days_back(world: &World, jobs: &[Uuid], column: &str) {
    sqlx::query(&format!(
        "UPDATE jobs SET {column} = {column} - interval '2 days' WHERE job_id = ANY($1)"
    ))
    .bind(jobs)
    .execute(&world.state)
    .await
    .expect("backdate");
}

#[tokio::test]
async fn old_results_are_deleted_through_the_lifecycle_by_one_replica_and_tombstones_pruned() {
    let world = World::new().await;
    let retention = || {
        vec![
            ("RESULT_RETENTION_DAYS".to_owned(), "1".to_owned()),
            ("JOB_RETENTION_DAYS".to_owned(), "1".to_owned()),
            ("RETENTION_INTERVAL_SEC".to_owned(), "1".to_owned()),
        ]
    };
    let first = world.start_worker_with(retention()).await;
    let second = world.start_worker_with(retention()).await;
    let mut events = world.listen().await;
    let jobs: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
    for job_id in &jobs {
        world.submit_job(*job_id, "src", "payments", &["id"]).await;
    }
    for job_id in &jobs {
        let completed = events.event_for(*job_id, Duration::from_secs(40)).await;
        assert_eq!(completed.delivery.routing_key.as_str(), "job.completed");
    }
    assert_eq!(world.object_keys().await.len(), 3);
    // Not due yet: a day has not passed.
    assert!(events.drain(Duration::from_secs(3)).await.is_empty());

    two_days_back(&world, &jobs, "finished_at").await;
    for job_id in &jobs {
        let deleting = events.event_for(*job_id, Duration::from_secs(30)).await;
        assert_eq!(
            deleting.delivery.routing_key.as_str(),
            "job.deletion_in_progress"
        );
        let deleted = events.event_for(*job_id, Duration::from_secs(30)).await;
        assert_eq!(deleted.delivery.routing_key.as_str(), "job.deleted");
        deleted.verify(&world.keys).expect("signature");
        let body = deleted.body();
        assert_eq!(body["comment"], "retention", "{body}");
        assert_eq!(body["resultDeleted"], true, "{body}");
        assert_eq!(world.job_status(*job_id).await.as_deref(), Some("deleted"));
    }
    assert!(world.object_keys().await.is_empty(), "the objects are gone");
    // One replica deleted each job, once.
    let output = format!("{}{}", first.output(), second.output());
    for job_id in &jobs {
        let id = job_id.to_string();
        let lines = output
            .lines()
            .filter(|line| line.contains(&id) && line.contains("RESULT_RETENTION_DAYS"))
            .count();
        assert_eq!(lines, 1, "{job_id} deleted by one replica once:\n{output}");
    }
    let deleted: f64 = [&first, &second]
        .iter()
        .map(|worker| {
            let metrics = worker.get("/metrics").expect("metrics").1;
            metric_sum(&metrics, "fetcher_retention_results_deleted_total", "")
        })
        .sum();
    assert_eq!(deleted, 3.0);

    // The tombstones, two days old in turn, are pruned with their rows.
    two_days_back(&world, &jobs, "updated_at").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    for job_id in &jobs {
        while world.job_status(*job_id).await.is_some() {
            assert!(Instant::now() < deadline, "{job_id} was never pruned");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let events_left: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE job_id = ANY($1)")
        .bind(&jobs)
        .fetch_one(&world.state)
        .await
        .expect("count");
    assert_eq!(events_left, 0);
    drop(first);
    drop(second);
    world.cleanup().await;
}
