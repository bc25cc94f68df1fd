//! Envelope verification with arbitrary headers, route, body, clock and policy: never a panic,
//! a freshly signed message always verifies, and any change of route or body never does.

#![no_main]

use arbitrary::Arbitrary;
use contract::envelope::{self, HeaderValue, Route, SignatureHeaders, VerifyPolicy};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Header {
    Text(Vec<u8>),
    Integer(i64),
    Other,
}

impl Header {
    fn value(&self) -> HeaderValue<'_> {
        match self {
            Header::Text(bytes) => HeaderValue::Text(bytes),
            Header::Integer(i) => HeaderValue::Integer(*i),
            Header::Other => HeaderValue::Other("table"),
        }
    }
}

#[derive(Debug, Arbitrary)]
struct Input {
    signature: Option<Header>,
    timestamp: Option<Header>,
    version: Option<Header>,
    tenant: String,
    exchange: String,
    routing_key: String,
    body: Vec<u8>,
    now: i64,
    max_age_secs: i64,
    max_future_secs: i64,
    legacy: bool,
    /// Which part of the route the tamper check changes.
    tamper: u8,
}

fuzz_target!(|input: Input| {
    let key = crypto::HmacKey::from_bytes([7; 32]);
    let mac = |payload: &[&[u8]], hex: &str| key.verify_hex_parts(payload, hex);
    let route = Route {
        tenant: &input.tenant,
        exchange: &input.exchange,
        routing_key: &input.routing_key,
    };
    let policy = VerifyPolicy {
        max_age_secs: input.max_age_secs,
        max_future_secs: input.max_future_secs,
        allow_legacy_body_signature: input.legacy,
    };

    // Arbitrary headers: any outcome, but never a panic.
    let headers = SignatureHeaders {
        signature: input.signature.as_ref().map(Header::value),
        timestamp: input.timestamp.as_ref().map(Header::value),
        version: input.version.as_ref().map(Header::value),
    };
    if let Err(error) = envelope::verify(&headers, &route, &input.body, &policy, input.now, mac) {
        assert!(!error.code().is_empty());
        let _ = error.to_string();
    }

    // A message signed now verifies now, under the default policy.
    let signed = envelope::sign(input.now, &route, &input.body, |p| key.sign_hex(p));
    let good = SignatureHeaders {
        signature: Some(HeaderValue::Text(signed.signature.as_bytes())),
        timestamp: Some(HeaderValue::Text(signed.timestamp.as_bytes())),
        version: Some(HeaderValue::Text(signed.version.as_bytes())),
    };
    let strict = VerifyPolicy::default();
    assert_eq!(
        envelope::verify(&good, &route, &input.body, &strict, input.now, mac),
        Ok(envelope::Verified::V1)
    );

    // The same signature replayed on another tenant, exchange, routing key or body fails.
    let (mut tenant, mut exchange, mut routing_key, mut body) = (
        input.tenant.clone(),
        input.exchange.clone(),
        input.routing_key.clone(),
        input.body.clone(),
    );
    match input.tamper % 4 {
        0 => tenant.push('x'),
        1 => exchange.push('x'),
        2 => routing_key.push('x'),
        _ => body.push(b' '),
    }
    let moved = Route {
        tenant: &tenant,
        exchange: &exchange,
        routing_key: &routing_key,
    };
    let outcome = envelope::verify(&good, &moved, &body, &strict, input.now, mac);
    // Appending a space to a JSON body keeps its jobId, and the v1 payload ends with the body,
    // so only the body tamper could ever collide; it must not.
    assert_eq!(outcome, Err(envelope::SignatureError::Mismatch));
});
