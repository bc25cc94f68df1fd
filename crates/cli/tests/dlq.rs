//! `fetcherctl dlq list | show | requeue | purge` against the real RabbitMQ, on a work queue and
//! a dead-letter queue of the test's own: messages dead-lettered by RabbitMQ (`basic.reject`
//! without requeue) are listed and shown, unverified, without being consumed or reordered, and
//! requeued only to a route the operator names; a letter the Worker stamped is verified and
//! requeued to its own route with its body and headers unchanged (nothing re-signed); forged
//! letters (planted straight in the queue, or refused by the Worker's own code unstamped) never
//! reach the route they name; purge needs its confirmation.

mod support;

use std::collections::BTreeMap;
use std::process::Output;
use std::time::Duration;

use contract::dead_letter::Stamp;
use lapin::options::{
    BasicGetOptions, BasicPublishOptions, BasicRejectOptions, ConfirmSelectOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::BasicProperties;
use support::Broker;
use uuid::Uuid;
use worker::amqp::dead_letter::{refuse, Refusal};

fn dlq(args: &[&str]) -> Output {
    support::fetcherctl()
        .arg("dlq")
        .args(args)
        .output()
        .expect("run fetcherctl")
}

/// `dlq` with the master key, so the Worker's stamps are checked.
fn keyed_dlq(args: &[&str]) -> Output {
    support::fetcherctl()
        .env("APP_ENC_KEY", support::MASTER)
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
    assert_eq!(
        columns[2],
        format!("unverified (no stamp of the Worker): rejected from {work}")
    );
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

    // requeue: unverified, so only to the route named; bytes and headers as they were.
    assert!(
        !dlq(&["requeue", "--dlq", &dead]).status.success(),
        "a selection is required"
    );
    let refused = dlq(&["requeue", "--dlq", &dead, "--job", &jobs[1]]);
    assert!(
        stdout(&refused).ends_with(&format!("Requeued 0 of 3 message(s) in {dead}\n")),
        "{refused:?}"
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains(&format!(
            "Kept the dead letter of job {}: unverified (no stamp of the Worker)",
            jobs[1]
        )),
        "{said}"
    );
    assert_eq!(listed(&dead), jobs, "kept in its place");
    let requeue = stdout(&dlq(&[
        "requeue",
        "--dlq",
        &dead,
        "--job",
        &jobs[1],
        "--to-queue",
        &work,
    ]));
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

/// A dead letter the Worker placed itself (its stamped `x-fetcher-*` headers, no `x-death`):
/// listed with the Worker's reason and queue, selected by that reason, and requeued to the route
/// it names; without the key, the same letter is unverified and stays.
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
    let digest = crypto::sha256_hex(&body);
    let stamp = Stamp {
        reason: "signature_mismatch",
        queue: &work,
        exchange: "",
        routing_key: &work,
        refused_at: 1_700_000_000,
        body_sha256: &digest,
    }
    .sign(|text| support::keys().internal_hmac().sign_hex(text));
    placed.insert("x-fetcher-stamp".into(), text(&stamp));
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

    let list = stdout(&keyed_dlq(&["list", "--dlq", &dead]));
    let columns: Vec<&str> = list.lines().nth(2).expect("a line").split('\t').collect();
    assert_eq!(columns[1], job);
    assert_eq!(
        columns[2],
        format!("signature_mismatch from {work}"),
        "{list}"
    );
    assert_eq!(columns[5], "1", "{list}");

    // Without the key nothing is the Worker's word: not listed as such, not selected.
    let unkeyed = dlq(&["list", "--dlq", &dead]);
    assert!(
        stdout(&unkeyed)
            .contains("unverified (no internal key given to check its stamp): - from -"),
        "{unkeyed:?}"
    );
    assert!(String::from_utf8_lossy(&unkeyed.stderr).contains("No internal key"));
    let unkeyed = stdout(&dlq(&[
        "requeue",
        "--dlq",
        &dead,
        "--reason",
        "signature_mismatch",
    ]));
    assert!(
        unkeyed.ends_with(&format!("Requeued 0 of 1 message(s) in {dead}\n")),
        "{unkeyed}"
    );
    assert_eq!(broker.depth(&work).await, 0);

    let requeue = stdout(&keyed_dlq(&[
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

/// Forged dead letters, against the Worker's own refusal code and topology: one planted straight
/// into the dead-letter queue (forged `x-fetcher-*`, a forged stamp and a forged `x-death`) and one
/// the Worker cannot copy (a header table nested past `MAX_HEADER_DEPTH`), which it rejects, so
/// RabbitMQ dead-letters it with the forged headers it came with. Both name an attacker's
/// exchange: `list` marks them unverified, `--reason` does not select them, and `requeue` keeps
/// them, so nothing reaches the attacker's queue. A letter the Worker refused and stamped is
/// verified and requeued to the route it came by.
#[tokio::test(flavor = "multi_thread")]
async fn forged_dead_letters_are_unverified_and_never_requeued_to_their_route() {
    let broker = Broker::connect().await;
    let work = support::unique("work");
    let events = support::unique("events");
    // The Worker's topology: the work queue dead-letters to fetcher.dlx, and a queue of the
    // test's own on that exchange stands for fetcher.dlq (other tests' dead letters pass too).
    let dead_letters = worker::amqp::topology::declare(&broker.connection, &events, &work)
        .await
        .expect("the Worker's topology");
    broker.track_queue(&work);
    broker.track_exchange(&events);
    let dead = support::unique("dlq");
    broker.declare_queue(&dead).await;
    broker.bind(&dead, "fetcher.dlx", "fetcher.dlq.key").await;
    let attacker = support::unique("attacker");
    broker.declare_exchange(&attacker).await;
    let loot = broker.bound_queue(&attacker, "#").await;

    let text = |v: &str| AMQPValue::LongString(LongString::from(v));
    let forge = |job: &str| {
        let mut forged = headers(job);
        forged.insert("x-fetcher-reason".into(), text("signature_mismatch"));
        forged.insert("x-fetcher-queue".into(), text(&work));
        forged.insert("x-fetcher-exchange".into(), text(&attacker));
        forged.insert("x-fetcher-routing-key".into(), text("loot"));
        forged.insert(
            "x-fetcher-refused-at".into(),
            AMQPValue::Timestamp(1_700_000_000),
        );
        forged.insert("x-fetcher-stamp".into(), text(&"0".repeat(64)));
        forged
    };
    let (genuine, nested, planted) = (
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
    );

    // Refused by the Worker's code, as its consumer refuses a bad signature.
    let confirms = broker.connection.create_channel().await.expect("channel");
    confirms
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirm mode");
    let keys = support::keys();
    let refusal = Refusal {
        confirms: &confirms,
        queue: &work,
        dead_letters: &dead_letters,
        max_bytes: 4 << 20,
        key: keys.internal_hmac(),
    };
    let mut deep = forge(&nested);
    deep.insert("deep".into(), AMQPValue::FieldTable(nested_table(6)));
    for (job, headers) in [(&genuine, headers(&genuine)), (&nested, deep)] {
        publish(&broker, "", &work, &body(job, 5), headers).await;
        let got = broker
            .channel
            .basic_get(work.as_str().into(), BasicGetOptions::default())
            .await
            .expect("get")
            .expect("the message");
        refuse(&refusal, &got.delivery, "signature_mismatch")
            .await
            .expect("refused");
    }
    // Planted straight into the dead-letter queue, with RabbitMQ's headers forged as well.
    let mut planted_headers = forge(&planted);
    let mut death = FieldTable::default();
    death.insert("queue".into(), text(&work));
    death.insert("reason".into(), text("rejected"));
    death.insert("exchange".into(), text(&attacker));
    death.insert(
        "routing-keys".into(),
        AMQPValue::FieldArray(vec![text("loot")].into()),
    );
    death.insert("count".into(), AMQPValue::LongLongInt(1));
    planted_headers.insert(
        "x-death".into(),
        AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into()),
    );
    planted_headers.insert("x-first-death-reason".into(), text("rejected"));
    planted_headers.insert("x-first-death-queue".into(), text(&work));
    publish(&broker, "", &dead, &body(&planted, 5), planted_headers).await;
    let ours = [genuine.clone(), nested.clone(), planted.clone()];
    let reasons = wait_listed(&dead, &ours).await;
    assert_eq!(reasons[&genuine], format!("signature_mismatch from {work}"));
    assert_eq!(
        reasons[&nested],
        format!("unverified (its stamp does not verify): rejected from {work}"),
        "the nested one was dead-lettered by RabbitMQ with its forged headers"
    );
    assert!(
        reasons[&planted].starts_with("unverified (its stamp does not verify): "),
        "{}",
        reasons[&planted]
    );
    let show = stdout(&keyed_dlq(&["show", "--dlq", &dead, "--job", &planted]));
    assert!(show.contains("reason: unverified"), "{show}");
    assert!(!show.contains("stamped by the Worker"), "{show}");

    // --reason selects the verified letter alone, and requeues it to the route it came by.
    let requeue = stdout(&keyed_dlq(&[
        "requeue",
        "--dlq",
        &dead,
        "--reason",
        "signature_mismatch",
    ]));
    assert!(
        requeue.contains(&format!(
            "Requeued job {genuine} to exchange \"\", routing key {work:?}"
        )),
        "{requeue}"
    );
    assert_eq!(requeue.matches("Requeued job").count(), 1, "{requeue}");
    let back = take_requeued(&broker, &work).await;
    assert_eq!(back.data, body(&genuine, 5));

    // Selected by job, the forged ones stay, each with its one line; the attacker gets nothing.
    let kept = keyed_dlq(&[
        "requeue", "--dlq", &dead, "--job", &nested, "--job", &planted,
    ]);
    assert!(stdout(&kept).contains("Requeued 0 of"), "{kept:?}");
    let said = String::from_utf8_lossy(&kept.stderr);
    for job in [&nested, &planted] {
        assert!(
            said.contains(&format!(
                "Kept the dead letter of job {job}: unverified (its stamp does not verify); its \
                 headers' route is not trusted; name the work queue with --to-queue"
            )),
            "{said}"
        );
    }
    assert_eq!(broker.depth(&loot).await, 0, "a forged route was used");
    assert_eq!(broker.depth(&work).await, 0);
    let left = wait_listed(&dead, &[nested.clone(), planted.clone()]).await;
    assert!(!left.contains_key(&genuine));

    // The operator may name the work queue: the letter goes there, never to the attacker.
    let named = stdout(&keyed_dlq(&[
        "requeue",
        "--dlq",
        &dead,
        "--job",
        &planted,
        "--to-queue",
        &work,
    ]));
    assert!(
        named.contains(&format!("Requeued job {planted}")),
        "{named}"
    );
    assert_eq!(take_requeued(&broker, &work).await.data, body(&planted, 5));
    assert_eq!(broker.depth(&loot).await, 0);
    broker.close().await;
}

/// A header table nested `depth` levels deep.
fn nested_table(depth: usize) -> FieldTable {
    let mut table = FieldTable::default();
    for _ in 1..depth {
        let mut outer = FieldTable::default();
        outer.insert("t".into(), AMQPValue::FieldTable(table));
        table = outer;
    }
    table
}

async fn publish(broker: &Broker, exchange: &str, key: &str, body: &[u8], headers: FieldTable) {
    broker
        .channel
        .basic_publish(
            exchange.into(),
            key.into(),
            BasicPublishOptions::default(),
            body,
            BasicProperties::default().with_headers(headers),
        )
        .await
        .expect("publish")
        .await
        .expect("confirm");
}

/// `list`'s reason column by job for the dead letters of `jobs`, once all of them are in
/// `queue` (dead-lettering is asynchronous; other tests' letters are skipped).
async fn wait_listed(queue: &str, jobs: &[String]) -> BTreeMap<String, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let listing = stdout(&keyed_dlq(&["list", "--dlq", queue]));
        let ours: BTreeMap<String, String> = listing
            .lines()
            .skip(2)
            .map(|line| line.split('\t').map(str::to_owned).collect::<Vec<_>>())
            .filter(|columns| jobs.contains(&columns[1]))
            .map(|columns| (columns[1].clone(), columns[2].clone()))
            .collect();
        if ours.len() == jobs.len() {
            return ours;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{jobs:?} never all reached {queue}:\n{listing}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
