//! Envelope verification rules (contract §3, §10): freshness, version, headers, tampering.

use contract::envelope::{
    self, HeaderValue, Route, SignatureError, SignatureHeaders, Verified, VerifyPolicy,
};
use crypto::HmacKey;
use proptest::prelude::*;

const NOW: i64 = 1_767_225_600;
const BODY: &[u8] =
    br#"{"jobId":"019391a2-7c1e-7a3b-9f00-0123456789ab","mappedFields":{"pg":{"users":["id"]}}}"#;

fn key() -> HmacKey {
    HmacKey::from_bytes([7; 32])
}

fn route() -> Route<'static> {
    Route {
        tenant: "tenant-a",
        exchange: "",
        routing_key: "fetcher.extract-external-data.queue",
    }
}

/// Signs at `signed_at` and verifies at `NOW` with the given edits.
fn check(
    signed_at: i64,
    edit: impl FnOnce(&mut SignatureHeaders<'_>),
) -> Result<Verified, SignatureError> {
    let signature = envelope::sign(signed_at, &route(), BODY, |p| key().sign_hex(p));
    let mut headers = SignatureHeaders {
        signature: Some(HeaderValue::Text(signature.signature.as_bytes())),
        timestamp: Some(HeaderValue::Text(signature.timestamp.as_bytes())),
        version: Some(HeaderValue::Text(signature.version.as_bytes())),
    };
    edit(&mut headers);
    envelope::verify(
        &headers,
        &route(),
        BODY,
        &VerifyPolicy::default(),
        NOW,
        |p, s| key().verify_hex_parts(p, s),
    )
}

#[test]
fn thirty_seconds_of_future_skew_is_accepted_and_ten_minutes_is_not() {
    assert_eq!(check(NOW + 30, |_| {}), Ok(Verified::V1));
    assert!(matches!(
        check(NOW + 31, |_| {}),
        Err(SignatureError::FromTheFuture { ahead_secs: 31, .. })
    ));
    assert!(matches!(
        check(NOW + 600, |_| {}),
        Err(SignatureError::FromTheFuture { .. })
    ));
}

#[test]
fn five_minutes_is_the_age_limit() {
    assert_eq!(check(NOW - 300, |_| {}), Ok(Verified::V1));
    assert!(matches!(
        check(NOW - 301, |_| {}),
        Err(SignatureError::Stale { age_secs: 301, .. })
    ));
}

#[test]
fn missing_headers_are_named() {
    assert_eq!(
        check(NOW, |h| h.signature = None),
        Err(SignatureError::Missing("x-message-signature"))
    );
    assert_eq!(
        check(NOW, |h| h.timestamp = None),
        Err(SignatureError::Missing("t"))
    );
    assert_eq!(
        check(NOW, |h| h.version = None),
        Err(SignatureError::Missing("signature-version"))
    );
}

#[test]
fn headers_of_the_wrong_type_are_refused() {
    assert!(matches!(
        check(NOW, |h| h.signature = Some(HeaderValue::Integer(5))),
        Err(SignatureError::NotAString { .. })
    ));
    assert!(matches!(
        check(NOW, |h| h.version = Some(HeaderValue::Other("boolean"))),
        Err(SignatureError::NotAString {
            found: "boolean",
            ..
        })
    ));
}

#[test]
fn timestamps_must_be_plain_decimal_seconds() {
    for bad in [
        "",
        "+1767225600",
        " 1767225600",
        "1767225600.0",
        "1e9",
        "99999999999999999999",
    ] {
        assert_eq!(
            check(NOW, |h| h.timestamp =
                Some(HeaderValue::Text(bad.as_bytes()))),
            Err(SignatureError::InvalidTimestamp),
            "{bad:?}"
        );
    }
}

#[test]
fn only_version_v1_is_accepted() {
    assert_eq!(
        check(NOW, |h| h.version = Some(HeaderValue::Text(b"v2"))),
        Err(SignatureError::UnsupportedVersion)
    );
}

#[test]
fn an_uppercase_signature_does_not_verify() {
    // Leaked so the edit closure may store it in headers of any lifetime.
    let upper: &'static str = Box::leak(
        envelope::sign(NOW, &route(), BODY, |p| key().sign_hex(p))
            .signature
            .to_uppercase()
            .into_boxed_str(),
    );
    assert_eq!(
        check(NOW, |h| h.signature =
            Some(HeaderValue::Text(upper.as_bytes()))),
        Err(SignatureError::Mismatch)
    );
}

