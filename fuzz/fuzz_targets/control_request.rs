//! Control API requests (lifecycle §3) on arbitrary bytes: the signature check over arbitrary
//! headers, path and body, and the body parser, never panic; a request signed for one method or
//! path never verifies for another; whatever body is accepted is within IoT's limits.

#![no_main]

use contract::envelope::{
    sign_control, verify_control, ControlRoute, HeaderValue, SignatureHeaders, VerifyPolicy,
};
use contract::lifecycle::parse_options;
use libfuzzer_sys::fuzz_target;

const NOW: i64 = 1_784_052_251;

fuzz_target!(|data: &[u8]| {
    let key = crypto::HmacKey::from_bytes([7; 32]);
    let matches = |parts: &[&[u8]], hex: &str| key.verify_hex_parts(parts, hex);
    // Split the input into a signature header, a path and a body.
    let mut pieces = data.splitn(3, |b| *b == 0);
    let signature = pieces.next().unwrap_or_default();
    let path = String::from_utf8_lossy(pieces.next().unwrap_or_default()).into_owned();
    let body = pieces.next().unwrap_or_default();
    let route = ControlRoute {
        tenant: "",
        job_id: "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88",
        method: "POST",
        path: &path,
    };
    let headers = SignatureHeaders {
        signature: Some(HeaderValue::Text(signature)),
        timestamp: Some(HeaderValue::Text(b"1784052251")),
        version: Some(HeaderValue::Text(b"v1")),
    };
    let policy = VerifyPolicy::default();
    // Arbitrary bytes are (almost surely) no valid signature.
    let _ = verify_control(&headers, &route, body, &policy, NOW, matches);

    // A genuine signature verifies for what it was made for, and for nothing else.
    let signed = sign_control(NOW, &route, body, |p| key.sign_hex(p));
    let genuine = SignatureHeaders {
        signature: Some(HeaderValue::Text(signed.signature.as_bytes())),
        ..headers
    };
    assert!(verify_control(&genuine, &route, body, &policy, NOW, matches).is_ok());
    let other_method = ControlRoute {
        method: "DELETE",
        ..route
    };
    assert!(verify_control(&genuine, &other_method, body, &policy, NOW, matches).is_err());

    if let Ok(options) = parse_options(body, data.first().is_some_and(|b| b & 1 == 1)) {
        if let Some(comment) = &options.comment {
            assert!(comment.chars().count() <= 2028);
            assert!(!comment.chars().any(char::is_control));
        }
        if let Some(code) = &options.reason_code {
            assert!(!code.is_empty() && code.len() <= 128);
            assert!(code
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
        }
    }
});
