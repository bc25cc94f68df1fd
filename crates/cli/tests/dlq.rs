//! `fetcherctl dlq list | show | requeue | purge` against the real RabbitMQ, on a work queue and
//! a dead-letter queue of the test's own: messages dead-lettered the way the Worker refuses them
//! (`basic.reject` without requeue) are listed and shown without being consumed or reordered,
//! a requeued one reaches the work queue with its body and headers unchanged (nothing re-signed),
//! and purge needs its confirmation.

mod support;

use std::process::Output;
use std::time::Duration;

use lapin::options::{
    BasicGetOptions, BasicPublishOptions, BasicRejectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::BasicProperties;
use support::Broker;
use uuid::Uuid;

fn dlq(args: &[&str]) -> Output {
    support::fetcherctl()
        .arg("dlq")
        .args(args)
        .output()
        .expect("run fetcherctl")
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The job ids of `list`'s lines, in order.
fn listed(queue: &str) -> Vec<String> {
    stdout(&dlq(&["list", "--dlq", queue]))
        .lines()
        .skip(2)
        .map(|line| line.split('\t').nth(1).expect("a job column").to_owned())
        .collect()
}

fn headers(job: &str) -> FieldTable {
    let mut headers = FieldTable::default();
    let text = |v: &str| AMQPValue::LongString(LongString::from(v));
    headers.insert("jobId".into(), text(job));
    headers.insert(
        "x-message-signature".into(),
        text("sha256=not-a-valid-signature"),
    );
    headers.insert("t".into(), text("1700000000"));
    headers.insert("signature-version".into(), text("v1"));
    headers.insert("X-Tenant-ID".into(), text("acme"));
    headers
}

fn body(job: &str, padding: usize) -> Vec<u8> {
    format!(r#"{{"jobId":"{job}","padding":"{}"}}"#, "x".repeat(padding)).into_bytes()
}

/// Waits until `queue` holds `depth` messages (dead-lettering is asynchronous).
async fn wait_for_depth(broker: &Broker, queue: &str, depth: u32) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while broker.depth(queue).await != depth {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{queue} never held {depth} message(s)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_are_listed_shown_requeued_unchanged_and_purged() {
    let broker = Broker::connect().await;
    let dead = support::unique("dlq");
    let work = support::unique("work");
    broker.declare_queue(&dead).await;
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString("".into()),
    );
    arguments.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString(dead.as_str().into()),
    );
    arguments.insert("x-expires".into(), AMQPValue::LongInt(600_000));
    broker
        .channel
        .queue_declare(
            work.as_str().into(),
            QueueDeclareOptions::default(),
            arguments,
        )
        .await
        .expect("declare the work queue");
    broker.track_queue(&work);

    let jobs: Vec<String> = (0..3).map(|_| Uuid::now_v7().to_string()).collect();
    let bodies: Vec<Vec<u8>> = jobs
        .iter()
        .zip([10, 20, 10_000])
        .map(|(job, padding)| body(job, padding))
        .collect();
    for (job, body) in jobs.iter().zip(&bodies) {
        let properties = BasicProperties::default()
            .with_headers(headers(job))
            .with_content_type(ShortString::from("application/json"))
            .with_message_id(ShortString::from(format!("message-{job}")))
            .with_delivery_mode(2);
        broker
            .channel
            .basic_publish(
                "".into(),
                work.as_str().into(),
                BasicPublishOptions::default(),
                body,
                properties,
            )
            .await
            .expect("publish")
            .await
            .expect("confirm");
    }
    // Refused as the Worker refuses: rejected without requeue, so RabbitMQ dead-letters them.
    for _ in &jobs {
        let got = broker
            .channel
            .basic_get(work.as_str().into(), BasicGetOptions::default())
            .await
            .expect("get")
            .expect("a message");
        got.delivery
            .reject(BasicRejectOptions { requeue: false })
            .await
            .expect("reject");
    }
    wait_for_depth(&broker, &dead, 3).await;

    // list: every one, in order, with its reason, queue and size; nothing consumed.
    let list = stdout(&dlq(&["list", "--dlq", &dead]));
    assert!(
        list.starts_with(&format!("3 message(s) in {dead}\n")),
        "{list}"
    );
    let first = list.lines().nth(2).expect("a first line");
    let columns: Vec<&str> = first.split('\t').collect();
    assert_eq!(columns[0], "1");
    assert_eq!(columns[1], jobs[0]);
    assert_eq!(columns[2], format!("rejected from {work}"));
    assert_eq!(columns[4], format!("{} B", bodies[0].len()));
    assert_eq!(columns[5], "1");
    assert_eq!(listed(&dead), jobs, "a second list sees the same order");
    wait_for_depth(&broker, &dead, 3).await;

    // show: by job id, headers and a capped body.
    let show = stdout(&dlq(&[
        "show",
        "--dlq",
        &dead,
        "--job",
        &jobs[2],
        "--max-bytes",
        "64",
    ]));
    assert!(show.contains(&format!("job: {}\n", jobs[2])), "{show}");
    assert!(
        show.contains(&format!("route: exchange \"\", routing key {work:?}")),
        "{show}"
    );
    assert!(
        show.contains("x-message-signature: sha256=not-a-valid-signature"),
        "{show}"
    );
    assert!(
        show.contains(&format!("body ({} bytes):", bodies[2].len())),
        "{show}"
    );
    assert!(
        show.contains(&format!("{} more bytes not shown", bodies[2].len() - 64)),
        "{show}"
    );
    let by_index = stdout(&dlq(&["show", "--dlq", &dead, "--index", "2"]));
    assert!(
        by_index.contains(&format!("job: {}\n", jobs[1])),
        "{by_index}"
    );
    assert!(!dlq(&["show", "--dlq", &dead, "--index", "9"])
        .status
        .success());
    assert_eq!(listed(&dead), jobs);

    // requeue: the middle one, to its first route, bytes and headers as they were.
    assert!(
        !dlq(&["requeue", "--dlq", &dead]).status.success(),
        "a selection is required"
    );
    let requeue = stdout(&dlq(&["requeue", "--dlq", &dead, "--job", &jobs[1]]));
    assert!(
        requeue.contains(&format!("Requeued job {}", jobs[1])),
        "{requeue}"
    );
    assert!(
        requeue.ends_with(&format!("Requeued 1 of 3 message(s) in {dead}\n")),
        "{requeue}"
    );
    let back = take_requeued(&broker, &work).await;
    assert_eq!(back.data, bodies[1]);
    let got = back.properties.headers().clone().expect("headers");
    for (name, value) in headers(&jobs[1]).inner() {
        assert_eq!(got.inner().get(name), Some(value), "header {name}");
    }
    assert_eq!(
        back.properties
            .message_id()
            .as_ref()
            .map(|id| id.to_string()),
        Some(format!("message-{}", jobs[1]))
    );
    assert_eq!(back.properties.delivery_mode(), &Some(2));
    assert_eq!(listed(&dead), vec![jobs[0].clone(), jobs[2].clone()]);

    // purge: refused without --yes, then everything.
    assert!(!dlq(&["purge", "--dlq", &dead]).status.success());
    assert_eq!(broker.depth(&dead).await, 2);
    let purge = stdout(&dlq(&["purge", "--dlq", &dead, "--yes"]));
    assert_eq!(purge, format!("Purged 2 message(s) from {dead}\n"));
    assert_eq!(broker.depth(&dead).await, 0);
    broker.close().await;
}

/// A dead letter the Worker placed itself (its `x-fetcher-*` headers, no `x-death`): listed with
/// the Worker's reason and queue, selected by that reason, and requeued to the route it names.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_letter_placed_by_the_worker_is_listed_and_requeued_by_its_own_reason() {
    let broker = Broker::connect().await;
    let dead = support::unique("dlq");
    let work = support::unique("work");
    broker.declare_queue(&dead).await;
    broker.declare_queue(&work).await;
    let text = |v: &str| AMQPValue::LongString(LongString::from(v));
    let job = Uuid::now_v7().to_string();
    let mut placed = headers(&job);
    placed.insert("x-fetcher-reason".into(), text("signature_mismatch"));
    placed.insert("x-fetcher-queue".into(), text(&work));
    placed.insert("x-fetcher-exchange".into(), text(""));
    placed.insert("x-fetcher-routing-key".into(), text(&work));
    placed.insert(
        "x-fetcher-refused-at".into(),
        AMQPValue::Timestamp(1_700_000_000),
    );
    let body = body(&job, 5);
    broker
        .channel
        .basic_publish(
            "".into(),
            dead.as_str().into(),
            BasicPublishOptions::default(),
            &body,
            BasicProperties::default().with_headers(placed.clone()),
        )
        .await
        .expect("publish")
        .await
        .expect("confirm");
    wait_for_depth(&broker, &dead, 1).await;

    let list = stdout(&dlq(&["list", "--dlq", &dead]));
    let columns: Vec<&str> = list.lines().nth(2).expect("a line").split('\t').collect();
    assert_eq!(columns[1], job);
    assert_eq!(
        columns[2],
        format!("signature_mismatch from {work}"),
        "{list}"
    );
    assert_eq!(columns[5], "1", "{list}");

    let requeue = stdout(&dlq(&[
        "requeue",
        "--dlq",
        &dead,
        "--reason",
        "signature_mismatch",
    ]));
    assert!(
        requeue.contains(&format!("Requeued job {job}")),
        "{requeue}"
    );
    let back = take_requeued(&broker, &work).await;
    assert_eq!(back.data, body);
    assert_eq!(back.properties.headers().as_ref(), Some(&placed));
    assert_eq!(broker.depth(&dead).await, 0);
    broker.close().await;
}

/// The message `dlq requeue` put back on `work`, taken off it.
async fn take_requeued(broker: &Broker, work: &str) -> lapin::message::Delivery {
    broker
        .channel
        .basic_get(work.into(), BasicGetOptions { no_ack: true })
        .await
        .expect("get")
        .expect("the requeued message is on the work queue")
        .delivery
}
