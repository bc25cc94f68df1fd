//! Finding: the unsigned `jobId` header picked which job an unusable body failed, so one
//! captured message, replayed with other headers, could pre-fail any job ids it chose.

use std::time::Duration;

use uuid::Uuid;

use crate::harness::World;
use crate::harness::{publish, signed, work_route, DeadLetters};

#[tokio::test]
async fn a_replayed_message_cannot_pick_the_job_it_fails() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut dead = DeadLetters::tap(&world).await;
    let signed_id = Uuid::new_v4();
    // Signed, but unusable: mappedFields is not an object.
    let body = format!(r#"{{"jobId":"{signed_id}","mappedFields":5}}"#).into_bytes();
    let t = chrono::Utc::now().timestamp();
    let headers = signed(&world, t, &work_route(&world, ""), &body, None);
    let victims = [Uuid::new_v4(), Uuid::new_v4()];
    for victim in victims {
        let replay = headers.clone().text("jobId", &victim.to_string());
        publish(&world.broker.channel, "", &world.queue, &body, &replay).await;
    }
    let refused = dead.collect(2, Duration::from_secs(60)).await;
    assert_eq!(refused.len(), 2, "both replays are dead-lettered");
    for victim in victims {
        assert_eq!(world.job_status(victim).await, None, "{victim} was touched");
    }
    assert_eq!(world.job_status(signed_id).await, None);

    // The genuine message (header and body agree) still fails its own job, as the contract says.
    let genuine = headers.text("jobId", &signed_id.to_string());
    publish(&world.broker.channel, "", &world.queue, &body, &genuine).await;
    world
        .wait_status(signed_id, "failed", Duration::from_secs(30))
        .await;
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_valid_job_with_a_header_naming_another_job_is_refused() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut dead = DeadLetters::tap(&world).await;
    let job_id = Uuid::new_v4();
    let body = world.job_body(job_id, "src", "payments", &["id"]);
    let t = chrono::Utc::now().timestamp();
    let other = Uuid::new_v4();
    let headers =
        signed(&world, t, &work_route(&world, ""), &body, None).text("jobId", &other.to_string());
    publish(&world.broker.channel, "", &world.queue, &body, &headers).await;
    assert_eq!(dead.collect(1, Duration::from_secs(60)).await.len(), 1);
    assert_eq!(world.job_status(job_id).await, None);
    assert_eq!(world.job_status(other).await, None);
    let metrics = worker.get("/metrics").expect("metrics").1;
    assert!(
        metrics.contains("reason=\"job_id_header_mismatch\""),
        "{metrics}"
    );
    drop(worker);
    world.cleanup().await;
}
