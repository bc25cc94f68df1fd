//! Recovering the job id of a message whose body cannot be used, so its failure can be recorded.

use std::sync::LazyLock;

use regex::bytes::Regex;
use uuid::Uuid;

use super::fold;
use crate::node::Node;

/// `"jobId": "<text>"` anywhere in the raw bytes, key matched case-insensitively.
static JOB_ID_IN_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    // A constant pattern: it compiles, or every test of this module fails.
    Regex::new(r#"(?i)"jobid"\s*:\s*"([^"\\]{32,45})""#).expect("valid job id pattern")
});

/// The job id of an unusable message: the `jobId` header when it holds a UUID, else a top-level
/// `jobId` member of a body that is still JSON, else the first `"jobId":"<uuid>"` in the raw
/// text. The nil UUID is never returned.
pub fn recover_job_id(header: Option<&[u8]>, body: &[u8]) -> Option<Uuid> {
    header
        .and_then(parse_uuid)
        .or_else(|| from_json(body))
        .or_else(|| {
            JOB_ID_IN_TEXT
                .captures_iter(body)
                .find_map(|c| c.get(1).and_then(|m| parse_uuid(m.as_bytes())))
        })
}

fn parse_uuid(text: &[u8]) -> Option<Uuid> {
    let text = std::str::from_utf8(text).ok()?;
    Uuid::parse_str(text.trim()).ok().filter(|id| !id.is_nil())
}

fn from_json(body: &[u8]) -> Option<Uuid> {
    let Ok(Node::Object(members)) = serde_json::from_slice::<Node>(body) else {
        return None;
    };
    members
        .into_iter()
        .rev()
        .find_map(|(name, value)| match value {
            Node::String(text) if fold::matches(&name, "jobId") => parse_uuid(text.as_bytes()),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "019391a2-7c1e-7a3b-9f00-0123456789ab";

    fn id() -> Uuid {
        Uuid::parse_str(ID).expect("valid")
    }

    #[test]
    fn header_wins_over_the_body() {
        let other = "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88";
        let body = format!(r#"{{"jobId":"{other}""#);
        assert_eq!(
            recover_job_id(Some(ID.as_bytes()), body.as_bytes()),
            Some(id())
        );
    }

    #[test]
    fn broken_json_still_yields_the_id_in_its_text() {
        let body = format!("{{\"mappedFields\": 1, \"jobId\" : \"{ID}\", \u{0}garbage");
        assert_eq!(recover_job_id(None, body.as_bytes()), Some(id()));
    }

    #[test]
    fn escaped_member_names_are_found_through_json_decoding() {
        let body = format!(r#"{{"job\u0049d":"{ID}","mappedFields":null}}"#);
        assert_eq!(recover_job_id(None, body.as_bytes()), Some(id()));
    }

    #[test]
    fn bad_header_falls_back_to_the_body() {
        let body = format!(r#"{{"JOBID":"{ID}"}}"#);
        assert_eq!(recover_job_id(Some(b"nope"), body.as_bytes()), Some(id()));
    }

    #[test]
    fn no_id_anywhere_gives_none() {
        assert_eq!(recover_job_id(None, b"\xff\xfe not json"), None);
        assert_eq!(recover_job_id(None, br#"{"jobId":"not-a-uuid"}"#), None);
        let nil = br#"{"jobId":"00000000-0000-0000-0000-000000000000"}"#;
        assert_eq!(recover_job_id(None, nil), None);
    }
}
