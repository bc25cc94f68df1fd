//! Properties over arbitrary input: the message parser and redaction never panic.

use contract::message::recover_job_id;
use contract::{redact, JobMessage};
use proptest::prelude::*;

/// Bytes that look like job messages often enough to reach deep into the parser.
fn message_like() -> impl Strategy<Value = Vec<u8>> {
    let fragments = prop_oneof![
        Just(r#"{"jobId":"019391a2-7c1e-7a3b-9f00-0123456789ab","#.to_owned()),
        Just(r#""mappedFields":{"pg":{"users":["id"]}}"#.to_owned()),
        Just(r#""filters":{"pg":{"users":{"id":{"eq":[1]}}}}"#.to_owned()),
        Just(r#""metadata":{"a":[1,2,{"b":null}]}"#.to_owned()),
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just(",".to_owned()),
        Just("null".to_owned()),
        "\\PC{0,12}",
    ];
    proptest::collection::vec(fragments, 0..12).prop_map(|parts| parts.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_parser_never_panics_on_arbitrary_bytes(body in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = JobMessage::parse(&body);
        let _ = recover_job_id(None, &body);
        let _ = recover_job_id(Some(&body), &body);
    }

    #[test]
    fn the_parser_never_panics_on_message_like_text(body in message_like()) {
        if let Err(e) = JobMessage::parse(&body) {
            prop_assert!(!e.code().is_empty());
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn redaction_is_idempotent(text in "\\PC{0,80}") {
        let once = redact(&text);
        prop_assert_eq!(redact(&once), once);
    }

    #[test]
    fn redaction_is_idempotent_on_address_like_text(text in "[a-f0-9:.%_\\[\\]/@ -]{0,40}") {
        let once = redact(&text);
        prop_assert_eq!(redact(&once), once);
    }

    #[test]
    fn redaction_removes_every_single_label_host_port(host in "[a-z][a-z0-9-]{0,20}[a-z0-9]", port in 1u16..) {
        let address = format!("{host}:{port}");
        let text = redact(&format!("connect to {address}: refused"));
        prop_assert!(!text.contains(&address), "{}", text);
    }

    #[test]
    fn redaction_removes_every_ipv4_with_port(a in 0u8..=255, b in 0u8..=255, c in 0u8..=255, d in 0u8..=255, port in 1u16..) {
        let address = format!("{a}.{b}.{c}.{d}:{port}");
        let text = redact(&format!("connect to {address} refused"));
        prop_assert!(!text.contains(&address), "{}", text);
    }
}

#[test]
fn deeply_nested_and_huge_bodies_are_refused_cleanly() {
    let deep = format!(
        r#"{{"jobId":"019391a2-7c1e-7a3b-9f00-0123456789ab","metadata":{}}}"#,
        "[".repeat(50_000)
    );
    assert_eq!(
        JobMessage::parse(deep.as_bytes()).unwrap_err().code(),
        "invalid_json"
    );
    let wide = format!(
        r#"{{"jobId":"019391a2-7c1e-7a3b-9f00-0123456789ab","metadata":{{"k":"{}"}}}}"#,
        "x".repeat(8 << 20)
    );
    assert_eq!(
        JobMessage::parse(wide.as_bytes()).unwrap_err().code(),
        "missing_mapped_fields"
    );
}
