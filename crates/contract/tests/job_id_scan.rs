//! The shallow `jobId` scan agrees with a full JSON decoder on every document that decoder
//! accepts, and never panics on anything else.

use contract::envelope::{scan_job_id, signed_job_id, ScannedJobId};
use proptest::prelude::*;
use serde_json::Value;

/// What a full decode says the signed id is: the top-level `jobId` string, else empty.
fn reference(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    Some(match value.get("jobId") {
        Some(Value::String(id)) if value.is_object() => id.clone(),
        _ => String::new(),
    })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
        Just(Value::String("\u{0}\"\\\u{2028}".into())),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(
                (prop_oneof![Just("jobId".to_owned()), "\\PC{0,6}"], inner),
                0..6
            )
            .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// A top-level object whose members may repeat `jobId`, written with or without whitespace.
fn document() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec(
            (
                prop_oneof![Just("jobId"), Just("JobId"), Just("x")],
                json_value(),
            ),
            0..5,
        ),
        any::<bool>(),
    )
        .prop_map(|(members, spaced)| {
            let sep = if spaced { " \n\t" } else { "" };
            let parts: Vec<String> = members
                .iter()
                .map(|(name, value)| {
                    let value = if spaced {
                        serde_json::to_string_pretty(value)
                    } else {
                        serde_json::to_string(value)
                    };
                    format!("{sep}\"{name}\"{sep}:{sep}{}", value.expect("serializable"))
                })
                .collect();
            format!("{sep}{{{}{sep}}}{sep}", parts.join(",")).into_bytes()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn agrees_with_a_full_decode_on_documents(body in document()) {
        let expected = reference(&body).expect("generated documents are valid JSON");
        prop_assert_eq!(signed_job_id(&body), expected.clone());
        prop_assert_eq!(scan_job_id(&body), ScannedJobId::Id(expected));
    }

    #[test]
    fn agrees_wherever_the_full_decoder_accepts(body in proptest::collection::vec(prop_oneof![
        Just(b'{'), Just(b'}'), Just(b'['), Just(b']'), Just(b'"'), Just(b':'), Just(b','),
        Just(b'\\'), Just(b'u'), Just(b'1'), Just(b'e'), Just(b'-'), Just(b'.'), Just(b' '),
        Just(b'n'), any::<u8>(),
    ], 0..64)) {
        let scanned = signed_job_id(&body);
        if let Some(expected) = reference(&body) {
            prop_assert_eq!(scanned, expected);
        }
    }

    #[test]
    fn never_panics_on_truncated_documents(body in document(), cut in any::<prop::sample::Index>()) {
        let cut = cut.index(body.len() + 1);
        let _ = scan_job_id(&body[..cut]);
    }
}

#[test]
fn a_megabyte_of_nesting_is_scanned_without_recursion() {
    let body = format!(r#"{{"jobId":"a","d":{}}}"#, "[".repeat(1 << 20));
    assert_eq!(signed_job_id(body.as_bytes()), "");
}
