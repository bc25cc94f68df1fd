//! `fetcherctl watch` and the age of signatures, against the real RabbitMQ: a durable queue's
//! backlog is shown whatever its age, a private queue (or `--max-age 5m`) refuses a signature
//! older than five minutes as stale, and a forged signature is refused in every case.

mod support;

use chrono::Utc;
use contract::event::OutboundEvent;
use crypto::HmacKey;
use support::events::{completed, publish_signed_at};
use support::watcher::Watcher;
use support::Broker;
use uuid::Uuid;

/// How old the old events' signatures are: well past the contract's five minutes.
const AN_HOUR: i64 = 3_600;

/// A key that is not the Worker's: what it signs is a forgery.
fn forger() -> HmacKey {
    HmacKey::from_bytes([9; 32])
}

fn external() -> HmacKey {
    support::keys().external_hmac().clone()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn shown(event: &OutboundEvent) -> [String; 2] {
    [
        format!(
            "studio.lerian.job.completed {} tenant=acme signature=ok",
            event.ce_id()
        ),
        text(&event.body),
    ]
}

fn forgery_rejected(event: &OutboundEvent) -> String {
    format!(
        "REJECTED signature does not match the message (ce-id {}, routing key job.completed)",
        event.ce_id()
    )
}

/// Whether `line` refuses `event` as stale under the 300 s limit.
fn is_stale_rejection(line: &str, event: &OutboundEvent) -> bool {
    line.starts_with("REJECTED signature is stale: signed ")
        && line.ends_with(&format!(
            "s ago, the limit is 300 s (ce-id {}, routing key job.completed)",
            event.ce_id()
        ))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_durable_backlog_shows_old_events_and_still_refuses_forgeries() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    broker.declare_exchange(&exchange).await;
    let queue = broker.bound_queue(&exchange, "job.*").await;
    let an_hour_ago = Utc::now().timestamp() - AN_HOUR;

    let forged = completed(Uuid::new_v4(), Some("acme"));
    let backlog = completed(Uuid::new_v4(), Some("acme"));
    // Both wait in the queue, an hour old; only the second is signed with the Worker's key.
    publish_signed_at(&broker.channel, &exchange, &forged, an_hour_ago, &forger()).await;
    publish_signed_at(
        &broker.channel,
        &exchange,
        &backlog,
        an_hour_ago,
        &external(),
    )
    .await;

    let output = support::fetcherctl()
        .env("APP_ENC_KEY", support::MASTER)
        .args(["watch", "--exchange", &exchange, "--queue", &queue])
        .args(["--count", "1", "--timeout", "30"])
        .output()
        .expect("run watch");
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let [event, body] = shown(&backlog);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [forgery_rejected(&forged), event, body],
        "stderr: {stderr}"
    );
    assert!(
        stderr.contains("signatures of any age are accepted"),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 event(s) shown, 0 duplicate(s) dropped, 1 rejected"),
        "{stderr}"
    );
    assert_eq!(broker.depth(&queue).await, 0, "both were acknowledged");

    broker.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn max_age_on_a_durable_queue_refuses_an_old_signature_as_stale() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    broker.declare_exchange(&exchange).await;
    let queue = broker.bound_queue(&exchange, "job.*").await;
    let now = Utc::now().timestamp();

    let (old, forged, fresh) = three_events();
    publish_signed_at(&broker.channel, &exchange, &old, now - AN_HOUR, &external()).await;
    publish_signed_at(&broker.channel, &exchange, &forged, now, &forger()).await;
    publish_signed_at(&broker.channel, &exchange, &fresh, now, &external()).await;

    let output = support::fetcherctl()
        .env("APP_ENC_KEY", support::MASTER)
        .args(["watch", "--exchange", &exchange, "--queue", &queue])
        .args(["--max-age", "5m", "--count", "1", "--timeout", "30"])
        .output()
        .expect("run watch");
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_stale_forged_and_fresh(&stdout, &stderr, &old, &forged, &fresh);

    broker.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_queue_refuses_an_old_signature_as_stale_by_default() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    broker.declare_exchange(&exchange).await;

    let mut watcher = Watcher::start(
        &["--exchange", &exchange, "--count", "1", "--timeout", "30"],
        &[("APP_ENC_KEY", support::MASTER)],
    );
    let bound = tokio::task::block_in_place(|| watcher.wait_until_bound());
    assert!(
        bound.ends_with("; signatures older than 300 s are rejected."),
        "{bound}"
    );

    let now = Utc::now().timestamp();
    let (old, forged, fresh) = three_events();
    publish_signed_at(&broker.channel, &exchange, &old, now - AN_HOUR, &external()).await;
    publish_signed_at(&broker.channel, &exchange, &forged, now, &forger()).await;
    publish_signed_at(&broker.channel, &exchange, &fresh, now, &external()).await;

    let finished = tokio::task::block_in_place(|| watcher.finish());
    assert!(finished.success, "{}\n{}", finished.stdout, finished.stderr);
    assert_stale_forged_and_fresh(&finished.stdout, &finished.stderr, &old, &forged, &fresh);

    broker.close().await;
}

/// An event to be signed an hour ago, one to be forged, and one to be signed now.
fn three_events() -> (OutboundEvent, OutboundEvent, OutboundEvent) {
    (
        completed(Uuid::new_v4(), Some("acme")),
        completed(Uuid::new_v4(), Some("acme")),
        completed(Uuid::new_v4(), Some("acme")),
    )
}

/// The old event was refused as stale, the forgery as not matching, and the fresh one shown.
fn assert_stale_forged_and_fresh(
    stdout: &str,
    stderr: &str,
    old: &OutboundEvent,
    forged: &OutboundEvent,
    fresh: &OutboundEvent,
) {
    let lines: Vec<&str> = stdout.lines().collect();
    let [event, body] = shown(fresh);
    assert_eq!(lines.len(), 4, "{stdout}\nstderr: {stderr}");
    assert!(is_stale_rejection(lines[0], old), "{stdout}");
    assert_eq!(
        lines[1..],
        [forgery_rejected(forged), event, body],
        "{stdout}"
    );
    assert!(
        stderr.contains("1 event(s) shown, 0 duplicate(s) dropped, 2 rejected"),
        "{stderr}"
    );
}