#[test]
fn errors_never_quote_the_signature() {
    let signature = envelope::sign(NOW, &route(), BODY, |p| key().sign_hex(p)).signature;
    let err = envelope::verify(
        &SignatureHeaders {
            signature: Some(HeaderValue::Text(signature.as_bytes())),
            timestamp: Some(HeaderValue::Text(b"1")),
            version: Some(HeaderValue::Text(b"v1")),
        },
        &route(),
        BODY,
        &VerifyPolicy::default(),
        NOW,
        |p, s| key().verify_hex_parts(p, s),
    )
    .expect_err("stale");
    assert!(!err.to_string().contains(&signature));
}

fn flip(bytes: &[u8], index: usize, xor: u8) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let i = index % out.len();
    out[i] ^= xor;
    out
}

proptest! {
    #[test]
    fn any_changed_byte_of_what_is_signed_fails(
        which in 0usize..5,
        index in any::<usize>(),
        xor in 1u8..=255,
    ) {
        let tenant = "tenant-a".as_bytes();
        let exchange = "fetcher.job.events".as_bytes();
        let routing_key = "job.completed".as_bytes();
        let signature = envelope::sign(
            NOW,
            &Route { tenant: "tenant-a", exchange: "fetcher.job.events", routing_key: "job.completed" },
            BODY,
            |p| key().sign_hex(p),
        );
        let mut parts = [
            tenant.to_vec(),
            exchange.to_vec(),
            routing_key.to_vec(),
            BODY.to_vec(),
            signature.signature.as_bytes().to_vec(),
        ];
        parts[which] = flip(&parts[which], index, xor);
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let (tenant, exchange, routing_key) = (text(&parts[0]), text(&parts[1]), text(&parts[2]));
        let route = Route { tenant: &tenant, exchange: &exchange, routing_key: &routing_key };
        let headers = SignatureHeaders {
            signature: Some(HeaderValue::Text(&parts[4])),
            timestamp: Some(HeaderValue::Text(signature.timestamp.as_bytes())),
            version: Some(HeaderValue::Text(b"v1")),
        };
        let policy = VerifyPolicy { allow_legacy_body_signature: true, ..VerifyPolicy::default() };
        let verified = envelope::verify(&headers, &route, &parts[3], &policy, NOW, |p, s| {
            key().verify_hex_parts(p, s)
        });
        prop_assert!(verified.is_err(), "part {} changed yet verified", which);
    }

    #[test]
    fn any_signature_verifies_only_its_own_message(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let signature = envelope::sign(NOW, &route(), &body, |p| key().sign_hex(p));
        let headers = SignatureHeaders {
            signature: Some(HeaderValue::Text(signature.signature.as_bytes())),
            timestamp: Some(HeaderValue::Text(signature.timestamp.as_bytes())),
            version: Some(HeaderValue::Text(b"v1")),
        };
        let ok = envelope::verify(&headers, &route(), &body, &VerifyPolicy::default(), NOW, |p, s| {
            key().verify_hex_parts(p, s)
        });
        prop_assert_eq!(ok, Ok(Verified::V1));
    }
}

#[test]
fn signing_with_the_known_job_id_is_signing_the_body() {
    let job_id = envelope::signed_job_id(BODY);
    assert_eq!(job_id, "019391a2-7c1e-7a3b-9f00-0123456789ab");
    let mac = |p: &[u8]| key().sign_hex(p);
    assert_eq!(
        envelope::sign_with_job_id(NOW, &route(), &job_id, BODY, mac),
        envelope::sign(NOW, &route(), BODY, mac)
    );
}

#[test]
fn a_legacy_signature_never_carries_a_tenant() {
    let legacy = |tenant: &'static str| {
        let t = NOW.to_string();
        let signature = key().sign_hex(&envelope::legacy_payload(&t, BODY));
        let headers = SignatureHeaders {
            signature: Some(HeaderValue::Text(signature.as_bytes())),
            timestamp: Some(HeaderValue::Text(t.as_bytes())),
            version: Some(HeaderValue::Text(b"v1")),
        };
        let route = Route { tenant, ..route() };
        let policy = VerifyPolicy {
            allow_legacy_body_signature: true,
            ..VerifyPolicy::default()
        };
        envelope::verify(&headers, &route, BODY, &policy, NOW, |p, s| {
            key().verify_hex_parts(p, s)
        })
    };
    assert_eq!(legacy(""), Ok(Verified::LegacyBody));
    // The legacy form signs the body only: a tenant header on it could be anyone's.
    assert_eq!(legacy("tenant-a"), Err(SignatureError::LegacyWithTenant));
}
