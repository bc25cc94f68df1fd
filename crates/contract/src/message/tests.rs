//! Decoding and validation of whole job messages.

use super::*;

const ID: &str = "019391a2-7c1e-7a3b-9f00-0123456789ab";

fn parse(text: &str) -> Result<JobMessage, MessageError> {
    JobMessage::parse(text.as_bytes())
}

fn code(text: &str) -> &'static str {
    parse(text).expect_err("should be rejected").code()
}

#[test]
fn the_contract_example_decodes() {
    let text = format!(
        r#"{{"jobId":"{ID}","mappedFields":{{"pg":{{"users":["id","name"]}}}},
        "filters":{{"pg":{{"users":{{"id":{{"gte":[10]}}}}}}}},
        "metadata":{{"source":"payments","correlationId":"settlement-2026-07-13"}},
        "createdAt":"2026-07-13T18:04:02.000Z"}}"#
    );
    let m = parse(&text).expect("valid");
    assert_eq!(m.job_id.to_string(), ID);
    assert_eq!(m.mapped_fields["pg"]["users"], ["id", "name"]);
    let condition = &m.filters["pg"]["users"]["id"];
    let clauses: Vec<_> = condition.clauses().collect();
    assert_eq!(clauses.len(), 1);
    assert_eq!(clauses[0].0, Operator::Gte);
    assert_eq!(m.metadata["source"], "payments");
}

#[test]
fn member_names_match_case_insensitively_and_the_last_wins() {
    let other = "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88";
    let text =
        format!(r#"{{"JOBID":"{ID}","jobid":"{other}","MAPPEDFIELDS":{{"c":{{"t":["f"]}}}}}}"#);
    let m = parse(&text).expect("valid");
    assert_eq!(m.job_id.to_string(), other);
    assert!(m.metadata.is_empty());
}

#[test]
fn uuid_forms_go_accepts_are_accepted() {
    let simple = ID.replace('-', "");
    for form in [
        ID.to_uppercase(),
        simple,
        format!("{{{ID}}}"),
        format!("urn:uuid:{ID}"),
    ] {
        let text = format!(r#"{{"jobId":"{form}","mappedFields":{{"c":{{"t":["f"]}}}}}}"#);
        assert_eq!(parse(&text).expect(&form).job_id.to_string(), ID);
    }
}

#[test]
fn repeated_map_members_accumulate_like_go() {
    let text = format!(
        r#"{{"jobId":"{ID}","mappedFields":{{"a":{{"t":["f"]}}}},"mappedfields":{{"b":{{"t":["f"]}}}},
        "metadata":{{"x":1}},"Metadata":{{"y":2}}}}"#
    );
    let m = parse(&text).expect("valid");
    assert_eq!(m.mapped_fields.len(), 2);
    assert_eq!(m.metadata.len(), 2);
}

