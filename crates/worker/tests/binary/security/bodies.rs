//! Job bodies and event readings the security cases share.

use uuid::Uuid;

use crate::harness::Event;

/// A job body of about `size` bytes whose metadata holds the padding: valid under the metadata
/// limit, a metadata failure above it, and refused before parsing over the message limit.
pub fn padded_job(job_id: Uuid, size: usize) -> Vec<u8> {
    let head = format!(
        r#"{{"jobId":"{job_id}","mappedFields":{{"src":{{"payments":["id"]}}}},"metadata":{{"pad":""#
    );
    let mut body = head.into_bytes();
    body.resize(size.saturating_sub(3).max(body.len()), b'x');
    body.extend_from_slice(br#""}}"#);
    body
}

/// The redacted error a `job.failed` event carries, asserting the event is one.
pub fn failure_message(event: &Event) -> String {
    let body = event.body();
    assert_eq!(body["status"], "failed", "{body}");
    body["metadata"]["error"]["message"]
        .as_str()
        .expect("error message")
        .to_owned()
}
