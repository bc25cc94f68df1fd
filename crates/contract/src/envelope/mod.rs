//! Signed AMQP envelopes (contract §3): the signed payload, signing and verification.
//!
//! The HMAC itself belongs to the `crypto` crate; this module decides *what* is signed and
//! *whether* a message's headers are acceptable, and takes the MAC as a function, so it stays
//! free of key material.

mod verify;

use crate::node::Node;

pub use verify::{verify, HeaderValue, SignatureError, SignatureHeaders, Verified, VerifyPolicy};

/// Header carrying the lowercase hex HMAC-SHA256 of the signed payload.
pub const SIGNATURE_HEADER: &str = "x-message-signature";
/// Header carrying the Unix seconds of signing.
pub const TIMESTAMP_HEADER: &str = "t";
/// Header carrying the signature scheme version.
pub const VERSION_HEADER: &str = "signature-version";
/// The only signature scheme version.
pub const SIGNATURE_VERSION: &str = "v1";

/// Where a message travels, as far as its signature covers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<'a> {
    /// The `X-Tenant-ID` header when it is a string, else empty.
    pub tenant: &'a str,
    /// The exchange the message was published to (`""` for the default exchange).
    pub exchange: &'a str,
    pub routing_key: &'a str,
}

/// The bytes a v1 signature covers:
/// `<t>\n<version>\n<tenant>\n<jobId>\n<exchange>\n<routingKey>\n<raw body>`.
pub fn signing_payload(timestamp: &str, route: &Route<'_>, body: &[u8]) -> Vec<u8> {
    payload_with_job_id(timestamp, route, &signed_job_id(body), body)
}

/// [`signing_payload`] with the `jobId` given rather than read from the body.
fn payload_with_job_id(timestamp: &str, route: &Route<'_>, job_id: &str, body: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(
        timestamp.len()
            + SIGNATURE_VERSION.len()
            + route.tenant.len()
            + job_id.len()
            + route.exchange.len()
            + route.routing_key.len()
            + body.len()
            + 6,
    );
    for part in [
        timestamp,
        SIGNATURE_VERSION,
        route.tenant,
        job_id,
        route.exchange,
        route.routing_key,
    ] {
        payload.extend_from_slice(part.as_bytes());
        payload.push(b'\n');
    }
    payload.extend_from_slice(body);
    payload
}

/// The bytes the legacy signature covers: `<t>.<raw body>`.
pub fn legacy_payload(timestamp: &str, body: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(timestamp.len() + 1 + body.len());
    payload.extend_from_slice(timestamp.as_bytes());
    payload.push(b'.');
    payload.extend_from_slice(body);
    payload
}

/// The job id as the signature sees it: the top-level member named exactly `jobId` when the body
/// is a JSON object and that member is a string (the last one when repeated), else empty.
pub fn signed_job_id(body: &[u8]) -> String {
    let Ok(Node::Object(members)) = serde_json::from_slice::<Node>(body) else {
        return String::new();
    };
    members
        .into_iter()
        .rev()
        .find(|(name, _)| name == "jobId")
        .and_then(|(_, value)| match value {
            Node::String(text) => Some(text),
            _ => None,
        })
        .unwrap_or_default()
}

/// The three signature headers of an outbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// Value of [`SIGNATURE_HEADER`].
    pub signature: String,
    /// Value of [`TIMESTAMP_HEADER`].
    pub timestamp: String,
    /// Value of [`VERSION_HEADER`].
    pub version: &'static str,
}

/// Signs a message published at Unix second `now` on `route`; `mac` returns the lowercase hex
/// HMAC-SHA256 of the payload under the caller's key.
pub fn sign(
    now: i64,
    route: &Route<'_>,
    body: &[u8],
    mac: impl FnOnce(&[u8]) -> String,
) -> Signature {
    let timestamp = now.to_string();
    let signature = mac(&signing_payload(&timestamp, route, body));
    Signature {
        signature,
        timestamp,
        version: SIGNATURE_VERSION,
    }
}

/// [`sign`] for a caller that already knows the body's `jobId` (an outbound event's subject is
/// its job id), sparing the parse of the body. `job_id` must be what [`signed_job_id`] returns
/// for `body`, or the signature will not verify.
pub fn sign_with_job_id(
    now: i64,
    route: &Route<'_>,
    job_id: &str,
    body: &[u8],
    mac: impl FnOnce(&[u8]) -> String,
) -> Signature {
    let timestamp = now.to_string();
    let signature = mac(&payload_with_job_id(&timestamp, route, job_id, body));
    Signature {
        signature,
        timestamp,
        version: SIGNATURE_VERSION,
    }
}