#[test]
fn unknown_members_are_ignored() {
    let text =
        format!(r#"{{"jobId":"{ID}","extra":[1,{{}}],"mappedFields":{{"c":{{"t":["f"]}}}}}}"#);
    assert!(parse(&text).is_ok());
}

#[test]
fn each_invalid_message_has_its_code() {
    let cases = [
        ("", "invalid_json"),
        ("{", "invalid_json"),
        ("{} trailing", "invalid_json"),
        ("[1,2]", "not_an_object"),
        ("null", "not_an_object"),
        (r#"{"mappedFields":{"c":{"t":["f"]}}}"#, "missing_job_id"),
        (
            r#"{"jobId":null,"mappedFields":{"c":{"t":["f"]}}}"#,
            "missing_job_id",
        ),
        (r#"{"jobId":42}"#, "wrong_type"),
        (r#"{"jobId":"nope"}"#, "invalid_job_id"),
        (
            r#"{"jobId":"00000000-0000-0000-0000-000000000000","mappedFields":{"c":{"t":["f"]}}}"#,
            "nil_job_id",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(code(text), expected, "for {text:?}");
    }
    let with = |rest: &str| format!(r#"{{"jobId":"{ID}"{rest}}}"#);
    let cases = [
        (with(""), "missing_mapped_fields"),
        (with(r#","mappedFields":{}"#), "missing_mapped_fields"),
        (with(r#","mappedFields":null"#), "missing_mapped_fields"),
        (with(r#","mappedFields":[]"#), "wrong_type"),
        (
            with(r#","mappedFields":{"c":{}}"#),
            "connection_without_tables",
        ),
        (
            with(r#","mappedFields":{"c":null}"#),
            "connection_without_tables",
        ),
        (
            with(r#","mappedFields":{"c":{"t":[]}}"#),
            "table_without_fields",
        ),
        (with(r#","mappedFields":{"c":{"t":[1]}}"#), "wrong_type"),
        (with(r#","mappedFields":{"c":{"t":[""]}}"#), "empty_name"),
        (with(r#","mappedFields":{"":{"t":["f"]}}"#), "empty_name"),
        (
            with(r#","mappedFields":{"c":{"t":["f"]}},"metadata":[]"#),
            "wrong_type",
        ),
        (
            with(r#","mappedFields":{"c":{"t":["f"]}},"filters":1"#),
            "wrong_type",
        ),
        (
            with(r#","mappedFields":{"c":{"t":["f"]}},"filters":{"c":{"t":{"f":{"x":[1]}}}}"#),
            "unknown_filter_operator",
        ),
        (
            with(
                r#","mappedFields":{"c":{"t":["f"]}},"filters":{"c":{"t":{"f":{"between":[1]}}}}"#,
            ),
            "invalid_filter",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(code(&text), expected, "for {text}");
    }
}

#[test]
fn error_messages_name_the_place_but_not_the_values() {
    let text = format!(
        r#"{{"jobId":"{ID}","mappedFields":{{"pg":{{"users":["id"]}}}},"filters":{{"pg":{{"users":{{"id":{{"eq":[{{"secret":"s3cr3t"}}]}}}}}}}}}}"#
    );
    let message = parse(&text).expect_err("nested value").to_string();
    assert!(message.contains("filters.pg.users.id.eq"), "{message}");
    assert!(!message.contains("s3cr3t"), "{message}");
}

#[test]
fn a_nul_character_anywhere_refuses_the_message() {
    for rest in [
        r#""mappedFields":{"c":{"t":["me\u0000mo"]}}"#,
        r#""mappedFields":{"c\u0000":{"t":["f"]}}"#,
        r#""mappedFields":{"c":{"t":["f"]}},"metadata":{"k":["\u0000"]}"#,
        r#""mappedFields":{"c":{"t":["f"]}},"filters":{"c":{"t":{"f":{"eq":["a\u0000"]}}}}"#,
    ] {
        let text = format!(r#"{{"jobId":"{ID}",{rest}}}"#);
        assert_eq!(code(&text), "nul_character", "{rest}");
    }
}

#[test]
fn metadata_is_measured_as_the_events_carry_it() {
    let job = parse(&format!(
        r#"{{"jobId":"{ID}","mappedFields":{{"pg":{{"t":["id"]}}}},"metadata":{{"b":"<&>","a":[1,null]}}}}"#
    ))
    .expect("valid");
    // {"a":[1,null],"b":"\u003c\u0026\u003e"}: Go escapes < & > in event bodies.
    let exact = r#"{"a":[1,null],"b":"\u003c\u0026\u003e"}"#.len() as u64;
    assert_eq!(job.check_metadata_size(exact), Ok(()));
    assert_eq!(
        job.check_metadata_size(exact - 1),
        Err(MessageError::MetadataTooLarge {
            bytes: exact,
            limit: exact - 1
        })
    );
    assert_eq!(
        job.check_metadata_size(exact - 1).unwrap_err().code(),
        "metadata_too_large"
    );
}

#[test]
fn absent_metadata_is_two_bytes() {
    let job = parse(&format!(
        r#"{{"jobId":"{ID}","mappedFields":{{"pg":{{"t":["id"]}}}}}}"#
    ))
    .expect("valid");
    assert_eq!(job.check_metadata_size(2), Ok(()));
    assert!(job.check_metadata_size(1).is_err());
}

#[test]
fn a_message_of_more_values_than_any_job_needs_is_refused_before_decoding() {
    let many = vec!["0"; MAX_MESSAGE_VALUES as usize].join(",");
    let body = format!(
        r#"{{"jobId":"{ID}","mappedFields":{{"pg":{{"t":["id"]}}}},"metadata":{{"x":[{many}]}}}}"#
    );
    assert_eq!(code(&body), "too_many_values");
    let fewer = vec!["0"; 1000].join(",");
    let body = format!(
        r#"{{"jobId":"{ID}","mappedFields":{{"pg":{{"t":["id"]}}}},"metadata":{{"x":[{fewer}]}}}}"#
    );
    assert!(parse(&body).is_ok());
}

#[test]
fn a_body_that_is_not_json_keeps_the_decoders_message() {
    let error = parse(r#"{"jobId": "#).expect_err("not JSON");
    assert_eq!(error.code(), "invalid_json");
    assert!(error.to_string().contains("EOF while parsing"), "{error}");
}

fn with_timeout(value: &str) -> String {
    format!(r#"{{"jobId":"{ID}","mappedFields":{{"pg":{{"t":["id"]}}}},"timeoutSeconds":{value}}}"#)
}

#[test]
fn timeout_seconds_decodes_as_gos_int_within_a_day() {
    assert_eq!(parse(&with_timeout("2")).unwrap().timeout_seconds, Some(2));
    assert_eq!(
        parse(&with_timeout("86400")).unwrap().timeout_seconds,
        Some(86_400)
    );
    assert_eq!(parse(&with_timeout("null")).unwrap().timeout_seconds, None);
    let absent = format!(r#"{{"jobId":"{ID}","mappedFields":{{"pg":{{"t":["id"]}}}}}}"#);
    assert_eq!(parse(&absent).unwrap().timeout_seconds, None);
    // Member names fold as Go's do; null after a value leaves the value.
    let folded = format!(
        r#"{{"jobId":"{ID}","mappedFields":{{"pg":{{"t":["id"]}}}},"TIMEOUTSECONDS":5,"timeoutSeconds":null}}"#
    );
    assert_eq!(parse(&folded).unwrap().timeout_seconds, Some(5));
}

#[test]
fn any_other_timeout_fails_the_job_as_invalid() {
    for value in ["0", "86401", "-1", "2.0", "1e2", "4294967297"] {
        assert_eq!(code(&with_timeout(value)), "invalid_timeout", "{value}");
    }
    for value in [r#""30""#, "true", "[30]", "{}"] {
        assert_eq!(code(&with_timeout(value)), "wrong_type", "{value}");
    }
    assert_eq!(
        parse(&with_timeout("0")).unwrap_err().to_string(),
        "timeoutSeconds must be an integer from 1 to 86400"
    );
}
