//! The bodies of cancel and delete requests of the control API (lifecycle §3), read before
//! anything is looked up: every member optional; `comment` at
//! most 2028 characters without control characters, `reasonCode` at most 128 of `[A-Z0-9_]`
//! (IoT's limits). Anything else is refused naming the member.

use serde_json::Value;

/// What a cancel or delete asks (every member optional).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ControlOptions {
    pub force: bool,
    pub comment: Option<String>,
    pub reason_code: Option<String>,
}

/// The longest comment (characters).
const MAX_COMMENT: usize = 2028;
/// The longest reason code.
const MAX_REASON_CODE: usize = 128;

/// Reads a request body (empty: all defaults); `allow_reason`: a cancel may carry
/// `reasonCode`, a delete may not. The error names the member at fault, never echoes a value.
pub fn parse_options(body: &[u8], allow_reason: bool) -> Result<ControlOptions, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(ControlOptions::default());
    }
    let value: Value =
        serde_json::from_slice(body).map_err(|_| "the body is not JSON".to_owned())?;
    let Value::Object(members) = value else {
        return Err("the body must be a JSON object".into());
    };
    let mut options = ControlOptions::default();
    for (name, value) in members {
        match (name.as_str(), value) {
            ("force", Value::Bool(force)) => options.force = force,
            ("force", _) => return Err("force must be a boolean".into()),
            ("comment", Value::String(comment)) => options.comment = Some(comment),
            ("comment", _) => return Err("comment must be a string".into()),
            ("reasonCode", Value::String(code)) if allow_reason => options.reason_code = Some(code),
            ("reasonCode", _) if allow_reason => return Err("reasonCode must be a string".into()),
            (other, _) => return Err(format!("{other} is not a member of this request")),
        }
    }
    if let Some(comment) = &options.comment {
        if comment.chars().count() > MAX_COMMENT {
            return Err(format!("comment must be at most {MAX_COMMENT} characters"));
        }
        if comment.chars().any(char::is_control) {
            return Err("comment must not hold control characters".into());
        }
    }
    if let Some(code) = &options.reason_code {
        let valid = !code.is_empty()
            && code.len() <= MAX_REASON_CODE
            && code
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(format!(
                "reasonCode must be 1 to {MAX_REASON_CODE} of A-Z, 0-9 and _"
            ));
        }
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_is_optional_and_read() {
        assert_eq!(parse_options(b"", true), Ok(ControlOptions::default()));
        assert_eq!(
            parse_options(
                br#"{"force":true,"comment":"runaway","reasonCode":"OPS_1"}"#,
                true
            ),
            Ok(ControlOptions {
                force: true,
                comment: Some("runaway".into()),
                reason_code: Some("OPS_1".into()),
            })
        );
    }

    #[test]
    fn anything_else_is_refused_naming_the_member() {
        let cases: [(&[u8], bool, &str); 8] = [
            (b"[]", true, "object"),
            (b"{", true, "JSON"),
            (br#"{"force":"yes"}"#, true, "force"),
            (br#"{"comment":1}"#, true, "comment"),
            (br#"{"reasonCode":"lower"}"#, true, "reasonCode"),
            (br#"{"reasonCode":"OPS"}"#, false, "reasonCode"),
            (br#"{"comment":"a\u0007b"}"#, true, "comment"),
            (br#"{"other":1}"#, true, "other"),
        ];
        for (body, allow, names) in cases {
            let error = parse_options(body, allow).expect_err("refused");
            assert!(error.contains(names), "{error}");
        }
        let long = format!(r#"{{"comment":"{}"}}"#, "é".repeat(2029));
        assert!(parse_options(long.as_bytes(), true)
            .unwrap_err()
            .contains("2028"));
        let ok = format!(r#"{{"comment":"{}"}}"#, "é".repeat(2028));
        assert!(
            parse_options(ok.as_bytes(), true).is_ok(),
            "characters, not bytes"
        );
    }
}
