//! A consumer receives every header of contract §8, the exact body, and a verifiable signature.

use std::time::Duration;

use contract::envelope::{verify, HeaderValue, Route, SignatureHeaders, VerifyPolicy};
use lapin::types::ShortString;

use crate::support::{self, Broker};

#[tokio::test]
async fn a_bound_consumer_receives_every_contract_header_and_a_valid_signature() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = support::publisher(&exchange);
    publisher.declare_exchange().await.expect("declare");
    publisher
        .declare_exchange()
        .await
        .expect("declaring twice is idempotent");
    let queue = broker.bound_queue(&exchange, "job.*").await;

    let event = support::completed_event(Some("acme"), Some("req-42"));
    publisher.publish(&event).await.expect("published");
    assert!(publisher.is_connected());

    let received = broker.receive(&queue, 1, Duration::from_secs(10)).await;
    let delivery = &received[0];
    let now = chrono::Utc::now().timestamp();

    assert_eq!(delivery.data, event.body, "body bytes are identical");
    assert_eq!(delivery.exchange.as_str(), exchange);
    assert_eq!(delivery.routing_key.as_str(), "job.completed");
    assert_eq!(*delivery.properties.delivery_mode(), Some(2), "persistent");
    assert_eq!(
        delivery
            .properties
            .content_type()
            .as_ref()
            .map(ShortString::as_str),
        Some("application/json")
    );
    assert_eq!(
        delivery
            .properties
            .message_id()
            .as_ref()
            .map(ShortString::as_str),
        Some(event.ce_id())
    );
    let timestamp = delivery.properties.timestamp().expect("timestamp") as i64;
    assert!(
        (now - timestamp).abs() <= 5,
        "timestamp {timestamp} vs now {now}"
    );

    // Every CloudEvents attribute, as a byte array, with the contract's values.
    let job_id = event.attributes.subject.clone();
    let expected: [(&str, String); 11] = [
        ("ce-specversion", "1.0".into()),
        ("ce-id", format!("fetcher.job.completed.{job_id}")),
        ("ce-source", support::SOURCE.into()),
        ("ce-type", "studio.lerian.job.completed".into()),
        ("ce-time", event.attributes.time.clone()),
        ("ce-subject", job_id.clone()),
        ("ce-resourcetype", "job".into()),
        ("ce-eventtype", "completed".into()),
        ("ce-schemaversion", "1.0.0".into()),
        ("ce-datacontenttype", "application/json".into()),
        ("ce-tenantid", "acme".into()),
    ];
    for (name, value) in &expected {
        assert_eq!(
            support::byte_array(delivery, name),
            value.as_bytes(),
            "header {name}"
        );
    }
    assert!(chrono::DateTime::parse_from_rfc3339(&event.attributes.time).is_ok());
    assert_eq!(support::long_string(delivery, "X-Tenant-ID"), b"acme");
    assert_eq!(support::long_string(delivery, "X-Request-Id"), b"req-42");
    assert_eq!(support::long_string(delivery, "signature-version"), b"v1");
    let signature = support::long_string(delivery, "x-message-signature");
    assert_eq!(signature.len(), 64);
    assert!(signature
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)));
    let t: i64 = std::str::from_utf8(support::long_string(delivery, "t"))
        .expect("utf-8")
        .parse()
        .expect("decimal seconds");
    assert!((now - t).abs() <= 5, "t {t} vs now {now}");
    let headers = delivery.properties.headers().as_ref().expect("headers");
    assert_eq!(headers.inner().len(), 16, "no header beyond the contract's");

    // The signature verifies on the route it was published on, and on no other.
    let signature_headers = SignatureHeaders {
        signature: Some(HeaderValue::Text(signature)),
        timestamp: Some(HeaderValue::Text(support::long_string(delivery, "t"))),
        version: Some(HeaderValue::Text(support::long_string(
            delivery,
            "signature-version",
        ))),
    };
    let check = |tenant: &str, exchange: &str, routing_key: &str| {
        verify(
            &signature_headers,
            &Route {
                tenant,
                exchange,
                routing_key,
            },
            &delivery.data,
            &VerifyPolicy::default(),
            now,
            |payload, hex| support::key().verify_hex_parts(payload, hex),
        )
    };
    check("acme", &exchange, "job.completed").expect("signature verifies");
    assert!(check("other-tenant", &exchange, "job.completed").is_err());
    assert!(check("acme", "fetcher.job.events", "job.completed").is_err());
    assert!(check("acme", &exchange, "job.failed").is_err());

    broker.delete_queue(&queue).await;
    broker.delete_exchange(&exchange).await;
    publisher.close().await;
    broker.close().await;
}

#[tokio::test]
async fn an_event_without_tenant_or_request_id_uses_single_tenant_and_the_ce_id() {
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    let publisher = support::publisher(&exchange);
    publisher.declare_exchange().await.expect("declare");
    let queue = broker.bound_queue(&exchange, "job.*").await;

    let event = support::failed_event(None);
    publisher.publish(&event).await.expect("published");

    let received = broker.receive(&queue, 1, Duration::from_secs(10)).await;
    let delivery = &received[0];
    assert_eq!(delivery.routing_key.as_str(), "job.failed");
    assert_eq!(
        support::byte_array(delivery, "ce-tenantid"),
        b"single-tenant"
    );
    assert_eq!(support::byte_array(delivery, "ce-eventtype"), b"failed");
    assert_eq!(
        support::long_string(delivery, "X-Tenant-ID"),
        b"single-tenant"
    );
    assert_eq!(
        support::long_string(delivery, "X-Request-Id"),
        event.ce_id().as_bytes()
    );
    assert_eq!(delivery.data, event.body);

    broker.delete_queue(&queue).await;
    broker.delete_exchange(&exchange).await;
    publisher.close().await;
    broker.close().await;
}
