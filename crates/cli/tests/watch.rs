//! `fetcherctl watch` against the real RabbitMQ: events signed by the Worker's own publisher are
//! printed once each (an execution's keyed by its datasource), forgeries are rejected, and
//! `--count`/`--timeout` decide the exit.

mod support;

use std::time::Duration;

use chrono::Utc;
use contract::event::OutboundEvent;
use lapin::options::{BasicPublishOptions, ExchangeDeleteOptions};
use lapin::types::{AMQPValue, ByteArray, FieldTable};
use lapin::BasicProperties;
use publisher::{AmqpUri, Publisher, PublisherConfig};
use support::events::{completed, failed};
use support::watcher::Watcher;
use support::Broker;
use uuid::Uuid;

/// The Worker's publisher on `exchange`, signing with the test's external key.
async fn publisher(exchange: &str) -> Publisher {
    let mut config = PublisherConfig::new(AmqpUri::new(support::amqp_uri()), exchange);
    config.confirm_timeout = Duration::from_secs(5);
    config.connect_timeout = Duration::from_secs(5);
    let publisher =
        Publisher::new(config, support::keys().external_hmac().clone()).expect("publisher");
    publisher
        .declare_exchange()
        .await
        .expect("declare exchange");
    publisher
}

/// Publishes, with the test's own channel, a `job.completed` event that claims `ce_id` and
/// carries a signature made with no key at all.
async fn publish_forgery(broker: &Broker, exchange: &str, job_id: Uuid, ce_id: &str) {
    let byte_array = |text: &str| AMQPValue::ByteArray(ByteArray::from(text.as_bytes()));
    let long_string = |text: &str| AMQPValue::LongString(text.into());
    let mut headers = FieldTable::default();
    headers.insert("ce-id".into(), byte_array(ce_id));
    headers.insert("ce-type".into(), byte_array("studio.lerian.job.completed"));
    headers.insert("X-Tenant-ID".into(), long_string("acme"));
    headers.insert("x-message-signature".into(), long_string(&"0".repeat(64)));
    headers.insert("t".into(), long_string(&Utc::now().timestamp().to_string()));
    headers.insert("signature-version".into(), long_string("v1"));
    let body = format!(r#"{{"jobId":"{job_id}","metadata":{{}},"status":"completed"}}"#);
    broker
        .channel
        .basic_publish(
            exchange.into(),
            "job.completed".into(),
            BasicPublishOptions::default(),
            body.as_bytes(),
            BasicProperties::default().with_headers(headers),
        )
        .await
        .expect("publish forgery")
        .await
        .expect("forgery confirmed");
}

async fn delete_exchange(broker: &Broker, exchange: &str) {
    let _ = broker
        .channel
        .exchange_delete(exchange.into(), ExchangeDeleteOptions::default())
        .await;
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn events_are_verified_printed_once_and_forgeries_rejected() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = publisher(&exchange).await;

    let mut watcher = Watcher::start(
        &["--exchange", &exchange, "--count", "2", "--timeout", "30"],
        &[("APP_ENC_KEY", support::MASTER)],
    );
    tokio::task::block_in_place(|| watcher.wait_until_bound());

    let (first_job, second_job) = (Uuid::new_v4(), Uuid::new_v4());
    let first = completed(first_job, Some("acme"));
    let second = failed(second_job);
    // A forgery claiming the first event's ce-id comes first: it must not hide the real one.
    publish_forgery(&broker, &exchange, first_job, first.ce_id()).await;
    publisher.publish(&first).await.expect("first");
    publisher.publish(&first).await.expect("first, republished");
    publisher.publish(&second).await.expect("second");

    let finished = tokio::task::block_in_place(|| watcher.finish());
    assert!(finished.success, "{}\n{}", finished.stdout, finished.stderr);
    let expected = [
        format!(
            "REJECTED signature does not match the message (ce-id {}, routing key job.completed)",
            first.ce_id()
        ),
        format!(
            "studio.lerian.job.completed fetcher.job.completed.{first_job} tenant=acme signature=ok"
        ),
        text(&first.body),
        format!(
            "studio.lerian.job.failed fetcher.job.failed.{second_job} tenant=single-tenant signature=ok"
        ),
        text(&second.body),
    ];
    let lines: Vec<&str> = finished.stdout.lines().collect();
    assert_eq!(lines, expected, "stderr: {}", finished.stderr);
    assert!(
        finished
            .stderr
            .contains("2 event(s) shown, 1 duplicate(s) dropped, 1 rejected"),
        "{}",
        finished.stderr
    );

    publisher.close().await;
    delete_exchange(&broker, &exchange).await;
    broker.close().await;
}

/// The Worker's event of `job_id`'s execution on `datasource`, succeeded.
fn execution_succeeded(job_id: Uuid, datasource: &str) -> OutboundEvent {
    use contract::event::{CloudEventAttributes, ExecutionBody, Operation};
    let details = serde_json::Map::new();
    let body = ExecutionBody {
        job_id,
        datasource,
        status: contract::lifecycle::ExecutionStatus::Succeeded,
        row_count: 3,
        status_details: &details,
        started_at: Some(Utc::now()),
        ended_at: Some(Utc::now()),
    }
    .to_bytes()
    .expect("body");
    OutboundEvent {
        attributes: CloudEventAttributes::execution(
            Operation::Succeeded,
            job_id,
            datasource,
            "//test",
            None,
            Utc::now(),
        ),
        request_id: None,
        body,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn executions_events_are_shown_with_job_hash_and_keyed_by_datasource() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = publisher(&exchange).await;
    let mut watcher = Watcher::start(
        &[
            "--exchange",
            &exchange,
            "--pattern",
            "job.#",
            "--count",
            "3",
            "--timeout",
            "30",
        ],
        &[("APP_ENC_KEY", support::MASTER)],
    );
    tokio::task::block_in_place(|| watcher.wait_until_bound());
    let job_id = Uuid::new_v4();
    let ledger = execution_succeeded(job_id, "ledger");
    let crm = execution_succeeded(job_id, "crm");
    // The same job and operation on two datasources are two events; a republish is one.
    publisher.publish(&ledger).await.expect("ledger");
    publisher.publish(&crm).await.expect("crm");
    publisher
        .publish(&ledger)
        .await
        .expect("ledger, republished");
    publisher
        .publish(&completed(job_id, None))
        .await
        .expect("job");
    let finished = tokio::task::block_in_place(|| watcher.finish());
    assert!(finished.success, "{}\n{}", finished.stdout, finished.stderr);
    let heads: Vec<&str> = finished
        .stdout
        .lines()
        .filter(|line| line.starts_with("studio.lerian."))
        .collect();
    assert_eq!(
        heads,
        [
            format!("studio.lerian.job.execution.succeeded fetcher.job.execution.succeeded.{job_id}.ledger tenant=single-tenant signature=ok"),
            format!("studio.lerian.job.execution.succeeded fetcher.job.execution.succeeded.{job_id}.crm tenant=single-tenant signature=ok"),
            format!("studio.lerian.job.completed fetcher.job.completed.{job_id} tenant=single-tenant signature=ok"),
        ]
    );
    assert!(
        finished.stderr.contains("1 duplicate(s) dropped"),
        "{}",
        finished.stderr
    );
    publisher.close().await;
    delete_exchange(&broker, &exchange).await;
}

/// A real signed event of another job, replayed with `ce_id`: `ce-id` is not covered by the
/// signature, so only the identity check can catch it.
fn replayed_with_ce_id(mut event: OutboundEvent, ce_id: &str) -> OutboundEvent {
    event.attributes.id = ce_id.to_owned();
    event
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signed_event_replayed_under_another_jobs_ce_id_is_refused_and_hides_nothing() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = publisher(&exchange).await;

    let mut watcher = Watcher::start(
        &["--exchange", &exchange, "--count", "2", "--timeout", "30"],
        &[("APP_ENC_KEY", support::MASTER)],
    );
    tokio::task::block_in_place(|| watcher.wait_until_bound());

    let (victim_job, replayed_job) = (Uuid::new_v4(), Uuid::new_v4());
    let victim = completed(victim_job, Some("acme"));
    let replayed = completed(replayed_job, Some("acme"));
    // Correctly signed by the Worker's own publisher: only its ce-id claims the victim's.
    let forged = replayed_with_ce_id(replayed.clone(), victim.ce_id());
    publisher.publish(&forged).await.expect("forged");
    publisher.publish(&victim).await.expect("victim");
    publisher
        .publish(&replayed)
        .await
        .expect("replayed job's own event");

    let finished = tokio::task::block_in_place(|| watcher.finish());
    assert!(finished.success, "{}\n{}", finished.stdout, finished.stderr);
    let expected = [
        format!(
            "REJECTED ce-id {:?} is not the signed event's fetcher.job.completed.{replayed_job} \
             (ce-id {}, routing key job.completed)",
            victim.ce_id(),
            victim.ce_id()
        ),
        format!(
            "studio.lerian.job.completed fetcher.job.completed.{victim_job} tenant=acme signature=ok"
        ),
        text(&victim.body),
        format!(
            "studio.lerian.job.completed fetcher.job.completed.{replayed_job} tenant=acme signature=ok"
        ),
        text(&replayed.body),
    ];
    let lines: Vec<&str> = finished.stdout.lines().collect();
    assert_eq!(lines, expected, "stderr: {}", finished.stderr);
    assert!(
        finished
            .stderr
            .contains("2 event(s) shown, 0 duplicate(s) dropped, 1 rejected"),
        "{}",
        finished.stderr
    );

    publisher.close().await;
    delete_exchange(&broker, &exchange).await;
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn json_mode_refuses_a_replayed_ce_id_with_a_stable_code() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = publisher(&exchange).await;
    let hex = support::keys().external_hmac().reveal_hex();

    let mut watcher = Watcher::start(
        &[
            "--exchange",
            &exchange,
            "--json",
            "--count",
            "1",
            "--timeout",
            "30",
        ],
        &[("FETCHER_EXTERNAL_HMAC_KEY", &hex)],
    );
    tokio::task::block_in_place(|| watcher.wait_until_bound());

    let victim = failed(Uuid::new_v4());
    let forged = replayed_with_ce_id(failed(Uuid::new_v4()), victim.ce_id());
    publisher.publish(&forged).await.expect("forged");
    publisher.publish(&victim).await.expect("victim");

    let finished = tokio::task::block_in_place(|| watcher.finish());
    assert!(finished.success, "{}\n{}", finished.stdout, finished.stderr);
    let lines: Vec<serde_json::Value> = finished
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "{}", finished.stdout);
    assert_eq!(lines[0]["rejected"], true);
    assert_eq!(lines[0]["code"], "event_attribute_mismatch");
    assert_eq!(lines[0]["ceId"], victim.ce_id());
    assert_eq!(lines[1]["ceId"], victim.ce_id());
    assert_eq!(lines[1]["signature"], "ok");

    publisher.close().await;
    delete_exchange(&broker, &exchange).await;
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn json_mode_with_only_the_external_key_and_a_job_filter() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = publisher(&exchange).await;
    let hex = support::keys().external_hmac().reveal_hex();
    let wanted = Uuid::new_v4();

    let mut watcher = Watcher::start(
        &[
            "--exchange",
            &exchange,
            "--pattern",
            "job.#",
            "--json",
            "--job",
            &wanted.to_string(),
            "--count",
            "1",
            "--timeout",
            "30",
        ],
        // No master key: a consumer only has the external key.
        &[("FETCHER_EXTERNAL_HMAC_KEY", &hex)],
    );
    tokio::task::block_in_place(|| watcher.wait_until_bound());

    publisher
        .publish(&completed(Uuid::new_v4(), Some("other")))
        .await
        .expect("another job's event");
    let event = completed(wanted, Some("acme"));
    publisher.publish(&event).await.expect("the wanted event");

    let finished = tokio::task::block_in_place(|| watcher.finish());
    assert!(finished.success, "{}\n{}", finished.stdout, finished.stderr);
    let lines: Vec<&str> = finished.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", finished.stdout);
    let line: serde_json::Value = serde_json::from_str(lines[0]).expect("one JSON object");
    assert_eq!(line["ceId"], event.ce_id());
    assert_eq!(line["ceType"], "studio.lerian.job.completed");
    assert_eq!(line["ceSubject"], wanted.to_string());
    assert_eq!(line["tenant"], "acme");
    assert_eq!(line["exchange"], exchange.as_str());
    assert_eq!(line["routingKey"], "job.completed");
    assert_eq!(line["signature"], "ok");
    let body: serde_json::Value = serde_json::from_slice(&event.body).expect("body");
    assert_eq!(line["body"], body);
    assert!(
        lines[0].ends_with(&format!(",\"body\":{}}}", text(&event.body))),
        "the body keeps its bytes: {}",
        lines[0]
    );
    assert!(
        finished.stderr.contains("1 of other jobs skipped"),
        "{}",
        finished.stderr
    );
    assert!(!finished.stderr.contains(&hex) && !finished.stdout.contains(&hex));

    publisher.close().await;
    delete_exchange(&broker, &exchange).await;
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_count_not_reached_in_time_fails_and_a_plain_timeout_does_not() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let env = [("APP_ENC_KEY", support::MASTER)];

    let output = support::fetcherctl()
        .envs(env)
        .args([
            "watch",
            "--exchange",
            &exchange,
            "--count",
            "1",
            "--timeout",
            "1",
        ])
        .output()
        .expect("run");
    assert!(!output.status.success(), "{output:?}");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("timed out after 1 s with 0 of 1 event(s)"),
        "{stderr}"
    );

    let output = support::fetcherctl()
        .envs(env)
        .args(["watch", "--exchange", &exchange, "--timeout", "1"])
        .output()
        .expect("run");
    assert!(output.status.success(), "{output:?}");

    delete_exchange(&broker, &exchange).await;
    broker.close().await;
}

#[test]
fn without_any_key_watch_says_which_ones_it_takes() {
    let output = support::fetcherctl()
        .args(["watch", "--count", "1"])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("APP_ENC_KEY") && stderr.contains("--hmac-key"),
        "{stderr}"
    );

    let output = support::fetcherctl()
        .args(["watch", "--hmac-key", "abc"])
        .output()
        .expect("run");
    assert!(!output.status.success());
    assert!(text(&output.stderr).contains("64 hex characters"));
}
