//! Settings that once stopped or crippled the Worker: a bad `DATASOURCE_<NAME>_*` group and
//! numeric settings at 0. The Worker starts, logs one warning for each, and runs jobs: the bad
//! group's fail with "connection not found", the others complete.

use std::time::Duration;

use uuid::Uuid;

use crate::harness::{free_port, WorkerProcess, World};

#[tokio::test]
async fn bad_groups_and_zero_settings_are_warned_about_and_the_worker_runs() {
    let world = World::new().await;
    let port = free_port();
    let mut env = world.env(port);
    for (name, value) in [
        ("DATASOURCE_BROKEN_TYPE", "POSTGRESQL"),
        ("DATASOURCE_BROKEN_PORT", "-1"),
        ("DATASOURCE_BROKEN_PASSWORD", "broken-secret-pw"),
        ("OUTBOX_REPAIR_INTERVAL_SEC", "0"),
        ("ENGINE_EXTRACTION_TIMEOUT_SEC", "0"),
    ] {
        env.insert(name.into(), value.into());
    }
    let worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;
    let mut events = world.listen().await;

    let broken = Uuid::now_v7();
    world
        .submit(
            &world.job_body(broken, "broken", "payments", &["id"]),
            None,
            &[],
        )
        .await;
    let event = events.event_for(broken, Duration::from_secs(40)).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.failed");
    let message = event.body()["metadata"]["error"]["message"]
        .as_str()
        .expect("message")
        .to_owned();
    assert!(
        message.contains("connection not found for database: broken"),
        "{message}"
    );

    // A zero extraction timeout is the default one, not an instant failure.
    let fine = Uuid::now_v7();
    world
        .submit(&world.job_body(fine, "src", "payments", &["id"]), None, &[])
        .await;
    let event = events.event_for(fine, Duration::from_secs(40)).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.completed");

    let output = worker.output();
    let warnings: Vec<&str> = output
        .lines()
        .filter(|l| {
            l.contains("\"level\":\"WARN\"") && l.contains("replaced by its default or skipped")
        })
        .collect();
    assert_eq!(warnings.len(), 3, "{output}");
    for expected in [
        "DATASOURCE_BROKEN_* is skipped",
        "DATASOURCE_BROKEN_HOST is not set",
        "DATASOURCE_BROKEN_PORT is not a port number",
        "OUTBOX_REPAIR_INTERVAL_SEC is 0, not above 0: using the default, 30 seconds",
        "ENGINE_EXTRACTION_TIMEOUT_SEC is 0, not above 0: using the default, 300 seconds",
    ] {
        assert!(
            warnings.iter().any(|w| w.contains(expected)),
            "{expected:?} not in {warnings:?}"
        );
    }
    assert!(
        !output.contains("broken-secret-pw"),
        "the password is in the log"
    );
    drop(worker);
    world.cleanup().await;
}
