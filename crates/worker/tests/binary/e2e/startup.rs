//! What the Worker says at start and stop: a dependency that refuses it stops the start at once
//! with one ERROR line saying what to fix, one that does not answer is waited for with the
//! reason logged, and an idle Worker's stop logs no ERROR and no colour codes.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::harness::{free_port, WorkerProcess, World};

/// The JSON log lines at ERROR in `output`.
fn errors(output: &str) -> Vec<&str> {
    output
        .lines()
        .filter(|line| line.contains("\"level\":\"ERROR\""))
        .collect()
}

/// Starts the Worker with the world's environment changed by `change`; waits for it to exit
/// (it must, without being stopped) and gives its exit code and output.
async fn refused_start(world: &World, change: &[(&str, String)]) -> (Option<i32>, String) {
    let port = free_port();
    let mut env: BTreeMap<String, String> = world.env(port);
    for (name, value) in change {
        env.insert((*name).to_owned(), value.clone());
    }
    let mut worker = WorkerProcess::spawn(env, port);
    let code = worker.wait_exit(Duration::from_secs(60)).await;
    (code, worker.output())
}

/// One ERROR line, naming the dependency and each of `fix`; no line saying it waits.
fn assert_one_refusal(output: &str, dep: &str, fix: &[&str]) {
    let errors = errors(output);
    assert_eq!(errors.len(), 1, "one ERROR line expected:\n{output}");
    let line = errors[0];
    // `error`: the field every log line names an error with.
    assert!(
        line.contains(&format!("\"error\":\"{dep} refuses the Worker")),
        "{line}"
    );
    for words in fix {
        assert!(line.contains(words), "{words:?} missing from {line}");
    }
    assert!(
        !output.contains("waiting for it before consuming"),
        "a refusal is not waited for:\n{output}"
    );
}

#[tokio::test]
async fn a_state_database_that_does_not_exist_stops_the_start_saying_what_to_fix() {
    let world = World::new().await;
    let missing = format!("fetcher_missing_{}", uuid::Uuid::new_v4().simple());
    let url = testkit::pg::with_database(&testkit::pg::admin_url(), &missing);
    let (code, output) = refused_start(&world, &[("DATABASE_URL", url)]).await;
    assert_eq!(code, Some(1), "{output}");
    assert_one_refusal(
        &output,
        "postgres",
        &[
            &format!("create the database {missing} or fix DATABASE_URL"),
            "does not exist",
        ],
    );
    world.cleanup().await;
}

#[tokio::test]
async fn a_broker_that_refuses_the_password_or_the_vhost_stops_the_start_saying_what_to_fix() {
    let world = World::new().await;
    let wrong = "not-the-broker-password-4417";
    let (code, output) =
        refused_start(&world, &[("RABBITMQ_DEFAULT_PASS", wrong.to_owned())]).await;
    assert_eq!(code, Some(1), "{output}");
    assert_one_refusal(&output, "rabbitmq", &["RABBITMQ_DEFAULT_PASS"]);
    assert!(
        !output.contains(wrong),
        "the password was logged:\n{output}"
    );

    let vhost = format!("missing-{}", uuid::Uuid::new_v4().simple());
    let (code, output) = refused_start(&world, &[("RABBITMQ_VHOST", vhost)]).await;
    assert_eq!(code, Some(1), "{output}");
    assert_one_refusal(
        &output,
        "rabbitmq",
        &["create the vhost RABBITMQ_VHOST names"],
    );
    world.cleanup().await;
}

#[tokio::test]
async fn a_missing_bucket_stops_the_start_saying_what_to_fix() {
    let world = World::new().await;
    let bucket = format!("missing-{}", uuid::Uuid::new_v4().simple());
    let (code, output) = refused_start(&world, &[("OBJECT_STORAGE_BUCKET", bucket.clone())]).await;
    assert_eq!(code, Some(1), "{output}");
    assert_one_refusal(
        &output,
        "s3",
        &[&bucket, "create the bucket or fix OBJECT_STORAGE_BUCKET"],
    );
    world.cleanup().await;
}

#[tokio::test]
async fn a_state_database_that_refuses_connections_is_waited_for_and_the_wait_says_refused() {
    let world = World::new().await;
    // Nothing listens on a port just freed.
    let closed = free_port();
    let url = format!("postgres://fetcher@127.0.0.1:{closed}/fetcher");
    let port = free_port();
    let mut env = world.env(port);
    env.insert("DATABASE_URL".into(), url);
    let mut worker = WorkerProcess::spawn(env, port);
    worker
        .wait_for_lines(
            "waits for a refusing database",
            2,
            Duration::from_secs(60),
            |line| {
                line.contains("waiting for it before consuming")
                    && line.contains("\"dep\":\"postgres\"")
                    && line.to_ascii_lowercase().contains("refused")
            },
        )
        .await;
    assert!(!worker.has_exited(), "{}", worker.output());
    // `/readyz` says the same.
    let (status, body) = worker.get("/readyz").expect("/readyz answers");
    assert_eq!(status, 503, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).expect("readyz JSON");
    let reason = body["checks"]["postgres"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.to_ascii_lowercase().contains("refused"), "{body}");
    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(30)).await, Some(0));
    assert!(errors(&worker.output()).is_empty(), "{}", worker.output());
    world.cleanup().await;
}

#[tokio::test]
async fn an_idle_worker_stopped_by_sigterm_logs_no_error_and_no_colour_codes() {
    let world = World::new().await;
    let port = free_port();
    let mut env = world.env(port);
    env.insert("LOG_FORMAT".into(), "text".into());
    let mut worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;
    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(30)).await, Some(0));
    let output = worker.output();
    assert!(output.contains("Fetcher Worker stopped."), "{output}");
    assert!(
        !output.contains('\x1b'),
        "colour codes in a log that is not a terminal:\n{output}"
    );
    let errors: Vec<&str> = output
        .lines()
        .filter(|line| line.contains(" ERROR "))
        .collect();
    assert!(errors.is_empty(), "ERROR lines at a clean stop:\n{output}");
    world.cleanup().await;
}
