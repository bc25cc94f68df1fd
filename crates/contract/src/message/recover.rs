//! Which job a message names: the body decides (it is what the signature covers); the unsigned
//! `jobId` header only fills in for a body that names none, and never overrules it.

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

/// The `jobId` header names another job than the body: the message is refused, never trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the jobId header names another job than the message body ({body})")]
pub struct JobIdMismatch {
    /// The job the body names.
    pub body: Uuid,
}

/// The job id of an unusable message: a top-level `jobId` member of a body that is still JSON,
/// else the first `"jobId":"<uuid>"` in the raw text, else the `jobId` header when it holds a
/// UUID. A header that disagrees with an id the body holds is refused. The nil UUID is never
/// returned.
pub fn recover_job_id(header: Option<&[u8]>, body: &[u8]) -> Result<Option<Uuid>, JobIdMismatch> {
    let from_body = from_json(body).or_else(|| {
        JOB_ID_IN_TEXT
            .captures_iter(body)
            .find_map(|c| c.get(1).and_then(|m| parse_uuid(m.as_bytes())))
    });
    match from_body {
        Some(id) => check_header(header, id).map(|()| Some(id)),
        None => Ok(header.and_then(parse_uuid)),
    }
}

/// Whether a `jobId` header, when there is one, names `body_id`.
pub fn check_header(header: Option<&[u8]>, body_id: Uuid) -> Result<(), JobIdMismatch> {
    match header {
        Some(text) if parse_uuid(text) != Some(body_id) => Err(JobIdMismatch { body: body_id }),
        _ => Ok(()),
    }
}

fn parse_uuid(text: &[u8]) -> Option<Uuid> {
    let text = std::str::from_utf8(text).ok()?;
    Uuid::parse_str(text.trim()).ok().filter(|id| !id.is_nil())
}

fn from_json(body: &[u8]) -> Option<Uuid> {
    let Ok(Node::Object(members)) = super::decode_tree(body) else {
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
    fn a_header_that_disagrees_with_the_body_is_refused() {
        let other = "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88";
        let body = format!(r#"{{"jobId":"{other}""#);
        let mismatch = Err(JobIdMismatch {
            body: Uuid::parse_str(other).expect("valid"),
        });
        assert_eq!(
            recover_job_id(Some(ID.as_bytes()), body.as_bytes()),
            mismatch
        );
        assert_eq!(recover_job_id(Some(b"nope"), body.as_bytes()), mismatch);
        assert_eq!(
            check_header(Some(other.as_bytes()), id()),
            Err(JobIdMismatch { body: id() })
        );
    }

    #[test]
    fn a_header_that_agrees_or_is_absent_is_fine() {
        let body = format!(r#"{{"jobId":"{ID}""#);
        assert_eq!(
            recover_job_id(Some(ID.as_bytes()), body.as_bytes()),
            Ok(Some(id()))
        );
        assert_eq!(check_header(None, id()), Ok(()));
        assert_eq!(
            check_header(Some(ID.to_uppercase().as_bytes()), id()),
            Ok(())
        );
    }

    #[test]
    fn the_header_fills_in_only_for_a_body_without_an_id() {
        assert_eq!(
            recover_job_id(Some(ID.as_bytes()), b"not json"),
            Ok(Some(id()))
        );
        assert_eq!(recover_job_id(Some(b"nope"), b"not json"), Ok(None));
    }

    #[test]
    fn broken_json_still_yields_the_id_in_its_text() {
        let body = format!("{{\"mappedFields\": 1, \"jobId\" : \"{ID}\", \u{0}garbage");
        assert_eq!(recover_job_id(None, body.as_bytes()), Ok(Some(id())));
    }

    #[test]
    fn escaped_member_names_are_found_through_json_decoding() {
        let body = format!(r#"{{"job\u0049d":"{ID}","mappedFields":null}}"#);
        assert_eq!(recover_job_id(None, body.as_bytes()), Ok(Some(id())));
    }

    #[test]
    fn no_id_anywhere_gives_none() {
        assert_eq!(recover_job_id(None, b"\xff\xfe not json"), Ok(None));
        assert_eq!(recover_job_id(None, br#"{"jobId":"not-a-uuid"}"#), Ok(None));
        let nil = br#"{"jobId":"00000000-0000-0000-0000-000000000000"}"#;
        assert_eq!(recover_job_id(None, nil), Ok(None));
    }
}
