//! Finding: at `LOG_LEVEL=trace` the AMQP client logged `Connection.StartOk` as a byte list,
//! the broker password inside it.

use std::process::Command;
use std::time::Duration;

use testkit::amqp::rabbitmqctl;
use uuid::Uuid;

use crate::harness::{free_port, WorkerProcess, World};

/// A broker user of the test's own, removed on drop.
struct BrokerUser(String);

impl Drop for BrokerUser {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl")
            .args(["delete_user", &self.0])
            .status();
    }
}

#[tokio::test]
async fn trace_logs_never_show_the_broker_password() {
    let world = World::new().await;
    let user = BrokerUser(format!("fetcher-test-{}", world.id));
    let password = format!("Pw{}", Uuid::new_v4().simple());
    rabbitmqctl(&["add_user", &user.0, &password]);
    rabbitmqctl(&["set_permissions", "-p", "/", &user.0, ".*", ".*", ".*"]);

    let port = free_port();
    let mut env = world.env(port);
    env.insert(
        "RABBITMQ_URI".into(),
        format!("amqp://{}:{password}@127.0.0.1:5672/%2f", user.0),
    );
    env.insert("LOG_LEVEL".into(), "trace".into());
    let worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;
    let job_id = Uuid::new_v4();
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["id"]),
            None,
            &[],
        )
        .await;
    world
        .wait_status(job_id, "completed", Duration::from_secs(60))
        .await;
    let output = worker.output();
    drop(worker);
    assert!(output.contains("TRACE") || output.contains("\"level\":\"TRACE\""));
    let as_bytes = password
        .bytes()
        .map(|b| b.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    assert!(!output.contains(&password), "the password is in the log");
    assert!(
        !output.contains(&as_bytes),
        "the password's bytes are in the log"
    );
    world.cleanup().await;
}
