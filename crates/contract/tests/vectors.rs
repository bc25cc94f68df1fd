//! Known answers from the repository's copy of the shared vectors: signatures and redaction.

use contract::envelope::{
    self, HeaderValue, Route, SignatureError, SignatureHeaders, Verified, VerifyPolicy,
};
use contract::redact;
use crypto::{HmacKey, KeySet};
use serde_json::Value;

fn vectors(name: &str) -> Value {
    let path = format!("{}/../../tests/vectors/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

fn master_keys() -> KeySet {
    let keys = vectors("keys.json");
    let master = keys["masters"][0]["APP_ENC_KEY"].as_str().expect("master");
    KeySet::from_base64(master).expect("valid master")
}

fn key(label: &str) -> HmacKey {
    let keys = master_keys();
    match label {
        "fetcher-internal-hmac-v1" => keys.internal_hmac().clone(),
        "fetcher-external-hmac-v1" => keys.external_hmac().clone(),
        other => panic!("no HMAC key labelled {other}"),
    }
}

fn s<'a>(case: &'a Value, member: &str) -> &'a str {
    case[member]
        .as_str()
        .unwrap_or_else(|| panic!("{member} is a string"))
}

fn headers<'a>(signature: &'a str, t: &'a str) -> SignatureHeaders<'a> {
    SignatureHeaders {
        signature: Some(HeaderValue::Text(signature.as_bytes())),
        timestamp: Some(HeaderValue::Text(t.as_bytes())),
        version: Some(HeaderValue::Text(b"v1")),
    }
}

#[test]
fn inbound_signatures_match_and_verify() {
    let v = vectors("signatures.json");
    for case in v["inbound"].as_array().expect("inbound cases") {
        let key = key(s(case, "key_label"));
        let t = case["t"].as_i64().expect("t");
        let route = Route {
            tenant: s(case, "tenant"),
            exchange: s(case, "exchange"),
            routing_key: s(case, "routing_key"),
        };
        let body = s(case, "body").as_bytes();
        let signed = envelope::sign(t, &route, body, |p| key.sign_hex(p));
        assert_eq!(signed.signature, s(case, "signature"), "{case}");
        assert_eq!(signed.timestamp, t.to_string());

        let t_text = t.to_string();
        let verified = envelope::verify(
            &headers(s(case, "signature"), &t_text),
            &route,
            body,
            &VerifyPolicy::default(),
            t + 10,
            |p, sig| key.verify_hex_parts(p, sig),
        );
        assert_eq!(verified, Ok(Verified::V1), "{case}");

        // `t` may arrive as an AMQP integer.
        let mut as_integer = headers(s(case, "signature"), &t_text);
        as_integer.timestamp = Some(HeaderValue::Integer(t));
        let verified = envelope::verify(
            &as_integer,
            &route,
            body,
            &VerifyPolicy::default(),
            t,
            |p, sig| key.verify_hex_parts(p, sig),
        );
        assert_eq!(verified, Ok(Verified::V1), "{case}");
    }
}

#[test]
fn a_body_that_is_not_an_object_signs_an_empty_job_id() {
    let v = vectors("signatures.json");
    let case = &v["inbound"][2];
    assert_eq!(envelope::signed_job_id(s(case, "body").as_bytes()), "");
    let first = &v["inbound"][0];
    assert_eq!(
        envelope::signed_job_id(s(first, "body").as_bytes()),
        "019391a2-7c1e-7a3b-9f00-0123456789ab"
    );
}

#[test]
fn legacy_body_signature_verifies_only_with_the_flag() {
    let v = vectors("signatures.json");
    let case = &v["legacy_body_only"];
    let key = key(s(case, "key_label"));
    let t = case["t"].as_i64().expect("t");
    let t_text = t.to_string();
    let body = s(case, "body").as_bytes();
    assert_eq!(
        envelope::legacy_payload(&t_text, body),
        s(case, "payload").as_bytes()
    );
    assert_eq!(
        key.sign_hex(s(case, "payload").as_bytes()),
        s(case, "signature")
    );

    let route = Route {
        tenant: "",
        exchange: "",
        routing_key: "fetcher.extract-external-data.queue",
    };
    let check = |allow| {
        let policy = VerifyPolicy {
            allow_legacy_body_signature: allow,
            ..VerifyPolicy::default()
        };
        envelope::verify(
            &headers(s(case, "signature"), &t_text),
            &route,
            body,
            &policy,
            t,
            |p, sig| key.verify_hex_parts(p, sig),
        )
    };
    assert_eq!(check(false), Err(SignatureError::Mismatch));
    assert_eq!(check(true), Ok(Verified::LegacyBody));
}

#[test]
fn event_signature_matches() {
    let v = vectors("signatures.json");
    let case = &v["event"];
    let key = key(s(case, "key_label"));
    let route = Route {
        tenant: s(case, "tenant"),
        exchange: s(case, "exchange"),
        routing_key: s(case, "routing_key"),
    };
    let t = case["t"].as_i64().expect("t");
    let signed = envelope::sign(t, &route, s(case, "body").as_bytes(), |p| key.sign_hex(p));
    assert_eq!(signed.signature, s(case, "signature"));
    assert_eq!(signed.version, "v1");
}

#[test]
fn redaction_examples_give_their_expected_text() {
    let v = vectors("redaction.json");
    for case in v["cases"].as_array().expect("cases") {
        assert_eq!(redact(s(case, "input")), s(case, "expected"), "{case}");
    }
}
