//! Finding: a takeover could store the result under the message's tenant while the job row kept
//! another: a job's tenant was whatever the delivery that took it over said.

use std::time::Duration;

use uuid::Uuid;

use crate::harness::World;
use crate::harness::{publish, signed, work_route, DeadLetters};

#[tokio::test]
async fn a_delivery_of_another_tenant_never_takes_the_job_over() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut dead = DeadLetters::tap(&world).await;
    let job_id = Uuid::new_v4();
    // The job of tenant acme, whose Worker died a moment ago: its lease just lapsed, so any
    // delivery of the job may take it over.
    sqlx::query(
        "INSERT INTO jobs (job_id, tenant_id, status, owner, lease_expires_at, attempts, started_at)
         VALUES ($1, 'acme', 'processing', 'lost-worker/1', now() - interval '1 second', 1, now())",
    )
    .bind(job_id)
    .execute(&world.state)
    .await
    .expect("processing job");
    let body = world.job_body(job_id, "src", "payments", &["id"]);
    let t = chrono::Utc::now().timestamp();
    let other = signed(
        &world,
        t,
        &work_route(&world, "globex"),
        &body,
        Some("globex"),
    );
    publish(&world.broker.channel, "", &world.queue, &body, &other).await;
    assert_eq!(dead.collect(1, Duration::from_secs(60)).await.len(), 1);
    let (tenant, owner): (Option<String>, Option<String>) =
        sqlx::query_as("SELECT tenant_id, owner FROM jobs WHERE job_id = $1")
            .bind(job_id)
            .fetch_one(&world.state)
            .await
            .expect("job row");
    assert_eq!(tenant.as_deref(), Some("acme"));
    assert_eq!(
        owner.as_deref(),
        Some("lost-worker/1"),
        "the job was taken over"
    );
    assert!(world.object_keys().await.is_empty());

    // The job's own tenant takes it over and completes it in its folder (the lease is made to
    // lapse just now again, so the sweeper of lost jobs leaves it to the takeover).
    sqlx::query("UPDATE jobs SET lease_expires_at = now() WHERE job_id = $1")
        .bind(job_id)
        .execute(&world.state)
        .await
        .expect("lapse the lease");
    let own = signed(&world, t, &work_route(&world, "acme"), &body, Some("acme"));
    publish(&world.broker.channel, "", &world.queue, &body, &own).await;
    world
        .wait_status(job_id, "completed", Duration::from_secs(60))
        .await;
    assert_eq!(
        world.object_keys().await,
        vec![format!("acme/external-data/{job_id}.json")]
    );
    drop(worker);
    world.cleanup().await;
}
