//! What the pings left out cost when a pooled connection dies: never a job.
//!
//! The state database's pool and the sources' pools test a connection when it is taken only
//! after a second idle ([`worker::state_pool`]). Both are shown here the way a server restart
//! leaves them, every pooled connection killed by the server (`pg_terminate_backend`: the same
//! `57P01` and closed socket a fast shutdown sends), without restarting the machine's server
//! under the other tests. A dead state connection costs a requeue; a dead source connection
//! costs nothing seen: the engine reads the datasource again on another connection at once,
//! with `JOB_RETRY_ATTEMPTS` at its default 0.

use std::time::{Duration, Instant};

use uuid::Uuid;
use worker::job::Disposition;

use super::round_trips::{handle, published};
use crate::harness::{free_port, World};

/// Connections killed within the untested second: each may cost a delivery (requeued, as for
/// any unavailable state database), and the job still completes.
#[tokio::test]
async fn a_job_right_after_its_connections_were_killed_is_retried_never_failed() {
    let (world, wired) = warm_worker().await;
    let killed = kill_pooled_connections(&world).await;
    let job_id = Uuid::new_v4();
    let mut requeued = 0;
    loop {
        match handle(&world, &wired.core, job_id, "src", "payments").await {
            Disposition::Ack => break,
            Disposition::Retry(_) => requeued += 1,
            other => panic!("job {job_id} was disposed of as {other:?}"),
        }
        assert_ne!(world.job_status(job_id).await.as_deref(), Some("failed"));
        // Each delivery may meet one dead connection: the pool drops it when it is given back.
        assert!(
            requeued <= killed,
            "job {job_id} was requeued {requeued} times after {killed} connections were killed"
        );
    }
    published(&world, job_id).await;
    println!("{killed} connections killed; the job was requeued {requeued} times, then completed");
    wired.publisher.close().await;
    wired.marks.close(Duration::from_secs(5)).await;
    wired.store.close().await;
    world.cleanup().await;
}

/// Connections killed and then left idle past the untested second are tested when taken and
/// replaced: the next job runs on its first delivery.
#[tokio::test]
async fn connections_killed_and_left_idle_are_replaced_before_a_job_sees_them() {
    let (world, wired) = warm_worker().await;
    let killed = kill_pooled_connections(&world).await;
    assert!(killed > 0, "the warm job left no pooled connection");
    tokio::time::sleep(worker::state_pool::TEST_AFTER_IDLE + Duration::from_millis(500)).await;
    let job_id = Uuid::new_v4();
    let disposition = handle(&world, &wired.core, job_id, "src", "payments").await;
    assert_eq!(disposition, Disposition::Ack);
    published(&world, job_id).await;
    wired.publisher.close().await;
    wired.marks.close(Duration::from_secs(5)).await;
    wired.store.close().await;
    world.cleanup().await;
}

/// The job core wired as the Worker wires it, after one job (its pools hold connections).
async fn warm_worker() -> (World, worker::startup::Wired) {
    let world = World::new().await;
    schema::migrate(&world.state).await.expect("migrate");
    let mut env = world.env(free_port());
    env.insert("JOB_LEASE_SEC".into(), "60".into());
    let settings = worker::config::Settings::from_vars(env).expect("settings");
    let wired = worker::startup::wire(&settings).await.expect("wired");
    let _events = world.listen_to("job.#").await;
    let job_id = Uuid::new_v4();
    let disposition = handle(&world, &wired.core, job_id, "src", "payments").await;
    assert_eq!(disposition, Disposition::Ack);
    published(&world, job_id).await;
    (world, wired)
}

/// Kills every other connection to the world's state and source databases, and waits until
/// they are gone; how many there were.
async fn kill_pooled_connections(world: &World) -> usize {
    let databases = [world.state_db.clone(), world.source_db.clone()];
    let killed: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity, pg_terminate_backend(pid)
         WHERE datname = ANY($1) AND pid <> pg_backend_pid()",
    )
    .bind(&databases[..])
    .fetch_all(&world.state)
    .await
    .expect("terminate the pooled connections");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)")
                .bind(&killed)
                .fetch_one(&world.state)
                .await
                .expect("the killed connections");
        if left == 0 {
            return killed.len();
        }
        assert!(Instant::now() < deadline, "{left} killed connections stay");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
