//! A validly signed message that PostgreSQL cannot store (a NUL character, `\u0000`, in a name
//! or in metadata: `jsonb` and `text` refuse it) must end its job, not come back forever.

use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::harness::World;

#[tokio::test]
async fn a_nul_character_in_a_name_fails_the_job_instead_of_looping() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let job_id = Uuid::now_v7();
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["id", "me\u{0}mo"]),
            None,
            &[],
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = world.job_status(job_id).await;
        let depth = world.broker.depth(&world.queue).await;
        if status.as_deref() == Some("failed") && depth == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the job is {status:?} with {depth} messages waiting; the Worker said:\n{}",
            worker
                .output()
                .lines()
                .filter(|l| l.contains("Could not claim"))
                .take(3)
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    drop(worker);
    world.cleanup().await;
}
