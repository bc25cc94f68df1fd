//! One event as an AMQP message: properties, CloudEvents headers, tenant, request id, signature.

use contract::envelope::{
    sign_with_job_id, Route, SIGNATURE_HEADER, TIMESTAMP_HEADER, VERSION_HEADER,
};
use contract::event::OutboundEvent;
use crypto::HmacKey;
use lapin::types::{AMQPValue, ByteArray, FieldTable, LongString, ShortString};
use lapin::BasicProperties;

use crate::error::{PublishError, Result};

/// The event's tenant (the same value as `ce-tenantid`) and correlation id travel as long strings
/// under the contract's names.
pub use contract::wire::{REQUEST_ID_HEADER, TENANT_HEADER};
/// `content_type` of every event.
pub const CONTENT_TYPE: &str = "application/json";
/// AMQP delivery mode of a persistent message.
pub const PERSISTENT: u8 = 2;

/// The `X-Request-Id` of an event: the job message's request id when it had a non-empty one,
/// else the ce-id. The ce-id is chosen over a fresh uuid because it is stable across
/// republishes and names the job, so a consumer can correlate every copy of the event with the
/// Worker's logs for that job.
pub fn request_id(event: &OutboundEvent) -> &str {
    match event.request_id.as_deref() {
        Some(id) if !id.is_empty() => id,
        _ => event.ce_id(),
    }
}

/// The properties of `event` published on `exchange` at Unix second `now`, signed with the
/// external HMAC `key` (contract §3 and §8). Everything but the signature's `t` and the
/// timestamp is the same on every republish.
pub(crate) fn properties(
    event: &OutboundEvent,
    exchange: &str,
    now: i64,
    key: &HmacKey,
) -> Result<BasicProperties> {
    let route = Route {
        tenant: event.tenant(),
        exchange,
        routing_key: event.routing_key(),
    };
    // The event's subject is its job id, the body's `jobId`: no need to parse the body for it.
    let job_id = event.attributes.subject.as_str();
    debug_assert_eq!(contract::envelope::signed_job_id(&event.body), job_id);
    let signature = sign_with_job_id(now, &route, job_id, &event.body, |payload| {
        key.sign_hex(payload)
    });

    let mut headers = FieldTable::default();
    let attributes = &event.attributes;
    for (name, value) in attributes
        .headers()
        .into_iter()
        .chain(attributes.extension_headers())
    {
        headers.insert(
            ShortString::from(name),
            AMQPValue::ByteArray(ByteArray::from(value.as_bytes())),
        );
    }
    headers.insert(TENANT_HEADER.into(), long_string(event.tenant()));
    headers.insert(REQUEST_ID_HEADER.into(), long_string(request_id(event)));
    headers.insert(SIGNATURE_HEADER.into(), long_string(&signature.signature));
    headers.insert(TIMESTAMP_HEADER.into(), long_string(&signature.timestamp));
    headers.insert(VERSION_HEADER.into(), long_string(signature.version));

    let message_id = ShortString::try_new(event.ce_id())
        .map_err(|_| PublishError::Message("the ce-id is longer than 255 bytes"))?;
    Ok(BasicProperties::default()
        .with_delivery_mode(PERSISTENT)
        .with_content_type(CONTENT_TYPE.into())
        .with_message_id(message_id)
        .with_timestamp(u64::try_from(now).unwrap_or(0))
        .with_headers(headers))
}

fn long_string(value: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use contract::envelope::{verify, HeaderValue, SignatureHeaders, VerifyPolicy};
    use contract::event::{CloudEventAttributes, TerminalStatus};
    use uuid::Uuid;

    const NOW: i64 = 1_784_052_251;

    fn event(tenant: Option<&str>, request_id: Option<&str>) -> OutboundEvent {
        let job = Uuid::parse_str("6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88").expect("uuid");
        let time = chrono::Utc.timestamp_opt(NOW, 0).single().expect("time");
        OutboundEvent {
            attributes: CloudEventAttributes::new(
                TerminalStatus::Failed,
                job,
                "//lerian/fetcher",
                tenant,
                time,
            ),
            request_id: request_id.map(str::to_owned),
            body: format!(r#"{{"jobId":"{job}","metadata":{{}},"status":"failed"}}"#).into_bytes(),
        }
    }

    fn key() -> HmacKey {
        HmacKey::from_bytes([7; 32])
    }

    fn header<'a>(props: &'a BasicProperties, name: &str) -> &'a AMQPValue {
        props
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(name))
            .unwrap_or_else(|| panic!("header {name} missing"))
    }

    fn text<'a>(props: &'a BasicProperties, name: &str) -> &'a [u8] {
        match header(props, name) {
            AMQPValue::LongString(s) => s.as_bytes(),
            other => panic!("{name} is not a long string: {other:?}"),
        }
    }

    #[test]
    fn ce_headers_are_byte_arrays_and_the_rest_long_strings() {
        let event = event(Some("acme"), Some("req-1"));
        let props = properties(&event, "fetcher.job.events", NOW, &key()).expect("props");
        for (name, value) in event.attributes.headers() {
            match header(&props, name) {
                AMQPValue::ByteArray(bytes) => assert_eq!(bytes.as_slice(), value.as_bytes()),
                other => panic!("{name} is not a byte array: {other:?}"),
            }
        }
        assert_eq!(text(&props, "X-Tenant-ID"), b"acme");
        assert_eq!(text(&props, "X-Request-Id"), b"req-1");
        assert_eq!(text(&props, "t"), NOW.to_string().as_bytes());
        assert_eq!(text(&props, "signature-version"), b"v1");
        assert_eq!(text(&props, "x-message-signature").len(), 64);
        assert_eq!(props.headers().as_ref().map(|h| h.inner().len()), Some(16));
    }

    #[test]
    fn a_traceparent_is_one_more_ce_header_and_none_adds_nothing() {
        let mut event = event(None, None);
        let without = properties(&event, "fetcher.job.events", NOW, &key()).expect("props");
        assert!(without
            .headers()
            .as_ref()
            .is_some_and(|h| !h.inner().contains_key("ce-traceparent")));
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        event.attributes.traceparent = Some(traceparent.to_owned());
        let with = properties(&event, "fetcher.job.events", NOW, &key()).expect("props");
        match header(&with, "ce-traceparent") {
            AMQPValue::ByteArray(bytes) => assert_eq!(bytes.as_slice(), traceparent.as_bytes()),
            other => panic!("ce-traceparent is not a byte array: {other:?}"),
        }
        assert_eq!(with.headers().as_ref().map(|h| h.inner().len()), Some(17));
    }

    #[test]
    fn properties_are_persistent_json_with_the_ce_id() {
        let event = event(None, None);
        let props = properties(&event, "x", NOW, &key()).expect("props");
        assert_eq!(*props.delivery_mode(), Some(2));
        assert_eq!(
            props.content_type().as_ref().map(ShortString::as_str),
            Some("application/json")
        );
        assert_eq!(
            props.message_id().as_ref().map(ShortString::as_str),
            Some(event.ce_id())
        );
        assert_eq!(*props.timestamp(), Some(NOW as u64));
    }

    #[test]
    fn missing_request_id_falls_back_to_the_ce_id() {
        for request_id in [None, Some("")] {
            let event = event(None, request_id);
            assert_eq!(request_id_of(&event), event.ce_id());
        }
        let event = event(None, Some("abc"));
        assert_eq!(request_id_of(&event), "abc");

        fn request_id_of(event: &OutboundEvent) -> String {
            let props = properties(event, "x", NOW, &key()).expect("props");
            String::from_utf8(text(&props, "X-Request-Id").to_vec()).expect("utf-8")
        }
    }

    #[test]
    fn single_tenant_events_carry_the_literal_tenant() {
        let event = event(None, None);
        let props = properties(&event, "x", NOW, &key()).expect("props");
        assert_eq!(text(&props, "X-Tenant-ID"), b"single-tenant");
    }

    #[test]
    fn signature_covers_tenant_exchange_and_routing_key() {
        let event = event(Some("acme"), None);
        let props = properties(&event, "fetcher.job.events", NOW, &key()).expect("props");
        let headers = SignatureHeaders {
            signature: Some(HeaderValue::Text(text(&props, "x-message-signature"))),
            timestamp: Some(HeaderValue::Text(text(&props, "t"))),
            version: Some(HeaderValue::Text(text(&props, "signature-version"))),
        };
        let check = |tenant: &str, exchange: &str, routing_key: &str| {
            let route = Route {
                tenant,
                exchange,
                routing_key,
            };
            verify(
                &headers,
                &route,
                &event.body,
                &VerifyPolicy::default(),
                NOW,
                |p, s| key().verify_hex_parts(p, s),
            )
        };
        assert!(check("acme", "fetcher.job.events", "job.failed").is_ok());
        assert!(check("other", "fetcher.job.events", "job.failed").is_err());
        assert!(check("acme", "other.exchange", "job.failed").is_err());
        assert!(check("acme", "fetcher.job.events", "job.completed").is_err());
    }

    #[test]
    fn an_overlong_ce_id_is_a_message_error() {
        let mut event = event(None, None);
        event.attributes.id = "x".repeat(300);
        let error = properties(&event, "x", NOW, &key()).expect_err("too long");
        assert!(matches!(error, PublishError::Message(_)));
        assert!(!error.is_retriable());
    }
}
